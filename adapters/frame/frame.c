/* SPDX-License-Identifier: MIT */
/*
 * Length-prefixed framing over a zbuf stream.
 *
 * The decoder holds one zbuf, the stream: everything received and not yet
 * returned as a frame, front first.  Feeding appends (segments move, no
 * copy).  Taking a frame reads the header with a cursor (which gathers the
 * few header bytes across segment boundaries when it must), remembers the
 * parsed header until the frame is complete, then cuts the frame off the
 * front with zbuf_split_head() and trims the header from it with a front
 * zbuf_cut(), which never allocates.  The order matters for the failure
 * rule: the split is the only step that can fail (-ENOMEM), and it changes
 * nothing when it does.
 *
 * Limits are checked on the header alone, before any payload is awaited,
 * so a hostile length cannot make the decoder buffer or allocate more than
 * header + max_payload + the bytes of one feed.
 *
 * An idle decoder holds nothing: the stream zbuf exists only while bytes
 * are buffered (the first zbuf fed becomes it, and a frame that is all of
 * it is handed out as it is, without a split).
 *
 * Frames that can never fit.  Bytes read into pool buffers hold those
 * buffers until the frame is taken, and a reader can hold only so many:
 * its quota's limit (zbuf_pool_quota_get(), which the libuv adapter uses
 * for every stream) or the whole pool.  A partial frame that needs more
 * than that would wait forever, holding what it has, and starve every
 * other reader of the pool; so while a frame is incomplete the decoder
 * counts the pool buffers its bytes hold and the ones the rest would need
 * at best (the last buffer filled to its end, then whole buffers: a reader
 * that cannot take another buffer fills the one it has, see
 * adapters/uv/uv_read.c), and refuses the frame with the sticky -EMSGSIZE
 * once that is more than the limit.  Counting is incremental (new segments only), so a large frame
 * arriving in many reads costs O(segments) in all.  Bytes that are not in
 * pool buffers are not counted: their memory is not shared.
 *
 * Header slabs.  zbuf_frame_encode() writes the header into the message's
 * headroom when it has some; when it has none (its first buffer is shared,
 * as every received message's is), it puts the header in a small slab of
 * the calling thread instead of a buffer of its own: a segment of a few
 * bytes in a 1 KiB buffer that many headers share.  The thread keeps a
 * reference to each of its slabs (so nobody else writes into them, see
 * zbuf/buf.h on writability), reuses one from its start once no header
 * uses it any more (only its own reference is left) and allocates only
 * when all of them are in use: in the steady state, framing allocates
 * nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <zbuf/frame.h>

struct zbuf_frame_decoder {
    zbuf_frame_opts_t o;  /* max_payload already clamped to the field's range */
    zbuf_t *stream;       /* received bytes not yet returned, front first; NULL
                             when there are none */
    int err;              /* sticky -EMSGSIZE / -EBADMSG, or 0 */
    bool have_hdr;        /* hdr_len/payload describe the frame at the front */
    size_t hdr_len;       /* header bytes of that frame */
    size_t payload;       /* its payload bytes, <= o.max_payload */
    /* The pool buffers the incomplete front frame holds, counted so far
     * (reset with have_hdr): up to and including segment fit_seg. */
    const zbuf_seg_t *fit_seg;
    const zbuf_buf_t *fit_buf;  /* the buffer of fit_seg */
    zbuf_pool_t *fit_pool;      /* the pool counted */
    size_t fit_bufs;
    size_t fit_limit;           /* buffers its reader may hold, read once per frame */
    size_t fit_size;            /* bytes per buffer of fit_pool */
};

/* Bytes of the shortest LEB128 form of v. */
static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t fixed_size(zbuf_frame_len_t k)
{
    switch (k) {
    case ZBUF_FRAME_BE16:
        return 2;
    case ZBUF_FRAME_BE32:
    case ZBUF_FRAME_LE32:
        return 4;
    case ZBUF_FRAME_BE64:
        return 8;
    case ZBUF_FRAME_VARINT:
        return 0;
    }
    return 0;
}

static bool opts_valid(const zbuf_frame_opts_t *o)
{
    return o->max_payload > 0 && (unsigned)o->len_kind <= (unsigned)ZBUF_FRAME_VARINT;
}

void zbuf_frame_opts_default(zbuf_frame_opts_t *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->len_kind = ZBUF_FRAME_BE32;
    o->len_includes_header = false;
    o->max_payload = ZBUF_FRAME_DEFAULT_MAX;
    o->keep_header = false;
    o->copy_max = ZBUF_FRAME_DEFAULT_COPY_MAX;
}

