"""The network: `graph` (nodes, links, segments, paths, addresses) and `presets` (dumbbell, parking lot)."""

from controller.network import presets
from controller.network.graph import (
    PREFIX_LEN,
    EmulatedLink,
    GilbertElliott,
    Graph,
    GraphError,
    Link,
    LinkSpec,
    ScheduleStep,
    subnet,
)

__all__ = [
    "PREFIX_LEN",
    "EmulatedLink",
    "GilbertElliott",
    "Graph",
    "GraphError",
    "Link",
    "LinkSpec",
    "ScheduleStep",
    "presets",
    "subnet",
]
