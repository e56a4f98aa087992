/* -*- P4_16 -*- */
/*
 * Lab 5: a bottleneck link in P4 for BMv2 (v1model), with random loss and
 * per-flow counters.  The switch has two ports; packets towards the
 * bottleneck port cross the emulated link:
 *
 *   ingress:  ipv4_forward (destination -> port, and whether that port is the
 *             bottleneck); flow_stats (the exact 5-tuple -> the counter slot
 *             the controller gave the flow; slot 0 for every other packet);
 *             count `offered`; drop-tail admission against queue_limit, a
 *             refused packet counted in `queue_drops`
 *   TM:       BMv2's queue of the bottleneck port sends at the link's rate
 *   egress:   the packet leaves the queue; random loss: a 32-bit random draw
 *             against link_loss's threshold, round(p * 2^32); counted in
 *             `random_drops` or `forwarded`
 *
 * So for each flow, once the queue is empty:
 *   offered = forwarded + random_drops + queue_drops
 * in packets and in wire bytes (standard_metadata.packet_length: the
 * Ethernet header included, no FCS).
 *
 * cclab's own program, p4/v1model/bottleneck.p4 in the clone, is this one
 * with a RED queue besides; the headers are p4/common/headers.p4 (cclab
 * compiles with p4/common on the include path).
 */
#include <core.p4>
#include <v1model.p4>

#include "headers.p4"

/*************************************************************************
 *  C O N S T A N T S  A N D  T Y P E S
 *************************************************************************/

typedef bit<9>  port_t;
typedef bit<32> loss_threshold_t;   /* P(drop) = threshold / 2^32 */
typedef bit<32> queue_limit_t;

/* A queue limit that never binds (queue_limit's default: no limit). */
const queue_limit_t QUEUE_UNLIMITED = 32w0xFFFFFFFF;
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
    queue_limit_t    limit_pkts;
    queue_limit_t    limit_bytes;
    bit<1>           admitted;
}

/* The queue as the program keeps it: packets and wire bytes admitted and not
 * yet sent.  Ingress admits, egress releases. */
register<bit<32>>(1) queued_pkts;
register<bit<32>>(1) queued_bytes;

/*************************************************************************
 *  P A R S E R
 *************************************************************************/

parser LabParser(packet_in packet,
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
        /* A flow's packet: IPv4, a header of 20..60 bytes, the first fragment
         * (later ones carry no ports), TCP or UDP. */
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

control LabVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/*************************************************************************
 *  I N G R E S S
 *************************************************************************/

control LabIngress(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    /* Packets and wire bytes offered to the bottleneck queue, per flow slot. */
    counter(FLOW_SLOTS, CounterType.packets_and_bytes) offered;
    /* Offered but refused: the queue was full. */
    counter(FLOW_SLOTS, CounterType.packets_and_bytes) queue_drops;

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

    /* The controller adds one entry per declared flow: its 5-tuple -> its
     * counter slot (1, 2, ...).  Every other packet takes the default, slot 0. */
    table flow_stats {
        key = {
            /* TODO: the 5-tuple, each field matched exactly (`field: exact;`), in this
             * order: the IPv4 source address, the IPv4 destination address,
             * meta.src_port, meta.dst_port (the apply block below copies them from
             * the TCP or UDP header), the IPv4 protocol */
        }
        actions = {
            set_flow;
        }
        size = FLOW_SLOTS;
        default_action = set_flow(FALLBACK_FLOW);
    }

    action set_queue_limit(queue_limit_t pkts, queue_limit_t bytes) {
        meta.limit_pkts = pkts;
        meta.limit_bytes = bytes;
    }

    table queue_limit {
        actions = {
            set_queue_limit;
        }
        size = 1;
        default_action = set_queue_limit(QUEUE_UNLIMITED, QUEUE_UNLIMITED);
    }

    /* Drop-tail admission: a packet joins the queue iff the queue holds
     * fewer than limit_pkts packets and its bytes fit in limit_bytes. */
    action enqueue() {
        bit<32> pkts;
        bit<32> bytes;
        queued_pkts.read(pkts, 0);
        queued_bytes.read(bytes, 0);
        bool fits = pkts < meta.limit_pkts &&
                    bytes + standard_metadata.packet_length <= meta.limit_bytes;
        meta.admitted = fits ? 1w1 : 1w0;
        queued_pkts.write(0, fits ? pkts + 1 : pkts);
        queued_bytes.write(0, fits ? bytes + standard_metadata.packet_length : bytes);
    }

    apply {
        if (hdr.ipv4.isValid()) {
            ipv4_forward.apply();
            if (standard_metadata.egress_spec == standard_metadata.ingress_port) {
                drop();     /* never back out of the port it came in on */
            } else if (meta.to_bottleneck == TO_BOTTLENECK) {
                if (hdr.l4.isValid()) {
                    meta.src_port = hdr.l4.src_port;
                    meta.dst_port = hdr.l4.dst_port;
                }
                flow_stats.apply();
                /* TODO: count the packet in `offered`, in its flow's slot */
                queue_limit.apply();
                enqueue();
                if (meta.admitted == 0) {
                    queue_drops.count(meta.flow_index);
                    drop();
                }
            }
        } else {
            drop();         /* not IPv4: ARP is static on the hosts */
        }
    }
}

/*************************************************************************
 *  E G R E S S
 *************************************************************************/

control LabEgress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    /* Left the queue and sent on the link. */
    counter(FLOW_SLOTS, CounterType.packets_and_bytes) forwarded;
    /* Left the queue and lost on the link at random. */
    counter(FLOW_SLOTS, CounterType.packets_and_bytes) random_drops;
    /* Histogram of the queue depth (packets) each packet left behind. */
    counter(QDEPTH_SLOTS, CounterType.packets) queue_depth;

    action set_loss(loss_threshold_t threshold) {
        meta.loss_threshold = threshold;
    }

    /* One default action, rewritten by the controller: p as round(p * 2^32). */
    table link_loss {
        actions = {
            set_loss;
        }
        size = 1;
        default_action = set_loss(0);
    }

    action drop_random() {
        /* TODO: count the packet in `random_drops`, in its flow's slot */
        mark_to_drop(standard_metadata);
    }

    action pass() {
        /* TODO: count the packet in `forwarded`, in its flow's slot */
    }

    /* The packet left the queue: release its place. */
    action dequeue() {
        bit<32> pkts;
        bit<32> bytes;
        queued_pkts.read(pkts, 0);
        queued_bytes.read(bytes, 0);
        queued_pkts.write(0, pkts - 1);
        queued_bytes.write(0, bytes - standard_metadata.packet_length);
    }

    apply {
        if (hdr.ipv4.isValid() && meta.to_bottleneck == TO_BOTTLENECK) {
            dequeue();
            meta.qdepth_slot = QDEPTH_SLOTS - 1;
            if ((bit<32>)standard_metadata.deq_qdepth < QDEPTH_SLOTS - 1) {
                meta.qdepth_slot = (bit<32>)standard_metadata.deq_qdepth;
            }
            queue_depth.count(meta.qdepth_slot);
            link_loss.apply();
            /* TODO: random loss. Draw meta.loss_draw uniformly from [0, RANDOM_MAX]
             * with v1model's random(result, lo, hi); drop the packet (drop_random)
             * with probability threshold / 2^32, else send it on (pass) */
            pass();
        }
    }
}

control LabComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control LabDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_options);
        packet.emit(hdr.l4);
    }
}

V1Switch(
    LabParser(),
    LabVerifyChecksum(),
    LabIngress(),
    LabEgress(),
    LabComputeChecksum(),
    LabDeparser()
) main;
