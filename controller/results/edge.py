"""The fabric's fidelity check: a flow's bytes offered at the edge against those forwarded at its last
emulated link, the difference explained by the drops on its path and the packets still queued there.

Per flow, summary.json gets an "edge" entry: packets and bytes counted by the OpenFlow entry at the
sender's switch, the emulated links' view beside them, and what stays unexplained:

    unexplained = edge packets - forwarded at the last link - drops on the path - packets queued on the path

which is 0 when the counters agree.  The runner reads the edge once its counts stopped moving and the
links after it; a packet or two may still be between the two reads: EDGE_TOLERANCE_PKTS.
"""

from __future__ import annotations

from typing import Any

from controller.results.summary import Check

EDGE_TOLERANCE_PKTS = 3


def add_edge(summ: dict[str, Any], edge: dict[str, dict[str, int]]) -> None:
    """Put each flow's edge counters and the check into a summary (summary.json's dict, in place)."""
    links = {lk["id"]: lk for lk in summ["links"]}
    fid_checks = summ["fidelity"]["checks"]
    for fl in summ["flows"]:
        got = edge.get(fl["id"])
        hops = [links[lid]["flows"][fl["id"]] for lid in fl["path"] if lid in links]
        if got is None or not hops:
            continue
        drops = sum(h["random_drops"] + h["queue_drops"] for h in hops)
        queued = sum(h["offered_packets"] - h["packets"] - h["random_drops"] - h["queue_drops"] for h in hops)
        unexplained = got["packets"] - hops[-1]["packets"] - drops - queued
        fl["edge"] = {
            "packets": got["packets"],
            "bytes": got["bytes"],
            "first_link_offered_packets": hops[0]["offered_packets"],
            "first_link_offered_bytes": hops[0]["offered_bytes"],
            "forwarded_packets": hops[-1]["packets"],
            "forwarded_bytes": hops[-1]["bytes"],
            "drops": drops,
            "queued": queued,
            "unexplained_packets": unexplained,
        }
        tol = EDGE_TOLERANCE_PKTS
        note = f"edge {got['packets']} - forwarded {hops[-1]['packets']} - drops {drops} - queued {queued}"
        check = Check(f"{fl['id']}.edge_unexplained_packets", unexplained, -tol, tol, note)
        fid_checks[check.name] = check.as_dict()
        if not check.ok:
            summ["fidelity"]["notes"].append(check.failure_note())
            summ["fidelity"]["ok"] = False
