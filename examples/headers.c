/* SPDX-License-Identifier: MIT */
/*
 * headers: protocol layers that prepend their headers without copying the
 * payload, and a parser that reads them back across segment boundaries.
 *
 * Sending.  The application's payload is enrolled as it is (the library never
 * writes into enrolled memory).  Each layer below then asks for room in front
 * of the bytes with zbuf_prepend_space() and writes its header there:
 *
 *   transport  8 bytes: source port, destination port, length, checksum
 *   network   12 bytes: version, ttl, total length, source, destination
 *   link       4 bytes: frame type, frame length
 *
 * The first call cannot write in front of the enrolled payload, so it adds
 * a library buffer that keeps ZBUF_HEADROOM_DEFAULT spare bytes in front of
 * the header; the next layers' headers go into that headroom, and the frame
 * stays at two segments: all headers, then the untouched payload.
 *
 * Receiving.  The frame goes through a pipe and is read back into a pool of
 * small buffers, 16 bytes each, the way a driver with small receive buffers
 * would deliver it.  Headers now straddle segment boundaries; a cursor reads
 * the integers as if the bytes were contiguous, and a frame that is not all
 * there yet is told apart (-ERANGE) so the caller can wait for more.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <zbuf/zbuf.h>

enum {
    LINK_HDR = 4,
    NET_HDR = 12,
    TRANSPORT_HDR = 8,
    FRAME_TYPE = 0x88b5, /* IEEE "local experimental" EtherType */
    RX_BUF_SIZE = 16,
    RX_BUFS = 32,
};

/* What the parser found in a frame. */
struct frame_info {
    uint16_t type;
    uint8_t version, ttl;
    uint32_t src, dst;
    uint16_t sport, dport, checksum;
    size_t payload_off, payload_len;
};

static void check(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "headers: %s: %s\n", what, zbuf_strerror(rc));
        exit(1);
    }
}

static void put_be16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static void put_be32(unsigned char *p, uint32_t v)
{
    put_be16(p, (uint16_t)(v >> 16));
    put_be16(p + 2, (uint16_t)v);
}

/* A 16-bit sum of the bytes of @z from @off, read in place segment by
 * segment (no copy).  Stands in for a real checksum. */
static uint16_t sum16(const zbuf_t *z, size_t off)
{
    size_t seg_off;
    uint32_t sum = 0;

    for (zbuf_seg_t *s = zbuf_seg_find(z, off, &seg_off); s != NULL;
         s = zbuf_seg_next(z, s), seg_off = 0) {
        const unsigned char *p = zbuf_seg_data(z, s);
        for (size_t i = seg_off; i < zbuf_seg_length(z, s); i++)
            sum += p[i];
    }
    return (uint16_t)sum;
}

static void show_layout(const char *when, const zbuf_t *z)
{
    printf("  %-28s %3zu bytes, %zu segment%s, headroom %3zu\n", when, zbuf_length(z),
           zbuf_seg_count(z), zbuf_seg_count(z) == 1 ? "" : "s", zbuf_headroom(z));
}

/* ----------------------------------------------------------- sending side */

/* [transport header] */
static void transport_output(zbuf_t *z, uint16_t sport, uint16_t dport)
{
    unsigned char *h;
    size_t len = zbuf_length(z);
    uint16_t sum = sum16(z, 0);

    check(zbuf_prepend_space(z, TRANSPORT_HDR, (void **)&h), "zbuf_prepend_space");
    put_be16(h, sport);
    put_be16(h + 2, dport);
    put_be16(h + 4, (uint16_t)(TRANSPORT_HDR + len));
    put_be16(h + 6, sum);
}
/* [transport header] */

static void network_output(zbuf_t *z, uint32_t src, uint32_t dst)
{
    unsigned char *h;
    size_t len = zbuf_length(z);

    check(zbuf_prepend_space(z, NET_HDR, (void **)&h), "zbuf_prepend_space");
    h[0] = 4;  /* version */
    h[1] = 64; /* ttl */
    put_be16(h + 2, (uint16_t)(NET_HDR + len));
    put_be32(h + 4, src);
    put_be32(h + 8, dst);
}

