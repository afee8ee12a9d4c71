/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the benchmark programs and the blaster/blastee examples
 * (bench/, adapters/<name>/bench, adapters/sock/examples): clocks, CPU time,
 * a fatal error exit and the port file a script waits for.  Nothing here is
 * on a measured path; every figure a program prints is the difference of two
 * readings taken outside its loop.
 */
#ifndef ZBUF_BENCH_COMMON_H
#define ZBUF_BENCH_COMMON_H

/* Monotonic wall-clock time, in seconds. */
double bench_now_s(void);
/* CPU time (user + system) of the whole process so far, in seconds. */
double bench_cpu_s(void);
/* CPU time (user + system) of the calling thread so far, in seconds. */
double bench_thread_cpu_s(void);
/* Times this process blocked so far (voluntary context switches). */
long bench_waits(void);
/* The median of the n values of v (n >= 1); sorts v. */
double bench_median(double *v, int n);
/* Print "<program>: <what>: <error>" to stderr and exit(1); err is an errno
 * value, positive or negative. */
_Noreturn void bench_die(const char *what, int err);
/* Write the local port of socket fd, in decimal and a newline, to path,
 * atomically (a temporary file renamed over it), so that a script polling
 * for the file never reads half of it.  Nothing when path is NULL; dies on
 * failure. */
void bench_write_port(int fd, const char *path);
/* The same for n sockets: their ports on one line, separated by commas. */
void bench_write_ports(const int *fds, unsigned n, const char *path);
/* Give the TCP socket fd the congestion control named cc (nothing when cc
 * is NULL or empty), as setsockopt(TCP_CONGESTION) does: 0, or its errno
 * (ENOENT: no such algorithm; EPERM: not allowed to this user).  The
 * benchmarks pin it because BBR paces loopback senders and decides results
 * (docs/benchmarks.md); a listener's setting is inherited by the
 * connections it accepts. */
int bench_tcp_cc(int fd, const char *cc);
/* bench_tcp_cc(), where an error exits:
 * "<program>: TCP congestion control <cc>: <error>". */
void bench_tcp_cc_or_die(int fd, const char *cc);

#endif
