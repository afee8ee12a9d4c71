/* SPDX-License-Identifier: MIT */
/* libFuzzer: one Ethernet frame into a fresh stack, then timers. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zbuf_ip_netif_t *nif;
    zbuf_ip_stack_t *s = fz_stack(&nif);
    size_t split = size ? data[0] % 64 : 0;
    fz_feed(nif, data, size, split);
    fz_now += 5000;
    zbuf_ip_poll(s);
    fz_stack_delete(s);
    return 0;
}
