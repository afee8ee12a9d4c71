/* SPDX-License-Identifier: MIT */
/*
 * A program outside the libzbuf tree written against the VxWorks names, as a
 * ported VxWorks program is: one include, <zbuf/vxworks.h>, and one
 * component, zbuf-vxworks, found through find_package(zbuf) (target
 * zbuf::vxworks) or pkg-config (zbuf-vxworks).  It enrolls a buffer with a
 * free routine (zbufLib), sends a share of it over a socketpair
 * (zbufSockLib) and checks that the free routine ran once.  Run from an
 * installed prefix with no LD_LIBRARY_PATH, it proves that the component
 * finds zbuf-sock and libzbuf by itself.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zbuf/vxworks.h>

static int freed;

static void free_rtn(caddr_t buf, int arg)
{
    (void)buf;
    freed += arg;
}

int main(void)
{
    static char msg[] = "sent by reference through zbufSockSend";
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    ZBUF_ID z = zbufCreate();
    if (z == NULL || zbufInsertBuf(z, NULL, 0, msg, sizeof msg, free_rtn, 1) == NULL) {
        perror("zbufLib");
        return 1;
    }
    ZBUF_ID share = zbufDup(z, NULL, 0, -1); /* shares the bytes, no copy */
    zbufDelete(z);
    int n = share != NULL ? zbufSockSend(sv[0], share, sizeof msg, 0) : ERROR; /* consumes */
    char got[64] = "";
    ssize_t r = read(sv[1], got, sizeof got);
    close(sv[0]);
    close(sv[1]);
    printf("zbufSockSend: sent %d, read \"%s\", free routine ran %d time(s)\n", n,
           r > 0 ? got : "", freed);
    return n == (int)sizeof msg && r == n && strcmp(got, msg) == 0 && freed == 1 ? 0 : 1;
}
