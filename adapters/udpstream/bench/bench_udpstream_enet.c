/* SPDX-License-Identifier: MIT */
/* ENet (Debian's libenet-dev) in the scenarios of bench_common.h: one
 * reliable channel; the client's sends use ENET_PACKET_FLAG_NO_ALLOCATE
 * (ENet's zero-copy send), the server echoes the packet it received. */
#include <enet/enet.h>

#include "bench_common.h"

static ENetHost *eh_srv, *eh_cli;
static ENetPeer *peer_cli;
static uint8_t *ebuf;
static void (*echo_cb)(const uint8_t *);
static size_t pp_back;
static uint64_t copied;

static void service(ENetHost *h, bool server)
{
    ENetEvent ev;
    while (enet_host_service(h, &ev, 0) > 0) {
        if (ev.type != ENET_EVENT_TYPE_RECEIVE)
            continue;
        if (server) {
            enet_peer_send(ev.peer, 0, ev.packet); /* the same packet goes back */
            enet_host_flush(h);
        } else {
            if (echo_cb)
                echo_cb(ev.packet->data);
            pp_back += ev.packet->dataLength;
            enet_packet_destroy(ev.packet);
        }
    }
}

static void open_hosts(struct sockaddr_in *server_out)
{
    if (enet_initialize() != 0) {
        fprintf(stderr, "enet_initialize failed\n");
        exit(1);
    }
    ENetAddress a = {.host = htonl(INADDR_LOOPBACK), .port = 0};
    eh_srv = enet_host_create(&a, 4, 1, 0, 0);
    eh_cli = enet_host_create(NULL, 1, 1, 0, 0);
    if (eh_srv == NULL || eh_cli == NULL) {
        fprintf(stderr, "enet_host_create failed\n");
        exit(1);
    }
    struct sockaddr_in sa;
    socklen_t l = sizeof sa;
    getsockname(eh_srv->socket, (struct sockaddr *)&sa, &l);
    *server_out = sa;
}

static void connect_to(const struct sockaddr_in *to)
{
    ENetAddress a = {.host = to->sin_addr.s_addr, .port = ntohs(to->sin_port)};
    peer_cli = enet_host_connect(eh_cli, &a, 1, 0);
}

static void enet_pp_open(size_t max)
{
    struct sockaddr_in sa;
    open_hosts(&sa);
    connect_to(&sa);
    ebuf = malloc(max);
    memset(ebuf, 0x42, max);
    uint64_t end = bench_now_us() + 5000000;
    while (peer_cli->state != ENET_PEER_STATE_CONNECTED && bench_now_us() < end) {
        service(eh_cli, false);
        service(eh_srv, true);
    }
}

static void enet_pp_round(size_t size)
{
    ENetPacket *p = enet_packet_create(ebuf, size,
                                       ENET_PACKET_FLAG_RELIABLE | ENET_PACKET_FLAG_NO_ALLOCATE);
    enet_peer_send(peer_cli, 0, p);
    enet_host_flush(eh_cli);
    pp_back = 0;
    while (pp_back < size) {
        service(eh_srv, true);
        service(eh_cli, false);
    }
}

static double enet_copied(void)
{
    return -1; /* ENet copies every received fragment into its packet; not counted here */
}

static void enet_close(void)
{
    enet_peer_disconnect_now(peer_cli, 0);
    enet_host_destroy(eh_cli);
    enet_host_destroy(eh_srv);
    enet_deinitialize();
    free(ebuf);
    ebuf = NULL;
    (void)copied;
}

static void enet_loss_open(struct sockaddr_in *server)
{
    open_hosts(server);
}

static void enet_loss_send(const uint8_t *msg)
{
    ENetPacket *p = enet_packet_create(msg, LOSS_PAYLOAD, ENET_PACKET_FLAG_RELIABLE);
    enet_peer_send(peer_cli, 0, p);
    enet_host_flush(eh_cli);
}

static void enet_loss_poll(int64_t wait_us, void (*echoed)(const uint8_t *))
{
    struct pollfd pf[2] = {{.fd = eh_cli->socket, .events = POLLIN},
                           {.fd = eh_srv->socket, .events = POLLIN}};
    int ms = (int)(wait_us / 1000);
    poll(pf, 2, ms > 1 ? 1 : ms);
    echo_cb = echoed;
    service(eh_srv, true);
    service(eh_cli, false);
}

static const struct bench_impl impls[] = {
    {"enet", enet_pp_open, enet_pp_round, enet_copied, enet_close, NULL, enet_loss_open,
     connect_to, enet_loss_send, enet_loss_poll, enet_close, false},
};

int main(int argc, char **argv)
{
    return bench_main(argc, argv, impls, 1);
}
