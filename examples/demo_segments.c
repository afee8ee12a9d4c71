/* SPDX-License-Identifier: MIT */
/*
 * demo_segments: what happens to segments and buffers when zbufs are built,
 * shared, joined, cut and split.
 *
 * These are the classic zbuf demonstrations from the VxWorks documentation,
 * redone with the modern libzbuf API.  The program enrols four buffers of its
 * own (labelled A to D, with contents that show where each segment starts),
 * and after every step prints a table with one line per segment:
 *
 *   seg     position of the segment in its zbuf
 *   buf     which buffer the segment points into
 *   data    address of the segment's first byte
 *   off     offset of that byte inside the buffer
 *   len     bytes in the segment
 *   refs    references to the buffer: how many segments, in all zbufs,
 *           share it (zbuf_buf_refs)
 *   bytes   the segment's first bytes
 *
 * Watch the data addresses: they never change, because no step copies a
 * byte.  Release callbacks print a line when the last reference to a buffer
 * goes, and the program ends by showing that the library copied 0 bytes.
 *
 * Run it with scripts/demo.sh, or build/release/examples/demo_segments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zbuf/zbuf.h>

/* One of the application's buffers: its bytes, a label for the tables and a
 * note of whether the library has handed it back. */
struct app_buf {
    const char *label;
    char *data;
    size_t size;
    int released;
};

static char bytes_a[] = "abcdefghijklmnopqrstuvwxyz";
static char bytes_b[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
static char bytes_c[] = "0123456789";
static char bytes_d[] = "<inserted>";

/* sizeof - 1: the terminating NUL is not part of the data. */
static struct app_buf bufs[] = {
    {"A", bytes_a, sizeof bytes_a - 1, 0},
    {"B", bytes_b, sizeof bytes_b - 1, 0},
    {"C", bytes_c, sizeof bytes_c - 1, 0},
    {"D", bytes_d, sizeof bytes_d - 1, 0},
};
#define NBUFS (sizeof bufs / sizeof bufs[0])

static int releases; /* release callbacks run so far */

/*
 * The release callback every buffer is enrolled with.  libzbuf calls it once,
 * on the thread that drops the last reference, from inside that call
 * (zbuf_cut() or zbuf_delete() here).  A real program would give the memory
 * back to whoever owns it; this one only records the fact.
 */
static void on_release(void *data, size_t size, void *arg)
{
    struct app_buf *b = arg;

    b->released++;
    releases++;
    printf("    [release] buffer %s (%zu bytes at %p): no segment refers to it any more\n",
           b->label, size, data);
}

/* Stop with a message if a libzbuf call failed (negative errno). */
static void check(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "demo_segments: %s: %s\n", what, zbuf_strerror(rc));
        exit(1);
    }
}

/* Which of our buffers a libzbuf buffer is, by its data address. */
static const char *label_of(const zbuf_buf_t *b)
{
    const void *data = zbuf_buf_data(b);

    for (size_t i = 0; i < NBUFS; i++)
        if (bufs[i].data == data)
            return bufs[i].label;
    return "lib"; /* allocated by the library (none in this demo) */
}

/* Print the segment table of zbuf @name. */
static void show(const char *name, const zbuf_t *z)
{
    size_t i = 0;

    check(zbuf_check(z), "zbuf_check");
    printf("  zbuf %s: %zu bytes in %zu segment%s\n", name, zbuf_length(z),
           zbuf_seg_count(z), zbuf_seg_count(z) == 1 ? "" : "s");
    printf("    seg  buf  data            off  len  refs  bytes\n");
    for (zbuf_seg_t *s = zbuf_seg_first(z); s != NULL; s = zbuf_seg_next(z, s), i++) {
        const zbuf_buf_t *b = zbuf_seg_buf(z, s);
        const char *p = zbuf_seg_data(z, s);
        size_t len = zbuf_seg_length(z, s);
        size_t show_len = len < 12 ? len : 12;

        printf("    %3zu  %-3s  %-14p  %3zu  %3zu  %4u  \"%.*s\"%s\n", i, label_of(b),
               (const void *)p, zbuf_seg_buf_offset(z, s), len, zbuf_buf_refs(b),
               (int)show_len, p, len > show_len ? "..." : "");
    }
}

/* The whole content of @z on one line.  It walks the segments and prints
 * each in place: reading bytes this way copies nothing, whereas
 * zbuf_copyout() would count a copy. */
static void show_bytes(const char *name, const zbuf_t *z)
{
    printf("  %s reads \"", name);
    for (zbuf_seg_t *s = zbuf_seg_first(z); s != NULL; s = zbuf_seg_next(z, s))
        printf("%.*s", (int)zbuf_seg_length(z, s), (const char *)zbuf_seg_data(z, s));
    printf("\"\n");
}

static void step(const char *title)
{
    printf("\n== %s ==\n", title);
}

