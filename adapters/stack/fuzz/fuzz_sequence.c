/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer: a sequence of frames with time steps, so that TCP state
 * machines are driven through many segments.  Records:
 *   op (1 byte), len (2 bytes, big-endian), body (len bytes)
 *   op & 3 == 0: a frame; with op & 4 the harness writes our MAC and IP
 *                address into it (so the fuzzer need not find them);
 *                (op >> 3) gives a segment split point
 *   op & 3 == 1: advance the clock by len milliseconds and poll
 *   op & 3 == 2: poll
 *   op & 3 == 3: advance the clock by the low byte of len and poll (small
 *                steps: delayed ACKs, retransmissions)
 * The harness's applications echo what they receive, so data flows back.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zbuf_ip_netif_t *nif;
    zbuf_ip_stack_t *s = fz_stack(&nif);
    static uint8_t frame[2048];
    size_t i = 0;
    int steps = 0;
    while (i + 3 <= size && steps++ < 256) {
        uint8_t op = data[i];
        size_t len = (size_t)data[i + 1] << 8 | data[i + 2];
        i += 3;
        switch (op & 3) {
        case 0: {
            if (len > size - i)
                len = size - i;
            if (len > sizeof frame)
                len = sizeof frame;
            memcpy(frame, data + i, len);
            i += len;
            if ((op & 4) && len >= 34) {
                memcpy(frame, fz_mac, 6);
                frame[30] = 192, frame[31] = 0, frame[32] = 2, frame[33] = 1;
            }
            fz_feed(nif, frame, len, (size_t)(op >> 3));
            break;
        }
        case 1:
            fz_now += len;
            zbuf_ip_poll(s);
            break;
        case 2:
            zbuf_ip_poll(s);
            break;
        default:
            fz_now += len & 0xff;
            zbuf_ip_poll(s);
            break;
        }
    }
    fz_now += 400000; /* let every timer run out */
    zbuf_ip_poll(s);
    fz_stack_delete(s);
    return 0;
}
