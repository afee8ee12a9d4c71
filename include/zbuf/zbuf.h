/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/zbuf.h
 * @brief Umbrella header: everything of the core library.
 *
 * `#include <zbuf/zbuf.h>` and link with `pkg-config --libs zbuf` or the
 * CMake target `zbuf::zbuf`.  See @ref concepts for the model.
 */
#ifndef ZBUF_ZBUF_H
#define ZBUF_ZBUF_H

#include "common.h"
#include "alloc.h"
#include "buf.h"
#include "pool.h"
#include "core.h"
#include "cursor.h"
#include "stats.h"

#endif /* ZBUF_ZBUF_H */
