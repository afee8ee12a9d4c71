/* SPDX-License-Identifier: MIT */
/*
 * Version and error names.  libzbuf reports errors as negative errno values
 * (see zbuf/common.h); these names say what each one means *here*, which is
 * more useful to a reader than the C library's generic text.
 */
#define _GNU_SOURCE /* strerrordesc_np */
#include <limits.h>

#include "internal.h"

unsigned zbuf_version(void)
{
    return ZBUF_VERSION_MAJOR * 10000u + ZBUF_VERSION_MINOR * 100u + ZBUF_VERSION_PATCH;
}

const char *zbuf_strerror(int err)
{
    if (err == INT_MIN)
        return "unknown error";
    if (err < 0)
        err = -err;
    switch (err) {
    case 0:
        return "success";
    case EINVAL:
        return "invalid argument (NULL, deleted or foreign handle, or bad value)";
    case ERANGE:
        return "offset or length outside the zbuf or buffer";
    case ENOMEM:
        return "out of memory (nothing was changed)";
    case ENOBUFS:
        return "no buffer available (pool exhausted or kernel buffer limit)";
    case EBUSY:
        return "resource busy (objects still alive)";
    case EAGAIN:
        return "operation would block or needs a copy the caller did not allow";
    case EIO:
        return "I/O error reading a file segment";
    case EOVERFLOW:
        return "size overflow";
    case EFAULT:
        return "zbuf invariant broken (library bug or memory corruption)";
    case EMSGSIZE:
        return "message too long";
    case ECONNRESET:
        return "connection reset by peer";
    case EPIPE:
        return "connection closed for writing";
    case ENOTSUP:
        return "operation not supported here";
    case ETIMEDOUT:
        return "timed out";
    case EPROTO:
        return "protocol error (malformed input)";
    default: {
        /* strerror() may format into a shared buffer; the description table
         * is static and thread-safe. */
        const char *d = strerrordesc_np(err);
        return d ? d : "unknown error";
    }
    }
}
