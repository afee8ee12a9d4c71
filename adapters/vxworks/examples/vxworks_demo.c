/* SPDX-License-Identifier: MIT */
/*
 * vxworks_demo: VxWorks zbufLib code, unchanged but for its #include line.
 *
 * The three fragments of the original zbuf article, written the way VxWorks
 * code is (hence the VxWorks names and mixed case, which the rest of libzbuf
 * does not use):
 *
 *   1. the send side: a pool of fixed buffers, each enrolled with
 *      zbufInsertBuf() and handed back by the free routine appBufRetn();
 *   2. the blaster: one master zbuf, duplicated with zbufDup() for every send;
 *   3. segment addressing: zbufSegFind(), zbufCut() and zbufSplit() with
 *      (segment, offset) locations and ZBUF_NONE.
 *
 * Without a network, "sending" is done by sockSend() below: it writes the
 * zbuf's segments to a pipe and deletes the zbuf, which is what zbufSockSend()
 * does with the zbufs it is given (the zbuf belongs to the library after the
 * call).  A reader drains the pipe and counts the bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <zbuf/vxworks.h> /* was: #include "zbufLib.h" */

#define NUM_BUFS 4
#define BUF_SIZE 512

static char bufPool[NUM_BUFS][BUF_SIZE];
static char *freeList[NUM_BUFS];
static int numFree;
static int numReturned;
static int pipeFd[2];

/*
 * The free routine (VxWorks 5.x shape).  The library calls it once the last
 * segment referring to the buffer is gone, on the thread that deleted it;
 * like every free routine it must be quick and must not block.
 */
static void appBufRetn(caddr_t buf, int freeArg)
{
    (void)freeArg;
    freeList[numFree++] = buf;
    numReturned++;
}

/* Write a zbuf's segments to the pipe, then delete it: the zbuf is consumed,
 * as with zbufSockSend().  Returns the bytes written or ERROR. */
static int sockSend(int fd, ZBUF_ID zbufId)
{
    ZBUF_SEG seg = NULL; /* NULL: the first segment */
    int total = 0, len;

    if (zbufLength(zbufId) > 0) {
        do {
            len = zbufSegLength(zbufId, seg);
            if (len == ERROR || write(fd, zbufSegData(zbufId, seg), (size_t)len) != len)
                break;
            total += len;
        } while ((seg = zbufSegNext(zbufId, seg)) != NULL);
    }
    zbufDelete(zbufId);
    return total;
}

/* Read and drop @len bytes from the pipe, as a blastee would. */
static int drain(int len)
{
    char sink[BUF_SIZE];
    int got = 0;

    while (got < len) {
        ssize_t r = read(pipeFd[0], sink, (size_t)(len - got) < sizeof sink ?
                                             (size_t)(len - got) : sizeof sink);
        if (r <= 0)
            return ERROR;
        got += (int)r;
    }
    return got;
}

static void printSegs(const char *name, ZBUF_ID zbufId)
{
    ZBUF_SEG seg = NULL;

    printf("  %-26s %2d bytes:", name, zbufLength(zbufId));
    if (zbufLength(zbufId) > 0) {
        do {
            printf(" [%.*s]", zbufSegLength(zbufId, seg), zbufSegData(zbufId, seg));
        } while ((seg = zbufSegNext(zbufId, seg)) != NULL);
    }
    printf("\n");
}

