/*
 * A program outside the libzbuf tree using the installed adapters, found
 * through find_package(zbuf) (targets zbuf::stack_uv, zbuf::sock) or
 * pkg-config (zbuf-stack-uv, zbuf-sock):
 *
 *   - two zbuf TCP/IP stacks joined by an in-memory link, both driven by one
 *     libuv loop; stack A pings stack B and the loop ends by itself once
 *     the reply is in;
 *   - a zbuf-sock handle on one end of a socketpair sends a zbuf to the
 *     other end;
 *   - when the package has them (ZBUF_CONSUMER_UDPSTREAM: zbuf::udpstream_uv,
 *     pkg-config zbuf-udpstream-uv), a reliable UDP byte stream on
 *     loopback, both ends driven by a libuv loop, carries a message by
 *     reference and closes cleanly.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>
#include <zbuf/ip_uv.h>
#include <zbuf/sock.h>
#ifdef ZBUF_CONSUMER_UDPSTREAM
#include <arpa/inet.h>
#include <netinet/in.h>
#include <zbuf/udpstream_uv.h>
#endif

static zbuf_ip_uv_t *uv_a, *uv_b;
static int replies;

static void on_reply(void *arg, uint32_t from, uint16_t id, uint16_t seq, zbuf_t *data)
{
    (void)arg;
    printf("ping reply from %u.%u.%u.%u id %u seq %u, %zu bytes\n", from >> 24,
           from >> 16 & 255, from >> 8 & 255, from & 255, id, seq, zbuf_length(data));
    zbuf_delete(data);
    replies++;
    zbuf_ip_uv_close(uv_a, NULL, NULL); /* uv_run returns once both are closed */
    zbuf_ip_uv_close(uv_b, NULL, NULL);
}

static int stacks(void)
{
    uv_loop_t *loop = uv_default_loop();
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.ping_reply = on_reply;
    zbuf_ip_stack_t *a, *b;
    zbuf_ip_link_t *link;
    zbuf_ip_netif_config_t na = {.mac = {2, 0, 0, 0, 0, 1}, .addr = ZBUF_IP_ADDR(192, 0, 2, 1),
                                 .prefix_len = 24};
    zbuf_ip_netif_config_t nb = {.mac = {2, 0, 0, 0, 0, 2}, .addr = ZBUF_IP_ADDR(192, 0, 2, 2),
                                 .prefix_len = 24};
    int rc;
    if ((rc = zbuf_ip_stack_create(&cfg, &a)) || (rc = zbuf_ip_stack_create(NULL, &b)) ||
        (rc = zbuf_ip_link_create(NULL, &link)) ||
        (rc = zbuf_ip_link_attach(link, 0, a, &na, NULL)) ||
        (rc = zbuf_ip_link_attach(link, 1, b, &nb, NULL)) ||
        (rc = zbuf_ip_uv_attach(loop, a, &uv_a)) || (rc = zbuf_ip_uv_attach(loop, b, &uv_b)) ||
        (rc = zbuf_ip_ping(a, ZBUF_IP_ADDR(192, 0, 2, 2), 1, 1, NULL))) {
        fprintf(stderr, "stack: %s\n", zbuf_strerror(rc));
        return 1;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    zbuf_ip_link_delete(link);
    zbuf_ip_stack_delete(a);
    zbuf_ip_stack_delete(b);
    return replies == 1 && uv_loop_close(loop) == 0 ? 0 : 1;
}

static int sockets(void)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    static const char msg[] = "sent by reference through zbuf-sock";
    zbuf_sock_t *s;
    zbuf_t *z;
    int rc;
    if ((rc = zbuf_sock_open(sv[0], NULL, &s)) || (rc = zbuf_create(&z)) ||
        (rc = zbuf_append_buf(z, (void *)msg, sizeof msg, NULL, NULL))) {
        fprintf(stderr, "sock: %s\n", zbuf_strerror(rc));
        return 1;
    }
    ssize_t n = zbuf_sock_send(s, z, 0);
    char got[64] = "";
    ssize_t r = read(sv[1], got, sizeof got);
    zbuf_delete(z);
    zbuf_sock_close(s, 1000);
    close(sv[1]);
    printf("socketpair: sent %zd, read \"%s\"\n", n, r > 0 ? got : "");
    return n == (ssize_t)sizeof msg && r == n && strcmp(got, msg) == 0 ? 0 : 1;
}

#ifdef ZBUF_CONSUMER_UDPSTREAM
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
#else
static int udpstream(void)
{
    return 0;
}
#endif

int main(void)
{
    return stacks() || sockets() || udpstream();
}