int main(void)
{
    zbuf_stats_t before, after;
    zbuf_t *z1, *z2, *z3, *z4;

    zbuf_stats_get(&before);

    step("1. A simple zbuf: one enrolled buffer");
    /* zbuf_insert_buf() enrols the caller's memory without copying it: the
     * segment's data address is the address of bytes_a itself. */
    check(zbuf_create(&z1), "zbuf_create");
    check(zbuf_insert_buf(z1, 0, bufs[0].data, bufs[0].size, on_release, &bufs[0], NULL),
          "zbuf_insert_buf");
    printf("  buffer A lives at %p\n", (void *)bytes_a);
    show("z1", z1);

    step("2. Complex zbufs: z2 is a dup of z1 that shares its last two segments");
    /* Two more buffers at the end of z1, then a dup of everything after A.
     * The dup copies no byte: z2's segments point into B and C, whose
     * reference counts go to 2. */
    check(zbuf_append_buf(z1, bufs[1].data, bufs[1].size, on_release, &bufs[1]),
          "zbuf_append_buf");
    check(zbuf_append_buf(z1, bufs[2].data, bufs[2].size, on_release, &bufs[2]),
          "zbuf_append_buf");
    check(zbuf_dup(z1, bufs[0].size, ZBUF_TO_END, &z2), "zbuf_dup");
    show("z1", z1);
    show("z2", z2);

    step("3. Insert: z3 (buffer D) goes into z2 at offset 10, inside B's segment");
    /* The insertion point falls inside a segment, so that segment is split
     * in two pieces of the same buffer (B's count rises to 3: one segment in
     * z1, two in z2) and z3's segment is linked between them.  z3 itself is
     * consumed: its segments now belong to z2. */
    check(zbuf_create(&z3), "zbuf_create");
    check(zbuf_insert_buf(z3, 0, bufs[3].data, bufs[3].size, on_release, &bufs[3], NULL),
          "zbuf_insert_buf");
    show("z3", z3);
    check(zbuf_insert(z2, 10, z3, NULL), "zbuf_insert");
    z3 = NULL; /* consumed */
    printf("  after zbuf_insert(z2, 10, z3): z3 is gone, its segment is in z2\n");
    show("z2", z2);
    show_bytes("z2", z2);

    step("4. Cut: 10 bytes from offset 5 of z1, strictly inside A's segment");
    /* A cut in the middle of a segment leaves two segments of the same
     * buffer, with a gap between their offsets.  Nothing is released: A is
     * still referenced (twice, now). */
    check(zbuf_cut(z1, 5, 10, NULL), "zbuf_cut");
    show("z1", z1);
    show_bytes("z1", z1);

    printf("\n  now cut D's bytes out of z2: D's last reference goes, so its\n"
           "  release callback runs inside zbuf_cut():\n");
    check(zbuf_cut(z2, 10, bufs[3].size, NULL), "zbuf_cut");
    show("z2", z2);

    step("5. Split: z2 at offset 20; the tail moves to a new zbuf z4");
    /* The byte at offset 20 becomes the first byte of z4.  Offset 20 lies
     * inside the second piece of B, which is split once more. */
    check(zbuf_split(z2, 20, &z4), "zbuf_split");
    show("z2", z2);
    show("z4", z4);
    show_bytes("z2", z2);
    show_bytes("z4", z4);

    step("6. Delete: buffers are released when their last segment goes");
    printf("  zbuf_delete(z1): A is only in z1; B and C are still shared\n");
    check(zbuf_delete(z1), "zbuf_delete");
    printf("  zbuf_delete(z2): B is still in z4, so nothing is released\n");
    check(zbuf_delete(z2), "zbuf_delete");
    printf("  zbuf_delete(z4): the last references to B and C go\n");
    check(zbuf_delete(z4), "zbuf_delete");

    zbuf_stats_get(&after);

    step("Summary");
    printf("  release callbacks run: %d (one per buffer:", releases);
    for (size_t i = 0; i < NBUFS; i++)
        printf(" %s=%d", bufs[i].label, bufs[i].released);
    printf(")\n");
    printf("  bytes copied by the library: %llu (create, insert_buf, dup, insert,\n"
           "  cut, split and delete move references, never bytes)\n",
           (unsigned long long)(after.bytes_copied - before.bytes_copied));
    printf("  live zbufs %lld, segments %lld, buffers %lld (compared with the start)\n",
           (long long)(after.live_zbufs - before.live_zbufs),
           (long long)(after.live_segs - before.live_segs),
           (long long)(after.live_bufs - before.live_bufs));

    for (size_t i = 0; i < NBUFS; i++)
        if (bufs[i].released != 1)
            return 1;
    if (after.live_zbufs != before.live_zbufs || after.live_segs != before.live_segs ||
        after.live_bufs != before.live_bufs)
        return 1;
    return after.bytes_copied == before.bytes_copied ? 0 : 1;
}