/* Header size for a payload of len bytes (the value written depends on the
 * header size when it includes it: take the smallest size that fits). */
static size_t header_size(const zbuf_frame_opts_t *o, size_t len)
{
    size_t f = fixed_size(o->len_kind);
    if (f != 0)
        return f;
    if (!o->len_includes_header)
        return varint_size(len);
    for (size_t h = 1; h < ZBUF_FRAME_MAX_HEADER; h++)
        if (varint_size((uint64_t)len + h) <= h)
            return h;
    return ZBUF_FRAME_MAX_HEADER;
}

size_t zbuf_frame_header_size(const zbuf_frame_opts_t *o, size_t len)
{
    zbuf_frame_opts_t def;
    if (o == NULL) {
        zbuf_frame_opts_default(&def);
        o = &def;
    }
    return opts_valid(o) ? header_size(o, len) : 0;
}

/* The largest payload the length field can describe. */
static uint64_t field_limit(const zbuf_frame_opts_t *o)
{
    uint64_t top;
    switch (o->len_kind) {
    case ZBUF_FRAME_BE16:
        top = UINT16_MAX;
        break;
    case ZBUF_FRAME_BE32:
    case ZBUF_FRAME_LE32:
        top = UINT32_MAX;
        break;
    default:
        top = UINT64_MAX;
        break;
    }
    if (o->len_includes_header)
        top -= fixed_size(o->len_kind) ? fixed_size(o->len_kind) : ZBUF_FRAME_MAX_HEADER;
    return top;
}

int zbuf_frame_decoder_create(const zbuf_frame_opts_t *o, zbuf_frame_decoder_t **out)
{
    zbuf_frame_opts_t def;
    if (o == NULL) {
        zbuf_frame_opts_default(&def);
        o = &def;
    }
    if (out == NULL || !opts_valid(o))
        return -EINVAL;
    zbuf_frame_decoder_t *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return -ENOMEM;
    d->o = *o;
    if ((uint64_t)d->o.max_payload > field_limit(o))
        d->o.max_payload = (size_t)field_limit(o);
    *out = d;
    return 0;
}

void zbuf_frame_decoder_delete(zbuf_frame_decoder_t *d)
{
    if (d == NULL)
        return;
    zbuf_delete(d->stream);
    free(d);
}

int zbuf_frame_decoder_feed(zbuf_frame_decoder_t *d, zbuf_t *in)
{
    size_t at;
    if (d == NULL || in == NULL || in == d->stream)
        return -EINVAL;
    if (d->err)
        return d->err;
    if (d->stream != NULL)
        return zbuf_append(d->stream, in);
    if (zbuf_locate(in, NULL, ZBUF_REL_BEGIN, &at) != 0)
        return -EINVAL; /* not a live zbuf (an O(1) check) */
    if (zbuf_length(in) == 0)
        return zbuf_delete(in); /* consumed; nothing to keep */
    d->stream = in;             /* the first bytes become the stream */
    return 0;
}

/* The stream lost its front: forget what was counted of it, and let an
 * empty stream go, so that an idle decoder holds no zbuf. */
static void front_taken(zbuf_frame_decoder_t *d)
{
    d->have_hdr = false;
    d->fit_seg = NULL;
    if (d->stream != NULL && zbuf_length(d->stream) == 0) {
        zbuf_delete(d->stream);
        d->stream = NULL;
    }
}

/* Take the first n bytes of the stream as a zbuf: the stream itself when
 * they are all of it (no split, no allocation). */
static int take_front(zbuf_frame_decoder_t *d, size_t n, zbuf_t **out)
{
    if (n == zbuf_length(d->stream)) {
        *out = d->stream;
        d->stream = NULL;
        front_taken(d);
        return 0;
    }
    int rc = zbuf_split_head(d->stream, n, out);
    if (rc == 0)
        front_taken(d);
    return rc;
}

size_t zbuf_frame_decoder_buffered(const zbuf_frame_decoder_t *d)
{
    return d != NULL ? zbuf_length(d->stream) : 0; /* 0 for a NULL stream */
}

/* Read a LEB128 varint in shortest form.  -EAGAIN if it is not complete,
 * -EBADMSG if it is longer than 10 bytes, overflows 64 bits, or ends with a
 * zero byte after the first (a padded, non-shortest encoding). */
