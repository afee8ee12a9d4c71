/* SPDX-License-Identifier: MIT */
/* Network namespaces for the packet tests: see nsutil.h. */
#define _GNU_SOURCE
#include "nsutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

void zpt_enter(int nsfd)
{
    if (setns(nsfd, CLONE_NEWNET) != 0) {
        perror("setns");
        abort();
    }
}

static int self_ns(void)
{
    return open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
}

int zpt_sh(int nsfd, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int here = self_ns();
    zpt_enter(nsfd);
    int rc = system(cmd);
    zpt_enter(here);
    close(here);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

pid_t zpt_spawn(int nsfd, const char *cmd)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        zpt_enter(nsfd);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void read_mac(const char *ifname, uint8_t mac[6])
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
    if (fd >= 0 && ioctl(fd, SIOCGIFHWADDR, &ifr) == 0)
        memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
    if (fd >= 0)
        close(fd);
}

const char *zpt_pair_up(struct zpt_ns *ns)
{
    if (geteuid() != 0)
        return "needs root (CAP_NET_ADMIN for namespaces and veth, CAP_NET_RAW for AF_PACKET)";
    if (system("command -v ip >/dev/null") != 0)
        return "iproute2 (ip) is not installed";
    if (unshare(CLONE_NEWNET) != 0)
        return "cannot create a network namespace (unshare CLONE_NEWNET refused)";
    ns->a = self_ns();
    if (unshare(CLONE_NEWNET) != 0)
        return "cannot create a second network namespace";
    ns->b = self_ns();
    /* A process parked in B, so that `ip` can name B by pid. */
    int pfd[2];
    if (pipe(pfd) != 0)
        return "pipe failed";
    pid_t park = fork();
    if (park == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(pfd[1]);
        char c;
        while (read(pfd[0], &c, 1) < 0 && errno == EINTR)
            ;
        _exit(0);
    }
    close(pfd[0]);
    zpt_enter(ns->a);
    int rc = system("ip link set lo up");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ip link add v0 type veth peer name v1 netns %d 2>/dev/null", (int)park);
    rc = system(cmd);
    close(pfd[1]);
    waitpid(park, NULL, 0);
    if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
        return "cannot create a veth pair (CONFIG_VETH)";
    zpt_sh(ns->a, "sysctl -qw net.ipv6.conf.all.disable_ipv6=1; ip link set v0 up");
    zpt_sh(ns->b, "sysctl -qw net.ipv6.conf.all.disable_ipv6=1; ip link set lo up; ip link set v1 up");
    read_mac("v0", ns->mac0);
    zpt_enter(ns->b);
    read_mac("v1", ns->mac1);
    zpt_enter(ns->a);
    int s = socket(AF_PACKET, SOCK_RAW, 0);
    if (s < 0)
        return "AF_PACKET sockets are not available (CONFIG_PACKET)";
    close(s);
    return NULL;
}

int zpt_raw_socket(int nsfd, const char *ifname, uint16_t proto)
{
    int here = self_ns();
    zpt_enter(nsfd);
    int s = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(proto));
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(proto),
                              .sll_ifindex = (int)if_nametoindex(ifname)};
    if (s >= 0 && bind(s, (struct sockaddr *)&sll, sizeof sll) != 0) {
        close(s);
        s = -1;
    }
    zpt_enter(here);
    close(here);
    return s;
}
