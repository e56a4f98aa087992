"""Benchmarks that print figures (targets are met here, not in timed tests): one module per family.

- data_plane:    `cclab bench dataplane`, a target's highest accurate rate beside its unshaped ceiling
- delay_element: `cclab bench delay`, the delay element's accuracy under load and its ceiling
- loopback:      `cclab bench cc`, each cclab algorithm's loopback throughput beside built-in reno
- setup_time:    `cclab bench setup`, set-up and teardown of large networks
- polling:       `cclab bench controller`, the monitor's CPU for many flows' counters
- ovs_fabric:    `cclab bench ovs`, what Open vSwitch carries beside Linux bridges
- sweep:         `cclab bench sweep`, runs per hour and fidelity pass rate at 1, 2, 3 runs side by side
- fpga_element:  `cclab bench fpga`, the FPGA element in the loop: model speed, the rate it carries beside
                 bmv2's, and (--demo) the demo on it beside the kernel target
"""

from controller.bench.data_plane import TARGETS, dataplane
from controller.bench.delay_element import delay
from controller.bench.loopback import cc_loopback
from controller.bench.ovs_fabric import fabric_ceiling
from controller.bench.polling import controller_polling
from controller.bench.setup_time import setup_teardown
from controller.bench.sweep import side_by_side

__all__ = [
    "TARGETS",
    "cc_loopback",
    "controller_polling",
    "dataplane",
    "delay",
    "fabric_ceiling",
    "setup_teardown",
    "side_by_side",
]
