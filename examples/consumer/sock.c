/* SPDX-License-Identifier: MIT */
/*
 * A program outside the libzbuf tree that links one adapter only, zbuf-sock,
 * found through find_package(zbuf) (target zbuf::sock) or pkg-config
 * (zbuf-sock): a zbuf-sock handle on one end of a socketpair sends a zbuf to
 * the other end.  Run from an installed prefix with no LD_LIBRARY_PATH, it
 * proves that the adapter finds libzbuf by itself.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zbuf/sock.h>

static int sockets(void)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    static const char msg[] = "sent by reference through zbuf-sock";
    zbuf_sock_t *s;
    zbuf_t *z;
    int rc;
    if ((rc = zbuf_sock_open(sv[0], NULL, &s)) || (rc = zbuf_create(&z)) ||
        (rc = zbuf_append_buf(z, (void *)msg, sizeof msg, NULL, NULL))) {
        fprintf(stderr, "sock: %s\n", zbuf_strerror(rc));
        return 1;
    }
    ssize_t n = zbuf_sock_send(s, z, 0);
    char got[64] = "";
    ssize_t r = read(sv[1], got, sizeof got);
    zbuf_delete(z);
    zbuf_sock_close(s, 1000);
    close(sv[1]);
    printf("socketpair: sent %zd, read \"%s\"\n", n, r > 0 ? got : "");
    return n == (ssize_t)sizeof msg && r == n && strcmp(got, msg) == 0 ? 0 : 1;
}

int main(void)
{
    return sockets();
}
