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
 *   - with zbuf-packet (zbuf::packet, pkg-config zbuf-packet): a frame sent
 *     through the transmit ring on the loopback interface comes back lent
 *     out of the receive ring (needs CAP_NET_RAW; said and skipped without).
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>
#include <zbuf/ip_uv.h>
#include <zbuf/sock.h>
#ifdef HAVE_ZBUF_PACKET
#include <errno.h>
#include <poll.h>
#include <zbuf/packet.h>
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

#ifdef HAVE_ZBUF_PACKET
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
#endif

int main(void)
{
#ifdef HAVE_ZBUF_PACKET
    if (packets())
        return 1;
#endif
    return stacks() || sockets();
}
