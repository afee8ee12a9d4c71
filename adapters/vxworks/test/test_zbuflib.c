/* SPDX-License-Identifier: MIT */
/*
 * The VxWorks zbufLib compatibility layer (<zbuf/vxworks.h>) against its
 * contract: (segment, offset) addressing, insertion points, cut/split/dup
 * lengths, segment walking, free routines called exactly once, and errno
 * with ERROR/NULL for bad handles, the zbuf left unchanged.
 *
 * The first part of this file is VxWorks-shaped application code from the
 * original zbuf article (send-side buffer pool with a free routine, the
 * blaster's dup loop, the blastee's give-back), with the socket calls
 * replaced by what the network would do with the zbuf.  It comes before any
 * other include, so it compiles seeing nothing but <zbuf/vxworks.h> and the
 * C library, as ported code would; it must also pass the build's
 * -Wstrict-prototypes with the old-style VOIDFUNCPTR.
 */

/* ================= VxWorks-shaped code: only <zbuf/vxworks.h> ========== */

#include <zbuf/vxworks.h>

#include <string.h>

#define APP_NUM_BUFS 4
#define APP_BUF_SIZE 512

/* Send side: a pool of fixed buffers, each given back by appBufRetn(). */
static char appBufPool[APP_NUM_BUFS][APP_BUF_SIZE];
static int appBufInUse[APP_NUM_BUFS];
static int appBufRetnCalls;
static int appBufRetnBad; /* calls with an address that does not match freeArg */

/* What stands in for the socket: zbufs handed to "zbufSockSend" and not yet
 * transmitted.  The library owns them now; the application must not touch
 * them. */
static ZBUF_ID netQueue[APP_NUM_BUFS];
static int netQueued;

static char *appBufGet(int *pIndex)
{
    int ix;

    for (ix = 0; ix < APP_NUM_BUFS; ix++)
        if (!appBufInUse[ix]) {
            appBufInUse[ix] = 1;
            *pIndex = ix;
            return appBufPool[ix];
        }
    return NULL;
}

/* The free routine, VxWorks 5.x shape: freeArg is the pool index. */
static void appBufRetn(caddr_t pBuf, int freeArg)
{
    appBufRetnCalls++;
    if (freeArg < 0 || freeArg >= APP_NUM_BUFS || pBuf != appBufPool[freeArg] ||
        !appBufInUse[freeArg]) {
        appBufRetnBad++;
        return;
    }
    appBufInUse[freeArg] = 0;
}

/* Stand-in for zbufSockSend(fdSock, zId, len, 0): takes the zbuf. */
static int netSend(ZBUF_ID zId, int zbufLen)
{
    (void)zbufLen;
    if (netQueued == APP_NUM_BUFS)
        return ERROR;
    netQueue[netQueued++] = zId;
    return zbufLength(zId);
}

/* The network transmits everything queued: copies the bytes out onto the
 * "wire" and drops the zbufs, which gives the buffers back. */
static int netTransmit(char *pWire, int wireSize)
{
    int ix, n, total = 0;

    for (ix = 0; ix < netQueued; ix++) {
        n = zbufExtractCopy(netQueue[ix], NULL, 0, pWire + total, wireSize - total);
        if (n == ERROR || zbufDelete(netQueue[ix]) == ERROR)
            return ERROR;
        total += n;
    }
    netQueued = 0;
    return total;
}

/* The article's send loop body: read into a pool buffer, loan it to a zbuf,
 * send the zbuf. */
static STATUS appSend(const char *pData, int readLen)
{
    ZBUF_ID zId;
    char *pBuffer;
    int ix;

    if ((pBuffer = appBufGet(&ix)) == NULL)
        return ERROR;
    memcpy(pBuffer, pData, (size_t)readLen);
    if ((zId = zbufCreate()) == NULL) {
        appBufInUse[ix] = 0;
        return ERROR;
    }
    if (zbufInsertBuf(zId, NULL, 0, pBuffer, readLen, appBufRetn, ix) == NULL) {
        zbufDelete(zId);
        appBufInUse[ix] = 0; /* not enrolled: still ours */
        return ERROR;
    }
    if (netSend(zId, readLen) == ERROR) {
        zbufDelete(zId); /* gives pBuffer back through appBufRetn */
        return ERROR;
    }
    return OK;
}

/* The blaster: one master zbuf around one buffer, duplicated for every
 * send.  Returns the bytes "sent", or ERROR. */
static int blaster(char *pBuffer, int sendSize, int nSends, int *pSharedSends)
{
    ZBUF_ID zbufSave, zbufSend;
    int ix, total = 0;

    *pSharedSends = 0;
    if ((zbufSave = zbufCreate()) == NULL)
        return ERROR;
    if (zbufInsertBuf(zbufSave, NULL, 0, pBuffer, sendSize, NULL, 0) == NULL) {
        zbufDelete(zbufSave);
        return ERROR;
    }
    for (ix = 0; ix < nSends; ix++) {
        if ((zbufSend = zbufDup(zbufSave, NULL, 0, sendSize)) == NULL)
            break;
        /* zbufSockSend(sFd, zbufSend, sendSize, 0) would consume it. */
        if (zbufSegData(zbufSend, NULL) == pBuffer)
            (*pSharedSends)++;
        total += zbufLength(zbufSend);
        zbufDelete(zbufSend);
    }
    zbufDelete(zbufSave);
    return total;
}

/* The blastee: the "stack" loans driver buffers to a received zbuf; the
 * application counts the bytes segment by segment and deletes the zbuf,
 * which gives the buffers back to the "driver" (VxWorks 6 shape: a
 * pointer-sized freeArg). */
static char drvBufs[3][64];
static int drvBufsLoaned;

static void drvBufReturn(caddr_t pBuf, intptr_t freeArg)
{
    int *pLoaned = (int *)freeArg;

    (void)pBuf;
    (*pLoaned)--;
}

static ZBUF_ID stackRecv(int *pLen)
{
    ZBUF_ID zId = zbufCreate();
    int ix;

    if (zId == NULL)
        return NULL;
    for (ix = 0; ix < 3; ix++) {
        memset(drvBufs[ix], 'a' + ix, sizeof drvBufs[ix]);
        if (zbufInsertBuf(zId, NULL, ZBUF_END, drvBufs[ix], (int)sizeof drvBufs[ix],
                          drvBufReturn, (intptr_t)&drvBufsLoaned) == NULL) {
            zbufDelete(zId);
            return NULL;
        }
        drvBufsLoaned++;
    }
    *pLen = zbufLength(zId);
    return zId;
}

static int blastee(int *pSegs)
{
    ZBUF_ID zbufRecv;
    ZBUF_SEG seg;
    int numRead = 0, counted = 0;

    *pSegs = 0;
    if ((zbufRecv = stackRecv(&numRead)) == NULL)
        return ERROR;
    /* Received data is usually not contiguous: walk the segments (NULL
     * names the first one). */
    counted = zbufSegLength(zbufRecv, NULL);
    (*pSegs)++;
    for (seg = zbufSegNext(zbufRecv, NULL); seg != NULL; seg = zbufSegNext(zbufRecv, seg)) {
        counted += zbufSegLength(zbufRecv, seg);
        (*pSegs)++;
    }
    zbufDelete(zbufRecv);
    return counted == numRead ? counted : ERROR;
}

