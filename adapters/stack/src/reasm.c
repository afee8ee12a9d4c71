/* SPDX-License-Identifier: MIT */
/*
 * IPv4 fragment reassembly (RFC 791), without copying a payload byte.
 *
 * A datagram being reassembled is a `struct ip_reasm`: its RFC 791 key
 * (source, destination, protocol, identification) and its fragments in a
 * small array sorted by offset.  A held fragment is the zbuf ip_input()
 * made of the received frame, Ethernet and IP headers cut away: its
 * segments are still the driver's buffers.  When the fragments cover the
 * datagram from byte 0 to the end the last fragment announced, they are
 * joined in order with zbuf_append(), which moves segments and copies
 * nothing, and the result goes up the normal path (the transport checksum
 * is then verified over the joined segments).
 *
 * A sorted array instead of RFC 815's hole list: overlaps are refused (the
 * datagram is discarded, see <zbuf/ip_opts.h>), so the held fragments never
 * overlap and the datagram is complete exactly when the end is known and
 * the held lengths add up to it.  Insertion looks at the two neighbours of
 * the new fragment only.
 *
 * Every number a peer controls is bounded before it is used: offsets are at
 * most 8 * 8191 and lengths at most 65535, so offset + length is computed
 * in 32 bits without overflow and then compared with 65535.
 *
 * Accounting: a fragment that does not reach the application inside a
 * reassembled datagram counts once in ip_frag_drops and once in rx_drops:
 * here for fragments held and later discarded, in ip_input() for the
 * fragment being offered when the offer fails.
 */
#include <stddef.h>
#include <stdlib.h>

#include "stack_internal.h"

struct ip_frag {
    uint32_t off;  /* payload offset in the datagram, bytes */
    uint32_t len;  /* bytes, > 0; off + len <= IP_MAX_DATAGRAM */
    zbuf_t *z;     /* the payload, owned */
};

struct ip_reasm {
    uint32_t src, dst;
    uint16_t id;
    uint8_t proto;
    bool have_end;             /* the fragment without MF arrived */
    uint32_t end;              /* payload length of the datagram (have_end) */
    uint32_t have;             /* sum of the held lengths; == end: complete */
    uint32_t cost;             /* sum of the held costs */
    uint64_t seq;              /* creation order: eviction takes the smallest */
    uint64_t deadline;         /* freed then if still incomplete */
    const zbuf_ip_netif_t *nif; /* where the first fragment came in */
    uint8_t head_len;          /* 0, or bytes in head: the fragment at offset 0 is here */
    uint8_t head[IP_HLEN + 8]; /* its IP header and first 8 payload bytes, for ICMP */
    unsigned n;                /* fragments held, sorted by off, disjoint */
    struct ip_frag frag[ZBUF_IP_REASM_FRAGS];
};

/* What holding `z` pins of the driver's buffers (see <zbuf/ip_opts.h>). */
static uint32_t charge(const zbuf_t *z)
{
    size_t c = zbuf_ip__pinned(z);
    return c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
}

/* Empty slot `i` and free its record (the fragments are the caller's). */
static void slot_release(zbuf_ip_stack_t *s, int i)
{
    struct ip_reasm *r = s->reasm[i];
    s->st.ip_reasm_held -= r->cost;
    s->st.ip_reasm_pending--;
    s->reasm[i] = NULL;
    free(r);
}

/* Free slot `i` and everything it holds.  Every held fragment counts as
 * dropped. */
static void reasm_free(zbuf_ip_stack_t *s, int i)
{
    struct ip_reasm *r = s->reasm[i];
    for (unsigned k = 0; k < r->n; k++)
        zbuf_delete(r->frag[k].z);
    s->st.ip_frag_drops += r->n;
    s->st.rx_drops += r->n;
    slot_release(s, i);
}

static int reasm_find(const zbuf_ip_stack_t *s, uint32_t src, uint32_t dst, uint8_t proto,
                      uint16_t id)
{
    for (int i = 0; i < ZBUF_IP_REASM_MAX; i++) {
        const struct ip_reasm *r = s->reasm[i];
        if (r && r->id == id && r->src == src && r->dst == dst && r->proto == proto)
            return i;
    }
    return -1;
}

