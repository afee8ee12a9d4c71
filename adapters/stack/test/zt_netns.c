/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "zt_netns.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int zt_sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void zt_netns_enter_or_skip(bool need_python)
{
    if (geteuid() != 0)
        cr_skip_test("needs root (CAP_NET_ADMIN) for a namespace and a TAP device");
    if (access("/dev/net/tun", R_OK | W_OK) != 0)
        cr_skip_test("/dev/net/tun is not available");
    if (zt_sh("command -v ip >/dev/null 2>&1") != 0)
        cr_skip_test("iproute2 (ip) is missing");
    if (need_python && zt_sh("command -v python3 >/dev/null 2>&1") != 0)
        cr_skip_test("python3 is missing");
    if (unshare(CLONE_NEWNET) != 0)
        cr_skip_test("unshare(CLONE_NEWNET): %s", strerror(errno));
    cr_assert_eq(zt_sh("ip link set lo up"), 0);
}

pid_t zt_spawn(const char *cmd)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* Die with the test process (a timeout kills it with SIGKILL): a
         * child left behind would keep the namespace alive. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

uint64_t zt_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void zt_wait_listening(uint16_t port, int limit_s)
{
    uint64_t end = zt_mono_ms() + (uint64_t)limit_s * 1000;
    while (zt_sh("ss -Hltn 'sport = :%u' | grep -q .", port) != 0) {
        cr_assert_lt(zt_mono_ms(), end, "nothing listens on port %u after %d s", port, limit_s);
        usleep(20 * 1000);
    }
}

void zt_tap_kernel_side_up(const char *dev, const char *cidr)
{
    cr_assert_eq(zt_sh("ip addr add %s dev %s && ip link set %s up", cidr, dev, dev), 0);
    zt_sh("sysctl -qw net.ipv6.conf.%s.disable_ipv6=1 2>/dev/null", dev);
}

int zt_run_stack_until_exit(zbuf_ip_stack_t *s, zbuf_ip_netif_t *nif, pid_t pid, int limit_s,
                            void (*tick)(void *), void *arg)
{
    struct pollfd pfd = {.fd = zbuf_ip_tap_fd(nif), .events = POLLIN};
    uint64_t end = zt_mono_ms() + (uint64_t)limit_s * 1000;
    int status;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (zt_mono_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        uint64_t d = zbuf_ip_next_deadline(s), now = zbuf_ip_now(s);
        int timeout = d <= now ? 0 : (d - now > 10 ? 10 : (int)(d - now));
        poll(&pfd, 1, timeout);
        zbuf_ip_poll(s);
        if (tick)
            tick(arg);
    }
    /* A little more for the last segments (FIN/ACK) to go. */
    for (uint64_t t = zt_mono_ms() + 300; zt_mono_ms() < t;) {
        poll(&pfd, 1, 5);
        zbuf_ip_poll(s);
        if (tick)
            tick(arg);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
