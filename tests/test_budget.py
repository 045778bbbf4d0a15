"""The run's budget (suite/budget.py): rates fitted on durations, the plan, the progress line,
the refusal of a benchmark over its mode's budget, and the held-out check on committed runs."""

from __future__ import annotations

import json
import math

import pytest

from suite import budget, calibrate
from suite.watchdog import Deadline
from tests import committed

# The 2-GPU default run of 2026-11-27: committed, but outside the report's fixture set.
TWO_GPU_RUN = "results/h200x2/20261127T135955Z-7im9itx9.json"


def timed(run: str, name: str, wall: float, rows) -> calibrate.TimedPass:
    return calibrate.TimedPass(run, name, "gpu", wall, tuple(rows))


def test_rates_are_duration_over_expected_per_study_and_the_start_is_the_rest():
    passes = [timed("a", "torchrun nvlink", 100.0, [("dp", 40.0, 20.0), ("gemm", 60.0, 30.0)]),
              timed("b", "torchrun nvlink", 70.0, [("dp", 40.0, 40.0)])]
    rates = calibrate.fit(passes)
    assert rates.rate["gpu"] == {"dp": 60.0 / 80.0, "gemm": 0.5, "*": 90.0 / 140.0}
    assert rates.start_s["gpu"]["torchrun nvlink"] == (100 - 50 + 70 - 40) / 2  # the median of two
    assert rates.benchmark_s("gpu", "dp", 10.0) == 7.5
    assert rates.benchmark_s("gpu", "never timed", 10.0) == 10.0 * 90.0 / 140.0
    assert rates.benchmark_s("cpu", "dp", 10.0) == 10.0  # nothing fitted: the estimate itself
    assert rates.pass_start_s("cpu", "mpirun") == budget.UNFITTED_START_S


def test_each_run_is_predicted_from_the_other_runs_only():
    passes = [timed("a", "p", 30.0, [("dp", 10.0, 20.0)]),
              timed("b", "p", 50.0, [("dp", 10.0, 40.0)])]
    (run_a, predicted_a, actual_a), (run_b, predicted_b, actual_b) = calibrate.held_out(passes)
    assert (run_a, actual_a, run_b, actual_b) == ("a", 30.0, "b", 50.0)
    assert predicted_a == 10.0 + 10.0 * 4.0  # b's start and rate
    assert predicted_b == 10.0 + 10.0 * 2.0  # a's


def test_a_run_alone_in_its_machine_class_is_not_scored():
    passes = [timed("a", "p", 30.0, [("dp", 10.0, 20.0)]),
              timed("b", "p", 50.0, [("dp", 10.0, 40.0)]),
              calibrate.TimedPass("c", "p", "cpu", 60.0, (("dp", 10.0, 50.0),))]
    assert calibrate.held_out(passes)[2] == ("c", None, 60.0)


@pytest.mark.parametrize("command, whole", [
    ("python -m suite.run", True),
    ("python -m suite.run --results-dir /root/out/r --skip-mpi", True),
    ("python -m suite.run --quick --ranks 2", True),
    ("python -m suite.run --results-dir /tmp/m --deadline-floor-s 300 -- -k K1-w2", False),
    ("python -m suite.run --workloads mlp_tiny", False),
    ("python -m pytest suite/", False),
    ("python -m suite.run -- -k 'unclosed", False),
    (None, False),
])
def test_only_whole_runs_are_fitted_on(command, whole):
    assert calibrate.whole_run(command) is whole


def test_a_recorded_pass_is_collected_as_its_launch_saw_it():
    arguments, env = calibrate.pass_collection(
        "/usr/bin/mpirun --allow-run-as-root -n 2 python -m pytest suite/bench_overlap.py "
        "--suite-mode quick -v --results-json /tmp/x.json --chunks 10", {"A": "1"})
    assert arguments == ["suite/bench_overlap.py", "--suite-mode", "quick", "-v", "--chunks",
                         "10"]
    assert env == {"A": "1", "OVERLAP_COLLECT_MPI": "1", "OVERLAP_COLLECT_WORLD": "2"}
    _, env = calibrate.pass_collection("python -m torch.distributed.run --standalone "
                                    "--nproc-per-node=4 -m pytest suite/", {})
    assert env == {"OVERLAP_COLLECT_WORLD": "4"}


def test_a_benchmark_longer_than_its_modes_budget_is_refused_in_one_line():
    rates = budget.Rates({"cpu": {"data parallel": 0.5}}, {})
    deadlines = {"a": Deadline(60.0, 10.0, own_s=10.0, study="data parallel"),
                 "b": Deadline(9e6, 2e6, own_s=2e6, study="data parallel")}
    assert budget.over_budget(deadlines, "cpu", "default", rates) == (
        "b is expected to take 1000000 s, more than the default mode's budget of 600 s: "
        "narrow it (--workloads, -k)")
    deadlines["b"] = Deadline(9e6, 2000.0, own_s=2000.0, study="data parallel")
    assert budget.over_budget(deadlines, "cpu", "default", rates) == (
        "b is expected to take 1000 s, more than the default mode's budget of 600 s: "
        "narrow it (--workloads, -k) or run --full")
    assert budget.over_budget({"a": deadlines["a"]}, "cpu", "quick", rates) is None


