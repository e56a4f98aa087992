"""on_time (tests/timing.py): a timing check is tried again only where its emulator says it ran late."""

from __future__ import annotations

import pytest

from tests import timing
from tests.timing import on_time


class Emulator:
    """An attempt that fails its first `failing` tries, and a late count that grows by `late_per_try` each try."""

    def __init__(self, failing: int, late_per_try: int) -> None:
        self.failing, self.late_per_try = failing, late_per_try
        self.tries = self.late_count = 0

    def attempt(self) -> str:
        self.tries += 1
        self.late_count += self.late_per_try
        assert self.tries > self.failing, f"measured wrong in try {self.tries}"
        return "measured"

    def late(self) -> int:
        return self.late_count


def test_a_failure_with_the_emulator_on_time_is_final() -> None:
    em = Emulator(failing=1, late_per_try=0)
    with pytest.raises(AssertionError, match="measured wrong in try 1"):
        on_time(em.attempt, em.late, "the element")
    assert em.tries == 1


def test_a_failure_with_the_emulator_late_is_tried_again_and_reported() -> None:
    em = Emulator(failing=1, late_per_try=2)
    before = len(timing.TRIED_AGAIN)
    assert on_time(em.attempt, em.late, "the element") == "measured"
    assert em.tries == 2
    assert len(timing.TRIED_AGAIN) == before + 1
    assert timing.TRIED_AGAIN[-1].endswith("try 1 of 3 failed, the element late 2 times")
    del timing.TRIED_AGAIN[before:]


def test_late_in_every_try_fails_saying_so() -> None:
    em = Emulator(failing=5, late_per_try=1)
    before = len(timing.TRIED_AGAIN)
    with pytest.raises(AssertionError, match=r"(?s)measured wrong in try 3.*the element ran late in each of 3 tries"):
        on_time(em.attempt, em.late, "the element")
    assert em.tries == 3
    del timing.TRIED_AGAIN[before:]
