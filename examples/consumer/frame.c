/* SPDX-License-Identifier: MIT */
/*
 * A program outside the libzbuf tree that links the framing codec only,
 * zbuf-frame, found through find_package(zbuf) (target zbuf::frame) or
 * pkg-config (zbuf-frame): two messages framed into one byte stream, the
 * stream fed back in two arbitrary pieces, the messages decoded out of it.
 * Run from an installed prefix with no LD_LIBRARY_PATH, it proves that the
 * library finds libzbuf by itself.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zbuf/frame.h>

static int run(void)
{
    static const char *msgs[] = {"hello", "framed world"};
    zbuf_frame_opts_t o;
    zbuf_frame_opts_default(&o);
    zbuf_t *stream, *piece = NULL, *msg;
    zbuf_frame_decoder_t *dec;
    int rc;
    if ((rc = zbuf_create(&stream)) < 0)
        return rc;
    for (size_t i = 0; i < 2 && rc == 0; i++)
        rc = zbuf_frame_append_copy(&o, stream, msgs[i], strlen(msgs[i]));
    if (rc == 0)
        rc = zbuf_split_head(stream, 7, &piece); /* the first piece ends mid-frame */
    if (rc < 0) {
        zbuf_delete(stream);
        return rc;
    }
    if ((rc = zbuf_frame_decoder_create(&o, &dec)) < 0) {
        zbuf_delete(piece);
        zbuf_delete(stream);
        return rc;
    }
    size_t got = 0;
    zbuf_t *in[] = {piece, stream};
    for (size_t i = 0; i < 2; i++) {
        if ((rc = zbuf_frame_decoder_feed(dec, in[i])) < 0) { /* not consumed */
            for (size_t j = i; j < 2; j++)
                zbuf_delete(in[j]);
            break;
        }
        while ((rc = zbuf_frame_decoder_next(dec, &msg)) == 0) {
            char text[32] = {0};
            size_t n = zbuf_length(msg);
            if (n < sizeof text)
                zbuf_copyout(msg, 0, text, n);
            if (got < 2 && strcmp(text, msgs[got]) == 0)
                got++;
            zbuf_delete(msg);
        }
    }
    zbuf_frame_decoder_delete(dec);
    zbuf_frame_thread_flush();
    if (rc != -EAGAIN && rc < 0)
        return rc;
    return got == 2 ? 0 : -EBADMSG;
}

int main(void)
{
    int rc = run();
    if (rc < 0) {
        fprintf(stderr, "consumer_frame: %s\n", zbuf_strerror(rc));
        return 1;
    }
    printf("consumer_frame: two messages framed and decoded from two pieces\n");
    return 0;
}
