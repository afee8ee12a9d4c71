/* SPDX-License-Identifier: MIT */
/*
 * zbuf-udpcat: a file over a reliable UDP byte stream (zbuf-udpstream).
 *
 *   zbuf-udpcat [options] -l PORT > out      receive one stream, exit when
 *                                            the sender has closed it
 *   zbuf-udpcat [options] HOST PORT < in     send standard input, exit when
 *                                            every byte is acknowledged
 *
 * Options: --stats (a line on standard error at the end: bytes, datagrams,
 * retransmissions, bytes copied), --mode auto|zerocopy|copy, --no-cc,
 * --mtu N, --timeout MS, --bind-port N (sender's local port).
 * Exit status 0 when the whole stream went through, 1 on any error.
 *
 * Standard input is read into 64 KiB buffers that the stream takes by
 * reference (in the zero-copy modes); each goes back to a free list when
 * the peer has acknowledged its bytes.  Received bytes are written to
 * standard output with writev() straight from the receive pool's buffers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zbuf/udpstream.h>

#define CHUNK 65536

static const char *prog = "zbuf-udpcat";

static void usage(void)
{
    fprintf(stderr,
            "usage: %s [--stats] [--mode auto|zerocopy|copy] [--no-cc] [--mtu N]\n"
            "          [--timeout MS] -l PORT > out\n"
            "       %s [options] [--bind-port N] HOST PORT < in\n",
            prog, prog);
    exit(2);
}

static void free_chunk(void *data, size_t size, void *arg)
{
    (void)size, (void)arg;
    free(data);
}

/* Write all of @z to @fd; 0 or -errno. */
static int write_zbuf(int fd, zbuf_t *z)
{
    while (zbuf_length(z) > 0) {
        struct iovec iov[64];
        int n = zbuf_iovec(z, 0, ZBUF_TO_END, iov, 64, NULL);
        if (n <= 0)
            return -EIO;
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        zbuf_cut(z, 0, (size_t)w, NULL);
    }
    return 0;
}

/* Read one chunk of standard input into the stream. 1 more, 0 EOF, <0 error. */
static int feed(zbuf_udpstream_t *s)
{
    uint8_t *buf = malloc(CHUNK);
    if (buf == NULL)
        return -ENOMEM;
    ssize_t r = read(STDIN_FILENO, buf, CHUNK);
    if (r <= 0) {
        free(buf);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            return 1;
        return r == 0 ? 0 : -errno;
    }
    zbuf_t *z;
    int rc = zbuf_create(&z);
    if (rc == 0 && (rc = zbuf_append_buf(z, buf, (size_t)r, free_chunk, NULL)) < 0) {
        zbuf_delete(z);
        free(buf);
        return rc;
    }
    if (rc < 0) {
        free(buf);
        return rc;
    }
    rc = zbuf_udpstream_write(s, z); /* WRITABLE was checked: no EAGAIN */
    if (rc < 0) {
        zbuf_delete(z);
        return rc;
    }
    return 1;
}

