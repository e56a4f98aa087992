/* -*- P4_16 -*- */
/*
 * cclab bottleneck for Tofino (TNA): the same contract as
 * p4/v1model/bottleneck.p4, with the same table and counter names, so one
 * controller vocabulary serves both.
 *
 * NOT COMPILED FOR TOFINO HERE: that needs bf-p4c from Intel's P4 Studio
 * SDE, which this project's machines do not have.  Only p4c's target-
 * independent front and mid end have checked it (p4test with tna.p4 from
 * p4c's backends/tofino/bf-p4c/p4include, -D__TARGET_TOFINO__=1: no error).
 * Compile with  bf-p4c --target tofino --arch tna
 * --bf-rt-schema bottleneck.bfrt.json -o build/tna p4/tna/bottleneck.p4.
 *
 *   ingress:  ipv4_forward (dst prefix -> egress port, bottleneck flag),
 *             flow_stats (exact 5-tuple -> counter index; 0 = undeclared),
 *             `offered` counter; flow index and flag bridged to egress
 *   TM:       port shaping (tf1.tm.port.sched_shaping) and the queue's
 *             buffer limit (tf1.tm.queue.buffer), set over BfRt by
 *             controller/dataplane/tofino.py
 *   egress:   RED (red_params, when on): the average of the queue each
 *             packet found on arrival, an early drop (`red_drops`); then
 *             after the queue: Random<> draw against loss_decide's range
 *             entry [0, threshold) -> drop_random, else forwarded;
 *             enq_qdepth histogram
 *
 * Queue drops happen in the TM and are derived by the controller exactly as
 * on BMv2: offered - forwarded - random_drops - red_drops - backlog (see the
 * v1model program's comment), RED's early drops added to them.  Range match
 * instead of a `<` on two 32-bit fields: a TCAM range entry is what Tofino
 * does well.
 *
 * RED is the v1model program's (controller/dataplane/red.py's integers,
 * as controller/dataplane/tofino.py maps them), shaped to what Tofino has:
 *
 * - where: in the egress, the only place Tofino tells the queue's depth
 *   (eg_intr_md.enq_qdepth: the depth the packet found when it joined the
 *   queue, the queue RED's arrival sees, in 80-byte cells).  So the average
 *   moves in departure order (FIFO: arrival order, late by the queueing
 *   delay), and an early drop happens as the packet leaves: it held its place
 *   in the queue, and the port's shaper (which meters at dequeue) counted its
 *   bytes.  The kernel and BMv2 targets drop before the queue;
 * - the average: a 32-bit register of cells << RED_WLOG.  Tofino's stateful
 *   ALUs add, subtract and compare, and shift by no run-time amount, so the
 *   weight 2^-RED_WLOG is the program's constant (build with -DRED_WLOG=k;
 *   tofino.py and the spec refuse another red.wlog);
 * - the idle rule: when the packet found the queue empty, the average is
 *   decayed by the idle time since the last departure (to this packet's
 *   departure: its wait in the empty queue, under a frame time, is a few
 *   thousandths of a halving at wlog 9), rounded to whole
 *   halvings: red_average's range entries (from red.py's halving time) pick
 *   one of four register actions: one step of the average with q = 0 (under
 *   half a halving), >> 1, >> 2, or 0 (from 2.5 halvings on, where the
 *   v1model program leaves under 18 %).  A register holds 4 actions at most;
 * - the drop: no multiplication either; red_ramp's RED_RAMP_STEPS range
 *   entries over [min, max) of the average give each step the v1model
 *   program's drop threshold at its middle (max_p * 2^32 * (avg - min) /
 *   (max - min), within max_p / (2 * RED_RAMP_STEPS) of the line), and from
 *   max on every packet is dropped; an early drop is draw < threshold, a
 *   saturating subtraction.
 *
 * What bf-p4c has yet to say: whether red_arrive's update (the register
 * less its own top bits, plus a field) fits one stateful ALU, and the
 * stages the RED chain (clock, average, ramp, draw, drop) takes.
 */
