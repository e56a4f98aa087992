/* -*- P4_16 -*- */
/*
 * cclab bottleneck for BMv2 (simple_switch_grpc, v1model): the data-plane
 * contract of DESIGN.md on one switch port, the "bottleneck port".
 *
 *   ingress:  ipv4_forward (dst prefix -> port, and whether that port is the
 *             bottleneck), flow_stats (exact 5-tuple -> counter index the
 *             controller assigned; index 0 = undeclared traffic), count
 *             `offered` for packets going to the bottleneck port
 *   TM:       BMv2's egress queue of the bottleneck port: rate (packets/s)
 *             and depth (packets) set over Thrift (set_queue_rate/_depth)
 *   egress:   after the queue, as on a lossy link: random loss with
 *             random() against link_loss's threshold, counted by cause
 *             (`random_drops`, `forwarded`); the dequeue depth goes into the
 *             `queue_depth` histogram
 *
 * Queue drops: BMv2 drops in its traffic manager when the queue is full;
 * the program never sees those packets.  Per flow the controller derives
 *     queue drops = offered - forwarded - random_drops - backlog
 * where backlog (packets of the flow still queued) is taken as large as it
 * can be while anything moves -- the queue limit + 2 (one packet in the
 * ingress hand-off, one in egress), and no more than the flow offered in
 * twice the time the full queue takes to drain -- and zero once nothing
 * was offered or sent for that long (a non-empty queue would have sent
 * something).  So a drop is never over-counted while traffic runs (a flow's
 * may be reported late; the link's total is bounded by one queue), and the
 * counts are exact once the queue has drained.  Counters are used, not
 * registers: BMv2's P4Runtime server reads counters but not registers.
 *
 * Bytes are wire bytes: standard_metadata.packet_length, Ethernet header
 * included, no FCS (the kernel target counts the same).
 */
#include <core.p4>
#include <v1model.p4>

#include "../common/headers.p4"

/*************************************************************************
 *  C O N S T A N T S  A N D  T Y P E S
 *************************************************************************/

typedef bit<9>  port_t;
typedef bit<32> loss_threshold_t;   /* P(drop) = threshold / 2^32 */

const bit<32> RANDOM_MAX = 32w0xFFFFFFFF;
const bit<1>  TO_BOTTLENECK = 1w1;

struct metadata_t {
    flow_index_t     flow_index;
    bit<1>           to_bottleneck;
    bit<16>          src_port;
    bit<16>          dst_port;
    loss_threshold_t loss_threshold;
    bit<32>          loss_draw;
    bit<32>          qdepth_slot;
}

/*************************************************************************
 *  P A R S E R
 *************************************************************************/

parser CclabParser(packet_in packet,
                   out headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        /* A flow's packet: IPv4 version 4, a header of 20..60 bytes (IHL 5..15),
         * the first fragment (later ones carry no ports), TCP or UDP.  Anything
         * else keeps hdr.l4 invalid and counts as undeclared traffic. */
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.frag_offset) {
            (IPV4_VERSION, IPV4_IHL_MIN, 13w0): parse_ipv4_proto;
            (IPV4_VERSION, 4w6 &&& 4w0xE, 13w0): parse_ipv4_options;     /* IHL 6, 7 */
            (IPV4_VERSION, 4w8 &&& 4w0x8, 13w0): parse_ipv4_options;     /* IHL 8..15 */
            default: accept;
        }
    }

    state parse_ipv4_options {
        packet.extract(hdr.ipv4_options, ((bit<32>)hdr.ipv4.ihl - (bit<32>)IPV4_IHL_MIN) * 32);
        transition parse_ipv4_proto;
    }

    state parse_ipv4_proto {
        transition select(hdr.ipv4.protocol) {
            IP_PROTO_TCP: parse_l4;
            IP_PROTO_UDP: parse_l4;
            default: accept;
        }
    }

    state parse_l4 {
        packet.extract(hdr.l4);
        transition accept;
    }
}

