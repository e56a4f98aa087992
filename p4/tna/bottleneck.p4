/* -*- P4_16 -*- */
/*
 * cclab bottleneck for Tofino (TNA): the same contract as
 * p4/v1model/bottleneck.p4, with the same table and counter names, so one
 * controller vocabulary serves both.
 *
 * NOT COMPILED FOR TOFINO HERE: that needs bf-p4c from Intel's P4 Studio
 * SDE, which this project's machines do not have.  Only p4c's target-
 * independent front and mid end have checked it (p4test with tna.p4 from
 * p4c's backends/tofino/bf-p4c/p4include, -D__TARGET_TOFINO__=1: no error,
 * no warning).  Compile with  bf-p4c --target tofino --arch tna
 * --bf-rt-schema bottleneck.bfrt.json -o build/tna p4/tna/bottleneck.p4.
 *
 *   ingress:  ipv4_forward (dst prefix -> egress port, bottleneck flag),
 *             flow_stats (exact 5-tuple -> counter index; 0 = undeclared),
 *             `offered` counter; flow index and flag bridged to egress
 *   TM:       port shaping (tf1.tm.port.sched_shaping) and the queue's
 *             buffer limit (tf1.tm.queue.buffer), set over BfRt by
 *             controller/dataplane/tofino.py
 *   egress:   after the queue: Random<> draw against loss_decide's range
 *             entry [0, threshold) -> drop_random, else forwarded;
 *             enq_qdepth histogram
 *
 * Queue drops happen in the TM and are derived by the controller exactly as
 * on BMv2: offered - forwarded - random_drops - backlog (see the v1model
 * program's comment).  Range match instead of a `<` on two 32-bit fields:
 * a TCAM range entry is what Tofino does well.
 */
#include <core.p4>
#include <tna.p4>

#include "../common/headers.p4"

/*************************************************************************
 *  C O N S T A N T S  A N D  T Y P E S
 *************************************************************************/

typedef bit<9> port_t;

const bit<1> TO_BOTTLENECK = 1w1;

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
    Counter<bit<64>, bit<32>>(QDEPTH_SLOTS, CounterType_t.PACKETS) queue_depth;
    Random<bit<32>>() rng;

    action drop_random() {
        random_drops.count(meta.bridge.flow_index);
        eg_dprsr_md.drop_ctl = 1;
    }

    action pass() {
        forwarded.count(meta.bridge.flow_index);
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

    apply {
        if (hdr.ipv4.isValid()) {
            if (meta.bridge.to_bottleneck == TO_BOTTLENECK) {
                queue_depth_slot.apply();
                queue_depth.count(meta.qdepth_slot);
                meta.loss_draw = rng.get();
                loss_decide.apply();
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
