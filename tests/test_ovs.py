"""`switches = "ovs"`: Open vSwitch bridges programmed by cclab's os-ken app, counting every flow at its
sender's switch; real OVS (Debian's openvswitch-switch, the userspace datapath where the kernel has no
openvswitch module) and real os-ken, in real runs."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from controller import spec, system
from controller.dataplane import FlowKey
from controller.experiment import preflight, runner
from controller.fabric import fabric, ovs
from controller.network import LinkSpec
from controller.network.presets import dumbbell, parking_lot
from controller.spec import SpecError, tomllib
from tests.conftest import CCLAB, REPO, leftovers

MISSING = fabric.missing()
needs_ovs = pytest.mark.skipif(MISSING is not None, reason=f"OVS or os-ken missing: {MISSING}")


def _ovs_leftovers() -> list[str]:
    """What a run with OVS switches may leave: the os-ken process, cclab's daemons and bridges."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or not system.alive(int(d.name)):
            continue
        try:
            argv = [a.decode() for a in (d / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        if any("controller.fabric.launch" in a for a in argv) or any(str(ovs.OVS_STATE) in a for a in argv):
            found.append(f"process {d.name} {' '.join(argv)}")
    if ovs.user_ovs_running():
        found += [f"bridge {b} in the user's OVS" for b in ovs.cclab_bridges(ovs.SYSTEM_DB)]
    return found + leftovers()


# --- no root: the spec and the plan -----------------------------------------------------------------


BASE = """
name = "t"
duration_s = 5
{extra}
[topology]
kind = "dumbbell"
pairs = 1
[bottleneck]
rate_mbps = {rate}
[[flows]]
algo = "reno"
src = "h1"
dst = "r1"
"""


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ('switches = "openflow"', "switches"),
        ('switches = "ovs"\ndataplane = "bmv2"', "switches"),
        ('controller_app = "experiments/port_monitor.py"', "controller_app"),  # needs switches = "ovs"
        ('switches = "ovs"\ncontroller_app = "no_such_app.py"', "controller_app"),
        ('switches = "ovs"\ncontroller_app = 3', "controller_app"),
    ],
)
def test_spec_refuses_bad_switches_fields_in_one_line(extra: str, field: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec.parse(tomllib.loads(BASE.format(extra=extra, rate=10)), REPO / "spec.toml")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"spec error: {field} = "), msg


def test_spec_takes_ovs_and_an_app_relative_to_the_spec() -> None:
    s = spec.load(REPO / "experiments" / "ovs_port_monitor.toml")
    assert s.switches == "ovs" and s.controller_app == REPO / "experiments" / "port_monitor.py"
    assert spec.load(REPO / "experiments" / "demo.toml").switches == "linux"


@pytest.mark.skipif(ovs.kernel_datapath(), reason="this kernel has the openvswitch module: no userspace ceiling")
def test_a_rate_beyond_the_userspace_datapath_is_refused_in_one_line() -> None:
    g = dumbbell(2, LinkSpec(rate_mbps=fabric.NETDEV_MAX_MBPS + 1))
    why = fabric.too_fast(g)
    assert why is not None and "rate_mbps" in why and f"{fabric.NETDEV_MAX_MBPS:g}" in why
    assert fabric.too_fast(dumbbell(2, LinkSpec(rate_mbps=fabric.NETDEV_MAX_MBPS))) is None


def test_the_plan_routes_every_address_and_counts_each_flow_on_every_switch_of_its_path() -> None:
    """Parking lot of 2: the long flow h0 -> r0 has an exact entry on s1, s2 and s3, each to the port
    towards the next switch; every switch routes every address of the segment."""
    g = parking_lot(2, LinkSpec(rate_mbps=10))
    ports: dict[tuple[str, str], int] = {}
    for link in g.links:
        ends = [link.a, link.b]
        if link.spec.emulated:  # with OVS an emulated link is emulated on two Linux bridges inside it
            ends = [link.a, f"d{link.id}q", f"d{link.id}", link.b]
        for x, y in zip(ends, ends[1:]):
            for a, b in ((x, y), (y, x)):
                if a in g.switches:
                    ports[(a, b)] = 1 + sum(1 for k in ports if k[0] == a)
    ip = {h: g.addresses[(h, 0)] for h in g.hosts}
    flows = [fabric.CountedFlow(1, "f1", FlowKey(ip["h0"], ip["r0"], 5001, 5201, 6), "h0", "r0", 0)]
    cfg = fabric.plan(g, ports, flows)
    assert [cfg[d]["name"] for d in sorted(cfg)] == ["s1", "s2", "s3"]
    for sw in cfg.values():
        assert sorted(r["dst"] for r in sw["routes"]) == sorted(ip.values()), sw["name"]
        assert [f["cookie"] for f in sw["flows"]] == [1], sw["name"]
    assert cfg["1"]["flows"][0]["port"] == ports[("s1", "dl1q")]
    assert cfg["2"]["flows"][0]["port"] == ports[("s2", "dl2q")]
    assert cfg["3"]["flows"][0]["port"] == ports[("s3", "r0")]
    by_dst = {r["dst"]: r["port"] for r in cfg["2"]["routes"]}
    assert by_dst[ip["h0"]] == ports[("s2", "dl1")] and by_dst[ip["r0"]] == ports[("s2", "dl2q")]