#include <core.p4>
#include <tna.p4>

#include "../common/headers.p4"

/*************************************************************************
 *  C O N S T A N T S  A N D  T Y P E S
 *************************************************************************/

typedef bit<9> port_t;

const bit<1> TO_BOTTLENECK = 1w1;

/* RED's average weight w_q = 2^-RED_WLOG: a constant of the program (the
 * spec's red.wlog must equal it; controller/network's TNA_RED_WLOG). */
#ifndef RED_WLOG
#define RED_WLOG 9
#endif
/* red_ramp's steps between min and max (tofino.py's RED_RAMP_STEPS). */
const bit<32> RED_RAMP_STEPS = 32w64;

/* Carried from ingress to egress in front of the packet. */
header bridge_t {
    bit<7>       pad;
    bit<1>       to_bottleneck;
    flow_index_t flow_index;
}

struct ig_headers_t {
    bridge_t   bridge;
    ethernet_t ethernet;
    ipv4_t     ipv4;
    l4_ports_t l4;
}

struct eg_headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

struct ig_metadata_t {
    flow_index_t flow_index;
    bit<1>       to_bottleneck;
    bit<16>      src_port;
    bit<16>      dst_port;
}

struct eg_metadata_t {
    bridge_t bridge;
    bit<32>  loss_draw;
    bit<32>  qdepth_slot;
    bit<1>   red_on;
    bit<1>   red_empty;     /* the packet found the queue empty */
    bit<1>   red_force;     /* the average is at max or above: drop */
    bit<32>  red_q;         /* cells queued when the packet arrived */
    bit<32>  red_now;       /* its departure, ns >> 10 (1.024 us) */
    bit<32>  red_idle;      /* since the previous departure, same unit */
    bit<32>  red_avg;       /* the average after it, cells << RED_WLOG */
    bit<32>  red_thr;       /* P(early drop) * 2^32 at that average */
    bit<32>  red_draw;
    bit<32>  red_gap;       /* red_thr |-| red_draw: > 0 iff draw < thr */
}

/*************************************************************************
 *  I N G R E S S   P A R S E R
 *************************************************************************/

parser CclabIngressParser(packet_in packet,
                          out ig_headers_t hdr,
                          out ig_metadata_t meta,
                          out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        packet.extract(ig_intr_md);
        packet.advance(PORT_METADATA_SIZE);
        meta.flow_index = FALLBACK_FLOW;
        meta.to_bottleneck = 0;
        meta.src_port = 0;
        meta.dst_port = 0;
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (IPV4_IHL_MIN, 13w0, IP_PROTO_TCP): parse_l4;
            (IPV4_IHL_MIN, 13w0, IP_PROTO_UDP): parse_l4;
            default: accept;
        }
    }

    state parse_l4 {
        packet.extract(hdr.l4);
        transition accept;
    }
}

/*************************************************************************
 *  I N G R E S S
 *************************************************************************/

control CclabIngress(inout ig_headers_t hdr,
                     inout ig_metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md,
                     in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                     inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                     inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Counter<bit<64>, flow_index_t>(FLOW_SLOTS, CounterType_t.PACKETS_AND_BYTES) offered;

    action drop() {
        ig_dprsr_md.drop_ctl = 1;
    }

    action forward(port_t port, bit<1> bottleneck) {
        ig_tm_md.ucast_egress_port = port;
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
            drop();
        }
        hdr.bridge.setValid();
        hdr.bridge.pad = 0;
        hdr.bridge.to_bottleneck = meta.to_bottleneck;
        hdr.bridge.flow_index = meta.flow_index;
    }
}

/*************************************************************************
 *  I N G R E S S   D E P A R S E R
 *************************************************************************/

