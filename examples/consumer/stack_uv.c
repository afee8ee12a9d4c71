/* SPDX-License-Identifier: MIT */
/*
 * A program outside the libzbuf tree that links one adapter only,
 * zbuf-stack-uv, found through find_package(zbuf) (target zbuf::stack_uv)
 * or pkg-config (zbuf-stack-uv): two zbuf TCP/IP stacks joined by an
 * in-memory link, both driven by one libuv loop; stack A pings stack B and
 * the loop ends by itself once the reply is in.  Run from an installed
 * prefix with no LD_LIBRARY_PATH, it proves that the adapter finds the
 * libraries it depends on (libzbuf-stack, libzbuf) by itself.
 */
#include <stdio.h>
#include <uv.h>
#include <zbuf/ip_uv.h>

static zbuf_ip_uv_t *uv_a, *uv_b;
static int replies;

static void on_reply(void *arg, uint32_t from, uint16_t id, uint16_t seq, zbuf_t *data)
{
    (void)arg;
    printf("ping reply from %u.%u.%u.%u id %u seq %u, %zu bytes\n", from >> 24,
           from >> 16 & 255, from >> 8 & 255, from & 255, id, seq, zbuf_length(data));
    zbuf_delete(data);
    replies++;
    zbuf_ip_uv_close(uv_a, NULL, NULL); /* uv_run returns once both are closed */
    zbuf_ip_uv_close(uv_b, NULL, NULL);
}

static int stacks(void)
{
    uv_loop_t *loop = uv_default_loop();
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.ping_reply = on_reply;
    zbuf_ip_stack_t *a, *b;
    zbuf_ip_link_t *link;
    zbuf_ip_netif_config_t na = {.mac = {2, 0, 0, 0, 0, 1}, .addr = ZBUF_IP_ADDR(192, 0, 2, 1),
                                 .prefix_len = 24};
    zbuf_ip_netif_config_t nb = {.mac = {2, 0, 0, 0, 0, 2}, .addr = ZBUF_IP_ADDR(192, 0, 2, 2),
                                 .prefix_len = 24};
    int rc;
    if ((rc = zbuf_ip_stack_create(&cfg, &a)) || (rc = zbuf_ip_stack_create(NULL, &b)) ||
        (rc = zbuf_ip_link_create(NULL, &link)) ||
        (rc = zbuf_ip_link_attach(link, 0, a, &na, NULL)) ||
        (rc = zbuf_ip_link_attach(link, 1, b, &nb, NULL)) ||
        (rc = zbuf_ip_uv_attach(loop, a, &uv_a)) || (rc = zbuf_ip_uv_attach(loop, b, &uv_b)) ||
        (rc = zbuf_ip_ping(a, ZBUF_IP_ADDR(192, 0, 2, 2), 1, 1, NULL))) {
        fprintf(stderr, "stack: %s\n", zbuf_strerror(rc));
        return 1;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    zbuf_ip_link_delete(link);
    zbuf_ip_stack_delete(a);
    zbuf_ip_stack_delete(b);
    return replies == 1 && uv_loop_close(loop) == 0 ? 0 : 1;
}

int main(void)
{
    return stacks();
}
