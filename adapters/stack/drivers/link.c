/* SPDX-License-Identifier: MIT */
/*
 * In-memory point-to-point Ethernet link between two interfaces, with loss,
 * duplication, reordering and delay.
 *
 * A frame handed to one side's transmit joins the other side's queue,
 * sorted by the clock value at which it is due, and is delivered when the
 * receiving stack polls.  Nothing is delivered from inside transmit, so a
 * stack never re-enters itself through the link.
 *
 * Two modes:
 * - shared (default): the receiving stack gets the very zbuf the sender's
 *   driver got, so payload segments stay shared with the sender's
 *   retransmission queue (read-only on both sides): zero copies.
 * - copy_to_pool: the link plays a NIC doing DMA into the receiver's pool
 *   buffers.  That copy is the emulated hardware's, reported in
 *   zbuf_ip_link_stats_t::dma_bytes, not the library's.
 */
#include <stdlib.h>

#include "stack_internal.h"

#define LINK_BUF_SIZE 2048

struct frame {
    zbuf_t *z;
    uint64_t due;
    struct frame *next;
};

struct side {
    zbuf_ip_link_t *link;
    int idx;
    zbuf_ip_netif_t *nif;   /* NULL when detached */
    zbuf_ip_stack_t *stack;
    zbuf_pool_t *pool;      /* copy_to_pool: receive buffers of this side */
    struct frame *head;     /* frames travelling to this side, by due time */
    struct frame *tail;     /* last of them (appending is the common case) */
    unsigned n;
};

struct zbuf_ip_link {
    zbuf_ip_link_config_t cfg;
    struct side side[2];
    uint64_t rng;
    zbuf_ip_link_stats_t st;
    zbuf_ip_link_monitor_cb monitor;
    void *monitor_arg;
};

