/*
 * Driving the zbuf stack from a libuv loop.
 *
 * The stack has no thread and no loop of its own: it needs a call to
 * zbuf_ip_poll() when a driver's descriptor is readable and when
 * zbuf_ip_next_deadline() has passed.  In libuv that is:
 *
 *   - a uv_poll_t per TAP descriptor (zbuf_ip_tap_fd()) calling poll;
 *   - one uv_timer_t set, before the loop blocks, to the next deadline: a
 *     uv_prepare_t runs right before each blocking wait, so whatever the
 *     callbacks did in this iteration (connect, write, close) is accounted
 *     for.
 *
 * This example runs two stacks joined by the in-memory link (so it needs no
 * privileges) with a 1 ms one-way delay: A connects to B's echo service,
 * sends 4 MiB by reference and checks that the same bytes come back, all
 * driven by libuv's timer.  With a TAP interface, add the uv_poll_t shown in
 * attach_fd().
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include <zbuf/ip.h>

#define TOTAL (4u << 20)

struct driver {
    zbuf_ip_stack_t *stacks[2];
    int n;
    uv_timer_t timer;
    uv_prepare_t prepare;
};

static void on_timer(uv_timer_t *t)
{
    struct driver *d = t->data;
    for (int i = 0; i < d->n; i++)
        zbuf_ip_poll(d->stacks[i]);
}

/* Before the loop blocks: aim the timer at the earliest deadline. */
static void on_prepare(uv_prepare_t *p)
{
    struct driver *d = p->data;
    uint64_t next = ZBUF_IP_NEVER, now = zbuf_ip_now(d->stacks[0]);
    for (int i = 0; i < d->n; i++) {
        uint64_t t = zbuf_ip_next_deadline(d->stacks[i]);
        if (t < next)
            next = t;
    }
    if (next == ZBUF_IP_NEVER)
        uv_timer_stop(&d->timer);
    else
        uv_timer_start(&d->timer, on_timer, next > now ? next - now : 0, 0);
}

#ifdef ZBUF_STACK_EXAMPLE_TAP
static void on_readable(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    zbuf_ip_poll(h->data);
}

/* For a TAP interface: poll the stack whenever its descriptor is readable. */
static void attach_fd(uv_loop_t *loop, uv_poll_t *h, zbuf_ip_stack_t *s, zbuf_ip_netif_t *nif)
{
    uv_poll_init(loop, h, zbuf_ip_tap_fd(nif));
    h->data = s;
    uv_poll_start(h, UV_READABLE, on_readable);
}
#endif

/* ----------------------------------------------------------- the echo */

static uint8_t *data;
static size_t echoed, checked;
static int mismatches;
static zbuf_ip_tcp_t *server_conn;

static zbuf_t *pending; /* received, waiting for room in the send buffer */
static bool peer_done;

/* Echo the very segments received; the window reopens only as they are
 * taken by the send queue, so the client cannot outrun the echo. */
static void srv_flush(zbuf_ip_tcp_t *pcb)
{
    size_t len = zbuf_length(pending), room = zbuf_ip_tcp_sndbuf(pcb);
    if (len > 0 && room > 0) {
        zbuf_t *part = pending;
        if (len > room)
            zbuf_split_head(pending, room, &part);
        else
            zbuf_create(&pending);
        size_t n = zbuf_length(part);
        if (zbuf_ip_tcp_write(pcb, part) == 0) {
            zbuf_ip_tcp_recved(pcb, n);
            echoed += n;
        } else {
            zbuf_insert(pending, 0, part, NULL);
        }
    }
    if (peer_done && zbuf_length(pending) == 0) {
        zbuf_ip_tcp_close(pcb);
        peer_done = false;
    }
}

static void srv_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *z)
{
    (void)arg;
    if (z == NULL)
        peer_done = true;
    else
        zbuf_append(pending, z);
    srv_flush(pcb);
}

static void srv_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)arg;
    (void)n;
    srv_flush(pcb);
}

static int srv_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)arg;
    (void)l;
    zbuf_ip_tcp_callbacks_t cb = {.recv = srv_recv, .sent = srv_sent};
    zbuf_ip_tcp_set_callbacks(c, &cb, NULL);
    server_conn = c;
    return 0;
}

static size_t sent_off;