/* ======================= tests (modern API allowed from here) ========== */

#include <errno.h>
#include <limits.h>
#include <stdint.h>

#include "support.h"

ZT_SUITE(vx_article);

Test(vx_article, send_pool_buffers_come_back_once_transmitted)
{
    char wire[APP_NUM_BUFS * APP_BUF_SIZE];
    char msg[APP_BUF_SIZE];

    for (int i = 0; i < APP_NUM_BUFS; i++) {
        memset(msg, '0' + i, sizeof msg);
        cr_assert_eq(appSend(msg, 100 + i), OK);
    }
    /* Every buffer is loaned to the network: none came back yet, and the
     * pool is empty. */
    cr_assert_eq(appBufRetnCalls, 0);
    cr_assert_eq(appSend(msg, 10), ERROR);
    cr_assert_eq(netQueued, APP_NUM_BUFS);

    int sent = netTransmit(wire, (int)sizeof wire);
    cr_assert_eq(sent, 100 + 101 + 102 + 103);
    cr_assert_eq(wire[0], '0');
    cr_assert_eq(wire[100], '1');
    cr_assert_eq(wire[sent - 1], '3');
    cr_assert_eq(appBufRetnCalls, APP_NUM_BUFS, "each buffer returned exactly once");
    cr_assert_eq(appBufRetnBad, 0, "free routine got the enrolled address and its freeArg");
    for (int i = 0; i < APP_NUM_BUFS; i++)
        cr_assert_eq(appBufInUse[i], 0);

    /* The pool works again. */
    cr_assert_eq(appSend("again", 5), OK);
    cr_assert_eq(netTransmit(wire, (int)sizeof wire), 5);
    cr_assert_eq(appBufRetnCalls, APP_NUM_BUFS + 1);
}

Test(vx_article, blaster_dups_share_the_master_buffer_without_copying)
{
    static char pBuffer[1024];
    zbuf_stats_t before, after;
    int shared;

    memset(pBuffer, 'z', sizeof pBuffer);
    zbuf_stats_get(&before);
    cr_assert_eq(blaster(pBuffer, (int)sizeof pBuffer, 50, &shared), 50 * 1024);
    zbuf_stats_get(&after);
    cr_assert_eq(shared, 50, "every dup points at the master buffer");
    cr_assert_eq(after.bytes_copied, before.bytes_copied, "no byte copied");
}

Test(vx_article, blastee_walks_segments_and_gives_buffers_back)
{
    int segs;

    cr_assert_eq(blastee(&segs), 3 * 64);
    cr_assert_eq(segs, 3);
    cr_assert_eq(drvBufsLoaned, 0, "deleting the received zbuf gave every buffer back");
}

/* ------------------------------------------------------------- helpers */

/* Free routines used by the tests.  count_free is the 5.x shape (freeArg an
 * int index); count_free_wide is the 6.x shape (freeArg a pointer). */
#define NFREE 8
static int freed[NFREE];
static caddr_t freed_buf[NFREE];
static int freed_bad; /* calls with an index out of range */

static void count_free(caddr_t buf, int idx)
{
    if (idx < 0 || idx >= NFREE) {
        freed_bad++;
        return;
    }
    freed[idx]++;
    freed_buf[idx] = buf;
}

static void count_free_wide(caddr_t buf, intptr_t arg)
{
    (void)buf;
    ++*(int *)arg;
}

/* Caller memory for the standard three-segment zbuf "abc|defg|hi". */
static char mem_a[] = "abc", mem_b[] = "defg", mem_c[] = "hi";

/* A zbuf of three enrolled segments "abc", "defg", "hi" (9 bytes); buffer k
 * is counted in freed[k].  The segments are returned through s[3]. */
static ZBUF_ID make3(ZBUF_SEG s[3])
{
    ZBUF_ID z = zbufCreate();

    memset(freed, 0, sizeof freed);
    memset(freed_buf, 0, sizeof freed_buf);
    freed_bad = 0;
    memcpy(mem_a, "abc", 4);
    memcpy(mem_b, "defg", 5);
    memcpy(mem_c, "hi", 3);
    cr_assert_not_null(z);
    s[0] = zbufInsertBuf(z, NULL, ZBUF_END, mem_a, 3, count_free, 0);
    s[1] = zbufInsertBuf(z, NULL, ZBUF_END, mem_b, 4, count_free, 1);
    s[2] = zbufInsertBuf(z, NULL, ZBUF_END, mem_c, 2, count_free, 2);
    cr_assert(s[0] && s[1] && s[2]);
    zt_check(z);
    return z;
}

/* z's segments as "piece|piece|...", walked with the VxWorks routines; also
 * asserts that no segment is empty and that the chain is consistent. */
static const char *layout(ZBUF_ID z)
{
    static char out[512];
    size_t n = 0;
    int off = 0;
    ZBUF_SEG seg;

    zt_check(z);
    out[0] = '\0';
    if (zbufLength(z) == 0)
        return out;
    for (seg = zbufSegFind(z, NULL, &off); seg != NULL; seg = zbufSegNext(z, seg)) {
        int len = zbufSegLength(z, seg);
        cr_assert_gt(len, 0, "a segment is never empty");
        cr_assert_lt(n + (size_t)len + 2, sizeof out);
        if (n > 0)
            out[n++] = '|';
        memcpy(out + n, zbufSegData(z, seg), (size_t)len);
        n += (size_t)len;
        out[n] = '\0';
    }
    return out;
}

#define expect_layout(z, want) cr_assert_str_eq(layout(z), (want))

