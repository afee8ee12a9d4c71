/* SPDX-License-Identifier: MIT */
/*
 * A program outside the libzbuf tree that links one adapter only,
 * zbuf-packet, found through find_package(zbuf) (target zbuf::packet) or
 * pkg-config (zbuf-packet): a frame sent through the transmit ring on the
 * loopback interface comes back lent out of the receive ring (needs
 * CAP_NET_RAW; said and skipped without).  Run from an installed prefix with
 * no LD_LIBRARY_PATH, it proves that the adapter finds libzbuf by itself.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <zbuf/packet.h>

static int packets(void)
{
    zbuf_packet_config_t cfg;
    zbuf_packet_config_init(&cfg);
    cfg.protocol = 0x88b5; /* local experimental EtherType */
    cfg.frame_size = 2048; /* loopback's 64 KiB MTU would make large slots */
    cfg.tx_frame_size = 2048;
    zbuf_packet_t *p;
    char why[256] = "";
    int rc = zbuf_packet_open("lo", &cfg, &p, why, sizeof why);
    if (rc == -EPERM) {
        printf("packet rings: skipped (%s)\n", why);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "packet: %s\n", why);
        return 1;
    }
    static unsigned char frame[60] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x88, 0xb5,
                                      'l', 'o', 'a', 'n', 'e', 'd'};
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_buf(z, frame, sizeof frame, NULL, NULL);
    if ((rc = zbuf_packet_send(p, z, 0)) < 0) { /* copied into the ring, z deleted */
        fprintf(stderr, "packet send: %s\n", zbuf_strerror(rc));
        return 1;
    }
    struct pollfd pfd = {.fd = zbuf_packet_fd(p), .events = POLLIN};
    zbuf_t *got = NULL;
    zbuf_packet_rxinfo_t info;
    for (int i = 0; i < 50 && got == NULL; i++)
        if (zbuf_packet_recv(p, &got, &info, 1) != 1)
            poll(&pfd, 1, 100);
    char word[7] = "";
    if (got)
        zbuf_copyout(got, 14, word, 6);
    printf("packet rings: %s frame of %zu bytes back from lo: \"%s\"\n",
           got && (info.flags & ZBUF_PACKET_RX_LOANED) ? "lent" : "copied",
           got ? zbuf_length(got) : 0, word);
    zbuf_delete(got); /* the slot goes back to the kernel */
    zbuf_packet_close(p, 1000);
    return got && strcmp(word, "loaned") == 0 ? 0 : 1;
}

int main(void)
{
    return packets();
}
