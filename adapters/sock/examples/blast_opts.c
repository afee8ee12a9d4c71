/* SPDX-License-Identifier: MIT */
#include "blast_opts.h"

#include <stdlib.h>
#include <unistd.h>

int blast_parse(int argc, char **argv, char path_opt, struct blast_opts *o,
                void (*usage)(void))
{
    char spec[] = "s:b:t:i:m:C:q?:";
    spec[sizeof spec - 3] = path_opt;
    int opt;
    while ((opt = getopt(argc, argv, spec)) != -1) {
        switch (opt) {
        case 's': o->size = strtoul(optarg, NULL, 0); break;
        case 'b': o->sockbuf = atoi(optarg); break;
        case 't': o->seconds = atof(optarg); break;
        case 'i': o->interval = atof(optarg); break;
        case 'm': o->mode = optarg; break;
        case 'C': o->cc = optarg; break;
        case 'q': o->quiet = true; break;
        default:
            if (opt != path_opt)
                usage();
            o->path = optarg;
        }
    }
    return optind;
}
