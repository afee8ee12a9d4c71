/* SPDX-License-Identifier: MIT */
/*
 * zbuf_blaster: send one message over and over on a TCP connection and
 * print the throughput every interval, like the 1995 tcpBlaster, in the
 * modern API.  Also the sender of the benchmarks (scripts/bench-sock.sh).
 *
 *   zbuf_blaster [-s size] [-b sockbuf] [-t seconds] [-i interval]
 *                [-m mode] [-f file] [-C cc] [-q] host port
 *
 * Modes:
 *   copy      write() of one application buffer (the BSD-socket baseline)
 *   zbuf      one master zbuf holding the buffer, a zbuf_dup() per send,
 *             zbuf_sock_send_fd(): a gather write, no user-space copy
 *   zerocopy  the same through a socket handle with MSG_ZEROCOPY and the
 *             adaptive COPIED fallback (loopback turns it off after the
 *             first notification); completions reaped after each send
 *   zc-always MSG_ZEROCOPY on every send, fallback disabled (to measure
 *             what zero copy costs where the kernel copies anyway)
 *   gather4   a message assembled from 4 application buffers: a master
 *             zbuf of 4 segments, sent by one gather write
 *   memcpy4   the same 4 buffers memcpy()d into one staging buffer, then
 *             write()
 *   file      the message is a file range (a memfd): zbuf file segment,
 *             sent by sendfile() (the cheapest sender, for receive tests)
 * -C names the TCP congestion control of the socket (default: the system's,
 * net.ipv4.tcp_congestion_control): on loopback, BBR's pacing decides how
 * fast a sendfile() sender may go, so the benchmarks pin it.
 * With -f FILE the whole file is sent once instead, the program waits
 * until the peer has closed, and prints the elapsed time.  Modes:
 *   readsend       read() + write() through a 64 KiB buffer (the baseline)
 *   zfile          one zbuf of file segments, zbuf_sock_send_fd(): the
 *                  adapter's default, sendfile()
 *   zfile-sendfile the same through a handle forced to sendfile()
 *   zfile-mmap     the same through a handle forced to the mapped write
 *
 * The last line is machine-readable:
 *   result mode=M size=N seconds=S bytes=B MBps=X cpu=C waits=W
 * where C is the process's user+system CPU seconds (with -f: those of the
 * transfer only, not the start-up's) and W the times it blocked (voluntary
 * context switches).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zbuf/sock.h>

#include "bench_common.h"
#include "blast_opts.h"

_Noreturn static void usage(void)
{
    fprintf(stderr, "usage: zbuf_blaster [-s size] [-b sockbuf] [-t seconds] [-i interval]\n"
                    "                    [-m copy|zbuf|zerocopy|zc-always|gather4|memcpy4|file]\n"
                    "                    [-f file -m readsend|zfile|zfile-sendfile|zfile-mmap]\n"
                    "                    [-C congestion-control] [-q]\n"
                    "                    host port\n");
    exit(2);
}

static int connect_to(const char *host, const char *port, const struct blast_opts *o)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
    int e = getaddrinfo(host, port, &hints, &ai);
    if (e != 0) {
        fprintf(stderr, "zbuf_blaster: %s: %s\n", host, gai_strerror(e));
        exit(1);
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        bench_die("socket", errno);
    if (o->sockbuf > 0 &&
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &o->sockbuf, sizeof o->sockbuf) != 0)
        bench_die("SO_SNDBUF", errno);
    bench_tcp_cc_or_die(fd, o->cc);
    int tries = 0;
    while (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != ECONNREFUSED || ++tries > 200)
            bench_die("connect", errno);
        usleep(10000); /* the blastee may still be starting */
    }
    freeaddrinfo(ai);
    return fd;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            bench_die("write", errno);
        p += k;
        n -= (size_t)k;
    }
}

