/* SPDX-License-Identifier: MIT */
/*
 * A program outside the libzbuf tree: it finds the installed library through
 * CMake's find_package(zbuf) or through pkg-config, and proves it links by
 * sharing one buffer between two zbufs.
 */
#include <stdio.h>
#include <zbuf/zbuf.h>

int main(void)
{
    static char hello[] = "hello from an installed libzbuf";
    zbuf_t *a, *b;
    int rc;

    if ((rc = zbuf_create(&a)) < 0 ||
        (rc = zbuf_append_buf(a, hello, sizeof hello - 1, NULL, NULL)) < 0 ||
        (rc = zbuf_dup(a, 6, ZBUF_TO_END, &b)) < 0) {
        fprintf(stderr, "consumer: %s\n", zbuf_strerror(rc));
        return 1;
    }
    printf("libzbuf %u.%u.%u, allocator %s: \"%.*s\" shares the bytes of \"%s\"\n",
           zbuf_version() / 10000, zbuf_version() / 100 % 100, zbuf_version() % 100,
           zbuf_default_allocator_name(),
           (int)zbuf_seg_length(b, zbuf_seg_first(b)),
           (const char *)zbuf_seg_data(b, zbuf_seg_first(b)), hello);
    zbuf_delete(b);
    zbuf_delete(a);
    return 0;
}