/* Run a call expected to fail: ERROR/NULL, the errno, and z unchanged. */
#define expect_fail_null(call, err, z, want)                                            \
    do {                                                                                \
        errno = 0;                                                                      \
        cr_assert_null((void *)(call), #call " should fail");                           \
        cr_assert_eq(errno, (err), #call ": errno %d, expected %d", errno, (err));      \
        expect_layout((z), (want));                                                     \
    } while (0)

#define expect_fail_int(call, err, z, want)                                             \
    do {                                                                                \
        errno = 0;                                                                      \
        cr_assert_eq((call), ERROR, #call " should fail");                              \
        cr_assert_eq(errno, (err), #call ": errno %d, expected %d", errno, (err));      \
        expect_layout((z), (want));                                                     \
    } while (0)

/* The byte at a data location, read with zbufExtractCopy(). */
static char byte_at(ZBUF_ID z, ZBUF_SEG seg, int offset)
{
    char c = 0;
    cr_assert_eq(zbufExtractCopy(z, seg, offset, &c, 1), 1, "no byte at (%p, %d)", (void *)seg,
                 offset);
    return c;
}

/* -------------------------------------------------------- types, create */

ZT_SUITE(vx_types);

Test(vx_types, constants_have_the_contract_values)
{
    cr_assert_eq(ZBUF_BEGIN, -INT_MAX);
    cr_assert_eq(ZBUF_END, INT_MAX);
    cr_assert_eq(OK, 0);
    cr_assert_eq(ERROR, -1);
    cr_assert(_Generic((caddr_t)0, char *: 1, default: 0), "caddr_t is char *");
    cr_assert(_Generic(zbufLength, int (*)(zbuf_t *): 1, default: 0));
    cr_assert(_Generic((STATUS)0, int: 1, default: 0));
}

Test(vx_types, handles_are_the_modern_ones)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(zbuf_length(z), 9);
    cr_assert_eq(zbuf_seg_first(z), s[0]);
    cr_assert_eq(zbuf_seg_last(z), s[2]);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(freed[0] + freed[1] + freed[2], 3);
}

ZT_SUITE(vx_create);

Test(vx_create, new_zbuf_is_empty_and_has_no_segment)
{
    ZBUF_ID z = zbufCreate();

    cr_assert_not_null(z);
    cr_assert_eq(zbufLength(z), 0);
    expect_fail_null(zbufSegData(z, NULL), EINVAL, z, "");
    expect_fail_int(zbufSegLength(z, NULL), EINVAL, z, "");
    errno = 12345;
    cr_assert_null(zbufSegNext(z, NULL));
    cr_assert_null(zbufSegPrev(z, NULL));
    cr_assert_eq(errno, 12345, "end of list is not an error");
    cr_assert_eq(zbufDelete(z), OK);
}

Test(vx_create, delete_calls_each_free_routine_once_with_its_buffer)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(freed[0] + freed[1] + freed[2], 0, "nothing freed while in use");
    cr_assert_eq(zbufDelete(z), OK);
    cr_assert_eq(freed[0], 1);
    cr_assert_eq(freed[1], 1);
    cr_assert_eq(freed[2], 1);
    cr_assert_eq(freed_buf[0], mem_a);
    cr_assert_eq(freed_buf[1], mem_b);
    cr_assert_eq(freed_buf[2], mem_c);
    cr_assert_eq(freed_bad, 0);
}

Test(vx_create, delete_of_null_id_fails_with_einval)
{
    errno = 0;
    cr_assert_eq(zbufDelete(NULL), ERROR);
    cr_assert_eq(errno, EINVAL);
}

/* ------------------------------------------------------------ locations */

ZT_SUITE(vx_locate);

Test(vx_locate, null_segment_makes_the_offset_absolute)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(byte_at(z, NULL, 0), 'a');
    cr_assert_eq(byte_at(z, NULL, 4), 'e');
    cr_assert_eq(byte_at(z, NULL, 8), 'i');
    zbufDelete(z);
}

Test(vx_locate, offset_counts_from_the_given_segment)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(byte_at(z, s[1], 0), 'd');
    cr_assert_eq(byte_at(z, s[1], 3), 'g');
    cr_assert_eq(byte_at(z, s[2], 1), 'i');
    zbufDelete(z);
}

Test(vx_locate, negative_offset_reaches_into_earlier_segments)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(byte_at(z, s[2], -1), 'g');
    cr_assert_eq(byte_at(z, s[2], -3), 'e');
    cr_assert_eq(byte_at(z, s[2], -7), 'a');
    cr_assert_eq(byte_at(z, s[1], -2), 'b');
    zbufDelete(z);
}

Test(vx_locate, offset_runs_past_the_segment_into_following_ones)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(byte_at(z, s[0], 3), 'd');
    cr_assert_eq(byte_at(z, s[0], 7), 'h');
    cr_assert_eq(byte_at(z, s[1], 5), 'i');
    zbufDelete(z);
}

Test(vx_locate, begin_and_end_ignore_the_segment)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(byte_at(z, s[2], ZBUF_BEGIN), 'a');
    cr_assert_eq(byte_at(z, s[1], ZBUF_BEGIN), 'a');
    cr_assert_not_null(zbufInsertCopy(z, s[0], ZBUF_END, "XY", 2));
    cr_assert_not_null(zbufInsertCopy(z, s[2], ZBUF_BEGIN, "<", 1));
    expect_layout(z, "<|abc|defg|hi|XY");
    zbufDelete(z);
}

Test(vx_locate, data_offsets_are_valid_only_from_0_to_n_minus_1)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    char c;

    cr_assert_eq(byte_at(z, NULL, 8), 'i');
    expect_fail_int(zbufExtractCopy(z, NULL, 9, &c, 1), ERANGE, z, "abc|defg|hi");
    expect_fail_int(zbufExtractCopy(z, NULL, -1, &c, 1), ERANGE, z, "abc|defg|hi");
    expect_fail_int(zbufExtractCopy(z, s[0], -1, &c, 1), ERANGE, z, "abc|defg|hi");
    expect_fail_int(zbufExtractCopy(z, s[2], 2, &c, 1), ERANGE, z, "abc|defg|hi");
    expect_fail_int(zbufExtractCopy(z, s[1], -4, &c, 1), ERANGE, z, "abc|defg|hi");
    expect_fail_int(zbufExtractCopy(z, NULL, ZBUF_END, &c, 1), ERANGE, z, "abc|defg|hi");
    expect_fail_int(zbufExtractCopy(z, NULL, INT_MIN, &c, 1), ERANGE, z, "abc|defg|hi");
    zbufDelete(z);
}

Test(vx_locate, empty_zbuf_has_no_data_location)
{
    ZBUF_ID z = zbufCreate();
    char c;

    expect_fail_int(zbufExtractCopy(z, NULL, 0, &c, 1), ERANGE, z, "");
    expect_fail_null(zbufDup(z, NULL, 0, -1), ERANGE, z, "");
    expect_fail_null(zbufCut(z, NULL, 0, -1), ERANGE, z, "");
    expect_fail_null(zbufSplit(z, NULL, 0), ERANGE, z, "");
    zbufDelete(z);
}

Test(vx_locate, seg_find_rewrites_the_offset_relative_to_the_found_segment)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    int off;

    off = 5;
    cr_assert_eq(zbufSegFind(z, NULL, &off), s[1]);
    cr_assert_eq(off, 2);
    off = -6;
    cr_assert_eq(zbufSegFind(z, s[2], &off), s[0]);
    cr_assert_eq(off, 1);
    off = 4;
    cr_assert_eq(zbufSegFind(z, s[0], &off), s[1]);
    cr_assert_eq(off, 1);
    off = ZBUF_BEGIN;
    cr_assert_eq(zbufSegFind(z, s[2], &off), s[0]);
    cr_assert_eq(off, 0);
    off = 8;
    cr_assert_eq(zbufSegFind(z, NULL, &off), s[2]);
    cr_assert_eq(off, 1);
    zbufDelete(z);
}

Test(vx_locate, seg_find_outside_returns_null_and_keeps_the_offset)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    int off;

    const int outside[] = {9, -1, ZBUF_END, INT_MIN};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        off = outside[i];
        errno = 12345;
        cr_assert_null(zbufSegFind(z, NULL, &off));
        cr_assert_eq(off, outside[i]);
        cr_assert_eq(errno, 12345, "outside is not an error");
    }
    off = 2;
    cr_assert_null(zbufSegFind(z, s[2], &off));
    cr_assert_eq(off, 2);
    expect_fail_null(zbufSegFind(z, NULL, NULL), EINVAL, z, "abc|defg|hi");
    zbufDelete(z);
}

/* ------------------------------------------------------------ insertion */

ZT_SUITE(vx_insert);

