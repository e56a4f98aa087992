"""cclab: a testbed for TCP congestion-control research and teaching."""

__version__ = "0.1.0"
