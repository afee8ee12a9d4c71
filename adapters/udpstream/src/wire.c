/* SPDX-License-Identifier: MIT */
/*
 * The datagram format (see internal.h for the layout).  Parsing looks at
 * the header in place when it lies in one segment, as it does for every
 * datagram the built-in transports receive; only a header split across
 * segments is gathered into a scratch copy.  Every field that could make a
 * later step misbehave is checked here, so that the stream code may trust
 * a parsed header's shape (not its values: those are checked against the
 * connection's state).
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

#define HDR_FIXED ZBUF_UDPSTREAM_HEADER

static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}
static inline void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* The bytes [off, off + len) of @z contiguous: in place, or gathered. */
static const uint8_t *view(const zbuf_t *z, size_t off, size_t len, uint8_t *scratch)
{
    const void *p;
    if (zbuf_peek(z, off, len, NULL, &p) == 0)
        return p;
    if (zbuf_peek(z, off, len, scratch, &p) == 0)
        return p;
    return NULL;
}

/* The fixed header at @p of a datagram of @total bytes. */
static int parse_fixed(const uint8_t *p, size_t total, struct zus_hdr *h)
{
    if (p[0] != ZUS_MAGIC || p[1] != ZUS_VERSION)
        return -EBADMSG;
    h->type = p[2];
    h->flags = p[3] & 0x0fu;
    h->nsack = p[3] >> 4;
    h->cid = rd32(p + 4);
    h->sn = rd32(p + 8);
    h->una = rd32(p + 12);
    h->wnd = rd16(p + 16);
    h->len = rd16(p + 18);
    h->ts = rd32(p + 20);
    h->ts_echo = rd32(p + 24);
    if (h->type < ZUS_SYN || h->type > ZUS_RST || h->nsack > ZBUF_UDPSTREAM_SACK_MAX)
        return -EBADMSG;
    if (h->flags & ~ZUS_F_FIN || (h->flags && h->type != ZUS_DATA))
        return -EBADMSG;
    if (h->nsack && h->type != ZUS_ACK)
        return -EBADMSG;
    size_t hs = HDR_FIXED + 8u * h->nsack;
    if (total != hs + h->len)
        return -EBADMSG; /* truncated, or trailing bytes */
    switch (h->type) {
    case ZUS_SYN:
    case ZUS_SYNACK:
        if (h->len != ZUS_HELLO_LEN)
            return -EBADMSG;
        break;
    case ZUS_DATA:
        if (h->len == 0 && !(h->flags & ZUS_F_FIN))
            return -EBADMSG;
        break;
    default:
        if (h->len != 0)
            return -EBADMSG;
    }
    return 0;
}

/* The SACK ranges at @q of the header @h. */
static int parse_sack(const uint8_t *q, struct zus_hdr *h)
{
    for (unsigned i = 0; i < h->nsack; i++) {
        h->sack[i][0] = rd32(q + 8 * i);
        h->sack[i][1] = rd32(q + 8 * i + 4);
        int32_t span = zus_diff(h->sack[i][1], h->sack[i][0]);
        if (span <= 0 || span > 32768)
            return -EBADMSG;
    }
    return 0;
}

int zbuf__us_parse(const zbuf_t *dgram, struct zus_hdr *h)
{
    uint8_t scratch[HDR_FIXED + 8 * ZBUF_UDPSTREAM_SACK_MAX];
    size_t total = zbuf_length(dgram);
    if (total < HDR_FIXED)
        return -EBADMSG;
    const uint8_t *p = view(dgram, 0, HDR_FIXED, scratch);
    if (p == NULL || parse_fixed(p, total, h) < 0)
        return -EBADMSG;
    if (h->nsack) {
        const uint8_t *q = view(dgram, HDR_FIXED, 8u * h->nsack, scratch);
        if (q == NULL || parse_sack(q, h) < 0)
            return -EBADMSG;
    }
    return 0;
}

int zbuf__us_parse_mem(const uint8_t *p, size_t len, struct zus_hdr *h)
{
    if (len < HDR_FIXED || parse_fixed(p, len, h) < 0)
        return -EBADMSG;
    return h->nsack ? parse_sack(p + HDR_FIXED, h) : 0; /* (inside: length checked) */
}

size_t zbuf__us_hdr_size(const struct zus_hdr *h)
{
    return HDR_FIXED + 8u * h->nsack;
}

void zbuf__us_write_hdr(const struct zus_hdr *h, uint8_t *o)
{
    o[0] = ZUS_MAGIC;
    o[1] = ZUS_VERSION;
    o[2] = h->type;
    o[3] = (uint8_t)((h->flags & 0x0fu) | (h->nsack << 4));
    wr32(o + 4, h->cid);
    wr32(o + 8, h->sn);
    wr32(o + 12, h->una);
    wr16(o + 16, h->wnd);
    wr16(o + 18, h->len);
    wr32(o + 20, h->ts);
    wr32(o + 24, h->ts_echo);
    for (unsigned i = 0; i < h->nsack; i++) {
        wr32(o + HDR_FIXED + 8 * i, h->sack[i][0]);
        wr32(o + HDR_FIXED + 8 * i + 4, h->sack[i][1]);
    }
}

void zbuf__us_write_hello(const struct zus_hello *hl, uint8_t *o)
{
    wr32(o, hl->src_cid);
    wr16(o + 4, hl->mss);
    wr16(o + 6, hl->flags);
}

int zbuf__us_parse_hello_mem(const uint8_t *p, struct zus_hello *hl)
{
    hl->src_cid = rd32(p);
    hl->mss = rd16(p + 4);
    hl->flags = rd16(p + 6);
    if (hl->src_cid == 0 || hl->mss < 64 || hl->flags != 0)
        return -EBADMSG;
    return 0;
}

int zbuf__us_parse_hello(const zbuf_t *dgram, size_t off, struct zus_hello *hl)
{
    uint8_t scratch[ZUS_HELLO_LEN];
    const uint8_t *p = view(dgram, off, ZUS_HELLO_LEN, scratch);
    return p == NULL ? -EBADMSG : zbuf__us_parse_hello_mem(p, hl);
}

int zbuf__us_out_zbuf(const struct zus_out *o, zbuf_t **out)
{
    zbuf_t *d;
    int rc = o->plen > 0 ? zbuf_dup(o->payload, 0, ZBUF_TO_END, &d) : zbuf_create(&d);
    if (rc < 0)
        return rc;
    void *p;
    rc = zbuf_prepend_space(d, o->hlen, &p);
    if (rc < 0) {
        zbuf_delete(d);
        return rc;
    }
    memcpy(p, o->hdr, o->hlen);
    *out = d;
    return 0;
}

int zbuf_udpstream_peek(const zbuf_t *dgram, uint32_t *cid)
{
    struct zus_hdr h;
    if (dgram == NULL)
        return -EINVAL;
    int rc = zbuf__us_parse(dgram, &h);
    if (rc == 0 && (h.type == ZUS_SYN || h.type == ZUS_SYNACK)) {
        struct zus_hello hl;
        rc = zbuf__us_parse_hello(dgram, zbuf__us_hdr_size(&h), &hl);
    }
    if (rc == 0 && cid != NULL)
        *cid = h.cid;
    return rc;
}