Test(vx_insert, every_point_from_0_to_n_is_valid)
{
    static const char *const want[] = {
        "X|abc|defg|hi", "a|X|bc|defg|hi", "ab|X|c|defg|hi", "abc|X|defg|hi",
        "abc|d|X|efg|hi", "abc|de|X|fg|hi", "abc|def|X|g|hi", "abc|defg|X|hi",
        "abc|defg|h|X|i", "abc|defg|hi|X",
    };
    for (int at = 0; at <= 9; at++) {
        ZBUF_SEG s[3];
        ZBUF_ID z = make3(s);
        ZBUF_SEG x = zbufInsertCopy(z, NULL, at, "X", 1);
        cr_assert_not_null(x, "insertion at %d", at);
        cr_assert_eq(*zbufSegData(z, x), 'X', "the returned segment is the new one");
        expect_layout(z, want[at]);
        zbufDelete(z);
        cr_assert_eq(freed[0] + freed[1] + freed[2], 3);
    }
}

Test(vx_insert, point_past_the_end_fails_with_erange_and_changes_nothing)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    expect_fail_null(zbufInsertCopy(z, NULL, 10, "X", 1), ERANGE, z, "abc|defg|hi");
    expect_fail_null(zbufInsertCopy(z, NULL, -1, "X", 1), ERANGE, z, "abc|defg|hi");
    expect_fail_null(zbufInsertCopy(z, s[2], 3, "X", 1), ERANGE, z, "abc|defg|hi");
    expect_fail_null(zbufInsertCopy(z, s[1], -4, "X", 1), ERANGE, z, "abc|defg|hi");
    zbufDelete(z);
}

Test(vx_insert, segment_relative_points_go_before_the_addressed_byte)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    /* 0 inserts before the segment, its length appends just after it. */
    cr_assert_not_null(zbufInsertCopy(z, s[1], 0, "<", 1));
    cr_assert_not_null(zbufInsertCopy(z, s[1], 4, ">", 1));
    expect_layout(z, "abc|<|defg|>|hi");
    /* Negative and past-the-segment points, relative to s[2]. */
    cr_assert_not_null(zbufInsertCopy(z, s[2], -1, "1", 1));
    cr_assert_not_null(zbufInsertCopy(z, s[2], 2, "2", 1));
    expect_layout(z, "abc|<|defg|1|>|hi|2");
    zbufDelete(z);
}

Test(vx_insert, zbuf_end_appends_whatever_the_segment)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_not_null(zbufInsertCopy(z, s[0], ZBUF_END, "!", 1));
    expect_layout(z, "abc|defg|hi|!");
    zbufDelete(z);
}

Test(vx_insert, empty_zbuf_takes_only_the_null_zero_point)
{
    ZBUF_ID z = zbufCreate();

    expect_fail_null(zbufInsertCopy(z, NULL, 1, "X", 1), ERANGE, z, "");
    expect_fail_null(zbufInsertCopy(z, NULL, -1, "X", 1), ERANGE, z, "");
    cr_assert_not_null(zbufInsertCopy(z, NULL, 0, "X", 1));
    expect_layout(z, "X");
    zbufDelete(z);

    /* ZBUF_BEGIN and ZBUF_END name that same point. */
    z = zbufCreate();
    cr_assert_not_null(zbufInsertCopy(z, NULL, ZBUF_END, "E", 1));
    zbufDelete(z);
    z = zbufCreate();
    cr_assert_not_null(zbufInsertCopy(z, NULL, ZBUF_BEGIN, "B", 1));
    zbufDelete(z);
}

Test(vx_insert, insert_buf_enrolls_the_callers_memory_without_copying)
{
    static char buf[] = "payload";
    zbuf_stats_t before, after;
    int calls = 0;
    ZBUF_ID z = zbufCreate();

    zbuf_stats_get(&before);
    ZBUF_SEG seg = zbufInsertBuf(z, NULL, 0, buf, 7, count_free_wide, (intptr_t)&calls);
    zbuf_stats_get(&after);
    cr_assert_not_null(seg);
    cr_assert_eq(zbufSegData(z, seg), buf, "the segment is the caller's memory");
    cr_assert_eq(zbufSegLength(z, seg), 7);
    cr_assert_eq(after.bytes_copied, before.bytes_copied);
    /* The caller may still write; the zbuf sees it. */
    buf[0] = 'P';
    cr_assert_eq(byte_at(z, NULL, 0), 'P');
    cr_assert_eq(calls, 0);
    zbufDelete(z);
    cr_assert_eq(calls, 1);
}

Test(vx_insert, insert_buf_failure_enrolls_nothing_and_never_calls_the_routine)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    ZBUF_ID other = zbufCreate();
    static char buf[] = "xyz";
    int calls = 0;
    const intptr_t arg = (intptr_t)&calls;

    expect_fail_null(zbufInsertBuf(z, NULL, 0, buf, 0, count_free_wide, arg), EINVAL, z,
                     "abc|defg|hi");
    expect_fail_null(zbufInsertBuf(z, NULL, 0, buf, -3, count_free_wide, arg), EINVAL, z,
                     "abc|defg|hi");
    expect_fail_null(zbufInsertBuf(z, NULL, 0, NULL, 3, count_free_wide, arg), EINVAL, z,
                     "abc|defg|hi");
    expect_fail_null(zbufInsertBuf(z, NULL, 10, buf, 3, count_free_wide, arg), ERANGE, z,
                     "abc|defg|hi");
    expect_fail_null(zbufInsertBuf(other, s[0], 0, buf, 3, count_free_wide, arg), EINVAL,
                     other, "");
    expect_fail_null(zbufInsertBuf(NULL, NULL, 0, buf, 3, count_free_wide, arg), EINVAL, z,
                     "abc|defg|hi");
    zbufDelete(z);
    zbufDelete(other);
    cr_assert_eq(calls, 0, "a failed insertion never calls the free routine");
}

Test(vx_insert, null_free_routine_means_nobody_is_told)
{
    static char buf[] = "quiet";
    ZBUF_ID z = zbufCreate();

    memset(freed, 0, sizeof freed);
    cr_assert_not_null(zbufInsertBuf(z, NULL, 0, buf, 5, NULL, 3));
    ZBUF_ID d = zbufDup(z, NULL, 1, 2);
    cr_assert_not_null(d);
    zbufDelete(z);
    zbufDelete(d);
    cr_assert_eq(freed[3], 0);
}

Test(vx_insert, pointer_sized_free_arg_arrives_intact)
{
    static char buf[] = "wide";
    int calls = 0;
    ZBUF_ID z = zbufCreate();

    /* A VxWorks 6 program passes a pointer; on LP64 it does not fit an int. */
    cr_assert_not_null(zbufInsertBuf(z, NULL, 0, buf, 4, count_free_wide, (intptr_t)&calls));
    zbufDelete(z);
    cr_assert_eq(calls, 1);
}

static int narrow_seen;
static caddr_t narrow_buf;
static int narrow_calls;

static void narrow_free(caddr_t buf, int arg)
{
    narrow_seen = arg;
    narrow_buf = buf;
    narrow_calls++;
}