static int read_varint(zbuf_cursor_t *c, uint64_t *v, size_t *n)
{
    uint64_t x = 0;
    for (size_t i = 0; i < ZBUF_FRAME_MAX_HEADER; i++) {
        uint8_t b;
        if (zbuf_cursor_read_u8(c, &b) != 0)
            return -EAGAIN;
        if (i == ZBUF_FRAME_MAX_HEADER - 1 && b > 1)
            return -EBADMSG; /* bits beyond 64 */
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (b == 0 && i > 0)
                return -EBADMSG;
            *v = x;
            *n = i + 1;
            return 0;
        }
    }
    return -EBADMSG; /* an 11th byte would be needed */
}

/* Read one header at the cursor (which moves past it on success): its
 * size and the payload length.  -EAGAIN when incomplete, -EBADMSG or
 * -EMSGSIZE when it is not acceptable. */
static int read_header(const zbuf_frame_opts_t *o, zbuf_cursor_t *c, size_t *hdr_len,
                       size_t *payload)
{
    uint64_t v = 0;
    size_t n = fixed_size(o->len_kind);
    int rc = 0;
    switch (o->len_kind) {
    case ZBUF_FRAME_BE16: {
        uint16_t x;
        rc = zbuf_cursor_read_be16(c, &x);
        v = x;
        break;
    }
    case ZBUF_FRAME_BE32: {
        uint32_t x;
        rc = zbuf_cursor_read_be32(c, &x);
        v = x;
        break;
    }
    case ZBUF_FRAME_LE32: {
        uint32_t x;
        rc = zbuf_cursor_read_le32(c, &x);
        v = x;
        break;
    }
    case ZBUF_FRAME_BE64:
        rc = zbuf_cursor_read_be64(c, &v);
        break;
    case ZBUF_FRAME_VARINT:
        rc = read_varint(c, &v, &n);
        break;
    }
    if (rc == -ERANGE)
        rc = -EAGAIN; /* the header is not all there yet */
    if (rc != 0)
        return rc;
    if (o->len_includes_header) {
        if (v < n)
            return -EBADMSG;
        v -= n;
    }
    if (v > (uint64_t)o->max_payload)
        return -EMSGSIZE;
    *hdr_len = n;
    *payload = (size_t)v;
    return 0;
}

/* Parse the header at the front of the stream into d->hdr_len/payload;
 * a rejected header makes the decoder's error sticky. */
static int parse_header(zbuf_frame_decoder_t *d)
{
    if (d->stream == NULL)
        return -EAGAIN;
    zbuf_cursor_t c;
    int rc = zbuf_cursor_init(&c, d->stream, 0);
    if (rc == 0)
        rc = read_header(&d->o, &c, &d->hdr_len, &d->payload);
    if (rc == -EMSGSIZE || rc == -EBADMSG)
        d->err = rc;
    if (rc == 0)
        d->have_hdr = true;
    return rc;
}

/* Whether the incomplete front frame can never be completed: it needs more
 * pool buffers than its reader may hold (see the file comment). */
static bool cannot_fit(zbuf_frame_decoder_t *d)
{
    const zbuf_t *z = d->stream;
    zbuf_seg_t *s = d->fit_seg != NULL ? zbuf_seg_next(z, d->fit_seg) : zbuf_seg_first(z);
    for (; s != NULL; s = zbuf_seg_next(z, s)) {
        const zbuf_buf_t *b = zbuf_seg_buf(z, s);
        zbuf_pool_t *p = zbuf_buf_pool(b);
        if (d->fit_pool == NULL && p != NULL) {
            d->fit_pool = p;
            d->fit_size = zbuf_pool_buf_size(p);
            d->fit_limit = zbuf_pool_capacity(p);
            zbuf_pool_quota_t *q = zbuf_buf_quota(b);
            if (q != NULL && zbuf_pool_quota_limit(q) < d->fit_limit)
                d->fit_limit = zbuf_pool_quota_limit(q);
        }
        if (p != NULL && p == d->fit_pool && b != d->fit_buf)
            d->fit_bufs++;
        d->fit_buf = b;
        d->fit_seg = s;
    }
    const zbuf_seg_t *last = d->fit_seg;
    zbuf_pool_t *pool = zbuf_buf_pool(d->fit_buf);
    if (pool == NULL || pool != d->fit_pool)
        return false; /* not (only) pool buffers: nothing to count against */
    size_t size = d->fit_size;
    size_t room = size - zbuf_seg_buf_offset(z, last) - zbuf_seg_length(z, last);
    size_t rest = d->hdr_len + d->payload - zbuf_length(z); /* > 0: incomplete */
    size_t more = rest > room ? (rest - room - 1) / size + 1 : 0;
    return d->fit_bufs + more > d->fit_limit;
}

