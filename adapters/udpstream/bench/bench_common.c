/* SPDX-License-Identifier: MIT */
/* The drivers of the two benchmark scenarios; see bench_common.h. */
#include "bench_common.h"

static const size_t default_sizes[] = {64,    256,   1024,  1443,  1444,   1445,   2888,
                                       2889,  4096,  8192,  16384, 32768,  65536,  131072,
                                       262144, 1048576};

int bench_slot;

/* Make @im[j] the implementation the hooks act on. */
static const struct bench_impl *use(const struct bench_impl *const *im, int j)
{
    bench_slot = j;
    return im[j];
}

/*
 * Round trips of each size with @k implementations (1, or 2 side by side:
 * their runs alternate, A B A B ..., so both see the same moments of the
 * machine's load and their ratio is taken within one run).
 */
static void pingpong(const struct bench_impl *const *im, int k, const size_t *sizes, size_t ns)
{
    size_t max = 0;
    for (size_t i = 0; i < ns; i++)
        if (sizes[i] > max)
            max = sizes[i];
    for (int j = 0; j < k; j++)
        use(im, j)->pp_open(max);
    const char *fixed = getenv("BENCH_ROUNDS");
    for (size_t i = 0; i < ns && fixed != NULL; i++) {
        /* Exactly N round trips per size, nothing printed: for callgrind
         * (instructions per round trip = the count / N). */
        for (int j = 0; j < k; j++)
            for (long n = atol(fixed); n > 0; n--)
                use(im, j)->pp_round(sizes[i]);
    }
    for (size_t i = 0; i < ns && fixed == NULL; i++) {
        size_t size = sizes[i];
        /* Warm up and size a run to about 0.15 s (at least 20 rounds),
         * on the first implementation; the others do as many. */
        size_t rounds = 0;
        for (int j = 0; j < k; j++) {
            uint64_t t0 = bench_now_us();
            int warm = 0;
            while (warm < 20 || bench_now_us() - t0 < 50000) {
                use(im, j)->pp_round(size);
                warm++;
            }
            if (j == 0) {
                uint64_t per = (bench_now_us() - t0) / (uint64_t)warm + 1;
                rounds = (size_t)(150000 / per);
            }
        }
        if (rounds < 20)
            rounds = 20;
        if (rounds > 20000)
            rounds = 20000;
        uint64_t *rtt = malloc(rounds * sizeof *rtt);
        uint64_t *all[2], med[2][RUNS], cpu[2] = {0, 0};
        double c0[2];
        for (int j = 0; j < k; j++) {
            all[j] = malloc(RUNS * rounds * sizeof *all[j]);
            c0[j] = im[j]->pp_copied ? use(im, j)->pp_copied() : -1;
        }
        for (int r = 0; r < RUNS; r++) {
            for (int j = 0; j < k; j++) {
                const struct bench_impl *m = use(im, j);
                uint64_t cp = bench_cpu_us();
                for (size_t n = 0; n < rounds; n++) { /* in ns: round trips of 1 us show */
                    uint64_t a = bench_now_ns();
                    m->pp_round(size);
                    rtt[n] = bench_now_ns() - a;
                }
                cpu[j] += bench_cpu_us() - cp;
                memcpy(all[j] + (size_t)r * rounds, rtt, rounds * sizeof *rtt);
                qsort(rtt, rounds, sizeof *rtt, bench_cmp_u64);
                med[j][r] = rtt[rounds / 2];
            }
        }
        for (int j = 0; j < k; j++) {
            double c1 = im[j]->pp_copied ? use(im, j)->pp_copied() : -1;
            qsort(med[j], RUNS, sizeof med[j][0], bench_cmp_u64);
            qsort(all[j], RUNS * rounds, sizeof *all[j], bench_cmp_u64);
            double total_rounds = (double)RUNS * (double)rounds;
            double p50 = (double)med[j][RUNS / 2] / 1000.0; /* us */
            double goodput = 2.0 * (double)size / (p50 > 0 ? p50 : 1); /* bytes/us = MB/s */
            double copies = c0[j] < 0 ? -1 : (c1 - c0[j]) / (total_rounds * 2.0 * (double)size);
            printf("pingpong %s %zu %.2f %.2f %.2f %.2f %.1f %.2f %.3f\n", im[j]->name, size, p50,
                   (double)med[j][0] / 1000.0, (double)med[j][RUNS - 1] / 1000.0,
                   (double)all[j][(size_t)(0.99 * total_rounds)] / 1000.0, goodput,
                   (double)cpu[j] / total_rounds, copies);
            free(all[j]);
        }
        fflush(stdout);
        free(rtt);
    }
    for (int j = 0; j < k; j++)
        use(im, j)->pp_close();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One-way streaming of each write size with @k implementations, runs
 * alternating as in pingpong(). */
static void stream(const struct bench_impl *const *im, int k, const size_t *sizes, size_t ns)
{
    for (int j = 0; j < k; j++)
        use(im, j)->pp_open(1u << 20);
    for (size_t i = 0; i < ns; i++) {
        size_t size = sizes[i];
        double mbps[2][RUNS], cpu_b[2] = {0, 0}, bytes_all[2] = {0, 0}, c0[2];
        for (int j = 0; j < k; j++) {
            const struct bench_impl *m = use(im, j);
            c0[j] = m->pp_copied ? m->pp_copied() : -1;
            uint64_t warm = bench_now_us() + 50000;
            while (bench_now_us() < warm)
                m->st_step(size);
        }
        for (int r = 0; r < RUNS; r++) {
            for (int j = 0; j < k; j++) {
                const struct bench_impl *m = use(im, j);
                uint64_t got = 0, t0 = bench_now_us(), c = bench_cpu_us();
                while (bench_now_us() - t0 < 200000)
                    got += m->st_step(size);
                uint64_t dt = bench_now_us() - t0;
                cpu_b[j] += (double)(bench_cpu_us() - c);
                bytes_all[j] += (double)got;
                mbps[j][r] = (double)got / (double)dt;
            }
        }
        for (int j = 0; j < k; j++) {
            double c1 = im[j]->pp_copied ? use(im, j)->pp_copied() : -1;
            double b = bytes_all[j] > 0 ? bytes_all[j] : 1;
            qsort(mbps[j], RUNS, sizeof mbps[j][0], cmp_double);
            printf("stream %s %zu %.1f %.1f %.1f %.3f %.3f\n", im[j]->name, size,
                   mbps[j][RUNS / 2], mbps[j][0], mbps[j][RUNS - 1], cpu_b[j] * 1000.0 / b,
                   c0[j] < 0 ? -1 : (c1 - c0[j]) / b);
        }
        fflush(stdout);
    }
    for (int j = 0; j < k; j++)
        use(im, j)->pp_close();
}

/* ------------------------------------------------------------- loss */

static uint64_t *loss_rtt;
static uint32_t loss_got, loss_count;

static void loss_echoed(const uint8_t *msg)
{
    uint32_t seq;
    uint64_t sent;
    memcpy(&seq, msg, 4);
    memcpy(&sent, msg + 4, 8);
    if (seq < loss_count && loss_rtt[seq] == 0) {
        loss_rtt[seq] = bench_now_us() - sent + 1;
        loss_got++;
    }
}

static void loss(const struct bench_impl *im, uint32_t count, const char *model)
{
    struct sockaddr_in server;
    im->loss_open(&server);
    struct relay r;
    relay_init(&r, &server, 12345, strcmp(model, "kcp") == 0);
    im->loss_connect(&r.addr[0]);
    loss_count = count;
    loss_got = 0;
    loss_rtt = calloc(count, sizeof *loss_rtt);
    uint32_t sent = 0;
    uint64_t next = bench_now_us() + 200000; /* let the handshake settle */
    uint64_t end = next + (uint64_t)count * 20000 + 30000000;
    while (loss_got < count && bench_now_us() < end) {
        uint64_t now = bench_now_us();
        if (sent < count && now >= next) {
            uint8_t msg[LOSS_PAYLOAD] = {0};
            memcpy(msg, &sent, 4);
            memcpy(msg + 4, &now, 8);
            im->loss_send(msg);
            sent++;
            next += 20000;
        }
        int64_t w = relay_wait_us(&r);
        int64_t ws = sent < count ? (int64_t)(next > now ? next - now : 0) : 5000;
        if (w < 0 || ws < w)
            w = ws;
        if (w > 1000)
            w = 1000;
        struct pollfd pf[2] = {{.fd = r.fd[0], .events = POLLIN}, {.fd = r.fd[1], .events = POLLIN}};
        poll(pf, 2, 0);
        relay_pump(&r);
        im->loss_poll(w, loss_echoed);
        relay_pump(&r);
    }
    uint64_t *v = malloc(count * sizeof *v);
    uint32_t k = 0;
    double sum = 0;
    for (uint32_t i = 0; i < count; i++)
        if (loss_rtt[i]) {
            v[k++] = loss_rtt[i];
            sum += (double)loss_rtt[i];
        }
    qsort(v, k, sizeof *v, bench_cmp_u64);
    double payload = 2.0 * LOSS_PAYLOAD * (double)count;
    printf("loss %s %u %s %.1f %.1f %.1f %.1f %.2f %u\n", im->name, count, model,
           k ? sum / k / 1000.0 : 0, k ? (double)v[k / 2] / 1000.0 : 0,
           k ? (double)v[(size_t)(0.99 * k)] / 1000.0 : 0, k ? (double)v[k - 1] / 1000.0 : 0,
           (double)r.wire_bytes / payload, count - k);
    fflush(stdout);
    free(v);
    free(loss_rtt);
    im->loss_close();
    close(r.fd[0]);
    close(r.fd[1]);
    free(r.q);
}

static const struct bench_impl *find(const struct bench_impl *impls, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(impls[i].name, name) == 0)
            return &impls[i];
    return NULL;
}

