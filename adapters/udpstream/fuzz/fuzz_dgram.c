/*
 * libFuzzer harness of the datagram parser and of a stream's input path.
 *
 * Every input is first parsed whole (zbuf_udpstream_peek()), laid out in
 * segments whose lengths come from the input, so that headers split
 * across segments are covered too.  Then a listening stream on a virtual
 * clock accepts a fixed, valid connection request and gets the input as a
 * sequence of records:
 *   u8 len_hi, u8 len_lo, u8 ctl, then len bytes: one datagram
 *   ctl bit 0: write the stream's real connection identifier at bytes 4..7
 *              (so the fuzzer reaches the connected state's code)
 *   ctl bit 1: the datagram comes from another address
 *   ctl bit 2: the application writes 3000 bytes; bit 3: it reads
 *   ctl bits 4..7: the clock moves on by that many x 50 ms
 * and the stream processes after each.  The sanitizers catch memory errors;
 * the harness checks that every written byte's release callback runs
 * exactly once by the end.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <zbuf/udpstream.h>

#include "internal.h"

static uint64_t now_us;
static uint32_t server_cid;
static int released, enrolled;

static uint64_t fuzz_clock(void *arg)
{
    (void)arg;
    return now_us;
}

static int capture_send(void *ctx, zbuf_t **dg, unsigned n, const struct sockaddr *to,
                        socklen_t tolen)
{
    (void)ctx, (void)to, (void)tolen;
    for (unsigned i = 0; i < n; i++) {
        struct zus_hdr h;
        if (zbuf__us_parse(dg[i], &h) == 0 && h.type == ZUS_SYNACK) {
            struct zus_hello hl;
            if (zbuf__us_parse_hello(dg[i], zbuf__us_hdr_size(&h), &hl) == 0)
                server_cid = hl.src_cid;
        }
        zbuf_delete(dg[i]);
    }
    return (int)n;
}

static void count_release(void *data, size_t size, void *arg)
{
    (void)size, (void)arg;
    free(data);
    released++;
}

/* The input as a zbuf of segments of 1..16 bytes chosen by the input. */
static zbuf_t *segmented(const uint8_t *d, size_t n)
{
    zbuf_t *z;
    if (zbuf_create(&z) < 0)
        abort();
    size_t at = 0;
    while (at < n) {
        size_t k = 1 + d[at] % 16;
        if (k > n - at)
            k = n - at;
        if (zbuf_append_copy(z, d + at, k) < 0)
            abort();
        at += k;
    }
    return z;
}

static zbuf_t *dgram(const uint8_t *d, size_t n)
{
    zbuf_t *z;
    if (zbuf_create(&z) < 0)
        abort();
    if (n > 0 && zbuf_append_copy(z, d, n) < 0)
        abort();
    return z;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zbuf_t *whole = segmented(data, size);
    uint32_t cid;
    (void)zbuf_udpstream_peek(whole, &cid);
    zbuf_delete(whole);

    now_us = 1000000;
    server_cid = 0;
    released = enrolled = 0;
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    o.clock = fuzz_clock;
    o.rcv_wnd = 64;
    o.snd_wnd = 64;
    o.mode = (size & 1) ? ZBUF_UDPSTREAM_ZEROCOPY : ZBUF_UDPSTREAM_COPY;
    static const zbuf_udpstream_transport_t t = {.send = capture_send};
    zbuf_udpstream_t *s;
    if (zbuf_udpstream_create(&o, &t, NULL, NULL, 0, &s) < 0)
        abort();
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(4000),
                               .sin_addr.s_addr = htonl(0x7f000001)};
    struct sockaddr_in other = peer;
    other.sin_port = htons(4001);
    uint8_t hello[ZUS_HELLO_LEN];
    zbuf__us_write_hello(&(struct zus_hello){.src_cid = 0x11111111, .mss = 1400}, hello);
    struct zus_hdr syn = {.type = ZUS_SYN, .sn = 1000, .wnd = 64, .len = ZUS_HELLO_LEN, .ts = 5};
    uint8_t pkt[ZBUF_UDPSTREAM_HEADER + ZUS_HELLO_LEN];
    zbuf__us_write_hdr(&syn, pkt);
    memcpy(pkt + ZBUF_UDPSTREAM_HEADER, hello, sizeof hello);
    zbuf_udpstream_input(s, dgram(pkt, sizeof pkt), (struct sockaddr *)&peer, sizeof peer);
    zbuf_udpstream_process(s);

    size_t at = 0;
    while (at + 3 <= size) {
        size_t len = (size_t)data[at] << 8 | data[at + 1];
        uint8_t ctl = data[at + 2];
        at += 3;
        if (len > size - at)
            len = size - at;
        uint8_t buf[65536];
        memcpy(buf, data + at, len);
        at += len;
        if ((ctl & 1) && len >= 8) {
            buf[4] = (uint8_t)(server_cid >> 24);
            buf[5] = (uint8_t)(server_cid >> 16);
            buf[6] = (uint8_t)(server_cid >> 8);
            buf[7] = (uint8_t)server_cid;
        }
        const struct sockaddr_in *from = (ctl & 2) ? &other : &peer;
        zbuf_udpstream_input(s, dgram(buf, len), (const struct sockaddr *)from, sizeof *from);
        if (ctl & 4) {
            uint8_t *m = malloc(3000);
            memset(m, 0x5a, 3000);
            zbuf_t *z;
            if (zbuf_create(&z) < 0 || zbuf_append_buf(z, m, 3000, count_release, NULL) < 0)
                abort();
            enrolled++;
            if (zbuf_udpstream_write(s, z) < 0)
                zbuf_delete(z);
        }
        if (ctl & 8) {
            zbuf_t *z;
            if (zbuf_udpstream_read(s, 1, 5000, &z) > 0)
                zbuf_delete(z);
        }
        now_us += (uint64_t)(ctl >> 4) * 50000;
        zbuf_udpstream_process(s);
    }
    zbuf_udpstream_delete(s);
    if (released != enrolled)
        abort();
    return 0;
}
