"""The network: `graph` (nodes, links, segments, paths, addresses), `presets` (dumbbell, parking lot),
`elements` (the delay elements' names) and `mininet` (the Mininet side, loaded by path)."""

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
