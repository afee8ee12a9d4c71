/* SPDX-License-Identifier: MIT */
/*
 * io_uring constants newer than the liburing headers of Debian 12
 * (liburing 2.3, kernel headers of 6.1), with the kernel's values.  Each
 * is used only after zbuf_uring_probe() found that the running kernel
 * knows it.
 */
#ifndef ZBUF_URING_COMPAT_H
#define ZBUF_URING_COMPAT_H

#include <liburing.h>

#ifndef IORING_SEND_ZC_REPORT_USAGE
/* sqe->ioprio of SEND_ZC / SENDMSG_ZC: the notification reports copies (6.2). */
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
/* Set in the notification's res when the kernel copied the data (6.2). */
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

#ifndef IORING_RECVSEND_BUNDLE
/* sqe->ioprio of RECV: one completion may fill several ring buffers (6.10). */
#define IORING_RECVSEND_BUNDLE (1U << 4)
#endif

#endif /* ZBUF_URING_COMPAT_H */
