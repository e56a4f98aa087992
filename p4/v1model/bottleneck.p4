/* -*- P4_16 -*- */
/*
 * cclab bottleneck for BMv2 (simple_switch_grpc, v1model): the data-plane
 * contract (docs/conformance.md) on one switch port, the "bottleneck port".
 *
 *   ingress:  ipv4_forward (dst prefix -> port, and whether that port is the
 *             bottleneck), flow_stats (exact 5-tuple -> counter index the
 *             controller assigned; index 0 = undeclared traffic), count
 *             `offered` for packets going to the bottleneck port; RED
 *             (red_params, when on) on the program's queue, then drop-tail
 *             admission against queue_limit (packets or bytes); both
 *             refusals counted in `queue_drops`
 *   TM:       BMv2's egress queue of the bottleneck port: the rate
 *             (packets/s, set over Thrift); its own depth is set far above
 *             the program's limit, so BMv2 never drops there
 *   egress:   the packet releases its place in the queue; then, as on a
 *             lossy link, random loss with random() against link_loss's
 *             threshold, counted by cause (`random_drops`, `forwarded`);
 *             the dequeue depth goes into the `queue_depth` histogram
 *
 * The queue limit is the program's, not BMv2's: BMv2's queue counts packets
 * only and drops where the program cannot count.  The program keeps the
 * queue's occupancy in packets and bytes (two registers, shared by ingress
 * and egress) and admits a packet iff the queue holds fewer packets than the
 * limit and its bytes fit, as Linux's pfifo and bfifo do.  So every counter
 * is exact: offered = forwarded + random_drops + queue_drops + queued.
 * Counters are read over P4Runtime (BMv2's server reads no registers).
 *
 * Bytes are wire bytes: standard_metadata.packet_length, Ethernet header
 * included, no FCS (the kernel target counts the same).
 *
 * RED does the kernel target's arithmetic (controller/dataplane/red.py gives
 * both the same integers) on the same queue length, the program's own
 * occupancy, with two differences P4 imposes: no division, so an arrival is
 * dropped early iff draw * span < max_p_thr * (avg - min) (the kernel target
 * divides to a threshold first), and the idle time's halvings (<< 16) are
 * idle_us * idle_inv >> 16 with idle_inv = 2^32 / (halving time in us).
 */
#include <core.p4>
#include <v1model.p4>

#include "../common/headers.p4"

/*************************************************************************
 *  C O N S T A N T S  A N D  T Y P E S
 *************************************************************************/

typedef bit<9>  port_t;
typedef bit<32> loss_threshold_t;   /* P(drop) = threshold / 2^32 */
typedef bit<32> queue_limit_t;
typedef bit<64> red_t;              /* RED's average and thresholds, << wlog */

/* A queue limit that never binds (queue_limit's default: no limit). */
const queue_limit_t QUEUE_UNLIMITED = 32w0xFFFFFFFF;

const bit<32> RANDOM_MAX = 32w0xFFFFFFFF;
const bit<1>  TO_BOTTLENECK = 1w1;
/* RED's idle time is capped at 2^31 us (36 minutes): idle * idle_inv
 * (<= 2^32) fits 64 bits. */
const red_t RED_IDLE_CAP_US = 64w0x80000000;
/* 2^-f for a fraction f of a halving: 1 - ln2 f + (ln2 - 1/2) f^2, the
 * coefficients << 20 (the kernel target's BN_LN2_Q20, BN_QUAD_Q20). */
const red_t RED_LN2_Q20 = 726817;
const red_t RED_QUAD_Q20 = 202531;

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
    bit<1>           red_on;
    bit<1>           red_bytes;
    bit<8>           red_wlog;
    bit<8>           red_norm;
    red_t            red_min_s;
    red_t            red_max_s;
    red_t            red_max_p_thr;
    red_t            red_idle_inv;
    bit<32>          red_draw;
    bit<1>           red_drop;
}

/* The drop-tail queue as the program keeps it: packets and wire bytes admitted
 * to the bottleneck queue and not yet dequeued.  Ingress admits (enqueue),
 * egress releases (dequeue); BMv2 runs each action's register accesses under
 * the registers' locks, so each update is atomic between the two threads. */
register<bit<32>>(1) queued_pkts;
register<bit<32>>(1) queued_bytes;
/* RED: the average queue << wlog (ingress), and when a packet last left the
 * queue, us (egress writes, ingress reads: the idle time's start). */
