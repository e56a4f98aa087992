# Shared by the testbench Makefiles in fpga/tb/<module>/: each sets DUT (its
# top-level module) and its PARAM_<name> parameters, then includes this.
#   make                 run on Icarus (SIM=icarus, the default)
#   make SIM=verilator   on Verilator (cocotb 2 needs Verilator >= 5.036)
#   make WAVES=1         also write a waveform (<DUT>.fst)

TB_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))

TOPLEVEL_LANG = verilog
SIM ?= icarus
WAVES ?= 0

COCOTB_HDL_TIMEUNIT = 1ns
COCOTB_HDL_TIMEPRECISION = 1ps

COCOTB_TOPLEVEL = $(DUT)
COCOTB_TEST_MODULES = test_$(DUT)
VERILOG_SOURCES = $(wildcard $(TB_DIR)/../rtl/*.v)
# the testbench reads its parameters from the environment too
export $(filter PARAM_%,$(.VARIABLES))
export PYTHONPATH := $(TB_DIR):$(PYTHONPATH)

ifeq ($(SIM), icarus)
	COMPILE_ARGS += $(foreach v,$(filter PARAM_%,$(.VARIABLES)),-P $(COCOTB_TOPLEVEL).$(subst PARAM_,,$(v))=$($(v)))
	ifeq ($(WAVES), 1)
		VERILOG_SOURCES += iverilog_dump.v
		COMPILE_ARGS += -s iverilog_dump
	endif
else ifeq ($(SIM), verilator)
	COMPILE_ARGS += $(foreach v,$(filter PARAM_%,$(.VARIABLES)),-G$(subst PARAM_,,$(v))=$($(v)))
	ifeq ($(WAVES), 1)
		COMPILE_ARGS += --trace-fst
	endif
endif

include $(shell cocotb-config --makefiles)/Makefile.sim

iverilog_dump.v:
	echo 'module iverilog_dump();' > $@
	echo 'initial begin' >> $@
	echo '    $$dumpfile("$(COCOTB_TOPLEVEL).fst");' >> $@
	echo '    $$dumpvars(0, $(COCOTB_TOPLEVEL));' >> $@
	echo 'end' >> $@
	echo 'endmodule' >> $@

clean::
	rm -rf iverilog_dump.v results.xml *.fst sim_build __pycache__
