/* SPDX-License-Identifier: MIT */
/*
 * The options zbuf_blaster and zbuf_blastee share, parsed one way:
 *   -s size  -b sockbuf  -t seconds  -i interval  -m mode  -C cc  -q
 * and the one that names a file: the blastee's -p portfile, the blaster's
 * -f file.
 */
#ifndef ZBUF_BLAST_OPTS_H
#define ZBUF_BLAST_OPTS_H

#include <stdbool.h>
#include <stddef.h>

struct blast_opts {
    size_t size;        /* -s: message (or read) size in bytes */
    int sockbuf;        /* -b: SO_SNDBUF / SO_RCVBUF, 0 the kernel's default */
    double seconds;     /* -t: how long to run (0: no limit) */
    double interval;    /* -i: seconds between progress lines */
    const char *mode;   /* -m */
    const char *cc;     /* -C: TCP congestion control of the socket (NULL: the system's) */
    const char *path;   /* the option named path_opt */
    bool quiet;         /* -q: no progress lines, only the result line */
};

/* Parse the options of argv into o, which holds the defaults; path_opt is
 * the letter of the option that names a file.  An unknown option calls
 * usage(), which does not return.  Returns the index of the first operand. */
int blast_parse(int argc, char **argv, char path_opt, struct blast_opts *o,
                void (*usage)(void));

#endif