int bench_main(int argc, char **argv, const struct bench_impl *impls, size_t n)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: %s pingpong|stream IMPL[,IMPL2] [SIZE...] | loss IMPL [COUNT [MODEL]]\n",
                argv[0]);
        return 2;
    }
    /* IMPL,IMPL2: two implementations side by side (both pairable). */
    const struct bench_impl *im[2];
    int k = 0;
    char names[256];
    snprintf(names, sizeof names, "%s", argv[2]);
    for (char *save = NULL, *t = strtok_r(names, ",", &save); t && k < 2;
         t = strtok_r(NULL, ",", &save)) {
        if ((im[k] = find(impls, n, t)) == NULL) {
            fprintf(stderr, "%s: unknown implementation %s\n", argv[0], t);
            return 2;
        }
        k++;
    }
    if (k == 0 || (k == 2 && !(im[0]->pairable && im[1]->pairable))) {
        fprintf(stderr, "%s: %s cannot run side by side\n", argv[0], argv[2]);
        return 2;
    }
    size_t sizes[64], ns = 0;
    for (int i = 3; i < argc && ns < 64; i++)
        sizes[ns++] = (size_t)strtoull(argv[i], NULL, 10);
    if (strcmp(argv[1], "pingpong") == 0) {
        if (ns == 0) {
            ns = sizeof default_sizes / sizeof default_sizes[0];
            memcpy(sizes, default_sizes, sizeof default_sizes);
        }
        pingpong(im, k, sizes, ns);
    } else if (strcmp(argv[1], "stream") == 0 && im[0]->st_step != NULL &&
               im[k - 1]->st_step != NULL) {
        stream(im, k, sizes, ns);
    } else if (strcmp(argv[1], "loss") == 0 && k == 1) {
        loss(im[0], argc > 3 ? (uint32_t)atoi(argv[3]) : 1000, argc > 4 ? argv[4] : "issue");
    } else {
        return 2;
    }
    return 0;
}
