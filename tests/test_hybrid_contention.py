"""The work run beside host Adam (impl/hybrid/contention.py): it runs from entry to exit, at
its steady state when entry returns, and a failure in it is not lost."""

from __future__ import annotations

import threading

import pytest

from impl.hybrid.contention import Beside


def test_the_work_runs_from_entry_until_exit_and_stops():
    ran, first_done = [], threading.Event()

    def work() -> None:
        ran.append(1)
        first_done.set()

    with Beside(work) as beside:
        assert first_done.is_set() and beside.runs >= 1  # entry waited for a whole run
    runs = beside.runs
    assert not beside.thread.is_alive() and runs == len(ran)
    with Beside(work):  # a second entry runs it again
        pass
    assert beside.runs == runs


def test_a_failing_work_is_raised_at_exit_with_its_message():
    def work() -> None:
        raise OSError("pinned memory exhausted")

    with pytest.raises(RuntimeError, match="the work beside host Adam failed: pinned memory "
                                           "exhausted"), Beside(work):
        pass
