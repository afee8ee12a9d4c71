/* SPDX-License-Identifier: MIT */
/*
 * zbuf_blastee: accept one TCP connection, receive until the sender stops,
 * and print the throughput every interval, like the 1995 tcpBlastee, in the
 * modern API.  Also the receiver of the benchmarks (scripts/bench-sock.sh).
 *
 *   zbuf_blastee [-s size] [-b sockbuf] [-t seconds] [-i interval]
 *                [-m copy|zbuf|discard] [-p portfile] [-q] port
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
 * where C is the process's user+system CPU seconds, K the receive calls
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

/* Times this process blocked (voluntary context switches) so far. */
static long waits(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_nvcsw;
}

/* User + system CPU seconds of this process so far. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

_Noreturn static void die(const char *what, int err)
{
    fprintf(stderr, "zbuf_blastee: %s: %s\n", what, strerror(err < 0 ? -err : err));
    exit(1);
}

_Noreturn static void usage(void)
{
    fprintf(stderr, "usage: zbuf_blastee [-s size] [-b sockbuf] [-t seconds] [-i interval]\n"
                    "                    [-m copy|zbuf|discard] [-p portfile] [-q] port\n");
    exit(2);
}

int main(int argc, char **argv)
{
    size_t size = 16384;
    int sockbuf = 0, quiet = 0;
    double seconds = 0, interval = 1;
    const char *mode = "zbuf", *portfile = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "s:b:t:i:m:p:q")) != -1) {
        switch (opt) {
        case 's': size = strtoul(optarg, NULL, 0); break;
        case 'b': sockbuf = atoi(optarg); break;
        case 't': seconds = atof(optarg); break;
        case 'i': interval = atof(optarg); break;
        case 'm': mode = optarg; break;
        case 'p': portfile = optarg; break;
        case 'q': quiet = 1; break;
        default: usage();
        }
    }
    if (argc - optind != 1 || size == 0)
        usage();
    enum { M_COPY, M_ZBUF, M_DISCARD } m;
    if (strcmp(mode, "copy") == 0)
        m = M_COPY;
    else if (strcmp(mode, "zbuf") == 0)
        m = M_ZBUF;
    else if (strcmp(mode, "discard") == 0)
        m = M_DISCARD;
    else
        usage();
    signal(SIGPIPE, SIG_IGN);

    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* Set before listen() so the accepted socket inherits it (and the
     * window scale is chosen for it). */
    if (sockbuf > 0 && setsockopt(l, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof sockbuf) != 0)
        die("SO_RCVBUF", errno);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[optind])),
                              .sin_addr.s_addr = htonl(INADDR_ANY) };
    if (bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(l, 1) != 0)
        die("bind/listen", errno);
    if (portfile != NULL) {
        socklen_t sl = sizeof sa;
        getsockname(l, (struct sockaddr *)&sa, &sl);
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", portfile);
        FILE *f = fopen(tmp, "w");
        if (f == NULL || fprintf(f, "%u\n", ntohs(sa.sin_port)) < 0 || fclose(f) != 0 ||
            rename(tmp, portfile) != 0)
            die(portfile, errno);
    }
    int fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        die("accept", errno);
    close(l);

    char *buf = malloc(size);
    zbuf_pool_t *pool = NULL;
    zbuf_t *z = NULL;
    if (m == M_ZBUF) {
        /* Buffers of the message size up to 64 KiB, enough for two messages. */
        size_t bs = size < 4096 ? 4096 : size > 65536 ? 65536 : size;
        size_t count = 2 * ((size + bs - 1) / bs) + 16;
        int e = zbuf_pool_create(bs, count, &pool);
        if (e == 0)
            e = zbuf_create(&z);
        if (e != 0)
            die("pool", e);
    }

    double t0 = 0, tick = 0, last = 0; /* from the first byte on */
    uint64_t total = 0, since = 0;
    unsigned n = 0;
    for (;;) {
        ssize_t r;
        switch (m) {
        case M_COPY:
            r = read(fd, buf, size);
            if (r < 0)
                r = -errno;
            break;
        case M_ZBUF:
            r = zbuf_sock_recv(fd, pool, size, 0, z);
            if (r > 0)
                zbuf_cut(z, 0, ZBUF_TO_END, NULL); /* "zbufDelete": back to the pool */
            break;
        default:
            r = recv(fd, NULL, size, MSG_TRUNC);
            if (r < 0)
                r = -errno;
            break;
        }
        if (r == -EINTR)
            continue;
        if (r < 0)
            die("receive", (int)r);
        if (r == 0)
            break;
        last = now_s();
        if (total == 0)
            t0 = tick = last;
        total += (uint64_t)r;
        since += (uint64_t)r;
        if ((++n & 15) == 0) {
            if (last - tick >= interval) {
                if (!quiet)
                    printf("zbuf_blastee: %s %zu: %.1f MB/s\n", mode, size,
                           (double)since / (last - tick) / 1e6);
                tick = last;
                since = 0;
            }
            if (seconds > 0 && last - t0 >= seconds)
                break;
        }
    }
    double t = last - t0;
    if (t <= 0)
        t = 1e-9;
    printf("result mode=%s size=%zu seconds=%.3f bytes=%llu MBps=%.1f cpu=%.3f calls=%u "
           "waits=%ld\n",
           mode, size, t, (unsigned long long)total, (double)total / t / 1e6, cpu_s(), n, waits());
    zbuf_delete(z);
    zbuf_pool_delete(pool);
    free(buf);
    close(fd);
    return 0;
}
