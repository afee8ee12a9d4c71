/* SPDX-License-Identifier: MIT */
/*
 * Private to zbuf-vxworks (vxworks_sock.c) and to the VxWorks routines of
 * zbuf-uring (adapters/uring/vx.c, which builds on zbuf-vxworks): both keep
 * a table of per-socket state indexed by the descriptor, as VxWorks code
 * passes bare descriptors, and grow it the same way.  Not installed.
 */
#ifndef ZBUF_VXWORKS_FDTAB_H
#define ZBUF_VXWORKS_FDTAB_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/*
 * The table tab of *n entries of elem bytes each, grown (doubling, from 64)
 * until it has an entry for descriptor fd, the new entries zeroed.  Returns
 * the table to use from now on and updates *n; NULL when memory runs out, and
 * then tab and *n are unchanged and still valid.  The caller calls it only
 * when fd >= *n.
 */
static inline void *zbuf_vx__fdtab_grow(void *tab, size_t *n, size_t elem, int fd)
{
    size_t m = *n ? *n : 64;
    while (m <= (size_t)fd)
        m *= 2;
    char *t = realloc(tab, m * elem);
    if (t == NULL)
        return NULL;
    memset(t + *n * elem, 0, (m - *n) * elem);
    *n = m;
    return t;
}

#endif