/* Parse the front header if needed and check the frame is whole. */
static int front_whole(zbuf_frame_decoder_t *d)
{
    if (d->err)
        return d->err;
    if (!d->have_hdr) {
        int rc = parse_header(d);
        if (rc != 0)
            return rc;
        d->fit_seg = NULL;
        d->fit_buf = NULL;
        d->fit_pool = NULL;
        d->fit_bufs = 0;
    }
    if (zbuf_length(d->stream) >= d->hdr_len + d->payload)
        return 0;
    if (cannot_fit(d))
        d->err = -EMSGSIZE;
    return d->err ? d->err : -EAGAIN;
}

int zbuf_frame_decoder_pending(const zbuf_frame_decoder_t *d, size_t *len)
{
    if (d == NULL || len == NULL)
        return -EINVAL;
    if (d->err)
        return d->err;
    if (!d->have_hdr) {
        int rc = parse_header((zbuf_frame_decoder_t *)d);
        if (rc != 0)
            return rc;
    }
    *len = d->payload;
    return 0;
}

int zbuf_frame_decoder_next(zbuf_frame_decoder_t *d, zbuf_t **msg)
{
    if (d == NULL || msg == NULL)
        return -EINVAL;
    int rc = front_whole(d);
    if (rc != 0)
        return rc;
    zbuf_t *m;
    size_t hdr_len = d->hdr_len;
    rc = take_front(d, hdr_len + d->payload, &m);
    if (rc != 0)
        return rc;
    if (!d->o.keep_header)
        (void)zbuf_cut(m, 0, hdr_len, NULL); /* front cut: never allocates */
    *msg = m;
    return 0;
}

int zbuf_frame_decoder_peek(zbuf_frame_decoder_t *d, const void **payload, size_t *len)
{
    if (d == NULL || payload == NULL || len == NULL)
        return -EINVAL;
    int rc = front_whole(d);
    if (rc != 0)
        return rc;
    static const char empty[1];
    const void *p = empty;
    if (d->payload > 0) {
        zbuf_cursor_t c;
        if (zbuf_cursor_init(&c, d->stream, d->hdr_len) != 0 ||
            (p = zbuf_cursor_peek(&c, d->payload)) == NULL)
            return -ENOBUFS; /* whole, but not contiguous: take it with next() */
    }
    *payload = p;
    *len = d->payload;
    return 0;
}

int zbuf_frame_decoder_skip(zbuf_frame_decoder_t *d)
{
    if (d == NULL)
        return -EINVAL;
    int rc = front_whole(d);
    if (rc != 0)
        return rc;
    /* A cut at the front never allocates: it trims or drops segments. */
    (void)zbuf_cut(d->stream, 0, d->hdr_len + d->payload, NULL);
    front_taken(d);
    return 0;
}

int zbuf_frame_decoder_next_frames(zbuf_frame_decoder_t *d, size_t max_bytes, zbuf_t **frames,
                                   size_t *count)
{
    if (d == NULL || frames == NULL)
        return -EINVAL;
    if (d->err)
        return d->err;
    if (d->stream == NULL)
        return -EAGAIN;
    zbuf_cursor_t c;
    int rc = zbuf_cursor_init(&c, d->stream, 0);
    if (rc != 0)
        return rc;
    size_t total = 0, n = 0, len = zbuf_length(d->stream);
    for (;;) {
        size_t hl, pl;
        rc = read_header(&d->o, &c, &hl, &pl);
        if (rc == 0 && zbuf_cursor_remaining(&c) < pl)
            rc = -EAGAIN; /* the next frame is not whole yet */
        if (rc != 0) {
            if (n == 0) /* nothing to return: report, as next() would */
                return front_whole(d);
            break; /* return the whole frames; the rest waits */
        }
        if (n > 0 && max_bytes > 0 && total + hl + pl > max_bytes)
            break;
        (void)zbuf_cursor_skip(&c, pl); /* cannot fail: checked above */
        total += hl + pl;
        n++;
        if (total == len)
            break;
    }
    zbuf_t *z;
    if ((rc = take_front(d, total, &z)) != 0)
        return rc;
    *frames = z;
    if (count)
        *count = n;
    return 0;
}

/* Write the header of a len-byte payload into hdr; returns its size, or 0
 * with *err set when the options or the length are not acceptable. */
