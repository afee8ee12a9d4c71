/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the tests that run the stack against the Linux kernel: a
 * private network namespace, shell commands, child processes, and a loop
 * that drives a stack on a TAP interface until a child exits.
 *
 * The namespace is anonymous: unshare(CLONE_NEWNET) moves the calling
 * (forked) test process into a new one, which disappears with the last
 * process in it, together with every interface made inside, whatever way
 * the test ends (pass, failure, skip, timeout, signal).  Children spawned
 * here die with the test process (PR_SET_PDEATHSIG), so none keeps the
 * namespace alive.  Names of interfaces need not be unique: each test has
 * its own namespace.
 */
#ifndef ZBUF_STACK_TEST_NETNS_H
#define ZBUF_STACK_TEST_NETNS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <zbuf/ip.h>

/* Move this test process into a new network namespace with lo up, or skip
 * the test saying why (not root, no /dev/net/tun, no iproute2, python3
 * missing when `need_python`, namespaces refused). */
void zt_netns_enter_or_skip(bool need_python);
/* Run a shell command (printf format); its exit status, -1 if it died. */
int zt_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Start `/bin/sh -c cmd` as a child that dies with this process. */
pid_t zt_spawn(const char *cmd);
/* Wait until a kernel TCP socket listens on `port` (a server just
 * spawned: on a loaded machine its start can take seconds), at most
 * `limit_s` seconds (then the test fails). */
void zt_wait_listening(uint16_t port, int limit_s);
/* Monotonic milliseconds. */
uint64_t zt_mono_ms(void);
/* Address the kernel side of TAP `dev` with `cidr` and bring it up (no
 * IPv6, so that its router solicitations do not disturb counters). */
void zt_tap_kernel_side_up(const char *dev, const char *cidr);
/* Poll stack `s` (TAP interface `nif`) until child `pid` exits (returns its
 * exit status) or `limit_s` seconds pass (kills it, returns -1); then 300
 * ms more for the last segments.  `tick`, if not NULL, runs after every
 * poll with `arg`. */
int zt_run_stack_until_exit(zbuf_ip_stack_t *s, zbuf_ip_netif_t *nif, pid_t pid, int limit_s,
                            void (*tick)(void *), void *arg);

#endif
