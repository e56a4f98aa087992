"""The Mininet side of cclab, loaded by path: mininet/topologies.py (nodes, GraphTopo, the presets for
`mn --custom`) and mininet/p4switch.py (the BMv2 node).

They are files, not modules of this package, so that `sudo mn --custom mininet/topologies.py` reads
them as they are; cclab loads the same files.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from controller import system

TOPOLOGY_FILE = system.REPO / "mininet" / "topologies.py"
P4SWITCH_FILE = system.REPO / "mininet" / "p4switch.py"


def _load_by_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_topology_module() -> ModuleType:
    """mininet/topologies.py (nodes, GraphTopo and the presets), loaded by path."""
    return _load_by_path("cclab_topologies", TOPOLOGY_FILE)


def load_p4switch_module() -> ModuleType:
    """mininet/p4switch.py (the BMv2 node), loaded by path like the topology."""
    return _load_by_path("cclab_node_p4switch", P4SWITCH_FILE)