static size_t make_header(const zbuf_frame_opts_t *o, size_t len, uint8_t *hdr, int *err)
{
    if (!opts_valid(o)) {
        *err = -EINVAL;
        return 0;
    }
    if (len > o->max_payload || (uint64_t)len > field_limit(o)) {
        *err = -EMSGSIZE;
        return 0;
    }
    size_t h = header_size(o, len);
    uint64_t v = (uint64_t)len + (o->len_includes_header ? h : 0);
    switch (o->len_kind) {
    case ZBUF_FRAME_BE16:
    case ZBUF_FRAME_BE32:
    case ZBUF_FRAME_BE64:
        for (size_t i = 0; i < h; i++)
            hdr[i] = (uint8_t)(v >> (8 * (h - 1 - i)));
        break;
    case ZBUF_FRAME_LE32:
        for (size_t i = 0; i < h; i++)
            hdr[i] = (uint8_t)(v >> (8 * i));
        break;
    case ZBUF_FRAME_VARINT:
        for (size_t i = 0; i < h; i++) {
            hdr[i] = (uint8_t)(v & 0x7f) | (i + 1 < h ? 0x80 : 0);
            v >>= 7;
        }
        break;
    }
    return h;
}

/* Make n contiguous new bytes at the end of out.  When the tailroom is too
 * small and `grow` is set (more small frames are likely to follow), grow by
 * a whole chunk and trim the unused rest off again (a trim at the end never
 * allocates), leaving it as tailroom for the next frames.  Without `grow`
 * (a header followed by a referenced payload, which ends the tailroom
 * anyway) take just what zbuf_append_space() gives. */
static int append_bytes(zbuf_t *out, size_t n, bool grow, void **p)
{
    if (!grow || zbuf_tailroom(out) >= n)
        return zbuf_append_space(out, n, p);
    size_t before = zbuf_length(out);
    size_t chunk = n > ZBUF_FRAME_APPEND_CHUNK ? n : ZBUF_FRAME_APPEND_CHUNK;
    int rc = zbuf_append_space(out, chunk, p);
    if (rc == 0 && chunk > n)
        (void)zbuf_cut(out, before + n, chunk - n, NULL);
    return rc;
}

static bool in_memory(const zbuf_t *z)
{
    for (zbuf_seg_t *s = zbuf_seg_first(z); s != NULL; s = zbuf_seg_next(z, s))
        if (zbuf_seg_data(z, s) == NULL)
            return false;
    return true;
}

int zbuf_frame_append(const zbuf_frame_opts_t *o, zbuf_t *out, zbuf_t *msg)
{
    zbuf_frame_opts_t def;
    if (o == NULL) {
        zbuf_frame_opts_default(&def);
        o = &def;
    }
    if (out == NULL || msg == NULL || out == msg)
        return -EINVAL;
    uint8_t hdr[ZBUF_FRAME_MAX_HEADER];
    int err = 0;
    size_t len = zbuf_length(msg), before = zbuf_length(out);
    size_t h = make_header(o, len, hdr, &err);
    if (h == 0)
        return err;
    void *p;
    bool copy = len <= o->copy_max && in_memory(msg);
    int rc = append_bytes(out, copy ? h + len : h, copy, &p);
    if (rc != 0)
        return rc;
    memcpy(p, hdr, h); /* the header is new bytes, not a copy of data */
    if (copy) {
        if (len > 0 && zbuf_copyout(msg, 0, (uint8_t *)p + h, len) != (ssize_t)len) {
            (void)zbuf_cut(out, before, h + len, NULL); /* undo: a trim at the end */
            return -EIO;
        }
        zbuf_delete(msg);
        return 0;
    }
    if ((rc = zbuf_append(out, msg)) != 0) {
        (void)zbuf_cut(out, before, h, NULL);
        return rc;
    }
    return 0;
}

int zbuf_frame_append_copy(const zbuf_frame_opts_t *o, zbuf_t *out, const void *data,
                           size_t len)
{
    zbuf_frame_opts_t def;
    if (o == NULL) {
        zbuf_frame_opts_default(&def);
        o = &def;
    }
    if (out == NULL || (data == NULL && len > 0))
        return -EINVAL;
    uint8_t hdr[ZBUF_FRAME_MAX_HEADER];
    int err = 0;
    size_t h = make_header(o, len, hdr, &err);
    if (h == 0)
        return err;
    void *p;
    int rc = append_bytes(out, h + len, true, &p);
    if (rc != 0)
        return rc;
    memcpy(p, hdr, h);
    if (len > 0) {
        memcpy((uint8_t *)p + h, data, len);
        zbuf_stats_count_copy(len);
    }
    return 0;
}

