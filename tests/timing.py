"""Timing checks beside a busy host: tried again only where the emulator under test says it ran late.

Used by the host's tests (tests/conftest.py prints every repeated try at the end of the session) and by the
lab VM's guest tests, which import it from the shared checkout.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

#: how many times a measurement of times is tried where the emulator says it ran late (`on_time`)
TIMED_TRIES = 3
#: a timer wake-up this late (ms) counts as the emulator's timers firing late (the lab VM's, the Vagrant box's)
TIMER_LATE_MS = 5.0
#: every try that failed and was tried again, and why, for the summary at the end of the session
TRIED_AGAIN: list[str] = []
T = TypeVar("T")


def on_time(attempt: Callable[[], T], late: Callable[[], int], who: str, tries: int = TIMED_TRIES) -> T:
    """attempt() (sets up, sends, asserts what it measured of times and rates); once more, up to `tries` in all,
    only where it failed while the emulator under test said it ran late: `late()` is its own count of late
    moments (fpga-sim's model behind the wall clock, cclab-delay's releases over 1 ms late, the lab VM's timer
    wake-ups), so the host, not the element, was slow.  A failure with the emulator on time is final; every
    repeated try is printed."""
    for n in range(1, tries + 1):
        late0 = late()
        try:
            return attempt()
        except AssertionError as exc:
            times = late() - late0
            if times == 0:
                raise
            print(f"{who}: try {n} of {tries} failed with the emulator late {times} times: {exc}")
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
            TRIED_AGAIN.append(f"{test}: try {n} of {tries} failed, {who} late {times} times")
            if n == tries:
                raise AssertionError(
                    f"{exc} ({who} ran late in each of {tries} tries, {times} times in the last: the host did not "
                    "give it the CPU)"
                ) from exc
    raise AssertionError(f"tries = {tries}: nothing was tried")
