"""The end hosts' TCP stack settings: the sysctls each host's namespace gets before its flows start.

They belong to what a run measures (a host's default algorithm, its SACK and its socket buffers shape every
connection), so they live with the hosts' other sources, which every run's source hash covers.
"""

from __future__ import annotations

#: the default congestion control, which every connection starts with until its flow's algorithm is set.
#: iperf3 sets a flow's algorithm after connect, when the default's init has run; bbr's (the default of some
#: machines, and namespaces inherit the machine's) turns on the kernel's internal pacing, and the switch to the
#: flow's algorithm leaves it on: reno then ran paced, and its segments' timestamps ran ahead of the clock
#: (measured: tcp_info's minimum RTT 184 ms on a 200 ms path, 2 of 4 runs of 60 s at 11 % loss below 198 ms;
#: with reno as the default, 4 of 4 read 200 ms). reno's init leaves pacing as it is, off.
DEFAULT_ALGO = "reno"


def sysctls(buffer_bytes: int, sack: bool, ephemeral_ports: tuple[int, int]) -> list[tuple[str, str]]:
    """(name, value) of every sysctl a host sets: socket buffers up to `buffer_bytes`, SACK on or off, the
    ephemeral port range and the default algorithm."""
    return [
        ("net.ipv4.tcp_rmem", f"4096 131072 {buffer_bytes}"),
        ("net.ipv4.tcp_wmem", f"4096 16384 {buffer_bytes}"),
        ("net.ipv4.tcp_no_metrics_save", "1"),
        # ephemeral ports (iperf3's control connections) above every flow's fixed client port, so that none can
        # take one first (seen: "unable to connect stream: Address already in use")
        ("net.ipv4.ip_local_port_range", f"{ephemeral_ports[0]} {ephemeral_ports[1]}"),
        ("net.ipv4.tcp_sack", "1" if sack else "0"),
        ("net.ipv4.tcp_congestion_control", DEFAULT_ALGO),
    ]
