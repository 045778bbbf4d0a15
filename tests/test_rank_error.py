"""A benchmark that raises on some ranks only: the ranks that went on wait inside a collective
the others never join. The pass ends FAILED_WAIT_S after the error, not at the deadline, names
the error, and the launcher goes on after it; where every rank raised alike the pass goes on
(2 gloo ranks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite import hangs
from suite.run import merge
from suite.watchdog import FAILED_WAIT_S, GRACE_S, POLL_S
from tests.test_deadline import run_logged, stuck_pass

FAILING = "tests/hang_bench/failing_benchmarks.py"
DEADLINE_S = 120  # far beyond FAILED_WAIT_S: the pass must not wait for it


@pytest.fixture(scope="module")
def raised(tmp_path_factory):
    folder = tmp_path_factory.mktemp("raised")
    passes, codes, hung, log = run_logged([stuck_pass(folder, FAILING, DEADLINE_S)],
                                          folder / "log.txt")
    return passes, codes, hung, log


def test_one_rank_raising_ends_the_pass_with_its_error_and_the_rest_runs(raised):
    passes, codes, hung, log = raised
    (hang,) = hung
    assert hang["benchmark"] == f"{FAILING}::test_one_rank_raises"
    line = Path(FAILING).read_text().splitlines().index(
        '        raise ValueError("rank 1 refused its input")') + 1
    assert hang["ranks"]["1"]["failed"] == (
        f"ValueError: rank 1 refused its input (failing_benchmarks.py:{line})")
    assert "failed" not in hang["ranks"]["0"]
    assert hang["stuck"] == [1]  # rank 0 waited in the all-reduce for rank 1
    assert hang["ranks"]["0"]["innermost"].endswith(" in all_reduce")
    assert (f"[suite] {FAILING}::test_one_rank_raises raised on rank(s) 1 and the other ranks "
            "did not finish it; the pass was stopped") in log
    assert "raised ValueError: rank 1 refused its input" in log
    assert [step.name for step in passes] == ["torchrun gloo-tcp", "torchrun gloo-tcp (resumed)"]
    merged = merge(passes, codes, "python -m suite.run", "test")
    assert [b["name"] for b in merged["benchmarks"]] == ["test_before", "test_after"]


def test_the_pass_ends_soon_after_the_error_not_at_the_deadline(raised):
    passes, _, _, _ = raised
    records = hangs.read_records(passes[0].output)
    failed = next(r for r in records if r["rank"] == 1)
    assert FAILED_WAIT_S <= failed["elapsed_s"] < FAILED_WAIT_S + GRACE_S
    assert all(r["elapsed_s"] < FAILED_WAIT_S + POLL_S + GRACE_S < DEADLINE_S for r in records)


def test_every_rank_raising_alike_keeps_the_pass(raised):
    passes, _, _, log = raised
    resumed = json.loads(passes[1].output.read_text())
    assert [b["name"] for b in resumed["benchmarks"]] == ["test_after"]
    assert "FAILED tests/hang_bench/failing_benchmarks.py::test_every_rank_raises" in log
    assert len(passes) == 2  # no third pass: nothing waited
