"""cclab's os-ken (Ryu) app: routes the topology implies, one counted entry per flow, stats every interval.

It runs inside the os-ken process cclab starts (controller/fabric/launch.py), beside any app the user
hands the run, and reads what to install from the JSON file named by $CCLAB_FABRIC (written by
controller/fabric/fabric.py).  On each switch, in OpenFlow 1.3 table 0:

    priority 200  the spec's flows, exact 5-tuple (cookie = the flow's number): counted per flow
    priority 100  ipv4_dst = a host's address -> the port towards it (the routes)
    priority 50   ARP -> flood (the hosts' ARP is static; this is for anything else that asks)
    no table-miss entry: everything else is dropped, nothing goes to the controller

Every interval it asks each switch for its flow and port statistics and appends each reply to the
stats file as one JSON line: {"t": wall time, "n": poll number, "dpid": ..., "kind": "flow" | "port",
"rows": [...]}.  Once every switch has its entries (a barrier answered), it writes the ready file.

This module imports os-ken and nothing of cclab's, so that it loads in the app process alone.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3

PRIO_FLOW = 200
PRIO_ROUTE = 100
PRIO_ARP = 50
ETH_IPV4 = 0x0800
ETH_ARP = 0x0806


def load_config() -> dict[str, Any]:
    """The run's fabric: switches by datapath id, their routes and counted flows, files and interval."""
    with open(os.environ["CCLAB_FABRIC"]) as f:
        cfg: dict[str, Any] = json.load(f)
    return cfg


class CclabFabric(app_manager.OSKenApp):  # type: ignore[misc]
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cfg = load_config()
        self.datapaths: dict[int, Any] = {}
        self.ready: set[int] = set()
        self.poll_n = 0
        self.stats = open(self.cfg["stats_path"], "a", buffering=1)
        self.poller = hub.spawn(self._poll)

    # --- set-up: the routes and counted flows, proactively -----------------------------------------

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)  # type: ignore[misc]
    def _features(self, ev: Any) -> None:
        dp = ev.msg.datapath
        sw = self.cfg["switches"].get(str(dp.id))
        if sw is None:
            self.logger.warning("datapath %016x is not one of this run's switches; ignored", dp.id)
            return
        ofp, parser = dp.ofproto, dp.ofproto_parser
        dp.send_msg(parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                      out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))  # fmt: skip
        self._add(dp, PRIO_ARP, parser.OFPMatch(eth_type=ETH_ARP), ofp.OFPP_FLOOD)
        for r in sw["routes"]:
            self._add(dp, PRIO_ROUTE, parser.OFPMatch(eth_type=ETH_IPV4, ipv4_dst=r["dst"]), r["port"])
        for fl in sw["flows"]:
            self._add(dp, PRIO_FLOW, flow_match(parser, fl), fl["port"], cookie=fl["cookie"])
        dp.send_msg(parser.OFPBarrierRequest(dp))

    def _add(self, dp: Any, priority: int, match: Any, port: int, cookie: int = 0) -> None:
        parser = dp.ofproto_parser
        actions = [parser.OFPActionOutput(port)]
        inst = [parser.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(dp, cookie=cookie, priority=priority, match=match, instructions=inst))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)  # type: ignore[misc]
    def _barrier(self, ev: Any) -> None:
        dp = ev.msg.datapath
        if str(dp.id) not in self.cfg["switches"] or dp.id in self.ready:
            return
        self.ready.add(dp.id)
        self.datapaths[dp.id] = dp
        if len(self.ready) == len(self.cfg["switches"]):
            tmp = self.cfg["ready_path"] + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"t": time.time(), "dpids": sorted(self.ready)}, f)
            os.replace(tmp, self.cfg["ready_path"])
            self.logger.info("all %d switches programmed", len(self.ready))

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)  # type: ignore[misc]
    def _gone(self, ev: Any) -> None:
        if ev.datapath.id is not None:
            self.datapaths.pop(ev.datapath.id, None)

    # --- statistics every interval ------------------------------------------------------------------

    def _poll(self) -> None:
        while True:
            self.poll_n += 1
            for dp in list(self.datapaths.values()):
                ofp, parser = dp.ofproto, dp.ofproto_parser
                dp.send_msg(parser.OFPFlowStatsRequest(dp, table_id=0, out_port=ofp.OFPP_ANY,
                                                       out_group=ofp.OFPG_ANY, match=parser.OFPMatch()))  # fmt: skip
                dp.send_msg(parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_ANY))
            hub.sleep(self.cfg["interval_s"])

    def _write(self, dpid: int, kind: str, rows: list[dict[str, Any]]) -> None:
        self.stats.write(json.dumps({"t": time.time(), "n": self.poll_n, "dpid": dpid, "kind": kind, "rows": rows}))
        self.stats.write("\n")

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)  # type: ignore[misc]
    def _flow_stats(self, ev: Any) -> None:
        rows = [
            {"cookie": s.cookie, "priority": s.priority, "packets": s.packet_count, "bytes": s.byte_count}
            for s in ev.msg.body
            if s.cookie
        ]
        self._write(ev.msg.datapath.id, "flow", rows)

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)  # type: ignore[misc]
    def _port_stats(self, ev: Any) -> None:
        rows = [
            {"port": s.port_no, "rx_packets": s.rx_packets, "tx_packets": s.tx_packets, "rx_bytes": s.rx_bytes,
             "tx_bytes": s.tx_bytes, "rx_dropped": s.rx_dropped, "tx_dropped": s.tx_dropped}
            for s in ev.msg.body
            if s.port_no < dp_local(ev.msg.datapath)
        ]  # fmt: skip
        self._write(ev.msg.datapath.id, "port", rows)


def dp_local(dp: Any) -> int:
    """OFPP_LOCAL and the reserved ports above it are not the switch's links."""
    return int(dp.ofproto.OFPP_MAX)


def flow_match(parser: Any, fl: dict[str, Any]) -> Any:
    """The exact 5-tuple of one flow as an OpenFlow 1.3 match."""
    ports = (
        {"tcp_src": fl["sport"], "tcp_dst": fl["dport"]}
        if fl["proto"] == 6
        else {"udp_src": fl["sport"], "udp_dst": fl["dport"]}
    )
    return parser.OFPMatch(eth_type=ETH_IPV4, ip_proto=fl["proto"], ipv4_src=fl["src"], ipv4_dst=fl["dst"], **ports)
