/* SPDX-License-Identifier: MIT */
/*
 * The attacks of issue 10 over TAP: the stack (192.0.2.2, reading into a
 * pool of TAP_POOL buffers) runs the demo's echo services in a network
 * namespace of its own; attack_scapy.py forges frames from the kernel's
 * side of the interface; then the kernel itself checks that the stack
 * answers a ping within a second (ping -W 1) and that a new connection
 * moves 64 KiB through the echo service and back (attack_scapy.py --check).  The ICMP tests use the
 * kernel's own errors: port unreachable from its UDP, and "fragmentation
 * needed" from it routing to a link of MTU 1280.
 *
 * Skipped with the reason without root, namespaces, /dev/net/tun, python3
 * or scapy.  The same classes on the in-memory link: test_hardening.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attack.h"
#include "support.h"
#include "zt_netns.h"

TestSuite(hardening_tap, .init = zt_leak_baseline, .fini = zt_assert_no_leaks, .timeout = 300);

#define TAP "zbh0"
#define STACK_MAC "02:7a:62:75:66:02"
#define STACK_IP ZBUF_IP_ADDR(192, 0, 2, 2)
#define TAP_POOL 512

struct env {
    zbuf_ip_stack_t *s;
    zbuf_ip_netif_t *nif;
    hx_svc_t svc;
};

/* A namespace, the stack on TAP with `prefix` (and gateway 192.0.2.1 when
 * `gateway`), the kernel side at 192.0.2.1/`prefix`, the services up. */
static void env_init(struct env *e, int prefix, bool gateway)
{
    zt_netns_enter_or_skip(true);
    if (zt_sh("/usr/bin/python3 -c 'import importlib.util, sys; "
              "sys.exit(importlib.util.find_spec(\"scapy\") is None)' 2>/dev/null") != 0)
        cr_skip_test("python3-scapy is not installed (scripts/deps.sh installs it)");
    memset(e, 0, sizeof *e);
    cr_assert_eq(zbuf_ip_stack_create(NULL, &e->s), 0);
    zbuf_ip_netif_config_t nc = {.mac = {0x02, 0x7a, 0x62, 0x75, 0x66, 0x02},
                                 .addr = STACK_IP, .prefix_len = (uint8_t)prefix,
                                 .gateway = gateway ? ZBUF_IP_ADDR(192, 0, 2, 1) : 0};
    int rc = zbuf_ip_tap_open(e->s, TAP, &nc, TAP_POOL, &e->nif);
    cr_assert_eq(rc, 0, "tap open: %s", zbuf_strerror(rc));
    char cidr[32];
    snprintf(cidr, sizeof cidr, "192.0.2.1/%d", prefix);
    zt_tap_kernel_side_up(TAP, cidr);
    hx_svc_start(&e->svc, e->s);
}

static void env_fini(struct env *e)
{
    hx_svc_stop(&e->svc);
    zbuf_ip_stack_delete(e->s);
}

static zbuf_ip_stats_t stats(struct env *e)
{
    zbuf_ip_stats_t st;
    zbuf_ip_stats(e->s, &st);
    return st;
}

/* Run attack `cls`, then from the kernel: a ping answered within a second
 * and 64 KiB through the echo service.  `during`, if not NULL, is a
 * command run while the attack runs, which must succeed too. */
