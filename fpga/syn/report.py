"""Print what synth.sh's tools found: resources from a Yosys `stat`, the clock and the critical path from a
nextpnr --report file.

    report.py xilinx STATFILE
    report.py ecp5 REPORT.json TARGET_MHZ
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def xilinx(stat: Path) -> None:
    cells: dict[str, int] = {}
    for line in stat.read_text().splitlines():
        m = re.match(r"\s+(\w+)\s+(\d+)$", line)
        if m:
            cells[m.group(1)] = cells.get(m.group(1), 0) + int(m.group(2))
    luts = sum(n for c, n in cells.items() if re.fullmatch(r"LUT[1-6]", c))
    lutram = sum(n for c, n in cells.items() if c.startswith("RAM") and not c.startswith("RAMB"))
    ffs = sum(n for c, n in cells.items() if re.fullmatch(r"FD[CPRSE]E?", c))
    b36 = cells.get("RAMB36E2", 0)
    b18 = cells.get("RAMB18E2", 0)
    carry = cells.get("CARRY8", 0) + cells.get("CARRY4", 0)
    print(f"  LUTs {luts} (+ {lutram} LUT-RAM, {cells.get('SRL16E', 0)} SRL16E), flip-flops {ffs}, block RAM: "
          f"{b36} RAMB36E2 + {b18} RAMB18E2, carry cells {carry}, DSP {cells.get('DSP48E2', 0)}")


def ecp5(report: Path, target_mhz: float) -> None:
    rep = json.loads(report.read_text())
    for clk, f in rep.get("fmax", {}).items():
        ok = "meets" if f["achieved"] >= target_mhz else "misses"
        print(f"  clock {clk}: {f['achieved']:.1f} MHz achieved ({ok} {target_mhz} MHz)")
    util = rep.get("utilization", {})
    shown = ("TRELLIS_COMB", "TRELLIS_FF", "DP16KD")
    parts = [f"{k} {v['used']}/{v['available']}" for k, v in util.items() if k in shown]
    print("  used: " + ", ".join(parts))
    paths = rep.get("critical_paths", [])
    if not paths:
        return
    worst = paths[0]
    steps = worst.get("path", [])
    total = sum(s.get("delay", 0.0) for s in steps)
    print(f"  critical path ({worst.get('from')} -> {worst.get('to')}), {total:.2f} ns, {len(steps)} steps:")
    # the modules the path crosses, in order (cell names are the netlist's: module path, then mapped names)
    crossed: list[str] = []
    for s in steps:
        for end in ("from", "to"):
            c = s.get(end, {}).get("cell", "")
            mod = ".".join(c.split(".")[:-1]) if "." in c else c
            if mod and (not crossed or crossed[-1] != mod):
                crossed.append(mod)
    print(f"    from {steps[0]['from']['cell']}" if steps else "")
    print(f"    to   {steps[-1]['to']['cell']}" if steps else "")
    print(f"    through {' > '.join(crossed)}")


if __name__ == "__main__":
    if sys.argv[1] == "xilinx":
        xilinx(Path(sys.argv[2]))
    else:
        ecp5(Path(sys.argv[2]), float(sys.argv[3]))
