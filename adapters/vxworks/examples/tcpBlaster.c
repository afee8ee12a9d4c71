/* SPDX-License-Identifier: MIT */
/* tcpBlaster.c - TCP blaster, with or without zbuf sockets */

/*
 * A 1995-style VxWorks program written against zbufSockLib, as in the
 * article that introduced zbufs: it sends the same buffer over and over, by
 * write() or by duplicating a master zbuf for each zbufSockSend().  Under
 * VxWorks it began with
 *
 *     #include "vxWorks.h"
 *     #include "sockLib.h"
 *     #include "inetLib.h"
 *     #include "zbufSockLib.h"
 *
 * On Linux only those lines change, to <zbuf/vxworks.h> and the standard
 * socket headers.  The main() at the end stands in for the VxWorks shell
 * command  -> blaster "127.0.0.1", 7000, 16384, 49152, 1
 */

#include <zbuf/vxworks.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* forward declarations */

STATUS blaster (char *targetAddr, int port, int size, int blen, int zbufMode);

int blasterStop;		/* set to stop the blaster */

/*******************************************************************************
*
* blaster - send a buffer over and over to a blastee
*
* RETURNS: OK, or ERROR if the connection could not be made.
*/

STATUS blaster
    (
    char *	targetAddr,	/* internet address of the blastee */
    int		port,		/* its port */
    int		size,		/* bytes per send */
    int		blen,		/* socket send buffer size */
    int		zbufMode	/* TRUE: zbuf sockets, FALSE: BSD sockets */
    )
    {
    struct sockaddr_in	sin;
    int			sFd;
    char *		buffer;
    ZBUF_ID		zbufSave = NULL;
    ZBUF_ID		zbufSend;

    if ((buffer = (char *) malloc (size)) == NULL)
	{
	printf ("cannot allocate buffer of size %d\n", size);
	return (ERROR);
	}
    memset (buffer, 'b', size);

    if ((sFd = socket (AF_INET, SOCK_STREAM, 0)) < 0)
	{
	printf ("cannot open socket\n");
	free (buffer);
	return (ERROR);
	}

    memset ((char *) &sin, 0, sizeof (sin));
    sin.sin_family	= AF_INET;
    sin.sin_port	= htons (port);
    sin.sin_addr.s_addr	= inet_addr (targetAddr);

    if (setsockopt (sFd, SOL_SOCKET, SO_SNDBUF, (char *) &blen,
		    sizeof (blen)) < 0)
	printf ("setsockopt SO_SNDBUF failed\n");

    if (connect (sFd, (struct sockaddr *) &sin, sizeof (sin)) < 0)
	{
	printf ("connect failed\n");
	close (sFd);
	free (buffer);
	return (ERROR);
	}

    if (zbufMode)
	{
	/* one master zbuf holds the buffer; each send shares it */

	zbufSave = zbufCreate ();
	if (zbufInsertBuf (zbufSave, NULL, 0, buffer, size, NULL, 0) == NULL)
	    {
	    printf ("zbufInsertBuf failed\n");
	    return (ERROR);
	    }
	}

    blasterStop = 0;
    while (!blasterStop)
	{
	if (zbufMode)
	    {
	    if ((zbufSend = zbufDup (zbufSave, NULL, 0, size)) == NULL)
		{
		printf ("zbufDup failed\n");
		break;
		}
	    if (zbufSockSend (sFd, zbufSend, size, 0) < size)
		{
		printf ("zbufSockSend failed\n");
		break;
		}
	    }
	else
	    {
	    if (write (sFd, buffer, size) < size)
		{
		printf ("write failed\n");
		break;
		}
	    }
	}

    close (sFd);
    if (zbufSave != NULL)
	zbufDelete (zbufSave);
    free (buffer);
    printf ("blaster exit.\n");
    return (OK);
    }

/* Linux stand-in for the shell: tcpBlaster addr port size blen zbuf secs */

static void stopBlaster (int sig)
    {
    (void) sig;
    blasterStop = 1;
    }

int main (int argc, char **argv)
    {
    if (argc != 7)
	{
	printf ("usage: tcpBlaster addr port size blen zbuf(0|1) seconds\n");
	return (2);
	}
    signal (SIGALRM, stopBlaster);
    signal (SIGPIPE, SIG_IGN);
    alarm (atoi (argv[6]));
    return (blaster (argv[1], atoi (argv[2]), atoi (argv[3]), atoi (argv[4]),
		     atoi (argv[5])) == OK ? 0 : 1);
    }