static void link_output(zbuf_t *z)
{
    unsigned char *h;
    size_t len = zbuf_length(z);

    check(zbuf_prepend_space(z, LINK_HDR, (void **)&h), "zbuf_prepend_space");
    put_be16(h, FRAME_TYPE);
    put_be16(h + 2, (uint16_t)(LINK_HDR + len));
}

/* ---------------------------------------------------------- receiving side */

/*
 * Parse the three headers at the front of @z.  Returns 0 with @fi filled in;
 * -ERANGE when the bytes so far do not hold a whole frame (call again when
 * more have arrived); -EPROTO for a malformed frame.
 */
static int parse_frame(const zbuf_t *z, struct frame_info *fi)
{
    zbuf_cursor_t c;
    uint16_t frame_len, net_len, transport_len;
    int rc;

    rc = zbuf_cursor_init(&c, z, 0);
    if (rc < 0)
        return rc;
    /* Each read fails with -ERANGE, moving nothing, if its bytes are not
     * there yet; the || chain stops at the first failure. */
    if ((rc = zbuf_cursor_read_be16(&c, &fi->type)) < 0 ||
        (rc = zbuf_cursor_read_be16(&c, &frame_len)) < 0 ||
        (rc = zbuf_cursor_read_u8(&c, &fi->version)) < 0 ||
        (rc = zbuf_cursor_read_u8(&c, &fi->ttl)) < 0 ||
        (rc = zbuf_cursor_read_be16(&c, &net_len)) < 0 ||
        (rc = zbuf_cursor_read_be32(&c, &fi->src)) < 0 ||
        (rc = zbuf_cursor_read_be32(&c, &fi->dst)) < 0 ||
        (rc = zbuf_cursor_read_be16(&c, &fi->sport)) < 0 ||
        (rc = zbuf_cursor_read_be16(&c, &fi->dport)) < 0 ||
        (rc = zbuf_cursor_read_be16(&c, &transport_len)) < 0 ||
        (rc = zbuf_cursor_read_be16(&c, &fi->checksum)) < 0)
        return rc;
    if (fi->type != FRAME_TYPE || fi->version != 4 || net_len != frame_len - LINK_HDR ||
        transport_len != net_len - NET_HDR || transport_len < TRANSPORT_HDR)
        return -EPROTO;
    fi->payload_off = zbuf_cursor_offset(&c);
    fi->payload_len = transport_len - TRANSPORT_HDR;
    if (zbuf_cursor_remaining(&c) < fi->payload_len)
        return -ERANGE; /* headers complete, payload not yet */
    return 0;
}

/* Read @len bytes from @fd into 16-byte pool buffers, one segment each. */
static zbuf_t *receive(int fd, zbuf_pool_t *pool, size_t len)
{
    zbuf_t *z;

    check(zbuf_create(&z), "zbuf_create");
    while (zbuf_length(z) < len) {
        zbuf_buf_t *b;
        size_t want = len - zbuf_length(z);
        ssize_t r;

        check(zbuf_pool_get(pool, &b), "zbuf_pool_get");
        r = read(fd, zbuf_buf_data(b), want < RX_BUF_SIZE ? want : RX_BUF_SIZE);
        if (r <= 0)
            check(r < 0 ? -errno : -EPIPE, "read");
        /* The segment takes its own reference; ours is dropped right away,
         * so the buffer goes back to the pool when the segment goes. */
        check(zbuf_append_ref(z, b, 0, (size_t)r), "zbuf_append_ref");
        zbuf_buf_unref(b);
    }
    return z;
}