static double rnd(zbuf_ip_link_t *l)
{
    /* xorshift64*: plenty for impairment decisions, reproducible by seed. */
    l->rng ^= l->rng >> 12;
    l->rng ^= l->rng << 25;
    l->rng ^= l->rng >> 27;
    return (double)((l->rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

static void enqueue(struct side *to, zbuf_t *z, uint64_t due)
{
    struct frame *f = malloc(sizeof *f);
    if (f == NULL) {
        zbuf_delete(z);
        to->link->st.overflow++;
        return;
    }
    f->z = z;
    f->due = due;
    f->next = NULL;
    to->n++;
    if (to->tail == NULL || to->tail->due <= due) {
        if (to->tail)
            to->tail->next = f;
        else
            to->head = f;
        to->tail = f;
        return;
    }
    /* Held back (reordering) frames are rare: walk to their place. */
    struct frame **pp = &to->head;
    while (*pp && (*pp)->due <= due)
        pp = &(*pp)->next;
    f->next = *pp;
    *pp = f;
}

static int link_transmit(void *ctx, zbuf_t *frame)
{
    struct side *from = ctx;
    zbuf_ip_link_t *l = from->link;
    struct side *to = &l->side[!from->idx];
    l->st.frames++;
    if (l->monitor)
        l->monitor(l->monitor_arg, from->idx, frame);
    if (to->nif == NULL) {
        zbuf_delete(frame);
        return -ENOTCONN;
    }
    if (l->cfg.loss > 0 && rnd(l) < l->cfg.loss) {
        l->st.lost++;
        zbuf_delete(frame);
        return 0;
    }
    if (to->n >= l->cfg.queue_max) {
        l->st.overflow++;
        zbuf_delete(frame);
        return -ENOBUFS;
    }
    /* The clock of the sending stack, sampled on entry (or the receiver's,
     * for a frame injected from a side without a stack). */
    uint64_t due = (from->stack ? from->stack->now : to->stack->now) + l->cfg.delay_ms;
    if (l->cfg.dup > 0 && rnd(l) < l->cfg.dup) {
        zbuf_t *copy;
        if (zbuf_dup(frame, 0, ZBUF_TO_END, &copy) == 0) {
            l->st.duplicated++;
            enqueue(to, copy, due);
        }
    }
    if (l->cfg.reorder > 0 && rnd(l) < l->cfg.reorder) {
        l->st.reordered++;
        due += l->cfg.reorder_ms ? l->cfg.reorder_ms : 1;
    }
    enqueue(to, frame, due);
    return 0;
}

/* The emulated NIC: gather the frame into one pool buffer of the receiver.
 * Without a buffer the frame is dropped and reading goes on (the rule of
 * the driver contract), reported to the stack. */
static zbuf_t *dma(struct side *to, zbuf_t *frame)
{
    zbuf_ip_link_t *l = to->link;
    size_t len = zbuf_length(frame);
    zbuf_buf_t *b;
    zbuf_t *z = NULL;
    if (len > LINK_BUF_SIZE) {
        l->st.no_buffer++;
        zbuf_delete(frame);
        return NULL;
    }
    if (zbuf_pool_get(to->pool, &b) != 0) {
        l->st.no_buffer++;
        zbuf_ip_netif_rx_nobuf(to->nif, 1);
        zbuf_delete(frame);
        return NULL;
    }
    uint8_t *dst = zbuf_buf_data(b);
    size_t done = 0;
    for (zbuf_seg_t *s = zbuf_seg_first(frame); s; s = zbuf_seg_next(frame, s)) {
        size_t n = zbuf_seg_length(frame, s);
        memcpy(dst + done, zbuf_seg_data(frame, s), n);
        done += n;
    }
    l->st.dma_bytes += done;
    zbuf_delete(frame);
    if (zbuf_create(&z) != 0 || zbuf_insert_ref(z, 0, b, 0, done, NULL) != 0) {
        zbuf_delete(z);
        z = NULL;
        l->st.no_buffer++;
    }
    zbuf_buf_unref(b); /* the zbuf's segment holds the buffer now */
    return z;
}

static int link_poll(void *ctx, unsigned budget)
{
    struct side *to = ctx;
    zbuf_ip_link_t *l = to->link;
    uint64_t now = to->stack->now;
    int n = 0;
    while (to->nif && to->head && to->head->due <= now && (unsigned)n < budget) {
        struct frame *f = to->head;
        to->head = f->next;
        if (to->head == NULL)
            to->tail = NULL;
        to->n--;
        zbuf_t *z = f->z;
        free(f);
        if (l->cfg.copy_to_pool)
            z = dma(to, z);
        if (z == NULL)
            continue;
        l->st.delivered++;
        n++;
        zbuf_ip_netif_input(to->nif, z);
    }
    return n;
}

static uint64_t link_deadline(void *ctx)
{
    struct side *to = ctx;
    return to->head ? to->head->due : ZBUF_IP_NEVER;
}

static void drop_queue(struct side *sd)
{
    while (sd->head) {
        struct frame *f = sd->head;
        sd->head = f->next;
        zbuf_delete(f->z);
        free(f);
    }
    sd->tail = NULL;
    sd->n = 0;
}

static void link_detach(void *ctx)
{
    struct side *sd = ctx;
    sd->nif = NULL;
    sd->stack = NULL;
    drop_queue(sd);
}

int zbuf_ip_link_create(const zbuf_ip_link_config_t *cfg, zbuf_ip_link_t **out)
{
    if (out == NULL)
        return -EINVAL;
    zbuf_ip_link_t *l = calloc(1, sizeof *l);
    if (l == NULL)
        return -ENOMEM;
    if (cfg)
        l->cfg = *cfg;
    if (l->cfg.loss < 0 || l->cfg.loss > 1 || l->cfg.dup < 0 || l->cfg.dup > 1 ||
        l->cfg.reorder < 0 || l->cfg.reorder > 1 || (l->cfg.tso && l->cfg.copy_to_pool)) {
        free(l);
        return -EINVAL;
    }
    if (l->cfg.queue_max == 0)
        l->cfg.queue_max = 4096;
    if (l->cfg.pool_bufs == 0)
        l->cfg.pool_bufs = 1024;
    l->rng = l->cfg.seed ? l->cfg.seed : 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 2; i++) {
        l->side[i].link = l;
        l->side[i].idx = i;
        if (l->cfg.copy_to_pool &&
            zbuf_pool_create(LINK_BUF_SIZE, l->cfg.pool_bufs, &l->side[i].pool) != 0) {
            zbuf_pool_delete(l->side[0].pool);
            free(l);
            return -ENOMEM;
        }
    }
    *out = l;
    return 0;
}

int zbuf_ip_link_attach(zbuf_ip_link_t *l, int side, zbuf_ip_stack_t *s,
                        const zbuf_ip_netif_config_t *cfg, zbuf_ip_netif_t **out)
{
    if (l == NULL || (side != 0 && side != 1) || s == NULL)
        return -EINVAL;
    struct side *sd = &l->side[side];
    if (sd->nif)
        return -EBUSY;
    zbuf_ip_driver_t drv = {
        .transmit = link_transmit,
        .poll = link_poll,
        .next_deadline = link_deadline,
        .detach = link_detach,
        .flags = (l->cfg.csum_offload ? ZBUF_IP_DRV_CSUM_OFFLOAD : 0u) |
                 (l->cfg.tso ? ZBUF_IP_DRV_TSO : 0u),
        .rx_pool = sd->pool, /* NULL in shared mode: no pool, no pressure */
    };
    zbuf_ip_netif_t *nif;
    int rc = zbuf_ip_netif_add(s, cfg, &drv, sd, &nif);
    if (rc)
        return rc;
    sd->nif = nif;
    sd->stack = s;
    if (out)
        *out = nif;
    return 0;
}

void zbuf_ip_link_set_impairments(zbuf_ip_link_t *l, double loss, double dup, double reorder)
{
    if (l == NULL)
        return;
    l->cfg.loss = loss;
    l->cfg.dup = dup;
    l->cfg.reorder = reorder;
}

void zbuf_ip_link_stats(const zbuf_ip_link_t *l, zbuf_ip_link_stats_t *out)
{
    if (l && out)
        *out = l->st;
}

void zbuf_ip_link_set_monitor(zbuf_ip_link_t *l, zbuf_ip_link_monitor_cb cb, void *arg)
{
    if (l) {
        l->monitor = cb;
        l->monitor_arg = arg;
    }
}

int zbuf_ip_link_inject(zbuf_ip_link_t *l, int side, zbuf_t *frame)
{
    if (l == NULL || frame == NULL || (side != 0 && side != 1)) {
        zbuf_delete(frame);
        return -EINVAL;
    }
    return link_transmit(&l->side[side], frame);
}

void zbuf_ip_link_delete(zbuf_ip_link_t *l)
{
    if (l == NULL)
        return;
    for (int i = 0; i < 2; i++) {
        if (l->side[i].nif)
            zbuf_ip_netif_remove(l->side[i].nif); /* runs link_detach */
        drop_queue(&l->side[i]);
    }
    for (int i = 0; i < 2; i++)
        zbuf_pool_delete(l->side[i].pool);
    free(l);
}