register<red_t>(1) red_avg;
register<bit<48>>(1) red_last_deq;

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
    /* Offered but not admitted: the queue was full (drop-tail). */
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

    action set_red(bit<1> on, bit<1> bytes, bit<8> wlog, bit<8> norm, red_t min_s, red_t max_s,
                   red_t max_p_thr, red_t idle_inv) {
        meta.red_on = on;
        meta.red_bytes = bytes;
        meta.red_wlog = wlog;
        meta.red_norm = norm;
        meta.red_min_s = min_s;
        meta.red_max_s = max_s;
        meta.red_max_p_thr = max_p_thr;
        meta.red_idle_inv = idle_inv;
    }

    table red_params {
        actions = {
            set_red;
        }
        size = 1;
        default_action = set_red(0, 0, 0, 0, 0, 0, 0, 0);
    }

    /* RED's verdict on an arrival: the average updated with the queue it
     * finds (avg += w_q (q - avg), kept << wlog), or decayed over the idle
     * time before it when it finds the queue empty (whole halvings shift, a
     * fraction f of one is the quadratic above); then a drop with
     * probability max_p (avg - min) / (max - min) between min and max,
     * always from max on. */
    action red_decide() {
        bit<32> pkts;
        bit<32> bytes;
        red_t avg;
        bit<48> last;
        queued_pkts.read(pkts, 0);
        queued_bytes.read(bytes, 0);
        red_avg.read(avg, 0);
        red_last_deq.read(last, 0);
        red_t q = meta.red_bytes == 1 ? (red_t)bytes : (red_t)pkts;
        red_t idle = (red_t)(standard_metadata.ingress_global_timestamp - last);
        idle = idle > RED_IDLE_CAP_US ? RED_IDLE_CAP_US : idle;
        red_t halvings = (idle * meta.red_idle_inv) >> 16;     /* << 16 */
        red_t whole = halvings >> 16;
        red_t f = halvings & 0xFFFF;
        red_t loss = ((RED_LN2_Q20 * f) >> 16) - ((RED_QUAD_Q20 * f * f) >> 32);
        red_t shifted = avg >> (bit<8>)(whole > 63 ? 63 : whole);
        red_t lost = shifted < 64w0x10000000000 ? (shifted * loss) >> 20 : ((shifted >> 10) * loss) >> 10;
        red_t decayed = whole > 63 ? 0 : shifted - lost;
        red_t updated = avg - (avg >> meta.red_wlog) + q;
        avg = q == 0 && last != 0 ? decayed : updated;
        red_avg.write(0, avg);
        random(meta.red_draw, 32w0, RANDOM_MAX);
        red_t over = (avg - meta.red_min_s) >> meta.red_norm;
        red_t span = (meta.red_max_s - meta.red_min_s) >> meta.red_norm;
        bool early = avg >= meta.red_min_s && (red_t)meta.red_draw * span < meta.red_max_p_thr * over;
        meta.red_drop = avg >= meta.red_max_s || early ? 1w1 : 1w0;
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
                /* Never back out of the port it came in on: a neighbouring
                 * bridge floods frames it has no entry for, and one that came
                 * from the side its destination is on is not this link's. */
                drop();
            } else if (meta.to_bottleneck == TO_BOTTLENECK) {
                if (hdr.l4.isValid()) {
                    meta.src_port = hdr.l4.src_port;
                    meta.dst_port = hdr.l4.dst_port;
                }
                flow_stats.apply();
                offered.count(meta.flow_index);
                queue_limit.apply();
                red_params.apply();
                if (meta.red_on == 1) {
                    red_decide();
                }
                if (meta.red_drop == 1) {
                    meta.admitted = 0;      /* an early drop: a queue drop */
                } else {
                    enqueue();
                }
                if (meta.admitted == 0) {
                    queue_drops.count(meta.flow_index);
                    drop();
                }
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

    /* The packet left the queue: release its place. */
    action dequeue() {
        bit<32> pkts;
        bit<32> bytes;
        queued_pkts.read(pkts, 0);
        queued_bytes.read(bytes, 0);
        queued_pkts.write(0, pkts - 1);
        queued_bytes.write(0, bytes - standard_metadata.packet_length);
        red_last_deq.write(0, standard_metadata.egress_global_timestamp);
    }

    apply {
        if (hdr.ipv4.isValid()) {
            if (meta.to_bottleneck == TO_BOTTLENECK) {
                dequeue();
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
