/* SPDX-License-Identifier: MIT */
/*
 * send_loop: an application that sends from a fixed pool of its own buffers
 * and gets each one back through a release callback, never copying a byte.
 *
 * This is the send side of the VxWorks zbuf socket article (its appBufRetn
 * free routine) with the modern API:
 *
 *   1. take a free buffer from the application's pool and fill it;
 *   2. enrol it at the end of a zbuf with zbuf_insert_buf(), giving
 *      app_buf_return() as the release callback: from now on the buffer is
 *      loaned to libzbuf and the application must not touch it;
 *   3. "send" the zbuf: zbuf_iovec() describes its segments for writev(),
 *      which writes them into a pipe (standing in for a socket);
 *   4. keep the zbuf on a retransmission queue, as TCP would, until the peer
 *      "acknowledges" it a few messages later, then zbuf_delete() it;
 *   5. the delete drops the last reference to each buffer, libzbuf calls
 *      app_buf_return() and the buffer is back in the pool for step 1.
 *
 * The pool holds just enough buffers for the messages that can be in flight
 * at once, so it never runs dry; the program checks that every buffer taken
 * came back through exactly one callback and that nothing was copied by the
 * library.  It reads the pipe back and checks every byte that went through.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <zbuf/zbuf.h>

enum {
    BUF_SIZE = 1024,  /* bytes per application buffer */
    WINDOW = 3,       /* unacknowledged messages kept for retransmission */
    MAX_PARTS = 2,    /* buffers per message, at most */
    POOL_BUFS = (WINDOW + 1) * MAX_PARTS, /* enough for the worst case */
    MESSAGES = 10000,
};

/* The application's own buffer pool: a free stack over static memory. */
struct app_pool {
    unsigned char mem[POOL_BUFS][BUF_SIZE];
    unsigned char *free[POOL_BUFS];
    int nfree;
    int low_water;      /* fewest free buffers ever seen */
    long taken;         /* buffers handed out */
    long returned;      /* buffers given back by release callbacks */
};

static struct app_pool pool;

static void app_pool_init(struct app_pool *p)
{
    for (int i = 0; i < POOL_BUFS; i++)
        p->free[i] = p->mem[i];
    p->nfree = p->low_water = POOL_BUFS;
}

static unsigned char *app_buf_get(struct app_pool *p)
{
    if (p->nfree == 0)
        return NULL;
    p->taken++;
    if (--p->nfree < p->low_water)
        p->low_water = p->nfree;
    return p->free[p->nfree];
}

/* [release callback] */
/*
 * The release callback (the article's appBufRetn).  libzbuf calls it once per
 * enrolled buffer, when no zbuf refers to any of its bytes: here inside
 * zbuf_delete(), on this thread.  It must be quick and must not block; it
 * only pushes the buffer back on the free stack.
 */
static void app_buf_return(void *data, size_t size, void *arg)
{
    struct app_pool *p = arg;

    (void)size;
    p->returned++;
    p->free[p->nfree++] = data;
}
/* [release callback] */

/* The byte at position @i of message @seq: lets the reader check every byte. */
static unsigned char pattern(long seq, size_t i)
{
    return (unsigned char)(seq * 31 + i * 7);
}

static void die(const char *what, int err)
{
    fprintf(stderr, "send_loop: %s: %s\n", what, zbuf_strerror(err));
    exit(1);
}

/* Build message @seq of @len bytes in one or two pool buffers. */
static zbuf_t *build_message(long seq, size_t len)
{
    zbuf_t *z;
    size_t done = 0;
    int rc;

    if ((rc = zbuf_create(&z)) < 0)
        die("zbuf_create", rc);
    while (done < len) {
        size_t part = len - done < BUF_SIZE ? len - done : BUF_SIZE;
        unsigned char *buf = app_buf_get(&pool);

        if (buf == NULL) {
            fprintf(stderr, "send_loop: the pool ran dry at message %ld\n", seq);
            exit(1);
        }
        for (size_t i = 0; i < part; i++)
            buf[i] = pattern(seq, done + i);
        rc = zbuf_insert_buf(z, ZBUF_OFF_END, buf, part, app_buf_return, &pool, NULL);
        if (rc < 0) {
            /* A failed call enrols nothing: the buffer is still ours and its
             * callback will not run, so it goes back to the pool by hand. */
            app_buf_return(buf, part, &pool);
            die("zbuf_insert_buf", rc);
        }
        done += part;
    }
    return z;
}