/* Send a whole file once; returns the seconds until the peer closed. */
static double send_file(int fd, const char *path, const char *mode, uint64_t *bytes)
{
    int ffd = open(path, O_RDONLY | O_CLOEXEC);
    if (ffd < 0)
        bench_die(path, errno);
    struct stat st;
    fstat(ffd, &st);
    *bytes = (uint64_t)st.st_size;
    double t0 = bench_now_s();
    if (strcmp(mode, "readsend") == 0) {
        static char buf[65536];
        ssize_t n;
        while ((n = read(ffd, buf, sizeof buf)) > 0)
            write_all(fd, buf, (size_t)n);
        if (n < 0)
            bench_die("read", errno);
    } else if (strncmp(mode, "zfile", 5) == 0) {
        /* One zbuf, file segments of at most 1 GiB each. */
        zbuf_t *z;
        if (zbuf_create(&z) != 0)
            bench_die("zbuf_create", ENOMEM);
        for (off_t off = 0; off < st.st_size;) {
            size_t n = (size_t)(st.st_size - off) < (1u << 30) ? (size_t)(st.st_size - off)
                                                                 : (1u << 30);
            zbuf_buf_t *b;
            int e = zbuf_buf_wrap_file(ffd, off, n, NULL, NULL, &b);
            if (e == 0)
                e = zbuf_append_ref(z, b, 0, n);
            if (e != 0)
                bench_die("zbuf_buf_wrap_file", e);
            zbuf_buf_unref(b);
            off += (off_t)n;
        }
        zbuf_sock_t *h = NULL;
        if (strcmp(mode, "zfile") != 0) {
            zbuf_sock_opts_t o;
            zbuf_sock_opts_init(&o);
            if (strcmp(mode, "zfile-sendfile") == 0)
                o.flags = ZBUF_SOCK_KEEP_FD | ZBUF_SOCK_FILE_SENDFILE;
            else if (strcmp(mode, "zfile-mmap") == 0)
                o.flags = ZBUF_SOCK_KEEP_FD | ZBUF_SOCK_FILE_MMAP;
            else
                usage();
            int e = zbuf_sock_open(fd, &o, &h);
            if (e != 0)
                bench_die("zbuf_sock_open", e);
        }
        ssize_t r = h ? zbuf_sock_send(h, z, 0) : zbuf_sock_send_fd(fd, z, 0);
        if (r < 0)
            bench_die("zbuf_sock_send", (int)r);
        zbuf_sock_close(h, 1000);
        zbuf_delete(z);
    } else {
        usage();
    }
    /* Done when the receiver has read everything and closed. */
    shutdown(fd, SHUT_WR);
    char c;
    while (read(fd, &c, 1) > 0)
        ;
    double t = bench_now_s() - t0;
    close(ffd);
    return t;
}

