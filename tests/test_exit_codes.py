"""The launcher's exit status: docs/failures.md's table is suite/exit_codes.py's, and what
torchrun and mpirun return for a pass maps onto it (a stall the launcher ended is never 137)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from suite import exit_codes
from suite.run import Pass, run_exit_status
from suite.watchdog import HANG_EXIT

DOCS = Path(__file__).resolve().parent.parent / "docs" / "failures.md"


def documented_table() -> list[tuple[str, str]]:
    """The rows of the table under docs/failures.md's "Exit status" heading."""
    section = DOCS.read_text().split("## Exit status", 1)[1].split("\n## ", 1)[0]
    return [(status, meaning.strip()) for status, meaning in
            re.findall(r"^\| (\d+(?: \+ N)?) \| (.+) \|$", section, re.MULTILINE)]


def test_the_documented_table_is_the_launchers():
    assert documented_table() == list(exit_codes.TABLE)
    assert [status for status, _ in exit_codes.TABLE] == [
        "0", "1", "2", "3", "130", "143", "129", "128 + N"]
    assert (exit_codes.ALL_RAN, exit_codes.BENCHMARK_FAILED, exit_codes.BAD_INPUT,
            exit_codes.HANG) == (0, 1, 2, 3)


def test_the_module_docstring_quotes_the_table():
    lines = re.findall(r"^    (\d+(?: \+ N)?)  +\S", exit_codes.__doc__, re.MULTILINE)
    assert lines == [status for status, _ in exit_codes.TABLE]


@pytest.mark.parametrize(("code", "hung", "expected"), [
    (0, False, 0),
    (5, False, 0),  # pytest: nothing selected (a resumed pass after its last benchmark)
    (None, False, 0),  # never started: a stop signal came first (the signal decides)
    (1, False, 1),  # torchrun: a rank failed
    (2, False, 1),  # pytest interrupted in a rank, under mpirun
    (-signal.SIGKILL, False, 137),  # killed from outside (the out-of-memory killer)
    (-signal.SIGSEGV, False, 139),
    (1, True, 3),  # torchrun after a rank's watchdog stopped it
    (HANG_EXIT, False, 3),  # mpirun passes the watchdog's 86 on
    (-signal.SIGKILL, True, 3),  # the launcher ended a stalled pass: not 137
])
def test_what_a_pass_returns_maps_onto_the_table(code, hung, expected):
    assert exit_codes.pass_status(code, hung) == expected


def test_the_run_takes_a_signal_first_then_a_hang_then_a_failure():
    assert exit_codes.run_status([0, 1, 3]) == 3
    assert exit_codes.run_status([1, 0]) == 1
    assert exit_codes.run_status([0, 0]) == 0
    assert exit_codes.run_status([0], incomplete=True) == 1
    assert exit_codes.run_status([1, 137, 0]) == 137
    assert exit_codes.run_status([137, 3]) == 3
    assert exit_codes.run_status([3], stop_signal=signal.SIGINT) == 130
    assert exit_codes.run_status([], stop_signal=signal.SIGTERM) == 143


def test_a_stall_the_launcher_ended_is_a_hang_not_137():
    passes = [Pass("torchrun gloo-tcp", []), Pass("mpirun", [])]
    passes[1].stalled = "rank(s) 0 ended 15 s ago and rank 1 (pid 7, stopped) did not"
    # No hang entry at all (no rank's stack could be taken): the stall alone decides.
    assert run_exit_status(passes, [0, -signal.SIGKILL], [], None, True) == 3
    # A hang the ranks ended themselves: torchrun's 1, mpirun's 86.
    passes[1].stalled = None
    hung = [{"pass": "torchrun gloo-tcp", "benchmark": "b"}]
    assert run_exit_status(passes, [1, 0], hung, None, True) == 3
    assert run_exit_status(passes, [0, HANG_EXIT], [], None, True) == 3
    assert run_exit_status(passes, [0, 1], [], None, True) == 1
    assert run_exit_status(passes, [0, -signal.SIGKILL], [], None, True) == 137  # not ours
    assert run_exit_status(passes, [0, 1], hung, signal.SIGTERM, True) == 143