Test(vx_insert, int_free_arg_arrives_intact_in_a_5x_routine)
{
    static char buf[] = "narrow";
    const int values[] = {0, 1, -1, INT_MAX, INT_MIN, 0x5a5a5a5a};

    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        ZBUF_ID z = zbufCreate();
        narrow_calls = 0;
        narrow_seen = ~values[i];
        cr_assert_not_null(zbufInsertBuf(z, NULL, 0, buf, 6, narrow_free, values[i]));
        zbufDelete(z);
        cr_assert_eq(narrow_calls, 1);
        cr_assert_eq(narrow_seen, values[i]);
        cr_assert_eq(narrow_buf, buf);
    }
}

Test(vx_insert, free_routine_gets_the_enrolled_address_after_the_front_was_cut)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_not_null(zbufCut(z, s[1], 0, 2));
    expect_layout(z, "abc|fg|hi");
    zbufDelete(z);
    cr_assert_eq(freed[1], 1);
    cr_assert_eq(freed_buf[1], mem_b, "the enrolled address, not the segment's");
}

Test(vx_insert, insert_copy_copies_and_leaves_the_callers_buffer_free)
{
    char src[] = "copy";
    zbuf_stats_t before, after;
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    zbuf_stats_get(&before);
    ZBUF_SEG seg = zbufInsertCopy(z, s[1], 2, src, 4);
    zbuf_stats_get(&after);
    cr_assert_not_null(seg);
    cr_assert_neq(zbufSegData(z, seg), src);
    cr_assert_eq(after.bytes_copied - before.bytes_copied, 4);
    memset(src, '#', 4);
    expect_layout(z, "abc|de|copy|fg|hi");
    expect_fail_null(zbufInsertCopy(z, NULL, 0, src, 0), EINVAL, z, "abc|de|copy|fg|hi");
    expect_fail_null(zbufInsertCopy(z, NULL, 0, src, -1), EINVAL, z, "abc|de|copy|fg|hi");
    expect_fail_null(zbufInsertCopy(z, NULL, 0, NULL, 1), EINVAL, z, "abc|de|copy|fg|hi");
    zbufDelete(z);
}

Test(vx_insert, insert_moves_z2s_segments_and_deletes_z2)
{
    ZBUF_SEG s[3];
    ZBUF_ID z1 = make3(s);
    ZBUF_ID z2 = zbufCreate();
    static char p[] = "PQ", r[] = "R";
    zbuf_stats_t before, after;

    cr_assert_not_null(zbufInsertBuf(z2, NULL, ZBUF_END, p, 2, count_free, 4));
    cr_assert_not_null(zbufInsertBuf(z2, NULL, ZBUF_END, r, 1, count_free, 5));
    zbuf_stats_get(&before);
    ZBUF_SEG first = zbufInsert(z1, s[1], 1, z2);
    zbuf_stats_get(&after);
    cr_assert_not_null(first);
    cr_assert_eq(zbufSegData(z1, first), p, "returns the first inserted segment");
    cr_assert_eq(after.live_zbufs, before.live_zbufs - 1, "z2 was deleted");
    cr_assert_eq(after.bytes_copied, before.bytes_copied);
    expect_layout(z1, "abc|d|PQ|R|efg|hi");
    cr_assert_eq(freed[4] + freed[5], 0, "moving segments frees nothing");
    zbufDelete(z1);
    cr_assert_eq(freed[4], 1);
    cr_assert_eq(freed[5], 1);
}

Test(vx_insert, failed_insert_leaves_z2_with_the_caller)
{
    ZBUF_SEG s[3];
    ZBUF_ID z1 = make3(s);
    ZBUF_ID z2 = zbufCreate();
    ZBUF_ID empty = zbufCreate();

    cr_assert_not_null(zbufInsertCopy(z2, NULL, 0, "zz", 2));
    expect_fail_null(zbufInsert(z1, NULL, 10, z2), ERANGE, z1, "abc|defg|hi");
    expect_layout(z2, "zz");
    expect_fail_null(zbufInsert(z1, NULL, 0, z1), EINVAL, z1, "abc|defg|hi");
    expect_fail_null(zbufInsert(z1, NULL, 0, empty), EINVAL, z1, "abc|defg|hi");
    expect_layout(empty, "");
    expect_fail_null(zbufInsert(z1, NULL, 0, NULL), EINVAL, z1, "abc|defg|hi");
    expect_fail_null(zbufInsert(NULL, NULL, 0, z2), EINVAL, z2, "zz");
    expect_fail_null(zbufInsert(z2, s[0], 0, z1), EINVAL, z2, "zz");
    expect_layout(z1, "abc|defg|hi");
    cr_assert_eq(zbufDelete(z2), OK, "z2 still belongs to the caller");
    cr_assert_eq(zbufDelete(empty), OK);
    zbufDelete(z1);
}

Test(vx_insert, insert_into_empty_zbuf_at_null_zero)
{
    ZBUF_ID z1 = zbufCreate();
    ZBUF_ID z2 = zbufCreate();

    cr_assert_not_null(zbufInsertCopy(z2, NULL, 0, "hello", 5));
    ZBUF_ID z3 = zbufCreate();
    expect_fail_null(zbufInsert(z1, NULL, 1, z2), ERANGE, z1, "");
    cr_assert_not_null(zbufInsert(z1, NULL, 0, z2));
    expect_layout(z1, "hello");
    cr_assert_not_null(zbufInsertCopy(z3, NULL, 0, "!", 1));
    cr_assert_not_null(zbufInsert(z1, NULL, ZBUF_END, z3));
    expect_layout(z1, "hello|!");
    zbufDelete(z1);
}

/* ------------------------------------------------------------- extract */

ZT_SUITE(vx_extract);

Test(vx_extract, copies_across_segments_from_the_location)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    char out[16] = {0};

    cr_assert_eq(zbufExtractCopy(z, s[0], 2, out, 5), 5);
    cr_assert_str_eq(out, "cdefg");
    memset(out, 0, sizeof out);
    cr_assert_eq(zbufExtractCopy(z, s[2], -2, out, 3), 3);
    cr_assert_str_eq(out, "fgh");
    expect_layout(z, "abc|defg|hi");
    zbufDelete(z);
}

Test(vx_extract, negative_or_too_long_len_copies_to_the_end)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    char out[16];

    memset(out, 0, sizeof out);
    cr_assert_eq(zbufExtractCopy(z, NULL, 4, out, -1), 5);
    cr_assert_str_eq(out, "efghi");
    memset(out, 0, sizeof out);
    cr_assert_eq(zbufExtractCopy(z, s[1], 0, out, 100), 6);
    cr_assert_str_eq(out, "defghi");
    memset(out, 0, sizeof out);
    cr_assert_eq(zbufExtractCopy(z, NULL, 0, out, INT_MAX), 9);
    cr_assert_str_eq(out, "abcdefghi");
    zbufDelete(z);
}

Test(vx_extract, zero_len_copies_nothing_but_checks_the_location)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    char out[4] = "###";

    cr_assert_eq(zbufExtractCopy(z, NULL, 3, out, 0), 0);
    cr_assert_str_eq(out, "###");
    expect_fail_int(zbufExtractCopy(z, NULL, 9, out, 0), ERANGE, z, "abc|defg|hi");
    expect_fail_int(zbufExtractCopy(z, NULL, 0, NULL, 3), EINVAL, z, "abc|defg|hi");
    zbufDelete(z);
}

/* ------------------------------------------------------------------ cut */

ZT_SUITE(vx_cut);