static int open_socket(int family, uint16_t bind_port)
{
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int big = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    struct sockaddr_storage a = {0};
    socklen_t alen;
    if (family == AF_INET6) {
        int off = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
        struct sockaddr_in6 *a6 = (void *)&a;
        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_any;
        a6->sin6_port = htons(bind_port);
        alen = sizeof *a6;
    } else {
        struct sockaddr_in *a4 = (void *)&a;
        a4->sin_family = AF_INET;
        a4->sin_addr.s_addr = htonl(INADDR_ANY);
        a4->sin_port = htons(bind_port);
        alen = sizeof *a4;
    }
    if (bind(fd, (struct sockaddr *)&a, alen) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static uint16_t parse_port(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < 0 || v > 65535)
        usage();
    return (uint16_t)v;
}

int main(int argc, char **argv)
{
    bool listen_mode = false, stats = false;
    uint16_t port = 0, bind_port = 0;
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    enum { OPT_STATS = 256, OPT_MODE, OPT_NOCC, OPT_MTU, OPT_TIMEOUT, OPT_BIND };
    static const struct option lo[] = {
        {"stats", no_argument, NULL, OPT_STATS},   {"mode", required_argument, NULL, OPT_MODE},
        {"no-cc", no_argument, NULL, OPT_NOCC},    {"mtu", required_argument, NULL, OPT_MTU},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"bind-port", required_argument, NULL, OPT_BIND},
        {"listen", required_argument, NULL, 'l'},  {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "l:", lo, NULL)) != -1) {
        switch (c) {
        case 'l':
            listen_mode = true;
            port = parse_port(optarg);
            break;
        case OPT_STATS:
            stats = true;
            break;
        case OPT_MODE:
            if (strcmp(optarg, "auto") == 0)
                o.mode = ZBUF_UDPSTREAM_AUTO;
            else if (strcmp(optarg, "zerocopy") == 0)
                o.mode = ZBUF_UDPSTREAM_ZEROCOPY;
            else if (strcmp(optarg, "copy") == 0)
                o.mode = ZBUF_UDPSTREAM_COPY;
            else
                usage();
            break;
        case OPT_NOCC:
            o.no_congestion_control = true;
            break;
        case OPT_MTU:
            o.mtu = (uint32_t)atoi(optarg);
            break;
        case OPT_TIMEOUT:
            o.timeout_ms = (uint32_t)atoi(optarg);
            break;
        case OPT_BIND:
            bind_port = parse_port(optarg);
            break;
        default:
            usage();
        }
    }
    if (listen_mode ? optind != argc : optind + 2 != argc)
        usage();
    signal(SIGPIPE, SIG_IGN);

    int fd = -1, rc;
    zbuf_udpstream_t *s = NULL;
    if (listen_mode) {
        fd = open_socket(AF_INET6, port);
        if (fd < 0)
            fd = open_socket(AF_INET, port);
        if (fd < 0) {
            fprintf(stderr, "%s: port %u: %s\n", prog, port, strerror(errno));
            return 1;
        }
        rc = zbuf_udpstream_listen_fd(fd, &o, &s);
    } else {
        struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *ai;
        int g = getaddrinfo(argv[optind], argv[optind + 1], &hints, &ai);
        if (g != 0) {
            fprintf(stderr, "%s: %s: %s\n", prog, argv[optind], gai_strerror(g));
            return 1;
        }
        fd = open_socket(ai->ai_family, bind_port);
        if (fd < 0) {
            fprintf(stderr, "%s: socket: %s\n", prog, strerror(errno));
            freeaddrinfo(ai);
            return 1;
        }
        rc = zbuf_udpstream_connect_fd(fd, ai->ai_addr, ai->ai_addrlen, &o, &s);
        freeaddrinfo(ai);
    }
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", prog, zbuf_strerror(rc));
        close(fd);
        return 1;
    }

    bool in_eof = listen_mode, shut = false, out_err = false;
    int status = 1;
    for (;;) {
        unsigned ev = zbuf_udpstream_events(s);
        /* Receive: standard output gets every byte in order. */
        zbuf_t *z;
        ssize_t n;
        while ((n = zbuf_udpstream_read(s, 1, SIZE_MAX, &z)) > 0) {
            if (!out_err && write_zbuf(STDOUT_FILENO, z) < 0) {
                fprintf(stderr, "%s: standard output: %s\n", prog, strerror(errno));
                out_err = true;
                zbuf_udpstream_abort(s);
            }
            zbuf_delete(z);
        }
        ev = zbuf_udpstream_events(s);
        if (ev & ZBUF_UDPSTREAM_CLOSED) {
            status = out_err ? 1 : 0;
            break;
        }
        if (ev & ZBUF_UDPSTREAM_ERROR) {
            /* Everything went through both ways, and only the last
             * handshake of the close was lost: the data is safe. */
            bool data_done = (ev & ZBUF_UDPSTREAM_EOF) && shut && (ev & ZBUF_UDPSTREAM_FLUSHED);
            if (!data_done)
                fprintf(stderr, "%s: %s\n", prog, zbuf_strerror(zbuf_udpstream_error(s)));
            status = data_done && !out_err ? 0 : 1;
            break;
        }
        /* Send: standard input while the stream takes more. */
        while (!in_eof && (zbuf_udpstream_events(s) & ZBUF_UDPSTREAM_WRITABLE)) {
            struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
            if (poll(&p, 1, 0) <= 0)
                break;
            int f = feed(s);
            if (f < 0) {
                fprintf(stderr, "%s: standard input: %s\n", prog, zbuf_strerror(f));
                zbuf_udpstream_abort(s);
                break;
            }
            if (f == 0)
                in_eof = true;
        }
        /* The sender ends once its input is in; the receiver once the
         * sender has ended. */
        if (!shut && ((!listen_mode && in_eof) || (listen_mode && (ev & ZBUF_UDPSTREAM_EOF)))) {
            zbuf_udpstream_shutdown(s);
            shut = true;
        }
        struct pollfd p[2] = {{.fd = fd, .events = (short)zbuf_udpstream_poll_events(s)},
                              {.fd = STDIN_FILENO, .events = POLLIN}};
        bool want_in = !in_eof && (zbuf_udpstream_events(s) & ZBUF_UDPSTREAM_WRITABLE);
        int r = poll(p, want_in ? 2 : 1, zbuf_udpstream_timeout(s));
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "%s: poll: %s\n", prog, strerror(errno));
            break;
        }
        zbuf_udpstream_process(s);
    }
    if (stats) {
        zbuf_udpstream_stats_t st;
        zbuf_udpstream_get_stats(s, &st);
        uint64_t payload = st.bytes_written + st.bytes_read;
        fprintf(stderr,
                "%s: stats: bytes %llu sent %llu received, datagrams %llu sent %llu received, "
                "retransmissions %llu (fast %llu, timeouts %llu), bytes copied %llu "
                "(%.3f per payload byte), bad %llu, wrong peer %llu, srtt %u us\n",
                prog, (unsigned long long)st.bytes_written, (unsigned long long)st.bytes_read,
                (unsigned long long)st.dgrams_tx, (unsigned long long)st.dgrams_rx,
                (unsigned long long)st.retransmits, (unsigned long long)st.fast_retransmits,
                (unsigned long long)st.timeouts, (unsigned long long)st.bytes_copied,
                payload ? (double)st.bytes_copied / (double)payload : 0.0,
                (unsigned long long)st.bad_dgrams, (unsigned long long)st.wrong_peer,
                st.srtt_us);
    }
    zbuf_udpstream_delete(s);
    close(fd);
    return status;
}