static void cli_fill(zbuf_ip_tcp_t *pcb)
{
    while (sent_off < TOTAL) {
        size_t n = TOTAL - sent_off < 16384 ? TOTAL - sent_off : 16384;
        if (zbuf_ip_tcp_sndbuf(pcb) < n)
            return;
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_buf(z, data + sent_off, n, NULL, NULL); /* by reference */
        if (zbuf_ip_tcp_write(pcb, z) != 0) {
            zbuf_delete(z);
            return;
        }
        sent_off += n;
    }
    zbuf_ip_tcp_shutdown(pcb);
}

static void cli_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    (void)arg;
    cli_fill(pcb);
}

static void cli_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)arg;
    (void)n;
    cli_fill(pcb);
}

static void cli_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *z)
{
    (void)arg;
    if (z == NULL) {
        zbuf_ip_tcp_close(pcb);
        return;
    }
    for (zbuf_seg_t *s = zbuf_seg_first(z); s; s = zbuf_seg_next(z, s)) {
        size_t n = zbuf_seg_length(z, s);
        if (memcmp(zbuf_seg_data(z, s), data + checked, n) != 0)
            mismatches++;
        checked += n;
    }
    zbuf_ip_tcp_recved(pcb, zbuf_length(z));
    zbuf_delete(z);
}

int main(void)
{
    uv_loop_t *loop = uv_default_loop();
    data = malloc(TOTAL);
    for (size_t i = 0; i < TOTAL; i++)
        data[i] = (uint8_t)(i * 131 + (i >> 12));

    struct driver d = {.n = 2};
    zbuf_ip_link_t *link;
    zbuf_ip_link_config_t lc = {.delay_ms = 1};
    if (zbuf_ip_stack_create(NULL, &d.stacks[0]) || zbuf_ip_stack_create(NULL, &d.stacks[1]) ||
        zbuf_ip_link_create(&lc, &link))
        return 1;
    zbuf_ip_netif_config_t na = {.mac = {2, 0, 0, 0, 0, 1}, .addr = ZBUF_IP_ADDR(192, 0, 2, 1),
                                 .prefix_len = 24};
    zbuf_ip_netif_config_t nb = {.mac = {2, 0, 0, 0, 0, 2}, .addr = ZBUF_IP_ADDR(192, 0, 2, 2),
                                 .prefix_len = 24};
    zbuf_ip_link_attach(link, 0, d.stacks[0], &na, NULL);
    zbuf_ip_link_attach(link, 1, d.stacks[1], &nb, NULL);

    zbuf_create(&pending);
    uv_timer_init(loop, &d.timer);
    d.timer.data = &d;
    uv_prepare_init(loop, &d.prepare);
    d.prepare.data = &d;
    uv_prepare_start(&d.prepare, on_prepare);

    zbuf_ip_tcp_t *l, *c;
    zbuf_ip_tcp_new(d.stacks[1], &l);
    zbuf_ip_tcp_bind(l, ZBUF_IP_ANY, 7);
    zbuf_ip_tcp_listen(l, 1);
    zbuf_ip_tcp_callbacks_t lcb = {.accept = srv_accept};
    zbuf_ip_tcp_set_callbacks(l, &lcb, NULL);
    zbuf_ip_tcp_new(d.stacks[0], &c);
    zbuf_ip_tcp_callbacks_t ccb = {.connected = cli_connected, .sent = cli_sent, .recv = cli_recv};
    zbuf_ip_tcp_set_callbacks(c, &ccb, NULL);
    zbuf_ip_tcp_connect(c, ZBUF_IP_ADDR(192, 0, 2, 2), 7);

    /* Run until the echo came back whole; TIME_WAIT and ARP timers would
     * keep the loop alive for minutes, so stop there. */
    while (checked < TOTAL && uv_run(loop, UV_RUN_ONCE))
        ;
    zbuf_stats_t zs;
    zbuf_stats_get(&zs);
    printf("stack_uv: %zu bytes echoed through libuv-driven stacks, %d mismatches, "
           "%llu bytes copied by the library\n",
           checked, mismatches, (unsigned long long)zs.bytes_copied);
    uv_prepare_stop(&d.prepare);
    uv_timer_stop(&d.timer);
    uv_close((uv_handle_t *)&d.prepare, NULL);
    uv_close((uv_handle_t *)&d.timer, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    zbuf_ip_tcp_close(l);
    zbuf_ip_stack_delete(d.stacks[0]);
    zbuf_ip_stack_delete(d.stacks[1]);
    zbuf_ip_link_delete(link);
    zbuf_delete(pending);
    free(data);
    return checked == TOTAL && mismatches == 0 ? 0 : 1;
}