static void attack_then_check(struct env *e, const char *cls, const char *during)
{
    char cmd[2048];
    if (during)
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 %s/attack_scapy.py %s " TAP " " STACK_MAC " 192.0.2.2 "
                 "--check >&2 & ( %s ) && wait $!",
                 ZBUF_STACK_TEST_DIR, cls, during);
    else
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 %s/attack_scapy.py %s " TAP " " STACK_MAC " 192.0.2.2 "
                 "--check >&2",
                 ZBUF_STACK_TEST_DIR, cls);
    int rc = zt_run_stack_until_exit(e->s, e->nif, zt_spawn(cmd), 180, NULL, NULL);
    zbuf_ip_stats_t st = stats(e);
    fprintf(stderr,
            "stack after '%s': frames rx %llu tx %llu, no-buffer drops %llu, collapsed %llu "
            "bytes, pruned %llu, cookies %llu (used %llu), bad sources %llu, challenge ACKs "
            "%llu (limited %llu), ARP requests %llu (limited %llu), pending evicted %llu\n",
            cls, (unsigned long long)st.rx_frames, (unsigned long long)st.tx_frames,
            (unsigned long long)st.rx_no_buffer, (unsigned long long)st.rx_collapsed_bytes,
            (unsigned long long)st.tcp_ooo_pruned, (unsigned long long)st.tcp_syncookies_sent,
            (unsigned long long)st.tcp_syncookies_ok, (unsigned long long)st.ip_bad_source,
            (unsigned long long)st.tcp_challenge_acks,
            (unsigned long long)st.tcp_challenge_acks_limited,
            (unsigned long long)st.arp_requests_tx, (unsigned long long)st.arp_requests_limited,
            (unsigned long long)st.arp_pending_evicted);
    cr_assert_eq(rc, 0, "after '%s' the stack did not answer a ping within a second and a new "
                        "connection, or the attack saw what it must not", cls);
    cr_assert_eq(st.rx_no_buffer, 0, "the pool ran dry");
}

Test(hardening_tap, out_of_order_one_byte_segments_cannot_pin_the_pool)
{
    struct env e;
    env_init(&e, 24, false);
    attack_then_check(&e, "ooo", NULL);
    cr_assert_gt(stats(&e).rx_collapses, 0);
    env_fini(&e);
}

Test(hardening_tap, zero_window_echo_fed_one_byte_segments_cannot_pin_the_pool)
{
    struct env e;
    env_init(&e, 24, false);
    attack_then_check(&e, "zerowin", NULL);
    cr_assert_gt(stats(&e).rx_collapses, 0);
    env_fini(&e);
}

Test(hardening_tap, syn_flood_from_spoofed_sources_leaves_the_port_open)
{
    struct env e;
    env_init(&e, 24, false);
    attack_then_check(&e, "synflood", NULL);
    zbuf_ip_stats_t st = stats(&e);
    cr_assert_gt(st.tcp_syncookies_sent, 0);
    cr_assert_geq(st.tcp_syncookies_ok, 1, "the kernel's connection came through a cookie");
    env_fini(&e);
}

Test(hardening_tap, unresolvable_neighbours_never_evict_one_in_use)
{
    struct env e;
    env_init(&e, 24, false);
    /* While the attack runs, three of the kernel's pings, each answered. */
    attack_then_check(&e, "neigh",
                      "sleep 0.5; ping -c 3 -i 0.8 -W 1 192.0.2.2 | grep -q ' 0% packet loss'");
    cr_assert_gt(stats(&e).arp_pending_evicted, 0);
    env_fini(&e);
}

Test(hardening_tap, datagrams_from_impossible_sources_or_to_broadcasts_get_no_answer)
{
    struct env e;
    env_init(&e, 24, false);
    attack_then_check(&e, "martian", NULL);
    zbuf_ip_stats_t st = stats(&e);
    cr_assert_geq(st.ip_bad_source, 32);
    cr_assert_eq(st.ip_l2_bcast_drops, 1);
    cr_assert_eq(st.udp_bcast_drops, 1);
    env_fini(&e);
}

Test(hardening_tap, syns_from_our_own_address_fill_nothing)
{
    struct env e;
    env_init(&e, 24, false);
    attack_then_check(&e, "land", NULL);
    cr_assert_geq(stats(&e).ip_bad_source, 70);
    env_fini(&e);
}

Test(hardening_tap, one_connection_cannot_spend_another_ones_challenge_acks)
{
    struct env e;
    env_init(&e, 24, false);
    attack_then_check(&e, "challenge", NULL);
    cr_assert_gt(stats(&e).tcp_challenge_acks_limited, 250);
    env_fini(&e);
}

Test(hardening_tap, the_window_accepted_is_the_window_advertised)
{
    struct env e;
    env_init(&e, 24, false);
    attack_then_check(&e, "window", NULL);
    env_fini(&e);
}