/* The oldest datagram other than slot `keep`, or -1. */
static int reasm_oldest(const zbuf_ip_stack_t *s, int keep)
{
    int best = -1;
    for (int i = 0; i < ZBUF_IP_REASM_MAX; i++)
        if (i != keep && s->reasm[i] &&
            (best < 0 || s->reasm[i]->seq < s->reasm[best]->seq))
            best = i;
    return best;
}

/* A new, empty datagram; the oldest is evicted when every slot is taken.
 * Returns its slot or -ENOMEM. */
static int reasm_new(zbuf_ip_netif_t *nif, uint32_t src, uint32_t dst, uint8_t proto,
                     uint16_t id)
{
    zbuf_ip_stack_t *s = nif->stack;
    int slot = -1;
    for (int i = 0; i < ZBUF_IP_REASM_MAX && slot < 0; i++)
        if (s->reasm[i] == NULL)
            slot = i;
    if (slot < 0) {
        slot = reasm_oldest(s, -1);
        reasm_free(s, slot);
        s->st.ip_reasm_drops++;
    }
    struct ip_reasm *r = malloc(sizeof *r);
    if (r == NULL)
        return -ENOMEM;
    memset(r, 0, offsetof(struct ip_reasm, frag));
    r->src = src;
    r->dst = dst;
    r->proto = proto;
    r->id = id;
    r->seq = s->reasm_seq++;
    r->deadline = s->now + s->cfg.ip_reasm_timeout_ms;
    r->nif = nif;
    s->reasm[slot] = r;
    s->st.ip_reasm_pending++;
    return slot;
}

/* Join the fragments of complete slot `i` into one zbuf and free the slot.
 * Returns 1 with *out, or -ENOMEM (everything dropped). */
static int reasm_join(zbuf_ip_stack_t *s, int i, zbuf_t **out)
{
    struct ip_reasm *r = s->reasm[i];
    zbuf_t *z = r->frag[0].z;
    unsigned k;
    for (k = 1; k < r->n; k++)
        if (zbuf_append(z, r->frag[k].z) != 0)
            break;
    if (k < r->n) {
        /* frag[0 .. k-1] now live in z; the rest are still held. */
        zbuf_delete(z);
        for (unsigned j = 0; j < k; j++)
            r->frag[j].z = NULL;
        reasm_free(s, i);
        s->st.ip_reasm_drops++;
        return -ENOMEM;
    }
    s->st.ip_reassembled++;
    slot_release(s, i);
    *out = z;
    return 1;
}