/* Write all of @z to @fd with one writev() per batch of segments. */
static void send_zbuf(int fd, const zbuf_t *z)
{
    size_t off = 0, len = zbuf_length(z);

    while (off < len) {
        struct iovec iov[8];
        size_t bytes;
        int n = zbuf_iovec(z, off, ZBUF_TO_END, iov, 8, &bytes);
        ssize_t w;

        if (n < 0)
            die("zbuf_iovec", n);
        w = writev(fd, iov, n);
        if (w < 0)
            die("writev", -errno);
        off += (size_t)w; /* a short write resumes at the first unsent byte */
    }
}

/* Read message @seq back from the pipe and check every byte. */
static void receive_and_check(int fd, long seq, size_t len)
{
    unsigned char in[MAX_PARTS * BUF_SIZE];
    size_t got = 0;

    while (got < len) {
        ssize_t r = read(fd, in + got, len - got);
        if (r <= 0)
            die("read", r < 0 ? -errno : -EPIPE);
        got += (size_t)r;
    }
    for (size_t i = 0; i < len; i++)
        if (in[i] != pattern(seq, i)) {
            fprintf(stderr, "send_loop: message %ld byte %zu is wrong\n", seq, i);
            exit(1);
        }
}

int main(void)
{
    zbuf_t *queue[WINDOW] = {NULL}; /* sent, waiting for their acknowledgement */
    zbuf_stats_t before, after;
    long long bytes_sent = 0;
    int fds[2];

    app_pool_init(&pool);
    if (pipe(fds) < 0)
        die("pipe", -errno);
    zbuf_stats_get(&before);

    for (long seq = 0; seq < MESSAGES; seq++) {
        /* Lengths from 1 to 2 * BUF_SIZE: some messages need two buffers. */
        size_t len = 1 + (size_t)(seq * 977) % (MAX_PARTS * BUF_SIZE);
        zbuf_t **slot = &queue[seq % WINDOW];

        /* The oldest message is acknowledged: deleting it runs the release
         * callbacks, which refill the pool before we take from it. */
        if (*slot != NULL)
            zbuf_delete(*slot);

        *slot = build_message(seq, len);
        send_zbuf(fds[1], *slot);
        receive_and_check(fds[0], seq, len);
        bytes_sent += (long long)len;
    }
    for (int i = 0; i < WINDOW; i++)
        zbuf_delete(queue[i]);
    zbuf_stats_get(&after);
    close(fds[0]);
    close(fds[1]);

    printf("messages sent:            %d (%lld bytes, each checked at the reader)\n", MESSAGES,
           bytes_sent);
    printf("pool:                     %d buffers of %d bytes, fewest free %d, free now %d\n",
           POOL_BUFS, BUF_SIZE, pool.low_water, pool.nfree);
    printf("buffers taken:            %ld\n", pool.taken);
    printf("release callbacks run:    %ld\n", pool.returned);
    printf("bytes copied by libzbuf:  %llu\n",
           (unsigned long long)(after.bytes_copied - before.bytes_copied));

    if (pool.taken != pool.returned || pool.nfree != POOL_BUFS ||
        after.bytes_copied != before.bytes_copied) {
        fprintf(stderr, "send_loop: FAILED: buffers or copies do not add up\n");
        return 1;
    }
    printf("OK: every buffer came back exactly once and nothing was copied\n");
    return 0;
}
