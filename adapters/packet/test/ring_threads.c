/* SPDX-License-Identifier: MIT */
/*
 * Loans returned on another thread: the walker and a simulated kernel run
 * on the main thread, a second thread deletes the frames (so the release
 * callbacks write the status words back from there).  Plain C, so that it
 * runs under ThreadSanitizer, which Criterion's runner cannot start under.
 * Exits non-zero on any lost, duplicated or corrupt frame or a slot never
 * returned.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringsim.h"

#define QCAP 4096

static zbuf_t *queue[QCAP];
static unsigned qhead, qlen;
static bool done;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void *deleter(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (qlen == 0 && !done)
            pthread_cond_wait(&cv, &mu);
        if (qlen == 0 && done) {
            pthread_mutex_unlock(&mu);
            return NULL;
        }
        zbuf_t *z = queue[qhead];
        qhead = (qhead + 1) % QCAP;
        qlen--;
        pthread_mutex_unlock(&mu);
        zbuf_delete(z); /* may return a ring slot: from this thread */
    }
}

static void push(zbuf_t *z)
{
    pthread_mutex_lock(&mu);
    while (qlen == QCAP) {
        pthread_mutex_unlock(&mu);
        sched_yield();
        pthread_mutex_lock(&mu);
    }
    queue[(qhead + qlen) % QCAP] = z;
    qlen++;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static int run(unsigned version, unsigned share)
{
    const uint64_t total = 30000;
    zbuf_pool_t *pool;
    if (zbuf_pool_create(512, 256, &pool) != 0)
        return 1;
    struct sim_rx *s = calloc(1, sizeof *s);
    if (version == ZBUF_PACKET_V3)
        sim_rx_init(s, version, 2048, 16384, 8, share, pool, false, 11, total + 64, false);
    else
        sim_rx_init(s, version, 2048, 4096, 64, share, pool, false, 11, total + 64, false);
    done = false;
    pthread_t t;
    pthread_create(&t, NULL, deleter, NULL);
    uint64_t next = 0, delivered = 0;
    int bad = 0;
    while (s->kseq < total) {
        for (int k = 0; k < 8; k++)
            sim_rx_kernel_write(s);
        if (version == ZBUF_PACKET_V3 && s->kseq % 5 == 0)
            sim_rx_kernel_retire(s);
        zbuf_t *f[32];
        zbuf_packet_rxinfo_t in[32];
        int n = zpk_rx_take(&s->rx, f, in, 32);
        for (int i = 0; i < n; i++) {
            uint64_t seq = in[i].ts_sec;
            if (seq < next || zbuf_length(f[i]) != s->lens[seq])
                bad++;
            next = seq + 1;
            delivered++;
            push(f[i]);
        }
    }
    sim_rx_kernel_retire(s);
    pthread_mutex_lock(&mu);
    done = true;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    for (;;) { /* what is left in the ring */
        zbuf_t *f[32];
        zbuf_packet_rxinfo_t in[32];
        int n = zpk_rx_take(&s->rx, f, in, 32);
        if (n <= 0)
            break;
        for (int i = 0; i < n; i++) {
            delivered++;
            zbuf_delete(f[i]);
        }
    }
    uint64_t skipped = s->st.rx_no_buffer + s->st.rx_outgoing_filtered;
    int rc = 0;
    if (bad || delivered + skipped != s->kseq || !sim_rx_all_returned(s)) {
        fprintf(stderr, "V%u share %u: bad %d, delivered %llu + skipped %llu of %llu written, "
                "returned %d\n", version, share, bad, (unsigned long long)delivered,
                (unsigned long long)skipped, (unsigned long long)s->kseq, sim_rx_all_returned(s));
        rc = 1;
    }
    zpk_rx_release_owner(&s->rx);
    if (s->destroyed != 1)
        rc = 1;
    printf("V%u share %u: %llu frames written, %llu delivered (%llu lent, %llu copied), "
           "%llu kernel drops, %llu stalls\n", version, share, (unsigned long long)s->kseq,
           (unsigned long long)delivered, (unsigned long long)s->st.rx_loaned,
           (unsigned long long)s->st.rx_copied, (unsigned long long)s->kdrops,
           (unsigned long long)s->st.rx_stalls);
    sim_rx_free(s);
    free(s);
    zbuf_pool_delete(pool);
    return rc;
}

int main(void)
{
    int rc = 0;
    rc |= run(ZBUF_PACKET_V2, 50);
    rc |= run(ZBUF_PACKET_V2, 100);
    rc |= run(ZBUF_PACKET_V3, 50);
    rc |= run(ZBUF_PACKET_V3, 100);
    return rc;
}
