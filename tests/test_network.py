"""The network as a graph: presets, addresses, paths, RTTs, and the specs that must fail before anything is built."""

from __future__ import annotations

import subprocess

import pytest

from controller import network, spec
from controller.spec import tomllib
from tests.conftest import CCLAB, REPO, experiment_specs

PARKING = """
name = "p"
duration_s = 5
[topology]
kind = "parking_lot"
hops = 3
[bottleneck]
rate_mbps = 20
queue_pkts = 50
[[flows]]
algo = "reno"
src = "h0"
dst = "r0"
[[flows]]
algo = "reno"
src = "h2"
dst = "r2"
"""

GRAPH = """
name = "g"
duration_s = 5
[topology]
kind = "graph"
hosts = ["a1", "a2", "b1"]
switches = ["sw1", "sw2"]
[[topology.links]]
a = "a1"
b = "sw1"
[[topology.links]]
a = "a2"
b = "sw1"
delay_ms = 60
[[topology.links]]
id = "lcore"
a = "sw1"
b = "sw2"
rate_mbps = 10
delay_ms = 20
both = true
[[topology.links]]
a = "b1"
b = "sw2"
[[flows]]
algo = "reno"
src = "a1"
dst = "b1"
[[flows]]
algo = "reno"
src = "a2"
dst = "b1"
"""


MULTIPATH = """
name = "m"
duration_s = 5
[topology]
kind = "multipath"
background = [2, 1]
[bottleneck]
rate_mbps = 10
[links.l2]
rate_mbps = 6
delay_ms = 80
[[flows]]
kind = "mptcp"
algo = "mptcpw"
src = "h0"
dst = "r0"
[[flows]]
algo = "reno"
src = "h3"
dst = "r3"
"""


def _parse(text: str) -> spec.Spec:
    return spec.parse(tomllib.loads(text))


def _paths(s: spec.Spec) -> dict[str, list[str]]:
    g = s.graph
    return {f.id: [e.id for e in g.emulated_on(g.path(f.src, f.dst, f.segment))] for f in s.flows}


def test_dumbbell_keeps_its_addresses_and_one_bottleneck() -> None:
    g = network.presets.dumbbell(3, network.LinkSpec(rate_mbps=10))
    assert [g.addresses[(h, 0)] for h in ("h1", "h3", "r1", "r3")] == ["10.0.1.1", "10.0.1.3", "10.0.2.1", "10.0.2.3"]
    assert [e.id for e in g.emulated()] == ["l1"]
    assert [e.id for e in g.emulated_on(g.path("h2", "r2", 0))] == ["l1"]
    assert g.emulated_on(g.path("r2", "h2", 0)) == [], "the reverse direction is not emulated"


def test_parking_lot_paths_cross_the_right_bottlenecks() -> None:
    s = _parse(PARKING)
    assert _paths(s) == {"f1": ["l1", "l2", "l3"], "f2": ["l2"]}
    assert [e.id for e in s.graph.emulated()] == ["l1", "l2", "l3"]
    assert s.topology.describe() == "parking lot of 3"


def test_link_override_sets_one_bottleneck_apart() -> None:
    s = _parse(PARKING + "[links.l2]\nrate_mbps = 5\nper = 0.01\n")
    rates = {e.id: (e.spec.rate_mbps, e.spec.per, e.spec.queue_pkts) for e in s.graph.emulated()}
    assert rates == {"l1": (20, 0, 50), "l2": (5, 0.01, 50), "l3": (20, 0, 50)}


def test_graph_rtts_and_both_directions() -> None:
    s = _parse(GRAPH)
    g = s.graph
    assert [e.id for e in g.emulated()] == ["lcore", "lcorer"]
    hops = {f.id: g.path(f.src, f.dst, f.segment) for f in s.flows}
    assert g.base_rtt_ms(hops["f1"]) == 40.0
    assert g.base_rtt_ms(hops["f2"]) == 160.0, "the 60 ms access link counts twice, as the core's 20 ms"
    assert [e.id for e in g.emulated_on(g.path("b1", "a1", 0))] == ["lcorer"]
    assert g.side(g.links[2], "sw2") == {"b1"}


