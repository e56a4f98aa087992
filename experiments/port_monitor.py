"""An os-ken (Ryu) app a user hands a run: a per-port monitor, in the style of Ryu's simple_monitor_13.

cclab's own app programs the routes and asks every switch for its port statistics each interval; this
app receives the same replies (os-ken hands every event to each app that listens for it) and writes
each port's transmit rate to port_rates.csv in the run directory.  Try it:

    sudo .venv/bin/cclab run experiments/ovs_port_monitor.toml

An app of yours can do more: it gets every OpenFlow event, and may add its own entries (with a
priority above 200 they win over cclab's per-flow entries, e.g. to move a flow to another port).
The run's plan (switches, routes, counted flows) is the JSON file named by $CCLAB_FABRIC; the run
directory is $CCLAB_RUN_DIR.
"""

import os
import time

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3


class PortMonitor(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.last = {}  # (dpid, port) -> (time, tx_bytes)
        self.out = open(os.path.join(os.environ["CCLAB_RUN_DIR"], "port_rates.csv"), "w", buffering=1)
        self.out.write("t_s,dpid,port,tx_bytes,tx_bps\n")
        self.t0 = time.time()

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def port_stats(self, ev):
        now = time.time()
        dpid = ev.msg.datapath.id
        for stat in ev.msg.body:
            if stat.port_no > ofproto_v1_3.OFPP_MAX:
                continue
            key = (dpid, stat.port_no)
            before = self.last.get(key)
            self.last[key] = (now, stat.tx_bytes)
            if before is None or now <= before[0]:
                continue
            bps = (stat.tx_bytes - before[1]) * 8 / (now - before[0])
            self.out.write(f"{now - self.t0:.3f},{dpid},{stat.port_no},{stat.tx_bytes},{bps:.0f}\n")