control CclabIngressDeparser(packet_out packet,
                             inout ig_headers_t hdr,
                             in ig_metadata_t meta,
                             in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply {
        packet.emit(hdr);
    }
}

/*************************************************************************
 *  E G R E S S   P A R S E R
 *************************************************************************/

parser CclabEgressParser(packet_in packet,
                         out eg_headers_t hdr,
                         out eg_metadata_t meta,
                         out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        packet.extract(eg_intr_md);
        packet.extract(meta.bridge);
        meta.loss_draw = 0;
        meta.qdepth_slot = 0;
        meta.red_on = 0;
        meta.red_empty = 0;
        meta.red_force = 0;
        meta.red_q = 0;
        meta.red_now = 0;
        meta.red_idle = 0;
        meta.red_avg = 0;
        meta.red_thr = 0;
        meta.red_draw = 0;
        meta.red_gap = 0;
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

/*************************************************************************
 *  E G R E S S
 *************************************************************************/

control CclabEgress(inout eg_headers_t hdr,
                    inout eg_metadata_t meta,
                    in egress_intrinsic_metadata_t eg_intr_md,
                    in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                    inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                    inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    Counter<bit<64>, flow_index_t>(FLOW_SLOTS, CounterType_t.PACKETS_AND_BYTES) forwarded;
    Counter<bit<64>, flow_index_t>(FLOW_SLOTS, CounterType_t.PACKETS_AND_BYTES) random_drops;
    /* Dropped early by RED (a queue drop: the controller adds them up). */
    Counter<bit<64>, flow_index_t>(FLOW_SLOTS, CounterType_t.PACKETS_AND_BYTES) red_drops;
    Counter<bit<64>, bit<32>>(QDEPTH_SLOTS, CounterType_t.PACKETS) queue_depth;
    Random<bit<32>>() rng;
    Random<bit<32>>() red_rng;

    /* RED: the average queue, cells << RED_WLOG, and when a packet last
     * left the queue (ns >> 10); the controller zeroes the average when it
     * sets a new RED. */
    Register<bit<32>, bit<1>>(1, 0) red_avg;
    Register<bit<32>, bit<1>>(1, 0) red_last_deq;

    /* The time since the previous departure; this one is the last now. */
    RegisterAction<bit<32>, bit<1>, bit<32>>(red_last_deq) red_clock = {
        void apply(inout bit<32> last, out bit<32> idle) {
            idle = meta.red_now - last;
            last = meta.red_now;
        }
    };

    /* avg += w_q (q - avg), kept << RED_WLOG: avg - avg >> RED_WLOG + q. */
    RegisterAction<bit<32>, bit<1>, bit<32>>(red_avg) red_arrive = {
        void apply(inout bit<32> avg, out bit<32> after) {
            avg = avg - (avg >> RED_WLOG) + meta.red_q;
            after = avg;
        }
    };

    /* The idle rule, in whole halvings of the average (red_average). */
    RegisterAction<bit<32>, bit<1>, bit<32>>(red_avg) red_halve = {
        void apply(inout bit<32> avg, out bit<32> after) {
            avg = avg >> 1;
            after = avg;
        }
    };

    RegisterAction<bit<32>, bit<1>, bit<32>>(red_avg) red_quarter = {
        void apply(inout bit<32> avg, out bit<32> after) {
            avg = avg >> 2;
            after = avg;
        }
    };

    RegisterAction<bit<32>, bit<1>, bit<32>>(red_avg) red_clear = {
        void apply(inout bit<32> avg, out bit<32> after) {
            avg = 0;
            after = 0;
        }
    };

    action drop_random() {
        random_drops.count(meta.bridge.flow_index);
        eg_dprsr_md.drop_ctl = 1;
    }

    action pass() {
        forwarded.count(meta.bridge.flow_index);
    }

    action drop_early() {
        red_drops.count(meta.bridge.flow_index);
        eg_dprsr_md.drop_ctl = 1;
    }

    /* One range entry [0, threshold - 1] -> drop_random; none: no loss. */
    table loss_decide {
        key = {
            meta.loss_draw: range;
        }
        actions = {
            drop_random;
            pass;
        }
        size = 4;
        default_action = pass();
    }

    action set_depth_slot(bit<32> slot) {
        meta.qdepth_slot = slot;
    }

    /* enq_qdepth (cells on Tofino) -> histogram slot; the controller fills it. */
    table queue_depth_slot {
        key = {
            eg_intr_md.enq_qdepth: range;
        }
        actions = {
            set_depth_slot;
        }
        size = QDEPTH_SLOTS;
        default_action = set_depth_slot(QDEPTH_SLOTS - 1);
    }

    action set_red(bit<1> on) {
        meta.red_on = on;
    }

    table red_params {
        actions = {
            set_red;
        }
        size = 1;
        default_action = set_red(0);
    }

    action red_update() {
        meta.red_avg = red_arrive.execute(0);
    }

    action red_decay_half() {
        meta.red_avg = red_halve.execute(0);
    }

    action red_decay_quarter() {
        meta.red_avg = red_quarter.execute(0);
    }

    action red_decay_all() {
        meta.red_avg = red_clear.execute(0);
    }

    /* The average after this packet: an update with the queue it found,
     * or, when it found the queue empty, the idle rule by the idle time:
     * entries (empty 1, idle range) -> a decay; anything else an update. */
    table red_average {
        key = {
            meta.red_empty: exact;
            meta.red_idle:  range;
        }
        actions = {
            red_update;
            red_decay_half;
            red_decay_quarter;
            red_decay_all;
        }
        size = 4;
        default_action = red_update();
    }

    action red_set_threshold(bit<32> thr) {
        meta.red_thr = thr;
    }

    action red_force_drop() {
        meta.red_force = 1;
    }

    /* The drop probability by the average: one range entry per step of
     * [min, max) with its threshold, one [max, 2^32 - 1] -> always; below
     * min (no entry) none. */
    table red_ramp {
        key = {
            meta.red_avg: range;
        }
        actions = {
            red_set_threshold;
            red_force_drop;
        }
        size = RED_RAMP_STEPS + 1;
        default_action = red_set_threshold(0);
    }

    apply {
        if (hdr.ipv4.isValid()) {
            if (meta.bridge.to_bottleneck == TO_BOTTLENECK) {
                queue_depth_slot.apply();
                queue_depth.count(meta.qdepth_slot);
                red_params.apply();
                if (meta.red_on == 1) {
                    meta.red_q = (bit<32>)eg_intr_md.enq_qdepth;
                    if (eg_intr_md.enq_qdepth == 0) {
                        meta.red_empty = 1;
                    }
                    meta.red_now = eg_prsr_md.global_tstamp[41:10];
                    meta.red_idle = red_clock.execute(0);
                    red_average.apply();
                    red_ramp.apply();
                    meta.red_draw = red_rng.get();
                    meta.red_gap = meta.red_thr |-| meta.red_draw;
                }
                if (meta.red_force == 1 || meta.red_gap != 0) {
                    drop_early();
                } else {
                    meta.loss_draw = rng.get();
                    loss_decide.apply();
                }
            }
        }
    }
}

/*************************************************************************
 *  E G R E S S   D E P A R S E R
 *************************************************************************/

control CclabEgressDeparser(packet_out packet,
                            inout eg_headers_t hdr,
                            in eg_metadata_t meta,
                            in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply {
        packet.emit(hdr);
    }
}

/*************************************************************************
 *  S W I T C H
 *************************************************************************/

Pipeline(
    CclabIngressParser(),
    CclabIngress(),
    CclabIngressDeparser(),
    CclabEgressParser(),
    CclabEgress(),
    CclabEgressDeparser()
) pipe;

Switch(pipe) main;