int main(int argc, char **argv)
{
    /* -f: send this file once instead. */
    struct blast_opts args = { .size = 16384, .seconds = 10, .interval = 1, .mode = "zbuf" };
    int first = blast_parse(argc, argv, 'f', &args, usage);
    if (argc - first != 2 || args.size < 4)
        usage();
    signal(SIGPIPE, SIG_IGN);
    int fd = connect_to(argv[first], argv[first + 1], &args);

    if (args.path != NULL) {
        uint64_t bytes;
        double c0 = bench_cpu_s(); /* the transfer's CPU, not the start-up's */
        double t = send_file(fd, args.path, args.mode, &bytes);
        printf("result mode=%s size=%llu seconds=%.6f bytes=%llu MBps=%.1f cpu=%.3f waits=%ld\n",
               args.mode, (unsigned long long)bytes, t, (unsigned long long)bytes,
               (double)bytes / t / 1e6, bench_cpu_s() - c0, bench_waits());
        close(fd);
        return 0;
    }

    /* The application's buffers: one of `size` bytes, or four quarters. */
    char *buf = malloc(args.size);
    char *part[4];
    size_t plen[4];
    for (int i = 0; i < 4; i++) {
        plen[i] = args.size / 4 + (i == 3 ? args.size % 4 : 0);
        part[i] = malloc(plen[i]);
        memset(part[i], 'a' + i, plen[i]);
    }
    memset(buf, 'z', args.size);
    zbuf_t *master;
    if (zbuf_create(&master) != 0)
        bench_die("zbuf_create", ENOMEM);
    int mfd = -1;
    if (strcmp(args.mode, "gather4") == 0) {
        for (int i = 0; i < 4; i++)
            zbuf_append_buf(master, part[i], plen[i], NULL, NULL);
    } else if (strcmp(args.mode, "file") == 0) {
        mfd = memfd_create("zbuf_blaster", MFD_CLOEXEC);
        write_all(mfd, buf, args.size);
        zbuf_buf_t *b;
        int e = zbuf_buf_wrap_file(mfd, 0, args.size, NULL, NULL, &b);
        if (e == 0)
            e = zbuf_append_ref(master, b, 0, args.size);
        if (e != 0)
            bench_die("zbuf_buf_wrap_file", e);
        zbuf_buf_unref(b);
    } else {
        zbuf_append_buf(master, buf, args.size, NULL, NULL);
    }
    zbuf_sock_t *h = NULL;
    if (strcmp(args.mode, "zerocopy") == 0 || strcmp(args.mode, "zc-always") == 0) {
        zbuf_sock_opts_t o;
        zbuf_sock_opts_init(&o);
        o.flags = ZBUF_SOCK_ZEROCOPY | ZBUF_SOCK_KEEP_FD;
        if (strcmp(args.mode, "zc-always") == 0)
            o.flags |= ZBUF_SOCK_ZEROCOPY_ALWAYS;
        int e = zbuf_sock_open(fd, &o, &h);
        if (e != 0)
            bench_die("zbuf_sock_open", e);
    }
    enum { M_COPY, M_ZBUF, M_ZC, M_MEMCPY4 } m;
    if (strcmp(args.mode, "copy") == 0)
        m = M_COPY;
    else if (strcmp(args.mode, "memcpy4") == 0)
        m = M_MEMCPY4;
    else if (h != NULL)
        m = M_ZC;
    else if (strcmp(args.mode, "zbuf") == 0 || strcmp(args.mode, "gather4") == 0 ||
             strcmp(args.mode, "file") == 0)
        m = M_ZBUF;
    else
        usage();
    char *staging = malloc(args.size);

    double t0 = bench_now_s(), tick = t0, end = t0 + args.seconds;
    uint64_t total = 0, since = 0;
    unsigned n = 0;
    for (;;) {
        switch (m) {
        case M_COPY:
            write_all(fd, buf, args.size);
            break;
        case M_MEMCPY4: {
            size_t off = 0;
            for (int i = 0; i < 4; i++) {
                memcpy(staging + off, part[i], plen[i]);
                off += plen[i];
            }
            write_all(fd, staging, args.size);
            break;
        }
        case M_ZBUF:
        case M_ZC: {
            zbuf_t *z;
            int e = zbuf_dup(master, 0, ZBUF_TO_END, &z);
            if (e != 0)
                bench_die("zbuf_dup", e);
            ssize_t r = m == M_ZC ? zbuf_sock_send(h, z, 0) : zbuf_sock_send_fd(fd, z, 0);
            if (r < 0)
                bench_die("send", (int)r);
            zbuf_delete(z);
            if (m == M_ZC)
                zbuf_sock_complete(h); /* an event loop would do this on POLLERR */
            break;
        }
        }
        total += args.size;
        since += args.size;
        /* Look at the clock every few sends only. */
        if ((++n & 15) == 0 || args.size >= 65536) {
            double t = bench_now_s();
            if (t - tick >= args.interval) {
                if (!args.quiet)
                    printf("zbuf_blaster: %s %zu: %.1f MB/s\n", args.mode, args.size,
                           (double)since / (t - tick) / 1e6);
                tick = t;
                since = 0;
            }
            if (t >= end)
                break;
        }
    }
    double t = bench_now_s() - t0;
    if (h != NULL) {
        zbuf_sock_stats_t st;
        zbuf_sock_get_stats(h, &st);
        if (!args.quiet)
            printf("zbuf_blaster: %llu sends, %llu zero-copy, %llu completed (%llu copied), "
                   "zero copy %s\n",
                   (unsigned long long)st.sends, (unsigned long long)st.zc_sends,
                   (unsigned long long)st.zc_completed, (unsigned long long)st.zc_copied,
                   st.zerocopy_on ? "on" : "off");
        zbuf_sock_close(h, 5000);
    }
    printf("result mode=%s size=%zu seconds=%.3f bytes=%llu MBps=%.1f cpu=%.3f waits=%ld\n",
           args.mode, args.size, t, (unsigned long long)total, (double)total / t / 1e6,
           bench_cpu_s(), bench_waits());
    zbuf_delete(master);
    close(fd);
    if (mfd >= 0)
        close(mfd);
    for (int i = 0; i < 4; i++)
        free(part[i]);
    free(buf);
    free(staging);
    return 0;
}
