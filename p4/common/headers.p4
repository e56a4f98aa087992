/* -*- P4_16 -*- */
/*
 * cclab: headers and constants shared by the v1model (BMv2) and TNA (Tofino)
 * bottleneck programs.  snake_case fields, no architecture types here.
 */
#ifndef CCLAB_COMMON_HEADERS_P4
#define CCLAB_COMMON_HEADERS_P4

/*************************************************************************
 *  C O N S T A N T S  A N D  T Y P E S
 *************************************************************************/

const bit<16> ETHERTYPE_IPV4 = 16w0x0800;
const bit<8>  IP_PROTO_TCP   = 8w6;
const bit<8>  IP_PROTO_UDP   = 8w17;
const bit<4>  IPV4_VERSION   = 4w4;
const bit<4>  IPV4_IHL_MIN   = 4w5;      /* 32-bit words: no options */

/* Per-flow counter slots.  Index 0 is the fallback for traffic no spec
 * declared (iperf3's control connections, ICMP, ...); the controller gives
 * declared flows 1..FLOW_SLOTS-1. */
const bit<32> FLOW_SLOTS     = 32w1024;
const bit<32> FALLBACK_FLOW  = 32w0;
/* Routes the controller installs (one per host, one per far-side prefix). */
const bit<32> IPV4_ROUTES    = 32w1024;
/* Queue-depth histogram buckets (packets); deeper queues land in the last one. */
const bit<32> QDEPTH_SLOTS   = 32w1024;

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<32> flow_index_t;

/*************************************************************************
 *  H E A D E R S
 *************************************************************************/

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<8>      diffserv;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

/* IPv4 options (IHL 6..15: up to 40 bytes), carried through as they came. */
header ipv4_options_t {
    varbit<320> options;
}

/* The first four bytes of TCP and UDP alike: all the 5-tuple needs. */
header l4_ports_t {
    bit<16> src_port;
    bit<16> dst_port;
}

struct headers_t {
    ethernet_t     ethernet;
    ipv4_t         ipv4;
    ipv4_options_t ipv4_options;
    l4_ports_t     l4;
}

#endif  /* CCLAB_COMMON_HEADERS_P4 */
