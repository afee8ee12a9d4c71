/* SPDX-License-Identifier: MIT */
/* tcpBlastee.c - TCP blastee, with or without zbuf sockets */

/*
 * The receiving half of tcpBlaster.c, 1995 style: accepts one connection,
 * reads (or zbufSockRecv()s and zbufDelete()s) as fast as it can, and
 * prints the bytes received per second every interval.  Under VxWorks it
 * included "vxWorks.h", "sockLib.h", "zbufSockLib.h" ...; on Linux only
 * those lines change.  main() stands in for the shell command
 *  -> blastee 7000, 16384, 49152, 1
 */

#include <zbuf/vxworks.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* forward declarations */

STATUS blastee (int port, int size, int blen, int zbufMode);

int blasteeStop;		/* set to stop the blastee */

/*******************************************************************************
*
* blastee - receive from a blaster and print the rate
*
* RETURNS: OK, or ERROR if the connection could not be made.
*/

STATUS blastee
    (
    int		port,		/* port to listen on */
    int		size,		/* bytes per receive */
    int		blen,		/* socket receive buffer size */
    int		zbufMode	/* TRUE: zbuf sockets, FALSE: BSD sockets */
    )
    {
    struct sockaddr_in	serverAddr;
    struct sockaddr_in	clientAddr;
    socklen_t		sockAddrSize = sizeof (struct sockaddr_in);
    int			sFd;
    int			newFd;
    char *		buffer;
    int			numRead;
    long		blastNum = 0;
    long		total = 0;
    time_t		lastTick;
    ZBUF_ID		zbufRecv;

    if ((buffer = (char *) malloc (size)) == NULL)
	{
	printf ("cannot allocate buffer of size %d\n", size);
	return (ERROR);
	}

    if ((sFd = socket (AF_INET, SOCK_STREAM, 0)) < 0)
	{
	printf ("cannot open socket\n");
	free (buffer);
	return (ERROR);
	}

    memset ((char *) &serverAddr, 0, sizeof (serverAddr));
    serverAddr.sin_family	= AF_INET;
    serverAddr.sin_port		= htons (port);
    serverAddr.sin_addr.s_addr	= htonl (INADDR_ANY);

    if (setsockopt (sFd, SOL_SOCKET, SO_RCVBUF, (char *) &blen,
		    sizeof (blen)) < 0)
	printf ("setsockopt SO_RCVBUF failed\n");

    if (bind (sFd, (struct sockaddr *) &serverAddr, sizeof (serverAddr)) < 0 ||
	listen (sFd, 1) < 0)
	{
	printf ("bind/listen failed\n");
	close (sFd);
	free (buffer);
	return (ERROR);
	}

    if ((newFd = accept (sFd, (struct sockaddr *) &clientAddr,
			 &sockAddrSize)) < 0)
	{
	printf ("accept failed\n");
	close (sFd);
	free (buffer);
	return (ERROR);
	}

    lastTick = time (NULL);
    blasteeStop = 0;
    while (!blasteeStop)
	{
	if (zbufMode)
	    {
	    numRead = size;
	    if ((zbufRecv = zbufSockRecv (newFd, 0, &numRead)) == NULL)
		break;
	    zbufDelete (zbufRecv);
	    }
	else
	    {
	    if ((numRead = read (newFd, buffer, size)) <= 0)
		break;
	    }

	blastNum += numRead;
	total += numRead;

	if (time (NULL) != lastTick)
	    {
	    printf ("%ld bytes/sec\n", blastNum / (long) (time (NULL) - lastTick));
	    lastTick = time (NULL);
	    blastNum = 0;
	    }
	}

    printf ("blastee exit: %ld bytes\n", total);
    close (newFd);
    close (sFd);
    free (buffer);
    return (OK);
    }

/* Linux stand-in for the shell: tcpBlastee port size blen zbuf(0|1) */

int main (int argc, char **argv)
    {
    if (argc != 5)
	{
	printf ("usage: tcpBlastee port size blen zbuf(0|1)\n");
	return (2);
	}
    setvbuf (stdout, NULL, _IOLBF, 0);
    return (blastee (atoi (argv[1]), atoi (argv[2]), atoi (argv[3]),
		     atoi (argv[4])) == OK ? 0 : 1);
    }