def test_access_delays_give_flows_their_own_rtt() -> None:
    text = PARKING.replace("hops = 3", "hops = 3\naccess_delay_ms = {h2 = 30}")
    s = _parse(text.replace("[bottleneck]\n", "[bottleneck]\ndelay_ms = 10\n"))
    g = s.graph
    rtt = {f.id: g.base_rtt_ms(g.path(f.src, f.dst, f.segment)) for f in s.flows}
    assert rtt == {"f1": 60.0, "f2": 80.0}
    s2 = _parse(PARKING.replace('src = "h2"', 'src = "h2"\naccess_delay_ms = 45'))
    g2 = s2.graph
    assert g2.base_rtt_ms(g2.path("h2", "r2", 0)) == 90.0


def test_udp_onoff_and_finite_flows_parse() -> None:
    text = PARKING + '[[flows]]\nkind = "udp_onoff"\nsrc = "h1"\ndst = "r1"\nrate_mbps = 5\non_s = 1\noff_s = 2\n'
    text += '[[flows]]\nalgo = "cubic"\nsrc = "h3"\ndst = "r3"\nbytes = 1000000\n'
    s = _parse(text)
    udp, fin = s.flows[2], s.flows[3]
    assert (udp.kind, udp.rate_mbps, udp.on_s, udp.off_s, udp.on_off) == ("udp_onoff", 5, 1, 2, "fixed")
    assert fin.bytes == 1_000_000 and fin.is_tcp
    assert s.algos == ("cubic", "reno"), "UDP flows load no algorithm"


def test_multipath_two_paths_each_its_own_subnet_and_an_mptcp_flow_on_both() -> None:
    from controller.experiment.build import counted

    s = _parse(MULTIPATH)
    g = s.graph
    assert [(e.id, e.src, e.dst) for e in g.emulated()] == [("l1", "s1", "s2"), ("l2", "s3", "s4")]
    assert g.host_segments("h0") == g.host_segments("r0") == [0, 1]
    assert g.host_segments("h3") == [1], "the third background pair is on path 2"
    assert (g.addresses[("h0", 0)], g.addresses[("h0", 1)]) == ("10.0.1.1", "10.1.1.1")
    mp = s.flows[0]
    assert (mp.kind, mp.subflow_segments, mp.is_tcp) == ("mptcp", (0, 1), True)
    parts = {c.id: c for c in counted(g, s.flows)}
    assert list(parts) == ["f1.1", "f1.2", "f2"]
    one, two = parts["f1.1"], parts["f1.2"]
    assert [e.id for e in one.path.links] == ["l1"] and [e.id for e in two.path.links] == ["l2"]
    assert (one.path.base_rtt_ms, two.path.base_rtt_ms) == (0.0, 160.0)
    assert (one.key.src, one.key.dst, two.key.src, two.key.dst) == ("10.0.1.1", "10.0.2.1", "10.1.1.1", "10.1.2.1")
    assert one.key.dport == two.key.dport and one.key.sport != two.key.sport, "subflows: one server port, two sources"
    assert s.algos == ("mptcpw", "reno")


def test_mptcp_over_one_path_opens_two_subflows_through_its_bottleneck() -> None:
    """Hosts sharing one switch group: two subflows over the one path (the shared-bottleneck setting), the second
    from the sender's own port to a second port its receiver announces, so each has its own 5-tuple."""
    from controller.experiment.build import MPTCP_JOIN_PORT_BASE, counted

    s = _parse(PARKING.replace('algo = "reno"\nsrc = "h0"', 'kind = "mptcp"\nalgo = "mptcpw"\nsrc = "h0"'))
    mp = s.flows[0]
    assert mp.subflow_segments == (0, 0)
    parts = {c.id: c for c in counted(s.graph, s.flows)}
    assert list(parts) == ["f1.1", "f1.2", "f2"]
    one, two = parts["f1.1"], parts["f1.2"]
    assert [e.id for e in one.path.links] == [e.id for e in two.path.links] == ["l1", "l2", "l3"]
    assert (one.key.src, one.key.dst) == (two.key.src, two.key.dst), "one address pair"
    assert two.key.dport == MPTCP_JOIN_PORT_BASE + 1 and one.key.dport != two.key.dport
    assert one.key.sport != two.key.sport
    keys = [c.key for c in parts.values()]
    assert len(set(keys)) == len(keys), "every counted 5-tuple is its own"