Test(vx_cut, inside_one_segment_splits_it_and_returns_the_second_half)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    ZBUF_SEG after = zbufCut(z, s[1], 1, 2);
    cr_assert_not_null(after);
    cr_assert_neq(after, ZBUF_NONE);
    cr_assert_eq(*zbufSegData(z, after), 'g');
    cr_assert_eq(zbufSegLength(z, after), 1);
    expect_layout(z, "abc|d|g|hi");
    cr_assert_eq(freed[1], 0, "both halves still reference the buffer");
    zbufDelete(z);
    cr_assert_eq(freed[1], 1);
}

Test(vx_cut, whole_segment_is_removed_and_its_buffer_freed)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(zbufCut(z, s[1], 0, 4), s[2]);
    expect_layout(z, "abc|hi");
    cr_assert_eq(freed[1], 1, "freed by the cut, on this thread");
    cr_assert_eq(freed[0] + freed[2], 0);
    zbufDelete(z);
    cr_assert_eq(freed[1], 1, "not freed twice");
}

Test(vx_cut, across_segments_returns_the_segment_after_the_cut)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    ZBUF_SEG after = zbufCut(z, NULL, 2, 6);
    cr_assert_not_null(after);
    cr_assert_neq(after, ZBUF_NONE);
    cr_assert_eq(*zbufSegData(z, after), 'i');
    expect_layout(z, "ab|i");
    cr_assert_eq(freed[1], 1);
    cr_assert_eq(freed[0] + freed[2], 0);
    zbufDelete(z);
    cr_assert_eq(freed[0] + freed[1] + freed[2], 3);
}

Test(vx_cut, reaching_the_end_returns_zbuf_none)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(zbufCut(z, NULL, 8, 1), ZBUF_NONE);
    expect_layout(z, "abc|defg|h");
    cr_assert_eq(zbufCut(z, s[1], 1, -1), ZBUF_NONE, "negative len cuts to the end");
    expect_layout(z, "abc|d");
    cr_assert_eq(freed[2], 1);
    cr_assert_eq(zbufCut(z, NULL, 1, 1000), ZBUF_NONE, "too long len cuts to the end");
    expect_layout(z, "a");
    cr_assert_eq(freed[1], 1);
    zbufDelete(z);
    cr_assert_eq(freed[0] + freed[1] + freed[2], 3);
}

Test(vx_cut, everything_leaves_an_empty_zbuf)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(zbufCut(z, s[2], ZBUF_BEGIN, -1), ZBUF_NONE);
    expect_layout(z, "");
    cr_assert_eq(zbufLength(z), 0);
    cr_assert_eq(freed[0] + freed[1] + freed[2], 3);
    expect_fail_null(zbufSegData(z, NULL), EINVAL, z, "");
    cr_assert_not_null(zbufInsertCopy(z, NULL, 0, "new", 3), "usable again");
    expect_layout(z, "new");
    zbufDelete(z);
}

Test(vx_cut, bad_arguments_fail_and_change_nothing)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    ZBUF_ID other = zbufCreate();

    cr_assert_not_null(zbufInsertCopy(other, NULL, 0, "o", 1));
    expect_fail_null(zbufCut(z, NULL, 0, 0), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufCut(z, NULL, 9, 1), ERANGE, z, "abc|defg|hi");
    expect_fail_null(zbufCut(z, NULL, ZBUF_END, -1), ERANGE, z, "abc|defg|hi");
    expect_fail_null(zbufCut(z, s[0], -1, 1), ERANGE, z, "abc|defg|hi");
    expect_fail_null(zbufCut(z, ZBUF_NONE, 0, 1), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufCut(other, s[0], 0, 1), EINVAL, other, "o");
    expect_fail_null(zbufCut(NULL, NULL, 0, 1), EINVAL, z, "abc|defg|hi");
    cr_assert_eq(freed[0] + freed[1] + freed[2], 0);
    zbufDelete(other);
    zbufDelete(z);
}

/* ---------------------------------------------------------------- split */

ZT_SUITE(vx_split);

Test(vx_split, addressed_byte_starts_the_new_zbuf)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    ZBUF_ID tail = zbufSplit(z, s[1], 2);
    cr_assert_not_null(tail);
    expect_layout(z, "abc|de");
    expect_layout(tail, "fg|hi");
    zbufDelete(z);
    cr_assert_eq(freed[0], 1);
    cr_assert_eq(freed[1], 0, "the tail still shares the split buffer");
    zbufDelete(tail);
    cr_assert_eq(freed[1], 1);
    cr_assert_eq(freed[2], 1);
}

Test(vx_split, at_a_segment_boundary_splits_no_segment)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    ZBUF_ID tail = zbufSplit(z, s[0], 3);
    cr_assert_not_null(tail);
    expect_layout(z, "abc");
    expect_layout(tail, "defg|hi");
    zbufDelete(z);
    zbufDelete(tail);
    cr_assert_eq(freed[0] + freed[1] + freed[2], 3);
}

Test(vx_split, at_the_first_byte_moves_everything)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    ZBUF_ID tail = zbufSplit(z, s[2], ZBUF_BEGIN);
    cr_assert_not_null(tail);
    expect_layout(z, "");
    expect_layout(tail, "abc|defg|hi");
    zbufDelete(z);
    cr_assert_eq(freed[0] + freed[1] + freed[2], 0);
    zbufDelete(tail);
    cr_assert_eq(freed[0] + freed[1] + freed[2], 3);
}

Test(vx_split, past_the_last_byte_fails_with_erange)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    expect_fail_null(zbufSplit(z, NULL, 9), ERANGE, z, "abc|defg|hi");
    expect_fail_null(zbufSplit(z, s[0], ZBUF_END), ERANGE, z, "abc|defg|hi");
    expect_fail_null(zbufSplit(z, NULL, -1), ERANGE, z, "abc|defg|hi");
    expect_fail_null(zbufSplit(NULL, NULL, 0), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufSplit(z, ZBUF_NONE, 0), EINVAL, z, "abc|defg|hi");
    zbufDelete(z);
}

/* ------------------------------------------------------------------ dup */

ZT_SUITE(vx_dup);

Test(vx_dup, shares_bytes_without_copying)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    zbuf_stats_t before, after;

    zbuf_stats_get(&before);
    ZBUF_ID d = zbufDup(z, s[0], 1, 5);
    zbuf_stats_get(&after);
    cr_assert_not_null(d);
    cr_assert_eq(after.bytes_copied, before.bytes_copied);
    expect_layout(d, "bc|def");
    expect_layout(z, "abc|defg|hi");
    cr_assert_eq(zbufSegData(d, NULL), mem_a + 1, "the dup points into the same buffer");
    /* A change to shared bytes is seen through both. */
    mem_b[1] = 'E';
    cr_assert_eq(byte_at(d, NULL, 3), 'E');
    cr_assert_eq(byte_at(z, NULL, 4), 'E');
    zbufDelete(d);
    zbufDelete(z);
}

Test(vx_dup, negative_or_too_long_len_means_to_the_end)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    ZBUF_ID d1 = zbufDup(z, s[1], 2, -1);
    ZBUF_ID d2 = zbufDup(z, NULL, 1, 9);
    ZBUF_ID d3 = zbufDup(z, NULL, 0, INT_MAX);
    cr_assert(d1 && d2 && d3);
    expect_layout(d1, "fg|hi");
    expect_layout(d2, "bc|defg|hi");
    expect_layout(d3, "abc|defg|hi");
    zbufDelete(d1);
    zbufDelete(d2);
    zbufDelete(d3);
    zbufDelete(z);
}

