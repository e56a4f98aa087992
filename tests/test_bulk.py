"""hosts/bulk.py, the MPTCP sender and sink, run for real over this host's loopback: a timed sender whose data
cannot drain in time (a sink reading slowly) ends within DRAIN_S of its time and says so, and the sink still
reports what it read."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hosts import bulk

TOOL = Path(bulk.__file__)
#: the slow sink: this many bytes every READ_EVERY_S (16 kB/s), where what the sender has queued at its end (its
#: socket's buffers and the sink's, 100 kB or more) takes 6 s or more to read
READ_BYTES, READ_EVERY_S = 4096, 0.25
DURATION_S = 1.5


def _mptcp_listener() -> socket.socket:
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, bulk.IPPROTO_MPTCP)
    except OSError as exc:
        pytest.skip(f"no MPTCP sockets on this kernel: {exc}")
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s


def test_a_timed_sender_resets_what_did_not_drain_in_time() -> None:
    listener = _mptcp_listener()
    port = listener.getsockname()[1]
    read: list[int] = []
    ended: list[str] = []

    def slow_sink() -> None:
        conn, _ = listener.accept()
        try:
            while chunk := conn.recv(READ_BYTES):
                read.append(len(chunk))
                time.sleep(READ_EVERY_S)
            ended.append("eof")
        except ConnectionResetError:
            ended.append("reset")
        conn.close()

    sink = threading.Thread(target=slow_sink, daemon=True)
    sink.start()
    args = ["send", "127.0.0.1", "0", "127.0.0.1", str(port), "--duration-s", str(DURATION_S), "--cc", "reno"]
    proc = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60)
    sink.join(timeout=10)
    listener.close()
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert 0 < sum(read) < out["sent"], (out, sum(read))  # what had not arrived by the reset was dropped
    assert not out["drained"], out
    assert DURATION_S + bulk.DRAIN_S - 0.5 < out["seconds"] < DURATION_S + bulk.DRAIN_S + 2.0, out
    assert ended == ["reset"], ended


def test_a_timed_sender_that_drains_says_so() -> None:
    """The usual end: the sink reads as fast as data comes, has it all soon after T and closes."""
    listener = _mptcp_listener()
    port = listener.getsockname()[1]
    listener.close()
    sink = subprocess.Popen(
        [sys.executable, str(TOOL), "sink", "127.0.0.1", str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert sink.stdout is not None and json.loads(sink.stdout.readline()) == {"ready": True}
        args = ["send", "127.0.0.1", "0", "127.0.0.1", str(port), "--duration-s", "1", "--cc", "reno"]
        proc = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60)
        got = json.loads(sink.stdout.readline())
    finally:
        sink.kill()
        sink.wait()
    out = json.loads(proc.stdout)
    assert out["drained"] and out["seconds"] < 1 + bulk.DRAIN_S, out
    assert got["received"] == out["sent"] > 0, (got, out)


def test_a_sender_stopped_while_its_data_still_leaves_reports_it() -> None:
    """SIGINT while the sender waits for the sink (which reads nothing), then again while its closed socket still
    holds data to send: it prints its report, saying its connection had not closed, instead of a traceback."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(listener.accept()[0]), daemon=True).start()
    args = ["send", "127.0.0.1", "0", "127.0.0.1", str(port), "--duration-s", "1", "--cc", "reno", "--tcp"]
    proc = subprocess.Popen([sys.executable, str(TOOL), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(2.0)  # its second of writing is over: it waits up to DRAIN_S for the sink
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)  # now waiting for its connection, whose data the sink never reads, to close
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        for conn in held:
            conn.close()
        listener.close()
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["sent"] > 0 and report["subflows"] == 1 and report["subflows_closed"] is False, report