def test_via_picks_the_path_of_a_flow_between_two_multihomed_hosts() -> None:
    text = MULTIPATH.replace('kind = "mptcp"\nalgo = "mptcpw"', 'algo = "reno"').replace(
        'dst = "r0"', 'dst = "r0"\nvia = "l2"'
    )
    s = _parse(text)
    assert _paths(s)["f1"] == ["l2"]


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        # two mptcp flows to one receiver (what it announces goes to every connection it accepts)
        (
            PARKING.replace('algo = "reno"\nsrc = "h0"', 'kind = "mptcp"\nalgo = "mptcpw"\nsrc = "h0"')
            + '[[flows]]\nkind = "mptcp"\nalgo = "mptcpw"\nsrc = "h3"\ndst = "r0"\n',
            "flows[2].dst",
            "r0",
        ),
        # an mptcp receiver that also sends one (it would announce its endpoints to its own peer)
        (
            PARKING.replace('algo = "reno"\nsrc = "h0"', 'kind = "mptcp"\nalgo = "mptcpw"\nsrc = "h0"')
            + '[[flows]]\nkind = "mptcp"\nalgo = "mptcpw"\nsrc = "r0"\ndst = "h3"\n',
            "flows[2].src",
            "r0",
        ),
        # an mptcp sender that also sends a tcp flow (its one ephemeral port is the second subflow's)
        (MULTIPATH + '[[flows]]\nalgo = "reno"\nsrc = "h0"\ndst = "r1"\n', "flows[2].src", "h0"),
        # a path choice naming a link off the flow's paths
        (MULTIPATH.replace('src = "h3"\ndst = "r3"', 'src = "h3"\ndst = "r3"\nvia = "l1"'), "flows[1].via", "l1"),
        (MULTIPATH.replace("background = [2, 1]", "background = [2]"), "topology.background", "[2]"),
        # a link naming a missing node
        (GRAPH.replace('a = "b1"\nb = "sw2"', 'a = "b1"\nb = "sw9"'), "topology.links[3].b", "sw9"),
        # a duplicate link
        (GRAPH.replace('a = "a2"\nb = "sw1"', 'a = "a1"\nb = "sw1"'), "topology.links[1]", "a1-sw1"),
        # a loop of switches
        (
            GRAPH.replace('switches = ["sw1", "sw2"]', 'switches = ["sw1", "sw2", "sw3"]')
            + '[[topology.links]]\na = "sw2"\nb = "sw3"\n[[topology.links]]\na = "sw3"\nb = "sw1"\n',
            "loop",
            "sw3",
        ),
        # a flow with no route: the hosts share no switch group
        (
            GRAPH.replace('hosts = ["a1", "a2", "b1"]', 'hosts = ["a1", "a2", "b1", "c1"]')
            .replace('switches = ["sw1", "sw2"]', 'switches = ["sw1", "sw2", "sw3"]')
            .replace('src = "a2"', 'src = "c1"')
            + '[[topology.links]]\na = "c1"\nb = "sw3"\n',
            "flows[1].dst",
            "b1",
        ),
        # a flow naming a host the preset does not have
        (PARKING.replace('dst = "r2"', 'dst = "r7"'), "flows[1].dst", "r7"),
        # a rate on a host's own link
        (GRAPH.replace('a = "a1"\nb = "sw1"', 'a = "a1"\nb = "sw1"\nrate_mbps = 5'), "link l1", "rate_mbps"),
        # queue without rate
        (GRAPH.replace("delay_ms = 60", "delay_ms = 60\nqueue_pkts = 10"), "topology.links[1].queue_pkts", "10"),
        # an override of a link the preset does not have
        (PARKING + "[links.l99]\nrate_mbps = 5\n", "links.l99", "no such link"),
        # UDP settings on a TCP flow, an algorithm on a UDP flow
        (PARKING.replace('dst = "r2"', 'dst = "r2"\non_s = 1'), "flows[1].on_s", "1"),
        (PARKING.replace('algo = "reno"\nsrc = "h2"', 'kind = "udp_onoff"\nalgo = "reno"\nsrc = "h2"'), "algo", "reno"),
        # two flows from one host asking for different access delays
        (
            PARKING.replace('src = "h0"', 'src = "h2"\naccess_delay_ms = 5').replace(
                'src = "h2"\ndst = "r2"', 'src = "h2"\ndst = "r2"\naccess_delay_ms = 9'
            ),
            "flows[1].access_delay_ms",
            "9",
        ),
        # a graph link on bmv2 in both directions
        (GRAPH.replace('name = "g"', 'name = "g"\ndataplane = "bmv2"'), "both", "True"),
    ],
)
def test_bad_network_is_refused_naming_field_and_value(text: str, field: str, value: str) -> None:
    with pytest.raises(spec.SpecError) as exc:
        _parse(text)
    msg = str(exc.value)
    assert msg.startswith("spec error: ") and "\n" not in msg, msg
    assert field in msg and value in msg, msg