int main(void)
{
    static char payload[] = "Headers go in front; the payload is never copied.";
    struct frame_info fi;
    zbuf_stats_t st0, st1;
    zbuf_pool_t *pool;
    zbuf_t *tx, *rx, *partial, *head;
    struct iovec iov[4];
    size_t bytes;
    int fds[2], n, rc;
    bool ok;

    if (pipe(fds) < 0)
        check(-errno, "pipe");
    zbuf_stats_get(&st0);

    printf("Sending: each layer prepends its header\n");
    check(zbuf_create(&tx), "zbuf_create");
    check(zbuf_append_buf(tx, payload, sizeof payload - 1, NULL, NULL), "zbuf_append_buf");
    show_layout("payload enrolled:", tx);
    transport_output(tx, 5000, 7);
    show_layout("after the transport header:", tx);
    network_output(tx, 0x0a000001, 0x0a000002);
    show_layout("after the network header:", tx);
    link_output(tx);
    show_layout("after the link header:", tx);

    /* One writev() sends both segments: headers and payload, in place. */
    n = zbuf_iovec(tx, 0, ZBUF_TO_END, iov, 4, &bytes);
    check(n, "zbuf_iovec");
    if (writev(fds[1], iov, n) != (ssize_t)bytes)
        check(-EIO, "writev");
    zbuf_stats_get(&st1);
    printf("  sent %zu bytes in %d iovecs; bytes copied so far: %" PRIu64 "\n", bytes, n,
           st1.bytes_copied - st0.bytes_copied);

    printf("\nReceiving into %d-byte pool buffers\n", RX_BUF_SIZE);
    check(zbuf_pool_create(RX_BUF_SIZE, RX_BUFS, &pool), "zbuf_pool_create");
    rx = receive(fds[0], pool, bytes);
    show_layout("received frame:", rx);

    /* A parser handed only the first 20 bytes finds the frame incomplete. */
    check(zbuf_dup(rx, 0, 20, &partial), "zbuf_dup");
    rc = parse_frame(partial, &fi);
    printf("  parse of the first 20 bytes: %s\n",
           rc == -ERANGE ? "-ERANGE, incomplete: wait for more bytes" : zbuf_strerror(rc));
    zbuf_delete(partial);
    if (rc != -ERANGE)
        return 1;

    rc = parse_frame(rx, &fi);
    check(rc, "parse_frame");
    printf("  link:      type 0x%04x\n", fi.type);
    printf("  network:   version %u, ttl %u, %" PRIu32 ".%" PRIu32 ".%" PRIu32 ".%" PRIu32
           " -> %" PRIu32 ".%" PRIu32 ".%" PRIu32 ".%" PRIu32 "\n",
           fi.version, fi.ttl, fi.src >> 24, (fi.src >> 16) & 255, (fi.src >> 8) & 255,
           fi.src & 255, fi.dst >> 24, (fi.dst >> 16) & 255, (fi.dst >> 8) & 255,
           fi.dst & 255);
    ok = fi.checksum == sum16(rx, fi.payload_off) && fi.payload_len == sizeof payload - 1;
    printf("  transport: port %u -> %u, checksum 0x%04x (%s)\n", fi.sport, fi.dport,
           fi.checksum, ok ? "good" : "BAD");

    /* Strip the headers: split them off the front; the payload stays in the
     * same pool buffers, in place. */
    check(zbuf_split_head(rx, fi.payload_off, &head), "zbuf_split_head");
    zbuf_delete(head);
    show_layout("payload after stripping:", rx);
    printf("  payload: \"");
    for (zbuf_seg_t *s = zbuf_seg_first(rx); s != NULL; s = zbuf_seg_next(rx, s))
        printf("%.*s", (int)zbuf_seg_length(rx, s), (const char *)zbuf_seg_data(rx, s));
    printf("\"\n");

    zbuf_delete(rx);
    zbuf_delete(tx);
    printf("  pool buffers free again: %zu of %zu\n", zbuf_pool_available(pool),
           zbuf_pool_capacity(pool));
    zbuf_pool_delete(pool);
    close(fds[0]);
    close(fds[1]);

    /* Bytes moved only in the kernel (writev, read).  The cursor's integer
     * reads are not copies of data; zbuf_cursor_read() into a buffer would
     * be, and would be counted. */
    zbuf_stats_get(&st1);
    printf("bytes copied by libzbuf: %" PRIu64 "\n", st1.bytes_copied - st0.bytes_copied);
    return ok && st1.bytes_copied == st0.bytes_copied ? 0 : 1;
}