int zbuf_ip__reasm_input(zbuf_ip_netif_t *nif, zbuf_t *frag, uint32_t src, uint32_t dst,
                         uint8_t proto, uint16_t id, uint32_t off, bool mf,
                         const uint8_t *iph, size_t hlen, zbuf_t **out)
{
    zbuf_ip_stack_t *s = nif->stack;
    size_t zlen = zbuf_length(frag);
    s->st.ip_frags_rx++;
    int rc;
    if (!s->cfg.ip_reassembly) {
        rc = -EMSGSIZE;
        goto drop;
    }
    /* Zero-length fragments carry nothing and could only hold a slot; a
     * fragment with more to follow must end on an 8-byte boundary, or the
     * next offset could not continue it. */
    if (zlen == 0 || (mf && (zlen & 7) != 0)) {
        s->st.bad_ip++;
        rc = -EBADMSG;
        goto drop;
    }
    uint32_t len = (uint32_t)zlen; /* <= 65535: cut to the IP total length */
    uint32_t end = off + len;      /* off <= 65528: no overflow */
    int i = reasm_find(s, src, dst, proto, id);
    if (end + hlen > IP_MAX_DATAGRAM) {
        /* Ping of Death: the datagram would not fit its own length field.
         * What is held of it goes too. */
        if (i >= 0)
            reasm_free(s, i);
        s->st.ip_reasm_oversize++;
        rc = -EMSGSIZE;
        goto drop;
    }
    if (i < 0) {
        i = reasm_new(nif, src, dst, proto, id);
        if (i < 0) {
            rc = i;
            goto drop;
        }
    }
    struct ip_reasm *r = s->reasm[i];
    /* Where it goes: k is the first held fragment at or after `off`. */
    unsigned k = 0;
    while (k < r->n && r->frag[k].off < off)
        k++;
    if (k < r->n && r->frag[k].off == off && r->frag[k].len == len &&
        (mf ? !(r->have_end && r->end == end) : (r->have_end && r->end == end))) {
        rc = -EEXIST; /* an exact duplicate, as duplicating links make */
        goto drop;
    }
    bool bad = (k > 0 && r->frag[k - 1].off + r->frag[k - 1].len > off) ||
               (k < r->n && end > r->frag[k].off);
    if (mf)
        bad = bad || (r->have_end && end >= r->end);
    else
        bad = bad || (r->have_end && r->end != end) ||
              (r->n > 0 && r->frag[r->n - 1].off + r->frag[r->n - 1].len > end);
    if (bad) {
        reasm_free(s, i);
        s->st.ip_reasm_overlaps++;
        rc = -EBADMSG;
        goto drop;
    }
    if (r->n == ZBUF_IP_REASM_FRAGS) {
        reasm_free(s, i);
        s->st.ip_reasm_drops++;
        rc = -ENOBUFS;
        goto drop;
    }
    /* Held until the datagram completes, maybe never: the pool policy may
     * want a compact copy, or no holding at all (its reserve). */
    if (zbuf_ip__rx_hold(s, frag, true) != 0) {
        if (r->n == 0)
            slot_release(s, i);
        rc = -ENOBUFS;
        goto drop;
    }
    uint32_t cost = charge(frag);
    while (s->st.ip_reasm_held + (uint64_t)cost > s->cfg.ip_reasm_bytes) {
        int victim = reasm_oldest(s, i);
        if (victim < 0) {
            /* This datagram alone would pass the budget. */
            reasm_free(s, i);
            s->st.ip_reasm_drops++;
            rc = -ENOBUFS;
            goto drop;
        }
        reasm_free(s, victim);
        s->st.ip_reasm_drops++;
    }
    memmove(&r->frag[k + 1], &r->frag[k], (r->n - k) * sizeof r->frag[0]);
    r->frag[k] = (struct ip_frag){.off = off, .len = len, .z = frag};
    r->n++;
    r->have += len;
    r->cost += cost;
    s->st.ip_reasm_held += cost;
    if (!mf) {
        r->have_end = true;
        r->end = end;
    }
    if (off == 0 && hlen == IP_HLEN) {
        /* Keep what an ICMP time-exceeded message quotes.  Transport header
         * bytes, read like any header. */
        uint8_t tmp[8];
        size_t q = len < 8 ? len : 8;
        const uint8_t *p = zbuf_ip__hdr(frag, 0, q, tmp);
        if (p != NULL) {
            memcpy(r->head, iph, IP_HLEN);
            memcpy(r->head + IP_HLEN, p, q);
            r->head_len = (uint8_t)(IP_HLEN + q);
        }
    }
    if (r->have_end && r->have == r->end)
        return reasm_join(s, i, out);
    return 0;
drop:
    s->st.ip_frag_drops++;
    zbuf_delete(frag);
    return rc;
}

int zbuf_ip__reasm_timers(zbuf_ip_stack_t *s)
{
    int n = 0;
    if (s->st.ip_reasm_pending == 0)
        return 0;
    for (int i = 0; i < ZBUF_IP_REASM_MAX; i++)
        if (s->reasm[i] && s->reasm[i]->deadline <= s->now) {
            /* RFC 792 / RFC 1122 3.3.2: tell the sender, if its first
             * fragment arrived (else the message could not quote it).
             * Free first: sending may call into a driver. */
            uint8_t head[sizeof s->reasm[i]->head];
            size_t head_len = s->reasm[i]->head_len;
            memcpy(head, s->reasm[i]->head, head_len);
            reasm_free(s, i);
            if (head_len > 0)
                zbuf_ip__icmp_reasm_timeout(s, head, head_len);
            s->st.ip_reasm_timeouts++;
            n++;
        }
    return n;
}

uint64_t zbuf_ip__reasm_deadline(const zbuf_ip_stack_t *s)
{
    uint64_t d = ZBUF_IP_NEVER;
    if (s->st.ip_reasm_pending == 0)
        return d;
    for (int i = 0; i < ZBUF_IP_REASM_MAX; i++)
        if (s->reasm[i] && s->reasm[i]->deadline < d)
            d = s->reasm[i]->deadline;
    return d;
}

void zbuf_ip__reasm_flush(zbuf_ip_stack_t *s, const zbuf_ip_netif_t *nif)
{
    for (int i = 0; i < ZBUF_IP_REASM_MAX; i++)
        if (s->reasm[i] && (nif == NULL || s->reasm[i]->nif == nif))
            reasm_free(s, i);
}
