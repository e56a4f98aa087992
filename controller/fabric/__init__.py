"""`switches = "ovs"`: Open vSwitch bridges programmed and read by an os-ken (Ryu) app.

ovs (the daemons and bridges), fabric (one run's fabric: plan, os-ken process, statistics), app (cclab's
os-ken app, run in the os-ken process), launch (that process's entry), edge (the edge-vs-bottleneck check).
"""
