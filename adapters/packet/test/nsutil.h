/* SPDX-License-Identifier: MIT */
/*
 * Network namespaces for the packet tests: two anonymous namespaces joined
 * by a veth pair (v0 in A, v1 in B).  Anonymous (unshare, no `ip netns`
 * name), so they and the pair vanish with the test process however it
 * ends: a failed assertion, a crash or a SIGKILL leaves nothing behind.
 * The test process is left in A.
 */
#ifndef ZBUF_PACKET_NSUTIL_H
#define ZBUF_PACKET_NSUTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct zpt_ns {
    int a, b;          /* namespace descriptors */
    uint8_t mac0[6];   /* v0's address (in A) */
    uint8_t mac1[6];   /* v1's address (in B) */
};

/* Set up A and B with the veth pair up, IPv6 off (no router solicitations
 * in the way).  Returns NULL, or the reason to skip the test. */
const char *zpt_pair_up(struct zpt_ns *ns);
/* Move this thread into namespace fd. */
void zpt_enter(int nsfd);
/* Run a shell command in namespace fd; its exit status. */
int zpt_sh(int nsfd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Start a shell command in namespace fd; its pid. */
pid_t zpt_spawn(int nsfd, const char *cmd);
/* A plain AF_PACKET socket in namespace fd bound to ifname for proto
 * (host order), non-blocking. */
int zpt_raw_socket(int nsfd, const char *ifname, uint16_t proto);

#endif