def test_cclab_check_refuses_a_bad_network_in_one_line_and_builds_nothing(tmp_path: object) -> None:
    from pathlib import Path

    bad = Path(str(tmp_path)) / "bad.toml"
    bad.write_text(GRAPH.replace('a = "b1"\nb = "sw2"', 'a = "b1"\nb = "sw9"'))
    proc = subprocess.run([*CCLAB, "check", str(bad)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2, proc
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and "sw9" in lines[0], lines


def test_shipped_specs_validate() -> None:
    """Every single-run spec at the top of experiments/ (a sweep's points: tests/test_experiments.py)."""
    for path in experiment_specs("*.toml"):
        if "sweep" not in spec.read_raw(path):
            assert spec.load(path).flows, path


def test_a_run_gives_its_flows_time_to_end_behind_its_fullest_queues() -> None:
    """iperf3's closing exchange waits behind a full queue: the slides' 5 MB queue at 10 Mbit/s holds 4 s and
    the path's RTT is 1.2 s, so four crossings take up to 20.8 s, past the 10 s a run gives at least."""
    from controller.experiment.build import GRACE_S, grace_s

    raw = spec.read_raw(REPO / "experiments" / "tcpw-faster-recovery" / "capacity.toml")
    raw.pop("sweep")
    for rate, want in ((10, 4 * (5e6 * 8 / 10e6 + 1.2)), (150, GRACE_S)):
        raw["bottleneck"]["rate_mbps"] = rate
        assert grace_s(spec.parse(raw).graph) == pytest.approx(want), rate
    # a schedule's lowest rate counts: TCPW-ABSE's radio (l2) at 0.2 Mbit/s holds 1.8 s with its 30 packets
    raw = spec.read_raw(REPO / "experiments" / "tcpw-abse" / "blackout.toml")
    raw.pop("sweep")
    assert grace_s(spec.parse(raw).graph) == GRACE_S
    raw["links"]["l2"]["queue_pkts"] = 300  # 18.2 s of 1514-byte frames at 0.2 Mbit/s, 9.1 s at its first 0.4
    held = (300 * 1514 * 8 / 0.2e6) + (50 * 1514 * 8 / 10e6) + 2 * (1 + 0.55) / 1e3
    assert grace_s(spec.parse(raw).graph) == pytest.approx(4 * held, rel=1e-3)
