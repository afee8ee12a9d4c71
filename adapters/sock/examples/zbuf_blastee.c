/* SPDX-License-Identifier: MIT */
/*
 * zbuf_blastee: accept one TCP connection, receive until the sender stops,
 * and print the throughput every interval, like the 1995 tcpBlastee, in the
 * modern API.  Also the receiver of the benchmarks (scripts/bench-sock.sh).
 *
 *   zbuf_blastee [-s size] [-b sockbuf] [-t seconds] [-i interval]
 *                [-m copy|zbuf|discard] [-p portfile] [-C cc] [-q] port
 *
 * Modes:
 *   copy     read() into one application buffer (the BSD-socket baseline)
 *   zbuf     zbuf_sock_recv() into pool buffers, then delete the zbuf (the
 *            buffers go back to the pool): the kernel's copy is the only one
 *   discard  recv(MSG_TRUNC): the kernel drops the bytes without copying
 *            them (the cheapest receiver, for send-side measurements)
 * It stops at end of stream or after -t seconds (0: no limit).  Port 0
 * takes any free port; -p writes the port listened on to a file once the
 * socket listens (for scripts).  The last
 * line is machine-readable:
 *   result mode=M size=N seconds=S bytes=B MBps=X cpu=C calls=K waits=W
 * where C is the user+system CPU seconds the process spent from the accepted
 * connection on (not its start-up), K the receive calls
 * that returned data and W the times the process blocked (voluntary
 * context switches).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zbuf/sock.h>

#include "bench_common.h"
#include "blast_opts.h"

_Noreturn static void usage(void)
{
    fprintf(stderr, "usage: zbuf_blastee [-s size] [-b sockbuf] [-t seconds] [-i interval]\n"
                    "                    [-m copy|zbuf|discard] [-p portfile] [-C cc] [-q] port\n");
    exit(2);
}

int main(int argc, char **argv)
{
    /* -p: write the port listened on to this file. */
    struct blast_opts args = { .size = 16384, .seconds = 0, .interval = 1, .mode = "zbuf" };
    int first = blast_parse(argc, argv, 'p', &args, usage);
    if (argc - first != 1 || args.size == 0)
        usage();
    enum { M_COPY, M_ZBUF, M_DISCARD } m;
    if (strcmp(args.mode, "copy") == 0)
        m = M_COPY;
    else if (strcmp(args.mode, "zbuf") == 0)
        m = M_ZBUF;
    else if (strcmp(args.mode, "discard") == 0)
        m = M_DISCARD;
    else
        usage();
    signal(SIGPIPE, SIG_IGN);

    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* Set before listen() so the accepted socket inherits it (and the
     * window scale is chosen for it). */
    if (args.sockbuf > 0 &&
        setsockopt(l, SOL_SOCKET, SO_RCVBUF, &args.sockbuf, sizeof args.sockbuf) != 0)
        bench_die("SO_RCVBUF", errno);
    bench_tcp_cc_or_die(l, args.cc); /* inherited by the accepted socket */
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[first])),
                              .sin_addr.s_addr = htonl(INADDR_ANY) };
    if (bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(l, 1) != 0)
        bench_die("bind/listen", errno);
    bench_write_port(l, args.path);
    int fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        bench_die("accept", errno);
    close(l);

    char *buf = malloc(args.size);
    zbuf_pool_t *pool = NULL;
    zbuf_t *z = NULL;
    if (m == M_ZBUF) {
        /* Buffers of the message size up to 64 KiB, enough for two messages. */
        size_t bs = args.size < 4096 ? 4096 : args.size > 65536 ? 65536 : args.size;
        size_t count = 2 * ((args.size + bs - 1) / bs) + 16;
        int e = zbuf_pool_create(bs, count, &pool);
        if (e == 0)
            e = zbuf_create(&z);
        if (e != 0)
            bench_die("pool", e);
    }

    double t0 = 0, tick = 0, last = 0; /* from the first byte on */
    double c0 = bench_cpu_s();            /* CPU from the connection on, not start-up's */
    uint64_t total = 0, since = 0;
    unsigned n = 0;
    for (;;) {
        ssize_t r;
        switch (m) {
        case M_COPY:
            r = read(fd, buf, args.size);
            if (r < 0)
                r = -errno;
            break;
        case M_ZBUF:
            r = zbuf_sock_recv(fd, pool, args.size, 0, z);
            if (r > 0)
                zbuf_cut(z, 0, ZBUF_TO_END, NULL); /* "zbufDelete": back to the pool */
            break;
        default:
            r = recv(fd, NULL, args.size, MSG_TRUNC);
            if (r < 0)
                r = -errno;
            break;
        }
        if (r == -EINTR)
            continue;
        if (r < 0)
            bench_die("receive", (int)r);
        if (r == 0)
            break;
        last = bench_now_s();
        if (total == 0)
            t0 = tick = last;
        total += (uint64_t)r;
        since += (uint64_t)r;
        if ((++n & 15) == 0) {
            if (last - tick >= args.interval) {
                if (!args.quiet)
                    printf("zbuf_blastee: %s %zu: %.1f MB/s\n", args.mode, args.size,
                           (double)since / (last - tick) / 1e6);
                tick = last;
                since = 0;
            }
            if (args.seconds > 0 && last - t0 >= args.seconds)
                break;
        }
    }
    double t = last - t0;
    if (t <= 0)
        t = 1e-9;
    printf("result mode=%s size=%zu seconds=%.3f bytes=%llu MBps=%.1f cpu=%.3f calls=%u "
           "waits=%ld\n",
           args.mode, args.size, t, (unsigned long long)total, (double)total / t / 1e6,
           bench_cpu_s() - c0, n, bench_waits());
    zbuf_delete(z);
    zbuf_pool_delete(pool);
    free(buf);
    close(fd);
    return 0;
}