Test(vx_dup, bad_arguments_fail_and_change_nothing)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    expect_fail_null(zbufDup(z, NULL, 0, 0), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufDup(z, NULL, 9, 1), ERANGE, z, "abc|defg|hi");
    expect_fail_null(zbufDup(z, s[0], ZBUF_END, 1), ERANGE, z, "abc|defg|hi");
    expect_fail_null(zbufDup(NULL, NULL, 0, 1), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufDup(z, ZBUF_NONE, 0, 1), EINVAL, z, "abc|defg|hi");
    zbufDelete(z);
}

Test(vx_dup, free_routine_runs_once_after_the_last_sharer_goes)
{
    static char buf[] = "0123456789";
    int calls = 0;
    ZBUF_ID z = zbufCreate();

    cr_assert_not_null(zbufInsertBuf(z, NULL, 0, buf, 10, count_free_wide, (intptr_t)&calls));
    ZBUF_ID d1 = zbufDup(z, NULL, 2, 5);
    ZBUF_ID d2 = zbufDup(d1, NULL, 1, -1);
    ZBUF_ID tail = zbufSplit(z, NULL, 4);
    cr_assert(d1 && d2 && tail);
    cr_assert_not_null(zbufCut(d1, NULL, 0, 2));
    cr_assert_eq(zbufCut(tail, NULL, 0, -1), ZBUF_NONE);
    expect_layout(z, "0123");
    expect_layout(d1, "456");
    expect_layout(d2, "3456");
    expect_layout(tail, "");

    zbufDelete(z);
    zbufDelete(tail);
    zbufDelete(d1);
    cr_assert_eq(calls, 0, "d2 still references the buffer");
    zbufDelete(d2);
    cr_assert_eq(calls, 1);
}

/* ------------------------------------------------------------- segments */

ZT_SUITE(vx_seg);

Test(vx_seg, next_of_null_is_the_second_segment)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(zbufSegNext(z, NULL), s[1]);
    cr_assert_eq(zbufSegNext(z, s[0]), s[1]);
    cr_assert_eq(zbufSegNext(z, s[1]), s[2]);
    errno = 12345;
    cr_assert_null(zbufSegNext(z, s[2]));
    cr_assert_eq(errno, 12345, "the end is not an error");
    zbufDelete(z);
}

Test(vx_seg, next_of_null_in_a_one_segment_zbuf_is_null)
{
    ZBUF_ID z = zbufCreate();

    cr_assert_not_null(zbufInsertCopy(z, NULL, 0, "one", 3));
    errno = 12345;
    cr_assert_null(zbufSegNext(z, NULL));
    cr_assert_eq(errno, 12345);
    zbufDelete(z);
}

Test(vx_seg, prev_walks_back_and_null_has_no_predecessor)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(zbufSegPrev(z, s[2]), s[1]);
    cr_assert_eq(zbufSegPrev(z, s[1]), s[0]);
    errno = 12345;
    cr_assert_null(zbufSegPrev(z, s[0]));
    cr_assert_null(zbufSegPrev(z, NULL));
    cr_assert_eq(errno, 12345);
    zbufDelete(z);
}

Test(vx_seg, data_and_length_of_null_are_the_first_segments)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(zbufSegData(z, NULL), mem_a);
    cr_assert_eq(zbufSegLength(z, NULL), 3);
    cr_assert_eq(zbufSegData(z, s[1]), mem_b);
    cr_assert_eq(zbufSegLength(z, s[1]), 4);
    cr_assert_eq(zbufSegLength(z, s[2]), 2);
    zbufDelete(z);
}

Test(vx_seg, length_counts_every_segment)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    cr_assert_eq(zbufLength(z), 9);
    cr_assert_not_null(zbufCut(z, NULL, 1, 1));
    cr_assert_eq(zbufLength(z), 8);
    zbufDelete(z);
}

Test(vx_seg, foreign_segment_is_einval_everywhere_and_changes_nothing)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    ZBUF_ID o = zbufCreate();
    ZBUF_ID o2 = zbufCreate();
    char c;
    int off = 0;

    cr_assert_not_null(zbufInsertCopy(o, NULL, 0, "other", 5));
    cr_assert_not_null(zbufInsertCopy(o2, NULL, 0, "o2", 2));
    /* s[1] belongs to z, not to o. */
    expect_fail_null(zbufInsert(o, s[1], 0, o2), EINVAL, o, "other");
    expect_layout(o2, "o2");
    expect_fail_null(zbufInsertBuf(o, s[1], 0, mem_a, 1, NULL, 0), EINVAL, o, "other");
    expect_fail_null(zbufInsertCopy(o, s[1], 0, "x", 1), EINVAL, o, "other");
    expect_fail_int(zbufExtractCopy(o, s[1], 0, &c, 1), EINVAL, o, "other");
    expect_fail_null(zbufCut(o, s[1], 0, 1), EINVAL, o, "other");
    expect_fail_null(zbufSplit(o, s[1], 0), EINVAL, o, "other");
    expect_fail_null(zbufDup(o, s[1], 0, 1), EINVAL, o, "other");
    expect_fail_null(zbufSegFind(o, s[1], &off), EINVAL, o, "other");
    expect_fail_null(zbufSegNext(o, s[1]), EINVAL, o, "other");
    expect_fail_null(zbufSegPrev(o, s[1]), EINVAL, o, "other");
    expect_fail_null(zbufSegData(o, s[1]), EINVAL, o, "other");
    expect_fail_int(zbufSegLength(o, s[1]), EINVAL, o, "other");
    expect_layout(z, "abc|defg|hi");
    cr_assert_eq(freed[0] + freed[1] + freed[2], 0);
    zbufDelete(o);
    zbufDelete(o2);
    zbufDelete(z);
}

Test(vx_seg, zbuf_none_is_not_a_segment)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    int off = 0;

    expect_fail_null(zbufInsertCopy(z, ZBUF_NONE, 0, "x", 1), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufSegFind(z, ZBUF_NONE, &off), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufSegNext(z, ZBUF_NONE), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufSegPrev(z, ZBUF_NONE), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufSegData(z, ZBUF_NONE), EINVAL, z, "abc|defg|hi");
    expect_fail_int(zbufSegLength(z, ZBUF_NONE), EINVAL, z, "abc|defg|hi");
    zbufDelete(z);
}

Test(vx_seg, null_id_is_einval_everywhere)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);
    char c;
    int off = 0;

    /* z is only there to show that nothing else was touched. */
    expect_fail_null(zbufInsertCopy(NULL, NULL, 0, "x", 1), EINVAL, z, "abc|defg|hi");
    expect_fail_int(zbufExtractCopy(NULL, NULL, 0, &c, 1), EINVAL, z, "abc|defg|hi");
    expect_fail_int(zbufLength(NULL), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufSegFind(NULL, NULL, &off), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufSegNext(NULL, NULL), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufSegPrev(NULL, NULL), EINVAL, z, "abc|defg|hi");
    expect_fail_null(zbufSegData(NULL, NULL), EINVAL, z, "abc|defg|hi");
    expect_fail_int(zbufSegLength(NULL, NULL), EINVAL, z, "abc|defg|hi");
    zbufDelete(z);
}