def test_the_progress_line_scales_what_is_left_by_the_pace_so_far():
    assert budget.progress_line(10, 40, 120.0, 60.0, 300.0) == (
        "[suite] progress: 10/40 benchmarks, 2.0 min elapsed (plan 1.0 min), ETA 8.0 min")


def test_a_pass_records_each_benchmark_and_says_its_progress():
    lines, now = [], [0.0]
    deadlines = {"x::a": Deadline(60.0, 4.0, own_s=4.0, study="dp"),
                 "x::b": Deadline(60.0, 4.0, own_s=0.0, study="dp"),
                 "x::c": Deadline(60.0, 6.0, own_s=6.0, study="gemm")}
    rates = budget.Rates({"gpu": {"dp": 2.0, "gemm": 1.0}}, {})
    timing = budget.PassTiming(deadlines, 2, rates, lines.append, clock=lambda: now[0])
    for nodeid, at in (("x::a", 5.0), ("x::b", 30.0), ("x::c", 31.0)):
        now[0] = at
        timing.finished(nodeid, 1.5)
    # After b: 8 s of plan took 30 s, so the 6 s left of it are expected to take 22.5 s.
    assert lines == [
        "[suite] progress: 2/3 benchmarks, 0.5 min elapsed (plan 0.1 min), ETA 0.4 min",
        "[suite] progress: 3/3 benchmarks, 0.5 min elapsed (plan 0.2 min), ETA 0.0 min"]
    assert timing.to_json() == {"machine": "gpu", "gpus": 2, "benchmarks": {
        "x::a": {"study": "dp", "expected_s": 4.0, "duration_s": 1.5},
        "x::b": {"study": "dp", "expected_s": 0.0, "duration_s": 1.5},
        "x::c": {"study": "gemm", "expected_s": 6.0, "duration_s": 1.5}}}


def test_the_plan_says_each_pass_and_study_against_the_budget():
    rates = budget.Rates({"gpu": {"dp": 0.5}}, {"gpu": {"mpirun": 12.0}}, ("r1", "r2"))
    plan = budget.pass_plan("mpirun", "gpu", [Deadline(60.0, 100.0, own_s=100.0, study="dp"),
                                              Deadline(60.0, 100.0, study="dp")], rates)
    assert plan.total_s == 62.0
    assert budget.plan_lines([plan], "default", "2 of 2 GPUs", rates) == [
        "[suite] plan: default mode on 2 of 2 GPUs, 1.0 min expected against a budget of "
        "10.0 min (rates fitted on 2 committed runs (python -m suite.calibrate --check gives "
        "their held-out error))",
        "[suite]   mpirun: 2 benchmarks, 1.0 min (start 12 s)",
        "[suite]     dp                  2 benchmarks    0.8 min"]


def test_the_committed_two_gpu_run_is_fitted_on_its_whole_passes_only(tmp_path):
    run = committed.make_copy(tmp_path / "copy", [TWO_GPU_RUN]) / TWO_GPU_RUN
    document = json.loads(run.read_text())
    passes = calibrate.timed_passes(run, document, tmp_path)
    # Its mpirun pass stopped at its deadline (exit 86): only the two passes that ended well.
    assert [p.name for p in passes] == ["torchrun nvlink", "torchrun hybrid"]
    main = passes[0]
    assert main.wall_s == 712.0
    # GEMM and the hybrid ran on both ranks at once then (SUPERSEDED): out of the fit.
    assert {study for study, _, _ in main.benchmarks} >= {"data parallel", "pipeline"}
    assert not {"GEMM", "hybrid"} & {study for study, _, _ in main.benchmarks}
    assert math.isclose(main.superseded_s + sum(d for _, _, d in main.benchmarks),
                        sum(b["duration_s"] for b in
                            document["suite"]["passes"][0]["timing"]["benchmarks"].values()))


@pytest.mark.skipif(committed.git_tracked() is None, reason="not a git checkout: no list of "
                    "every committed run")
def test_the_docs_table_of_measured_runs_is_generated_from_the_committed_runs(tmp_path):
    every = committed.make_copy(tmp_path, committed.git_tracked()) / "results"
    text = calibrate.DOC.read_text()
    assert calibrate.with_runs_table(text, calibrate.runs_table([str(every)])) == text, (
        "docs/budget.md's runs table is stale: python -m suite.calibrate --runs results")
    assert "| h200x2/20261127T135955Z-7im9itx9.json | 2 | 9d074ca |" in text
