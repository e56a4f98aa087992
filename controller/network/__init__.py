"""The network: `graph` (nodes, links, segments, paths, addresses), `presets` (dumbbell, parking lot),
`elements` (the delay elements' names) and `mininet` (the Mininet side, loaded by path)."""

from controller.network import presets
from controller.network.graph import (
    PREFIX_LEN,
    TNA_RED_WLOG,
    EmulatedLink,
    GilbertElliott,
    Graph,
    GraphError,
    Link,
    LinkSpec,
    Red,
    ScheduleStep,
    subnet,
)

#: the data-plane targets an emulated link can run on, by name (the spec's `dataplane`); the registry that
#: makes them (controller/dataplane/targets.py) holds exactly these
DATAPLANES = ("kernel", "bmv2", "tofino", "fpga-sim")

__all__ = [
    "DATAPLANES",
    "PREFIX_LEN",
    "EmulatedLink",
    "GilbertElliott",
    "Graph",
    "GraphError",
    "Link",
    "LinkSpec",
    "Red",
    "ScheduleStep",
    "TNA_RED_WLOG",
    "presets",
    "subnet",
]