/*************************************************************************
 *  C H E C K S U M   (nothing is rewritten: nothing to verify or update)
 *************************************************************************/

control CclabVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/*************************************************************************
 *  I N G R E S S
 *************************************************************************/

control CclabIngress(inout headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    /* Packets and wire bytes offered to the bottleneck queue, per flow. */
    counter(FLOW_SLOTS, CounterType.packets_and_bytes) offered;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action forward(port_t port, bit<1> bottleneck) {
        standard_metadata.egress_spec = port;
        meta.to_bottleneck = bottleneck;
    }

    table ipv4_forward {
        key = {
            hdr.ipv4.dst_addr: lpm;
        }
        actions = {
            forward;
            drop;
        }
        size = IPV4_ROUTES;
        default_action = drop();
    }

    action set_flow(flow_index_t index) {
        meta.flow_index = index;
    }

    table flow_stats {
        key = {
            hdr.ipv4.src_addr: exact;
            hdr.ipv4.dst_addr: exact;
            meta.src_port:     exact;
            meta.dst_port:     exact;
            hdr.ipv4.protocol: exact;
        }
        actions = {
            set_flow;
        }
        size = FLOW_SLOTS;
        default_action = set_flow(FALLBACK_FLOW);
    }

    apply {
        if (hdr.ipv4.isValid()) {
            ipv4_forward.apply();
            if (meta.to_bottleneck == TO_BOTTLENECK) {
                if (hdr.l4.isValid()) {
                    meta.src_port = hdr.l4.src_port;
                    meta.dst_port = hdr.l4.dst_port;
                }
                flow_stats.apply();
                offered.count(meta.flow_index);
            }
        } else {
            /* Not IPv4 (ARP is static on the hosts): not forwarded. */
            drop();
        }
    }
}

/*************************************************************************
 *  E G R E S S
 *************************************************************************/

control CclabEgress(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    /* Left the bottleneck: sent on the link. */
    counter(FLOW_SLOTS, CounterType.packets_and_bytes) forwarded;
    /* Lost on the link at random (after the queue). */
    counter(FLOW_SLOTS, CounterType.packets_and_bytes) random_drops;
    /* Histogram of the queue depth (packets) each packet left behind. */
    counter(QDEPTH_SLOTS, CounterType.packets) queue_depth;

    action set_loss(loss_threshold_t threshold) {
        meta.loss_threshold = threshold;
    }

    table link_loss {
        actions = {
            set_loss;
        }
        size = 1;
        default_action = set_loss(0);
    }

    action drop_random() {
        random_drops.count(meta.flow_index);
        mark_to_drop(standard_metadata);
    }

    action pass() {
        forwarded.count(meta.flow_index);
    }

    apply {
        if (hdr.ipv4.isValid()) {
            if (meta.to_bottleneck == TO_BOTTLENECK) {
                meta.qdepth_slot = QDEPTH_SLOTS - 1;
                if ((bit<32>)standard_metadata.deq_qdepth < QDEPTH_SLOTS - 1) {
                    meta.qdepth_slot = (bit<32>)standard_metadata.deq_qdepth;
                }
                queue_depth.count(meta.qdepth_slot);
                link_loss.apply();
                random(meta.loss_draw, 32w0, RANDOM_MAX);
                if (meta.loss_draw < meta.loss_threshold) {
                    drop_random();
                } else {
                    pass();
                }
            }
        }
    }
}

/*************************************************************************
 *  C H E C K S U M   C O M P U T A T I O N
 *************************************************************************/

control CclabComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/*************************************************************************
 *  D E P A R S E R
 *************************************************************************/

control CclabDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_options);
        packet.emit(hdr.l4);
    }
}

/*************************************************************************
 *  S W I T C H
 *************************************************************************/

V1Switch(
    CclabParser(),
    CclabVerifyChecksum(),
    CclabIngress(),
    CclabEgress(),
    CclabComputeChecksum(),
    CclabDeparser()
) main;
