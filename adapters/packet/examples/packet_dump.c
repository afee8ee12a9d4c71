/* SPDX-License-Identifier: MIT */
/*
 * zbuf-packet-dump: print the frames arriving on an interface, tcpdump-like
 * but without parsing beyond Ethernet, straight out of the receive ring.
 *
 *   zbuf-packet-dump IFNAME [COUNT] [--v3 TIMEOUT_MS]
 *
 * Each frame is a zbuf loaned from the ring; deleting it hands the slot
 * back to the kernel.  Stops after COUNT frames (default 10) or on SIGINT,
 * then prints the handle's counters: frames lent and copied, kernel drops.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zbuf/packet.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: zbuf-packet-dump IFNAME [COUNT] [--v3 TIMEOUT_MS]\n");
        return 2;
    }
    long count = argc > 2 && argv[2][0] != '-' ? strtol(argv[2], NULL, 10) : 10;
    zbuf_packet_config_t cfg;
    zbuf_packet_config_init(&cfg);
    cfg.tx_ring = false;
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--v3") == 0 && i + 1 < argc) {
            cfg.version = ZBUF_PACKET_V3;
            cfg.block_timeout_ms = (uint32_t)strtoul(argv[++i], NULL, 10);
        }
    char why[256];
    zbuf_packet_t *p;
    int rc = zbuf_packet_open(argv[1], &cfg, &p, why, sizeof why);
    if (rc < 0) {
        fprintf(stderr, "zbuf-packet-dump: %s: %s (%s)\n", argv[1], why, zbuf_strerror(rc));
        return 1;
    }
    signal(SIGINT, on_signal);
    struct pollfd pfd = {.fd = zbuf_packet_fd(p), .events = POLLIN};
    long seen = 0;
    while (!stop && seen < count) {
        zbuf_t *f[16];
        zbuf_packet_rxinfo_t info[16];
        int n = zbuf_packet_recv(p, f, info, 16);
        if (n == -EAGAIN) {
            poll(&pfd, 1, 1000);
            continue;
        }
        if (n < 0) {
            fprintf(stderr, "zbuf-packet-dump: %s\n", zbuf_strerror(n));
            if (n == -ENODEV)
                break;
            continue;
        }
        for (int i = 0; i < n; i++, seen++) {
            uint8_t h[14];
            size_t len = zbuf_length(f[i]);
            if (len >= 14 && zbuf_copyout(f[i], 0, h, 14) == 14)
                printf("%u.%09u %02x:%02x:%02x:%02x:%02x:%02x > %02x:%02x:%02x:%02x:%02x:%02x "
                       "type 0x%04x length %u%s%s\n",
                       info[i].ts_sec, info[i].ts_nsec, h[6], h[7], h[8], h[9], h[10], h[11],
                       h[0], h[1], h[2], h[3], h[4], h[5], h[12] << 8 | h[13], info[i].wire_len,
                       info[i].flags & ZBUF_PACKET_RX_LOANED ? " (loaned)" : " (copied)",
                       info[i].flags & ZBUF_PACKET_RX_TRUNCATED ? " truncated" : "");
            zbuf_delete(f[i]); /* the slot goes back to the kernel */
        }
    }
    zbuf_packet_stats_t st;
    zbuf_packet_stats(p, &st);
    printf("%llu frames (%llu lent, %llu copied), kernel: %llu seen, %llu dropped\n",
           (unsigned long long)st.rx_frames, (unsigned long long)st.rx_loaned,
           (unsigned long long)st.rx_copied, (unsigned long long)st.kernel_packets,
           (unsigned long long)st.kernel_drops);
    zbuf_packet_close(p, 0);
    return 0;
}