/* ------------------------------------------------------------ header slabs */

/* Bytes per slab: 256 four-byte headers.  Small, so that a long-lived
 * message keeps little memory alive with its header. */
#define SLAB_SIZE 1024
/* Slabs a thread keeps.  With all of them in use (many messages in
 * flight), a new one replaces the oldest, which goes with its last header. */
#define SLABS_MAX 16

struct slabs {
    zbuf_buf_t *slab[SLABS_MAX]; /* our references */
    unsigned n;                  /* slabs held */
    unsigned cur;                /* the one being carved */
    size_t used;                 /* its bytes handed out */
    bool registered;             /* the thread-exit destructor is armed */
};

static _Thread_local struct slabs slabs;
static pthread_key_t slabs_key;
static pthread_once_t slabs_once = PTHREAD_ONCE_INIT;
static bool slabs_key_ok;
static atomic_size_t slabs_held; /* every thread's, for zbuf_frame_header_bufs() */

static void slabs_drop(struct slabs *t)
{
    for (unsigned i = 0; i < t->n; i++)
        zbuf_buf_unref(t->slab[i]); /* a slab headers still use goes with the last */
    atomic_fetch_sub(&slabs_held, t->n);
    t->n = t->cur = 0;
    t->used = 0;
}

static void slabs_thread_exit(void *arg)
{
    slabs_drop(arg);
}

static void slabs_key_create(void)
{
    slabs_key_ok = pthread_key_create(&slabs_key, slabs_thread_exit) == 0;
}

/* Room for an h-byte header in a slab of this thread: *b (borrowed) at
 * byte *off.  0 or -ENOMEM. */
static int slab_take(size_t h, zbuf_buf_t **b, size_t *off)
{
    struct slabs *t = &slabs;
    if (t->n > 0 && SLAB_SIZE - t->used >= h)
        goto carve;
    /* The current slab is used up: take one no header uses any more (only
     * our reference left; the check has acquire ordering, so the last
     * reader of its old headers is done with them). */
    for (unsigned i = 1; i <= t->n; i++) {
        unsigned k = (t->cur + i) % t->n;
        if (zbuf_buf_writable(t->slab[k])) {
            t->cur = k;
            t->used = 0;
            goto carve;
        }
    }
    zbuf_buf_t *nb;
    if (zbuf_buf_alloc(SLAB_SIZE, &nb) != 0)
        return -ENOMEM;
    if (!t->registered) {
        pthread_once(&slabs_once, slabs_key_create);
        if (slabs_key_ok)
            pthread_setspecific(slabs_key, t);
        t->registered = true;
    }
    if (t->n < SLABS_MAX) {
        t->cur = t->n++;
        atomic_fetch_add(&slabs_held, 1);
    } else {
        t->cur = (t->cur + 1) % SLABS_MAX;
        zbuf_buf_unref(t->slab[t->cur]);
    }
    t->slab[t->cur] = nb;
    t->used = 0;
carve:
    *b = t->slab[t->cur];
    *off = t->used;
    t->used += h;
    return 0;
}

void zbuf_frame_thread_flush(void)
{
    slabs_drop(&slabs);
}

size_t zbuf_frame_header_bufs(void)
{
    return atomic_load(&slabs_held);
}

int zbuf_frame_encode(const zbuf_frame_opts_t *o, zbuf_t *msg)
{
    zbuf_frame_opts_t def;
    if (o == NULL) {
        zbuf_frame_opts_default(&def);
        o = &def;
    }
    if (msg == NULL)
        return -EINVAL;
    uint8_t hdr[ZBUF_FRAME_MAX_HEADER];
    int err = 0;
    size_t h = make_header(o, zbuf_length(msg), hdr, &err);
    if (h == 0)
        return err;
    void *p;
    int rc;
    if (zbuf_headroom(msg) >= h) {
        if ((rc = zbuf_prepend_space(msg, h, &p)) != 0)
            return rc;
        memcpy(p, hdr, h); /* the header is new bytes, not a copy of data */
        return 0;
    }
    zbuf_buf_t *b;
    size_t off;
    if ((rc = slab_take(h, &b, &off)) != 0)
        return rc;
    memcpy((uint8_t *)zbuf_buf_data(b) + off, hdr, h);
    /* On failure the carved bytes stay unused until the slab is reused. */
    return zbuf_insert_ref(msg, 0, b, off, h, NULL);
}
