/* SPDX-License-Identifier: MIT */
/*
 * A program outside the libzbuf tree that links one adapter only,
 * zbuf-udpstream-uv, found through find_package(zbuf) (target
 * zbuf::udpstream_uv) or pkg-config (zbuf-udpstream-uv): a reliable UDP
 * byte stream on loopback, both ends driven by one libuv loop, carries a
 * message by reference and closes both ways.  Run from an installed prefix
 * with no LD_LIBRARY_PATH, it proves that the adapter finds the libraries it
 * depends on (libzbuf-udpstream, libzbuf-sock, libzbuf) by itself.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>
#include <zbuf/udpstream_uv.h>

static const char umsg[] = "sent by reference over a reliable UDP stream";
static char ugot[64];
static size_t ugot_len;

static void on_stream(zbuf_udpstream_uv_t *h, zbuf_udpstream_t *s, unsigned ev, void *arg)
{
    (void)arg;
    ssize_t n;
    while ((n = zbuf_udpstream_read_copy(s, ugot + ugot_len, sizeof ugot - ugot_len - 1)) > 0)
        ugot_len += (size_t)n;
    if (n == 0) /* the sender ended: end ours too */
        zbuf_udpstream_shutdown(s);
    if (ev & (ZBUF_UDPSTREAM_CLOSED | ZBUF_UDPSTREAM_ERROR))
        zbuf_udpstream_uv_close(h, NULL, NULL);
}

static int udp_socket(struct sockaddr_in *a)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in b = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof *a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&b, sizeof b) < 0 ||
        getsockname(fd, (struct sockaddr *)a, &l) < 0)
        return -1;
    return fd;
}

static int udpstream(void)
{
    uv_loop_t *loop = uv_default_loop();
    struct sockaddr_in a, b;
    int fa = udp_socket(&a), fb = udp_socket(&b);
    zbuf_udpstream_t *sa, *sb;
    zbuf_udpstream_uv_t *ha, *hb;
    zbuf_t *z;
    int rc = -EBADF; /* a socket that could not be made */
    if (fa < 0 || fb < 0 || (rc = zbuf_udpstream_listen_fd(fb, NULL, &sb)) ||
        (rc = zbuf_udpstream_connect_fd(fa, (struct sockaddr *)&b, sizeof b, NULL, &sa)) ||
        (rc = zbuf_udpstream_uv_start(loop, sa, on_stream, NULL, &ha)) ||
        (rc = zbuf_udpstream_uv_start(loop, sb, on_stream, NULL, &hb)) ||
        (rc = zbuf_create(&z)) ||
        (rc = zbuf_append_buf(z, (void *)umsg, sizeof umsg, NULL, NULL)) ||
        (rc = zbuf_udpstream_write(sa, z)) || (rc = zbuf_udpstream_shutdown(sa))) {
        fprintf(stderr, "udpstream: %s\n", zbuf_strerror(rc));
        return 1;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    int ok = zbuf_udpstream_error(sa) == 0 && zbuf_udpstream_error(sb) == 0 &&
             ugot_len == sizeof umsg && strcmp(ugot, umsg) == 0;
    printf("udpstream: read \"%s\"\n", ugot);
    zbuf_udpstream_delete(sa);
    zbuf_udpstream_delete(sb);
    close(fa);
    close(fb);
    return ok ? 0 : 1;
}

int main(void)
{
    return udpstream();
}