Test(vx_seg, segment_handles_track_splits_and_cuts)
{
    ZBUF_SEG s[3];
    ZBUF_ID z = make3(s);

    /* After a cut inside s[1] (whose handle may die with the split), the
     * returned segment addresses like any other. */
    ZBUF_SEG g = zbufCut(z, s[1], 1, 2);
    ZBUF_SEG d = zbufSegPrev(z, g);
    cr_assert_not_null(d);
    cr_assert_eq(*zbufSegData(z, d), 'd');
    cr_assert_eq(zbufSegLength(z, d), 1);
    cr_assert_eq(zbufSegNext(z, g), s[2]);
    cr_assert_eq(byte_at(z, g, -1), 'd');
    cr_assert_eq(byte_at(z, g, 1), 'h');
    zbufDelete(z);
}

/* ------------------------------------------------------- out of memory */

/*
 * A counting allocator that fails the Nth call: every operation is run with
 * N = 0, 1, 2 ... until it succeeds, and each failure must give ENOMEM,
 * leave the zbuf as it was, call no free routine and give back every byte
 * allocated during the call (this is what catches a leaked free-routine
 * context in zbufInsertBuf()).  The descriptor caches are off so that every
 * allocation reaches the allocator.
 */
#include <stdlib.h>

#include "internal.h"

static long fi_live;
static int fi_calls;
static int fi_fail_at = -1;

static void *fi_alloc(void *ctx, size_t size)
{
    (void)ctx;
    if (fi_calls++ == fi_fail_at)
        return NULL;
    void *p = malloc(size);
    if (p != NULL)
        fi_live++;
    return p;
}

static void fi_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    (void)size;
    free(ptr);
    fi_live--;
}

static void fi_setup(void)
{
    static const zbuf_allocator_t a = {fi_alloc, fi_free, NULL};

    zt_leak_baseline();
    cr_assert_eq(zbuf_set_allocator(&a), 0);
    zbuf__cache_set_enabled(false);
}

static void fi_teardown(void)
{
    zt_assert_no_leaks();
    cr_assert_eq(fi_live, 0, "allocator blocks still out: %ld", fi_live);
    zbuf__cache_set_enabled(true);
    cr_assert_eq(zbuf_set_allocator(NULL), 0);
}

TestSuite(vx_nomem, .init = fi_setup, .fini = fi_teardown);

/* Arm the allocator to fail its nth call from now. */
static void fi_arm(int n)
{
    fi_calls = 0;
    fi_fail_at = n;
}

Test(vx_nomem, insert_buf_fails_cleanly_at_every_allocation)
{
    static char buf[] = "new";
    int n, calls = 0;

    for (n = 0;; n++) {
        ZBUF_SEG s[3];
        ZBUF_ID z = make3(s);
        long live = fi_live;

        fi_arm(n);
        errno = 0;
        ZBUF_SEG seg = zbufInsertBuf(z, s[1], 2, buf, 3, count_free_wide, (intptr_t)&calls);
        fi_arm(-1);
        if (seg != NULL) {
            expect_layout(z, "abc|de|new|fg|hi");
            zbufDelete(z);
            break;
        }
        cr_assert_eq(errno, ENOMEM, "failing allocation %d", n);
        cr_assert_eq(fi_live, live, "allocation %d: everything given back", n);
        expect_layout(z, "abc|defg|hi");
        zbufDelete(z);
        cr_assert_eq(calls, 0, "a failed insertion never calls the free routine");
    }
    cr_assert_geq(n, 2, "the free-routine context and the core both allocate");
    cr_assert_eq(calls, 1, "the successful insertion's routine ran once");
}

/* One operation of the layer on the standard zbuf; true on success. */
typedef bool (*vx_op)(ZBUF_ID z, ZBUF_SEG s[3], ZBUF_ID *extra);

static bool op_insert_copy(ZBUF_ID z, ZBUF_SEG s[3], ZBUF_ID *extra)
{
    (void)extra;
    return zbufInsertCopy(z, s[1], 1, "xy", 2) != NULL;
}

static bool op_cut_inside(ZBUF_ID z, ZBUF_SEG s[3], ZBUF_ID *extra)
{
    (void)extra;
    return zbufCut(z, s[1], 1, 2) != NULL;
}

static bool op_split(ZBUF_ID z, ZBUF_SEG s[3], ZBUF_ID *extra)
{
    return (*extra = zbufSplit(z, s[1], 2)) != NULL;
}

static bool op_dup(ZBUF_ID z, ZBUF_SEG s[3], ZBUF_ID *extra)
{
    (void)s;
    return (*extra = zbufDup(z, NULL, 1, 7)) != NULL;
}

static bool op_insert(ZBUF_ID z, ZBUF_SEG s[3], ZBUF_ID *extra)
{
    /* extra holds the zbuf to move; on success it is gone. */
    if (zbufInsert(z, s[1], 2, *extra) == NULL)
        return false;
    *extra = NULL;
    return true;
}

Test(vx_nomem, every_operation_fails_with_enomem_and_changes_nothing)
{
    static const struct {
        const char *name;
        vx_op op;
        const char *after;
    } ops[] = {
        {"insert_copy", op_insert_copy, "abc|d|xy|efg|hi"},
        {"cut", op_cut_inside, "abc|d|g|hi"},
        {"split", op_split, "abc|de"},
        {"dup", op_dup, "abc|defg|hi"},
        {"insert", op_insert, "abc|de|zz|fg|hi"},
    };

    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        int failures = 0;
        for (int n = 0;; n++) {
            ZBUF_SEG s[3];
            ZBUF_ID z = make3(s);
            ZBUF_ID extra = NULL;
            if (ops[k].op == op_insert) {
                extra = zbufCreate();
                cr_assert_not_null(zbufInsertCopy(extra, NULL, 0, "zz", 2));
            }
            long live = fi_live;
            fi_arm(n);
            errno = 0;
            bool ok = ops[k].op(z, s, &extra);
            fi_arm(-1);
            if (ok) {
                expect_layout(z, ops[k].after);
                if (extra != NULL)
                    zbufDelete(extra);
                zbufDelete(z);
                break;
            }
            failures++;
            cr_assert_eq(errno, ENOMEM, "%s, failing allocation %d", ops[k].name, n);
            cr_assert_eq(fi_live, live, "%s, allocation %d: everything given back",
                         ops[k].name, n);
            expect_layout(z, "abc|defg|hi");
            if (ops[k].op == op_insert)
                expect_layout(extra, "zz");
            if (extra != NULL)
                zbufDelete(extra);
            zbufDelete(z);
            cr_assert_eq(freed[0] + freed[1] + freed[2], 3);
        }
        if (ops[k].op != op_insert)
            cr_assert_gt(failures, 0, "%s allocates, so it can fail", ops[k].name);
    }
}

Test(vx_nomem, create_fails_with_enomem)
{
    fi_arm(0);
    errno = 0;
    cr_assert_null(zbufCreate());
    fi_arm(-1);
    cr_assert_eq(errno, ENOMEM);
}