/* ------------------------------------------------------------ ICMP */

struct uerr {
    int calls, err;
    uint16_t dport;
};

static void on_uerr(void *arg, zbuf_ip_udp_t *u, int err, uint32_t dst, uint16_t dport)
{
    (void)u;
    (void)dst;
    struct uerr *x = arg;
    x->calls++;
    x->err = err;
    x->dport = dport;
}

Test(hardening_tap, the_kernels_port_unreachable_reaches_the_udp_pcb)
{
    struct env e;
    env_init(&e, 24, false);
    zbuf_ip_udp_t *u;
    cr_assert_eq(zbuf_ip_udp_new(e.s, &u), 0);
    struct uerr x = {0};
    zbuf_ip_udp_set_error(u, on_uerr, &x);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "anyone there?", 13), 0);
    cr_assert_eq(zbuf_ip_udp_sendto(u, z, ZBUF_IP_ADDR(192, 0, 2, 1), 9), 0); /* nobody listens */
    zt_run_stack_until_exit(e.s, e.nif, zt_spawn("sleep 1"), 10, NULL, NULL);
    cr_assert_eq(x.calls, 1, "the kernel's ICMP port unreachable did not reach the PCB");
    cr_assert_eq(x.err, -ECONNREFUSED);
    cr_assert_eq(x.dport, 9);
    zbuf_ip_udp_delete(u);
    env_fini(&e);
}

/* The kernel routes between the stack (192.0.2.2/25) and a host in a
 * namespace of its own (192.0.2.130) over a veth whose router side has MTU
 * 1280; that host sends at most 1280-byte packets but announces MSS 1460,
 * so the stack's full-sized segments meet the router, which answers with
 * ICMP "fragmentation needed", MTU 1280.  The transfer completes. */
Test(hardening_tap, the_kernels_fragmentation_needed_lowers_the_path_mtu)
{
    struct env e;
    env_init(&e, 25, true);
    if (zt_sh("command -v nsenter >/dev/null && command -v unshare >/dev/null") != 0)
        cr_skip_test("nsenter or unshare (util-linux) missing");
    pid_t far = zt_spawn("exec unshare -n sleep 300");
    char cmd[1024];
    for (int i = 0; i < 100 && zt_sh("test \"$(readlink /proc/%d/ns/net)\" != \"$(readlink "
                                    "/proc/self/ns/net)\"", (int)far) != 0; i++)
        usleep(20000);
    cr_assert_eq(zt_sh("ip link add zbv0 type veth peer name zbv1 && ip link set zbv1 netns %d "
                       "&& ip addr add 192.0.2.129/25 dev zbv0 && ip link set zbv0 mtu 1280 up "
                       "&& sysctl -qw net.ipv4.ip_forward=1",
                       (int)far), 0);
    cr_assert_eq(zt_sh("nsenter -t %d -n sh -c 'ip link set lo up && ip addr add "
                       "192.0.2.130/25 dev zbv1 && ip link set zbv1 up && ip route add default "
                       "via 192.0.2.129 mtu 1280 advmss 1460'",
                       (int)far), 0);
    snprintf(cmd, sizeof cmd, "nsenter -t %d -n python3 %s/interop_peer.py client 192.0.2.2 7 "
             "4194304 >&2", (int)far, ZBUF_STACK_TEST_DIR);
    int rc = zt_run_stack_until_exit(e.s, e.nif, zt_spawn(cmd), 120, NULL, NULL);
    zbuf_ip_stats_t st = stats(&e);
    fprintf(stderr, "path MTU: %llu reductions, %llu ICMP errors (%llu ignored), %llu "
            "retransmissions\n", (unsigned long long)st.tcp_pmtu_reductions,
            (unsigned long long)st.icmp_errors_rx, (unsigned long long)st.icmp_errors_ignored,
            (unsigned long long)st.tcp_retransmits);
    kill(far, SIGKILL);
    cr_assert_eq(rc, 0, "4 MiB through a 1280-byte link did not come back");
    cr_assert_geq(st.tcp_pmtu_reductions, 1, "no path MTU discovery happened");
    env_fini(&e);
}