# --- root: real runs --------------------------------------------------------------------------------


def _run(text: str, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    s = spec.parse(tomllib.loads(text), REPO / "experiments" / "x.toml")
    out = runner.run(s, runner.RunOptions(results_root=tmp_path, plots=False))
    assert out.summary["complete"], out.summary["reason"]
    return out.run_dir, out.summary


def _check_edge(summ: dict[str, Any]) -> None:
    """Every flow: the OpenFlow entry at its sender's switch counted what its first emulated link was
    offered, and its edge packets less the last link's forwarded ones are exactly its drops and the
    packets still queued on its path (within EDGE_TOLERANCE_PKTS)."""
    for fl in summ["flows"]:
        e = fl.get("edge")
        assert e is not None, f"{fl['id']}: no edge counters"
        assert e["packets"] > 1000, e
        assert abs(e["packets"] - e["first_link_offered_packets"]) <= 3, (fl["id"], e)
        assert abs(e["bytes"] - e["first_link_offered_bytes"]) <= 3 * 1514, (fl["id"], e)
        chk = summ["fidelity"]["checks"][f"{fl['id']}.edge_unexplained_packets"]
        assert chk["ok"], (fl["id"], e, chk)


@pytest.mark.root
@pytest.mark.slow
@needs_ovs
@pytest.mark.usefixtures("clean_host")
def test_dumbbell_on_ovs_edge_counters_agree_with_the_bottleneck(tmp_path: Path) -> None:
    """experiments/ovs_dumbbell.toml: two flows, random loss 1e-3 and a 50-packet queue, so both kinds of
    drop happen; the manifest records the datapath."""
    run_dir, summ = _run((REPO / "experiments" / "ovs_dumbbell.toml").read_text(), tmp_path)
    _check_edge(summ)
    assert sum(f["random_drops"] for f in summ["flows"]) > 0 and sum(f["queue_drops"] for f in summ["flows"]) > 0
    man = json.loads((run_dir / "manifest.json").read_text())
    sw = man["switches"]
    assert sw["switches"] == "ovs" and sw["os_ken"], sw
    assert sw["datapath_type"] == ("system" if ovs.kernel_datapath() else "netdev"), sw
    assert _ovs_leftovers() == []


@pytest.mark.root
@pytest.mark.slow
@needs_ovs
@pytest.mark.usefixtures("clean_host")
def test_parking_lot_on_ovs_with_the_users_app(tmp_path: Path) -> None:
    """experiments/ovs_port_monitor.toml: the parking lot of two with experiments/port_monitor.py beside
    cclab's app; the long flow is counted at s1 and agrees with l2's forwarded packets and the drops of
    l1 and l2; the user's app wrote each port's rate."""
    run_dir, summ = _run((REPO / "experiments" / "ovs_port_monitor.toml").read_text(), tmp_path)
    _check_edge(summ)
    flows = {f["id"]: f for f in summ["flows"]}
    assert flows["f1"]["path"] == ["l1", "l2"]
    with open(run_dir / "port_rates.csv") as f:
        rows = list(csv.DictReader(f))
    busy = [r for r in rows if float(r["tx_bps"]) > 10e6]
    assert {r["dpid"] for r in busy} >= {"1", "2"}, "the user's app saw no port carry the flows"
    assert _ovs_leftovers() == []


@pytest.mark.root
@pytest.mark.slow
@needs_ovs
def test_ctrl_c_leaves_nothing_and_clean_removes_a_killed_run(tmp_path: Path) -> None:
    """SIGINT during traffic: no os-ken, no OVS daemons or bridges, nothing of Mininet.  SIGKILL of the
    controller and of ovs-vswitchd (as a machine's stop kills them): the leftovers are there, the userspace
    bridges' persistent devices among them, and `cclab clean` removes them."""
    assert _ovs_leftovers() == [], "host not clean before the test"
    for sig in (signal.SIGINT, signal.SIGKILL):
        results = tmp_path / sig.name
        proc = subprocess.Popen(
            [*CCLAB, "run", "experiments/ovs_dumbbell.toml", "--no-live", "--results", str(results)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 40
        while not any(results.glob("*/iperf")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not start in time"
            time.sleep(0.05)
        time.sleep(3)
        proc.send_signal(sig)
        if sig == signal.SIGKILL:
            os.kill(int((ovs.OVS_STATE / "ovs-vswitchd.pid").read_text()), signal.SIGKILL)
        proc.communicate(timeout=40)
        if sig == signal.SIGINT:
            assert _ovs_leftovers() == [], "left behind after SIGINT"
            summ = json.loads(next(results.glob("*/summary.json")).read_text())
            assert summ["complete"] is False and "interrupted" in summ["reason"]
        else:
            left = _ovs_leftovers()
            assert any("controller.fabric.launch" in x for x in left), left
            if not ovs.kernel_datapath():
                assert "device s1" in left, left
            clean = subprocess.run([*CCLAB, "clean"], cwd=REPO, capture_output=True, text=True, timeout=60)
            assert clean.returncode == 0, clean.stderr
            assert _ovs_leftovers() == [], "cclab clean left these"


@pytest.mark.root
@needs_ovs
def test_a_spec_too_fast_for_the_userspace_datapath_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    if ovs.kernel_datapath():
        pytest.skip("this kernel has the openvswitch module: no userspace ceiling")
    text = BASE.format(extra='switches = "ovs"', rate=fabric.NETDEV_MAX_MBPS * 2)
    with pytest.raises(preflight.RunError) as exc:
        runner.run(spec.parse(tomllib.loads(text)), runner.RunOptions(results_root=tmp_path))
    assert "\n" not in str(exc.value) and "rate_mbps" in str(exc.value)
    assert not list(tmp_path.iterdir())


@pytest.mark.root
@pytest.mark.slow
@needs_ovs
@pytest.mark.usefixtures("clean_host")
def test_an_ovs_the_user_runs_is_used_and_left_alone(tmp_path: Path) -> None:
    """A user's OVS (Debian's default run directory) with a bridge of its own: the run adds its bridges
    to it and removes only those; the user's daemons and bridge are still there after the run."""
    if ovs.user_ovs_running():
        pytest.skip("an OVS already runs here: this test starts and stops one of its own")
    rundir, db = ovs.SYSTEM_DB.parent, ovs.SYSTEM_DB
    rundir.mkdir(parents=True, exist_ok=True)
    conf = tmp_path / "user.db"
    subprocess.run(["ovsdb-tool", "create", str(conf), str(ovs.SCHEMA)], check=True)
    pidfiles = [tmp_path / "user-ovsdb.pid", tmp_path / "user-vswitchd.pid"]
    subprocess.run(
        ["ovsdb-server", str(conf), f"--remote=punix:{db}", f"--pidfile={pidfiles[0]}", "--detach",
         f"--unixctl={tmp_path / 'user-ovsdb.ctl'}", f"--log-file={tmp_path / 'user-ovsdb.log'}"],
        check=True,
    )  # fmt: skip
    try:
        subprocess.run(["ovs-vsctl", f"--db=unix:{db}", "--no-wait", "init"], check=True)
        subprocess.run(
            ["ovs-vswitchd", f"unix:{db}", f"--pidfile={pidfiles[1]}", "--detach",
             f"--unixctl={tmp_path / 'user-vswitchd.ctl'}", f"--log-file={tmp_path / 'user-vswitchd.log'}"],
            check=True,
        )  # fmt: skip
        subprocess.run(
            ["ovs-vsctl", f"--db=unix:{db}", "add-br", "userbr0", "--", "set", "Bridge", "userbr0",
             "datapath_type=netdev"],
            check=True,
        )  # fmt: skip
        text = (REPO / "experiments" / "ovs_dumbbell.toml").read_text().replace("duration_s = 10", "duration_s = 4")
        run_dir, summ = _run(text, tmp_path)
        _check_edge(summ)
        assert json.loads((run_dir / "manifest.json").read_text())["switches"]["daemons"] == "the user's"
        assert all(system.alive(int(p.read_text())) for p in pidfiles), "the user's OVS was stopped"
        names = subprocess.run(["ovs-vsctl", f"--db=unix:{db}", "list-br"], capture_output=True, text=True).stdout
        assert names.split() == ["userbr0"], names
    finally:
        subprocess.run(["ovs-vsctl", f"--db=unix:{db}", "--if-exists", "del-br", "userbr0"], capture_output=True)
        for p in reversed(pidfiles):
            if p.exists():
                pid = int(p.read_text())
                if system.alive(pid):
                    os.kill(pid, signal.SIGTERM)
                    deadline = time.monotonic() + 5
                    while system.alive(pid) and time.monotonic() < deadline:
                        time.sleep(0.05)
        db.unlink(missing_ok=True)
