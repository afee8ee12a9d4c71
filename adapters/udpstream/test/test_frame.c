/* SPDX-License-Identifier: MIT */
/* Messages on top of the byte stream: the framing codec of <zbuf/frame.h>
 * (public API of zbuf-uv) marks boundaries; the stream keeps the bytes in
 * order under loss and reordering; the decoder gives the messages back
 * whole, without copying, whatever the read sizes. */
#include <stdlib.h>
#include <string.h>
#include <zbuf/frame.h>

#include "support.h"
#include "ustest.h"

static void fini(void)
{
    zt_assert_no_leaks();
}
TestSuite(frame, .init = zt_leak_baseline, .fini = fini, .timeout = 120);

Test(frame, framed_messages_keep_their_boundaries_across_a_lossy_stream)
{
    struct unet n;
    unet_init(&n, 60);
    n.loss[0] = n.loss[1] = 0.05;
    n.reorder = 0.05;
    n.reorder_us = 2000;
    n.delay_us = 1000;
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    o.mode = ZBUF_UDPSTREAM_ZEROCOPY;
    unet_open(&n, &o);
    zbuf_frame_decoder_t *dec;
    cr_assert_eq(zbuf_frame_decoder_create(NULL, &dec), 0);
    enum { MSGS = 400 };
    uint64_t rng = 60;
    int sent = 0, got = 0;
    size_t lens[MSGS];
    while (got < MSGS) {
        if (sent < MSGS && (zbuf_udpstream_events(n.s[0]) & ZBUF_UDPSTREAM_WRITABLE)) {
            size_t len = (size_t)(ut_rand(&rng) % 9000);
            lens[sent] = len;
            zbuf_t *m;
            cr_assert_eq(zbuf_create(&m), 0);
            if (len > 0) {
                uint8_t *buf = malloc(len);
                for (size_t i = 0; i < len; i++)
                    buf[i] = (uint8_t)(sent + i);
                cr_assert_eq(zbuf_append_copy(m, buf, len), 0);
                free(buf);
            }
            cr_assert_eq(zbuf_frame_encode(NULL, m), 0);
            cr_assert_eq(zbuf_udpstream_write(n.s[0], m), 0);
            sent++;
        }
        zbuf_t *z;
        size_t max = 1 + (size_t)(ut_rand(&rng) % 5000);
        while (zbuf_udpstream_read(n.s[1], 1, max, &z) > 0)
            cr_assert_eq(zbuf_frame_decoder_feed(dec, z), 0);
        zbuf_t *msg;
        while (zbuf_frame_decoder_next(dec, &msg) == 0) {
            cr_assert_eq(zbuf_length(msg), lens[got], "message %d", got);
            for (size_t i = 0; i < lens[got]; i++) {
                uint8_t b;
                zbuf_copyout(msg, i, &b, 1);
                cr_assert_eq(b, (uint8_t)(got + i));
            }
            zbuf_delete(msg);
            got++;
        }
        cr_assert(unet_pump(&n));
    }
    zbuf_frame_decoder_delete(dec);
    unet_free(&n);
}
