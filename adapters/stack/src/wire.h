/* SPDX-License-Identifier: MIT */
/*
 * The wire formats the stack speaks, named once: header sizes, type and
 * protocol numbers, flag bits, TCP option kinds, and big-endian accessors
 * for header bytes.  Private to the stack and its drivers (the packet-ring
 * driver includes it too); field offsets inside a header stay where the
 * header is built or parsed, next to the RFC's picture of it.
 */
#ifndef ZBUF_IP_WIRE_H
#define ZBUF_IP_WIRE_H

#include <stdint.h>

/* ------------------------------------------------------------- Ethernet */

#define ETH_ALEN 6               /* bytes of a hardware address */
#define ETH_HLEN 14              /* destination, source, type */
#define ETH_ZLEN 60              /* shortest frame, without the FCS (shorter ones are padded) */
#define ETH_VLAN_LEN 4           /* an 802.1Q tag a frame may carry */
#define ETH_TYPE_IP 0x0800
#define ETH_TYPE_ARP 0x0806

/* ------------------------------------------------------- ARP (RFC 826) */

#define ARP_LEN 28               /* an Ethernet/IPv4 ARP packet */
#define ARP_HTYPE_ETHER 1
#define ARP_OP_REQUEST 1
#define ARP_OP_REPLY 2

/* --------------------------------------------------------- IPv4 (RFC 791) */

#define IP_HLEN 20               /* header without options */
#define IP_HLEN_MAX 60           /* with the most options */
#define IP_VERSION 4
#define IP_VHL (IP_VERSION << 4 | IP_HLEN / 4) /* first byte of a header without options */
#define IP_DF 0x4000             /* don't fragment */
#define IP_MF 0x2000             /* more fragments */
#define IP_OFFMASK 0x1fff        /* fragment offset, in 8-byte units */
#define IP_FRAG_BITS (IP_MF | IP_OFFMASK) /* nonzero: a fragment */
#define IP_MAX_DATAGRAM 65535u   /* largest total length */
#define IP_MIN_MTU 576           /* every host takes datagrams this large (RFC 791) */
#define IP_BROADCAST 0xffffffffu /* the limited broadcast */
#define IP_PROTO_ICMP 1
#define IP_PROTO_TCP 6
#define IP_PROTO_UDP 17

/* The MTU of an interface configured with 0, and of a path we know nothing
 * about: Ethernet's. */
#define ZBUF_IP__MTU_DEFAULT 1500

/* ------------------------------------------------------ ICMP (RFC 792) */

#define ICMP_HLEN 8
#define ICMP_ECHO_REPLY 0
#define ICMP_DEST_UNREACH 3
#define ICMP_SOURCE_QUENCH 4
#define ICMP_ECHO 8
#define ICMP_TIME_EXCEEDED 11
#define ICMP_PARAM_PROBLEM 12
/* Codes of destination unreachable. */
#define ICMP_UNREACH_NET 0
#define ICMP_UNREACH_HOST 1
#define ICMP_UNREACH_PROTO 2
#define ICMP_UNREACH_PORT 3
#define ICMP_UNREACH_NEEDFRAG 4  /* fragmentation needed and DF set (RFC 1191) */
/* Code of time exceeded. */
#define ICMP_EXC_FRAGTIME 1      /* fragment reassembly time exceeded */
/* Bytes of the offending datagram's payload an error quotes at least. */
#define ICMP_QUOTE_PAYLOAD 8

/* Dynamic ports (RFC 6335), where ephemeral ports are taken from. */
#define PORT_DYNAMIC_MIN 49152
#define PORT_DYNAMIC_COUNT 16384

/* ------------------------------------------------------- UDP (RFC 768) */

#define UDP_HLEN 8
#define UDP_CSUM_OFF 6           /* offset of the checksum field */

/* ------------------------------------------------------ TCP (RFC 9293) */

#define TCP_HLEN 20              /* header without options */
#define TCP_CSUM_OFF 16          /* offset of the checksum field */
#define TCP_OPT_MAX 40           /* option bytes a header holds at most */

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_PSH 0x08
#define TCP_ACK 0x10
#define TCP_URG 0x20
#define TCP_FLAGS 0x3f           /* the flags above (ECN bits are ignored) */

/* Option kinds and their lengths. */
#define TCP_OPT_EOL 0
#define TCP_OPT_NOP 1
#define TCP_OPT_MSS 2            /* RFC 9293 */
#define TCP_OPT_MSS_LEN 4
#define TCP_OPT_WSCALE 3         /* RFC 7323 */
#define TCP_OPT_WSCALE_LEN 3
#define TCP_OPT_SACK_PERM 4      /* RFC 2018 */
#define TCP_OPT_SACK_PERM_LEN 2
#define TCP_OPT_SACK 5           /* RFC 2018: 2 + 8 bytes per block */
#define TCP_OPT_SACK_BLOCK 8
#define TCP_OPT_TS 8             /* RFC 7323 */
#define TCP_OPT_TS_LEN 10
#define TCP_OPT_TS_SPACE 12      /* what timestamps take of every segment, with
                                    their two bytes of padding (RFC 7323 app. A) */
#define TCP_SACK_BLOCKS_MAX 4    /* what 40 option bytes hold */

/* ------------------------------------------------- big-endian accessors */

/* Headers are written into fresh header segments and read from peeked
 * header bytes. */
static inline uint16_t get16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}
static inline uint32_t get32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

#endif
