#!/usr/bin/env bash
# Synthesis and place-and-route of the reference build (64-bit, full register
# map), for `make fpga-synth`:
#   1. Yosys synth_xilinx for UltraScale+ (the family of Alveo and NetFPGA
#      boards): LUTs, flip-flops, block RAMs.  Yosys gives no clock.
#   2. Yosys synth_ecp5 + nextpnr-ecp5 on an LFE5U-85F (speed 6), behind the
#      byte-wide register port of cclab_bottleneck_pnr.v: the achieved clock
#      and the critical path, for PIPELINE=0 (the straightforward form) and
#      PIPELINE=1 (the pipelined token bucket and admission), against
#      156.25 MHz.
# Usage: fpga/syn/synth.sh OUTDIR   (YOSYS, NEXTPNR_ECP5, PYTHON overridable)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: synth.sh OUTDIR}"
YOSYS="${YOSYS:-yosys}"
NEXTPNR_ECP5="${NEXTPNR_ECP5:-nextpnr-ecp5}"
PYTHON="${PYTHON:-python3}"
SEED="${SEED:-1}"
mkdir -p "$out"
rtl=("$here"/../rtl/*.v)

echo "== Yosys synth_xilinx -family xcup (cclab_bottleneck, PIPELINE=1)"
"$YOSYS" -q -l "$out/xcup.log" -p "read_verilog ${rtl[*]}; \
	chparam -set PIPELINE 1 cclab_bottleneck; \
	synth_xilinx -family xcup -top cclab_bottleneck -flatten; \
	tee -o $out/xcup.stat stat" >/dev/null 2>&1
"$PYTHON" "$here/report.py" xilinx "$out/xcup.stat"

for p in 0 1; do
	echo "== Yosys synth_ecp5 + nextpnr-ecp5 --85k CABGA756 speed 6 (PIPELINE=$p)"
	"$YOSYS" -q -l "$out/ecp5-p$p.yosys.log" -p "read_verilog ${rtl[*]} $here/cclab_bottleneck_pnr.v; \
		chparam -set PIPELINE $p cclab_bottleneck_pnr; \
		synth_ecp5 -top cclab_bottleneck_pnr -json $out/ecp5-p$p.json" >/dev/null 2>&1
	"$NEXTPNR_ECP5" --85k --package CABGA756 --speed 6 --freq 156.25 --seed "$SEED" \
		--json "$out/ecp5-p$p.json" --report "$out/ecp5-p$p.report.json" \
		--timing-allow-fail -q -l "$out/ecp5-p$p.nextpnr.log" >/dev/null 2>&1 || {
		echo "nextpnr-ecp5 failed: see $out/ecp5-p$p.nextpnr.log" >&2
		exit 1
	}
	"$PYTHON" "$here/report.py" ecp5 "$out/ecp5-p$p.report.json" 156.25
done
