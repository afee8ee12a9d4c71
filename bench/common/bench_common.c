/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* RUSAGE_THREAD, program_invocation_short_name */
#include "bench_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double rusage_s(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

double bench_cpu_s(void)
{
    return rusage_s(RUSAGE_SELF);
}

double bench_thread_cpu_s(void)
{
    return rusage_s(RUSAGE_THREAD);
}

long bench_waits(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_nvcsw;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bench_die(const char *what, int err)
{
    fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
            strerror(err < 0 ? -err : err));
    exit(1);
}

void bench_write_ports(const int *fds, unsigned n, const char *path)
{
    if (path == NULL)
        return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        bench_die(tmp, errno);
    for (unsigned i = 0; i < n; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(fds[i], (struct sockaddr *)&ss, &sl) != 0)
            bench_die("getsockname", errno);
        /* sin_port and sin6_port sit at the same offset. */
        fprintf(f, "%s%u", i ? "," : "", ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
    if (fputc('\n', f) == EOF || fclose(f) != 0 || rename(tmp, path) != 0)
        bench_die(path, errno);
}

void bench_write_port(int fd, const char *path)
{
    bench_write_ports(&fd, 1, path);
}

int bench_tcp_cc(int fd, const char *cc)
{
    if (cc == NULL || *cc == '\0')
        return 0;
    return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) == 0 ? 0 : errno;
}

void bench_tcp_cc_or_die(int fd, const char *cc)
{
    int e = bench_tcp_cc(fd, cc);
    if (e != 0) {
        char what[64];
        snprintf(what, sizeof what, "TCP congestion control %s", cc);
        bench_die(what, e);
    }
}
