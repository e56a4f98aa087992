"""controller/system.py: the facts read from the running kernel."""

from __future__ import annotations

import os

from controller import system


def test_netstat_groups_each_line_of_names_with_its_line_of_values() -> None:
    text = "TcpExt: SyncookiesSent Delayed\nTcpExt: 0 12\nMPTcpExt: MPCapableSYNRX MPTCPRetrans\nMPTcpExt: 3 7\n"
    assert system.parse_netstat(text) == {
        "TcpExt": {"SyncookiesSent": 0, "Delayed": 12},
        "MPTcpExt": {"MPCapableSYNRX": 3, "MPTCPRetrans": 7},
    }
    # this process's own namespace, as a run reads a sender's: the counter MPTCP-level retransmissions come from
    assert system.netstat(os.getpid())["MPTcpExt"]["MPTCPRetrans"] >= 0
