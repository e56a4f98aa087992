"""What the FPGA element of the harness build holds (dataplane = "fpga-sim"): its line, its queue and its
delay line, so that a link beyond them is refused when the spec is read, before anything is built.

The figures are the Makefile's FPGA_SIM_* (the -G flags cclab-fpga-sim is Verilated with;
tests/test_fpgasim.py holds them equal), and controller/dataplane/fpgasim.py refuses an element whose
registers say otherwise.  An element asked for more than it holds would bind at its own limit (a full
memory drops, a short delay line holds frames back), not at the spec's: a silent mismatch.
"""

from __future__ import annotations

from controller.network.graph import LinkSpec

#: the element's clock in kHz and its memories, 2^W beats of BEAT_BYTES each
CLOCK_KHZ, QUEUE_ADDR_W, DELAY_ADDR_W, BEAT_BYTES = 1250, 18, 20, 8
#: the descriptor ring holds 2^(QUEUE_ADDR_W - 2) frames (fpga/rtl/cclab_queue.v, DESC_ADDR_W)
QUEUE_FRAMES = 1 << (QUEUE_ADDR_W - 2)
#: the element's line: a beat a cycle, the most it carries (80 Mbit/s)
LINE_BPS = BEAT_BYTES * 8 * CLOCK_KHZ * 1000

#: a frame's Ethernet header on top of the MTU (no FCS: the element gets frames without it)
ETH_HLEN = 14


def _frame(mtu: int) -> int:
    return mtu + ETH_HLEN


def beats(nbytes: int) -> int:
    """Memory words (beats) a frame of `nbytes` takes in the element."""
    return -(-nbytes // BEAT_BYTES)


def queue_capacity(mtu: int = 1500) -> tuple[int, int]:
    """(frames, bytes) of full-size frames the element's queue memory holds."""
    frames = min(QUEUE_FRAMES, (1 << QUEUE_ADDR_W) // beats(_frame(mtu)))
    return frames, frames * _frame(mtu)


def delay_beats_needed(rate_bps: float, delay_ms: float, mtu: int = 1500) -> int:
    """Beats the delay line holds at `rate_bps` for `delay_ms`: full-size frames' bytes in flight, each frame
    rounded up to whole beats, and one frame more."""
    frame = _frame(mtu)
    frames = -(-int(rate_bps * delay_ms / 1000) // (8 * frame))
    return (frames + 1) * beats(frame)


def capacity_refusal(
    rate_bps: float, delay_ms: float, queue_pkts: int | None, queue_bytes: int | None, mtu: int = 1500
) -> tuple[str, object, str] | None:
    """Why the element of the harness build cannot emulate these settings, as (field, value, what is allowed),
    or None: a rate above its line, a queue larger than its memory, a delay whose bandwidth-delay product its
    delay line cannot hold.  Emulating such a link anyway would bind at the element's limit, not the spec's."""
    frames, nbytes = queue_capacity(mtu)
    frame = _frame(mtu)
    if queue_bytes is not None and queue_bytes > nbytes:
        return "queue_bytes", queue_bytes, f"the FPGA element's queue memory holds {nbytes} bytes at most"
    if queue_bytes is None and (queue_pkts or 0) > frames:
        return "queue_pkts", queue_pkts, f"the FPGA element's queue memory holds {frames} full-size frames at most"
    if rate_bps > LINE_BPS:
        return (
            "rate_mbps", rate_bps / 1e6,
            f"the FPGA element carries {LINE_BPS / 1e6:g} Mbit/s at most ({8 * BEAT_BYTES} bit at "
            f"{CLOCK_KHZ / 1000:g} MHz)",
        )  # fmt: skip
    if delay_beats_needed(rate_bps, delay_ms, mtu) > 1 << DELAY_ADDR_W:
        most_ms = ((1 << DELAY_ADDR_W) // beats(frame) - 1) * frame * 8 / rate_bps * 1000
        return (
            "delay_ms", delay_ms,
            f"the FPGA element's delay line holds {1 << DELAY_ADDR_W} beats of {BEAT_BYTES} bytes: "
            f"{most_ms:.0f} ms at most at {rate_bps / 1e6:g} Mbit/s",
        )  # fmt: skip
    return None


def link_refusal(ls: LinkSpec, mtu: int = 1500) -> tuple[str, object, str] | None:
    """capacity_refusal of a link's settings and of every step of its schedule (field names as in the spec)."""
    rate, delay = ls.rate_mbps or 0.0, ls.delay_ms
    why = capacity_refusal(rate * 1e6, delay, ls.queue_pkts, ls.queue_bytes, mtu)
    for i, st in enumerate(ls.schedule):
        if why is not None:
            break
        rate = st.rate_mbps if st.rate_mbps is not None else rate
        delay = st.delay_ms if st.delay_ms is not None else delay
        step = capacity_refusal(rate * 1e6, delay, ls.queue_pkts, ls.queue_bytes, mtu)
        why = None if step is None else (f"schedule[{i}].{step[0]}", *step[1:])
    return why