int main(void)
{
    int i, sent = 0, failures = 0;

    if (pipe(pipeFd) != 0) {
        perror("pipe");
        return 1;
    }
    for (i = 0; i < NUM_BUFS; i++)
        freeList[i] = bufPool[i];
    numFree = NUM_BUFS;

    /* 1. Send side: take a buffer, enrol it, send the zbuf.  After the send
     *    the zbuf belongs to the library and the buffer comes back through
     *    appBufRetn(). */
    printf("1. send loop with appBufRetn\n");
    for (i = 0; i < 1000; i++) {
        char *pBuffer = freeList[--numFree];
        int readLen = 1 + (i * 37) % BUF_SIZE;
        ZBUF_ID zId;

        memset(pBuffer, 'a' + i % 26, (size_t)readLen);
        zId = zbufCreate();
        if (zId == NULL ||
            zbufInsertBuf(zId, NULL, 0, pBuffer, readLen, appBufRetn, 0) == NULL) {
            perror("zbufInsertBuf");
            return 1;
        }
        sent += sockSend(pipeFd[1], zId); /* zId now belongs to the library */
        if (drain(readLen) != readLen)
            return 1;
    }
    printf("  %d bytes sent, %d buffers returned by appBufRetn, %d of %d free\n", sent,
           numReturned, numFree, NUM_BUFS);

    /* 2. The blaster: one master zbuf; each send gets a dup that shares the
     *    master's buffer, so no byte is copied however often it is sent. */
    printf("2. blaster\n");
    {
        static char pBuffer[BUF_SIZE];
        int sendSize = BUF_SIZE;
        ZBUF_ID zbufSave = zbufCreate();

        memset(pBuffer, 'x', sizeof pBuffer);
        zbufInsertBuf(zbufSave, NULL, 0, pBuffer, sendSize, NULL, 0);
        for (i = 0, sent = 0; i < 1000; i++) {
            ZBUF_ID zbufSend = zbufDup(zbufSave, NULL, 0, sendSize);
            sent += sockSend(pipeFd[1], zbufSend);
            drain(sendSize);
        }
        printf("  %d dups sent, %d bytes; the master still holds %d bytes\n", i, sent,
               zbufLength(zbufSave));
        failures += sent != 1000 * sendSize || zbufLength(zbufSave) != sendSize;
        zbufDelete(zbufSave);
    }

    /* 3. Addressing with (segment, offset) pairs. */
    printf("3. segments, cut and split\n");
    {
        static char part1[] = "Hello, ";
        static char part2[] = "zero-copy ";
        static char part3[] = "world";
        ZBUF_ID zId = zbufCreate();
        ZBUF_ID tail;
        ZBUF_SEG seg, after;
        int offset;

        zbufInsertBuf(zId, NULL, 0, part1, (int)strlen(part1), NULL, 0);
        zbufInsertBuf(zId, NULL, ZBUF_END, part2, (int)strlen(part2), NULL, 0);
        zbufInsertBuf(zId, NULL, ZBUF_END, part3, (int)strlen(part3), NULL, 0);
        printSegs("zbuf", zId);

        /* Which segment holds absolute byte 9, and where in it? */
        offset = 9;
        seg = zbufSegFind(zId, NULL, &offset);
        printf("  byte 9 is byte %d of segment \"%.*s\"\n", offset,
               zbufSegLength(zId, seg), zbufSegData(zId, seg));

        /* Cut "zero-" (5 bytes from the start of that segment). */
        after = zbufCut(zId, seg, 0, 5);
        printSegs("after zbufCut(seg, 0, 5)", zId);
        printf("  zbufCut returned the segment \"%.*s\"\n", zbufSegLength(zId, after),
               zbufSegData(zId, after));

        /* Split before "world": offset 0 of the third segment.  The tail
         * is a new zbuf; the head keeps "Hello, copy ". */
        tail = zbufSplit(zId, zbufSegNext(zId, zbufSegNext(zId, NULL)), 0);
        printSegs("head after zbufSplit", zId);
        printSegs("tail", tail);

        /* A cut that reaches the end returns ZBUF_NONE: no byte follows. */
        after = zbufCut(zId, NULL, zbufLength(zId) - 1, -1);
        printSegs("head after cutting 1 byte", zId);
        printf("  zbufCut returned %s\n", after == ZBUF_NONE ? "ZBUF_NONE" : "a segment");
        {
            char text[32];
            int n = zbufExtractCopy(zId, NULL, 0, text, -1);
            failures += after != ZBUF_NONE || n != 11 || memcmp(text, "Hello, copy", 11) != 0 ||
                        zbufLength(tail) != 5;
        }
        zbufDelete(tail);
        zbufDelete(zId);
    }

    close(pipeFd[0]);
    close(pipeFd[1]);
    failures += numReturned != 1000 || numFree != NUM_BUFS;
    if (failures != 0)
        printf("FAILED: %d check%s did not hold\n", failures, failures == 1 ? "" : "s");
    return failures == 0 ? 0 : 1;
}
