"""Deadlines: a stuck benchmark ends the pass with every rank's stack, the results stay whole,
and the launcher goes on with the rest in a fresh pass (2 gloo ranks)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

import pytest

from impl.presets import preset
from suite import deadline, hangs
from suite.launch import Launcher
from suite.run import (
    InputError,
    Pass,
    check_pytest_args,
    main,
    merge,
    resumed_pass,
    run_exit_status,
    run_passes,
)
from suite.suite_options import check_suite_options
from suite.watchdog import BACKSTOP_S, GRACE_S, HANG_EXIT, POLL_S, Deadline, pg_timeout_s

STUCK = "tests/hang_bench/stuck_benchmarks.py"
DEADLINE_S = 10


# Starting 2 ranks (torch's import, the collection) on the loaded 2-core machine.
STARTUP_S = 30


def stuck_pass(folder: Path, benchmarks: str = STUCK, deadline_s: int = DEADLINE_S) -> Pass:
    output = folder / "gloo-tcp.json.tmp"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node=2", "--local-ranks-filter=0", "-m", "pytest", benchmarks,
               "-o", f"python_files={Path(benchmarks).name}", "-p", "no:cacheprovider", "-q",
               "--deadline-floor-s", str(deadline_s), "--deadline-multiple", "0",
               "--results-json", str(output)]
    return Pass("torchrun gloo-tcp", command, {}, output)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """The stuck benchmarks run as suite.run runs a pass: (passes, codes, hangs, log, files)."""
    folder = tmp_path_factory.mktemp("stuck")
    passes, codes, hung, log = run_logged([stuck_pass(folder)], folder / "log.txt")
    pass_files = {step.name: json.loads(step.output.read_text()) for step in passes
                  if step.output.exists()}
    return passes, codes, hung, log, pass_files


def run_logged(passes: list[Pass], log: Path) -> tuple[list[Pass], list, list[dict], str]:
    """``run_passes`` on 2 gloo ranks with its log, as suite.run's would be: the passes write
    to the inherited file descriptors, the launcher to sys.stdout."""
    env = {**os.environ, "OVERLAP_BACKEND": "gloo", "OMP_NUM_THREADS": "1",
           "PYTHONUNBUFFERED": "1"}
    saved = [os.dup(1), os.dup(2)]
    with open(log, "w") as stream, contextlib.redirect_stdout(stream):
        os.dup2(stream.fileno(), 1), os.dup2(stream.fileno(), 2)
        try:
            passes, codes, hung = run_passes(passes, env, Launcher())
        finally:
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0]), os.close(saved[1])
    return passes, codes, hung, log.read_text()


def test_each_stuck_benchmark_ends_at_its_deadline_and_the_rest_runs(stopped):
    passes, codes, hung, log, _ = stopped
    assert [hang["benchmark"] for hang in hung] == [
        f"{STUCK}::test_stuck_collective", f"{STUCK}::test_mismatched_point_to_point"]
    assert [step.name for step in passes] == ["torchrun gloo-tcp", "torchrun gloo-tcp (resumed)",
                                              "torchrun gloo-tcp (resumed)"]
    assert codes[0] != 0 and codes[1] != 0 and codes[2] == 0, codes
    assert f"exitcode  : {HANG_EXIT}" in log
    # torchrun's 1 for a rank its watchdog stopped is the launcher's 3 (suite/exit_codes.py)
    assert run_exit_status(passes, codes, hung, None, True) == 3
    merged = merge(passes, codes, "python -m suite.run", "test")
    assert [b["name"] for b in merged["benchmarks"]] == ["test_before", "test_after"]
    assert merged["suite"]["partial"] is True  # two passes did not finish


def test_every_rank_names_its_frame_and_leaves_its_stacks_in_the_log(stopped):
    _, _, hung, log, _ = stopped
    collective, point_to_point = hung
    assert collective["ranks"]["0"]["innermost"].endswith(" in all_reduce")
    assert collective["ranks"]["1"]["innermost"].endswith(" in recv")
    for rank in ("0", "1"):
        assert collective["ranks"][rank]["frame"].startswith(
            f"{STUCK}:"), collective["ranks"][rank]
        assert collective["ranks"][rank]["frame"].endswith(" in test_stuck_collective")
        assert point_to_point["ranks"][rank]["frame"].endswith(
            " in test_mismatched_point_to_point")
        assert point_to_point["ranks"][rank]["innermost"].endswith(" in recv")
        assert log.count(f"[suite] rank {rank}, Python stacks of every thread:") == 2
    # Both ranks' dumps, each with the main thread's frame in the stuck benchmark.
    assert log.count(f'{STUCK}", line') >= 4
    assert f"[suite] {STUCK}::test_stuck_collective passed its deadline of {DEADLINE_S} s" in log
    assert f"[deadline] rank 0: {STUCK}::test_stuck_collective has run" in log


def test_the_hung_pass_leaves_a_whole_file_that_names_the_hang(stopped):
    passes, _, hung, _, files = stopped
    first = files[passes[0].name]  # rank 0 rewrote it before its exit
    assert [b["name"] for b in first["benchmarks"]] == ["test_before"]
    assert first["suite"]["partial"] is True
    (hang,) = first["suite"]["hangs"]
    assert hang["benchmark"] == hung[0]["benchmark"]
    assert sorted(hang["ranks"]) == ["0", "1"]


def test_a_stuck_benchmark_costs_its_deadline(stopped, tmp_path):
    """Each rank's record says how long the benchmark ran: the deadline, plus at most the
    watchdog's polling (a rank that sees another's record stops too)."""
    passes, _, _, _, _ = stopped
    for step in passes[:2]:
        records = hangs.read_records(step.output)
        assert [r["rank"] for r in records] == [0, 1]
        # The rank that stopped on its own deadline ran at least the deadline; another rank
        # that armed later may stop sooner, on seeing that rank's record.
        first = max(r["elapsed_s"] for r in records)
        assert DEADLINE_S <= first < DEADLINE_S + GRACE_S
        assert all(r["elapsed_s"] < DEADLINE_S + POLL_S + GRACE_S for r in records)


def record(rank: int, benchmark: str, frame: str) -> dict:
    return {"benchmark": benchmark, "rank": rank, "world_size": 3, "deadline_s": 60.0,
            "expected_s": 2.5, "waiting": frame.endswith("barrier"), "frame": frame,
            "innermost": f"torch/x.py:1 in {frame}", "measured_with": ["b"],
            "remaining": 3, "stacks": f"Thread 0x1 (most recent call first):\n  {frame}\n"}


def test_summary_names_the_benchmark_and_every_rank_frame():
    records = [record(0, "a", "impl/x.py:3 in f"), record(1, "c", "impl/dist.py:9 in barrier")]
    dumps = {2: ("a", "Thread 0x2 (most recent call first):\n")}
    hang = hangs.summary(records, dumps)
    assert hang == {
        "benchmark": "a", "deadline_s": 60.0, "expected_s": 2.5, "measured_with": ["b"],
        "remaining": 3, "stuck": [0, 2], "ranks": {
            "0": {"frame": "impl/x.py:3 in f", "innermost": "torch/x.py:1 in impl/x.py:3 in f"},
            "1": {"frame": "impl/dist.py:9 in barrier", "benchmark": "c",
                  "innermost": "torch/x.py:1 in impl/dist.py:9 in barrier"},
            "2": {"frame": hangs.NO_PYTHON_THREAD, "innermost": hangs.NO_PYTHON_THREAD}}}
    assert hangs.resume_arguments(hang) == ["--resume-after", "a", "--deselect", "b"]
    assert hangs.resume_arguments({**hang, "remaining": 0}) is None
    text = hangs.log_text(hang, records, dumps)
    assert "[suite]   rank 1 (in c): impl/dist.py:9 in barrier" in text
    assert "[suite] rank 2, faulthandler's dump:" in text
    assert "[suite] the other ranks waited for rank(s) 0, 2" in text
    # Rank 1 waited in its barrier: no record from rank 2, rank 0 not in a collective.
    assert hangs.stuck_ranks(records[1:], {}) == [0, 2]
    # Every rank waiting in a collective (mismatched ones): all of them are named.
    waiting = [{**r, "waiting": True, "world_size": 2} for r in records]
    assert hangs.stuck_ranks(waiting, {}) == [0, 1]
    assert hangs.summary([], {}) is None


def test_the_resumed_pass_writes_its_own_file(tmp_path):
    step = stuck_pass(tmp_path)
    again = resumed_pass(step, ["--resume-after", "x"], 1)
    assert again.output == tmp_path / "gloo-tcp.resume1.json.tmp"
    assert again.command[-2:] == ["--resume-after", "x"]
    assert again.command[again.command.index("--results-json") + 1] == str(again.output)
    assert step.command[step.command.index("--results-json") + 1] == str(step.output)


def test_resume_after_must_name_a_collected_test():
    with pytest.raises(InputError) as error:
        arguments = ["-o", f"python_files={Path(STUCK).name}", "--resume-after", f"{STUCK}::nope"]
        step = Pass("torchrun gloo-tcp", [], pytest_args=[STUCK, "--suite-mode", "quick",
                                                          *arguments])
        check_pytest_args([step], arguments)
    assert str(error.value) == (f"pytest: --resume-after {STUCK}::nope: no such test in this "
                                "collection")


@pytest.mark.parametrize("given, message", [
    ({"deadline_floor_s": "0"}, "--deadline-floor-s='0': choose a number from 1 to 86400 s"),
    ({"deadline_multiple": "-1"}, "--deadline-multiple='-1': choose a number from 0 to 1000"),
    ({"deadline_multiple": "nan"}, "--deadline-multiple='nan': choose a number from 0 to 1000"),
])
def test_bad_deadline_options_are_one_line(given, message):
    with pytest.raises(ValueError) as error:
        check_suite_options(given)
    assert str(error.value) == message


def test_deadline_is_a_multiple_of_the_expected_time_with_a_floor():
    assert deadline.deadline_s(expected_s=12.0, multiple=4.0, floor_s=60.0) == 60.0
    assert deadline.deadline_s(expected_s=90.0, multiple=4.0, floor_s=60.0) == 360.0
    assert deadline.deadline_s(expected_s=90.0, multiple=0.0, floor_s=10.0) == 10.0


def test_overlap_cells_expected_time_covers_what_they_took_on_a_loaded_machine():
    """The slowest default-mode cells of the 2-core machine at a load of 5 to 7 (suite.run
    with --durations, 2026-11-24): 88.6 s for mlp_1024x8_b64 at K = 5 on 2 ranks (11 variants,
    8 checked; 335 steps), 52.5 s for mlp_1024x8_b16 at the same cell."""
    import torch

    cpu = torch.device("cpu")
    for name, took_s in (("mlp_1024x8_b64", 88.6), ("mlp_1024x8_b16", 52.5)):
        expected = deadline.expected_s(preset(name), steps=335, builds=21, world_size=2,
                                       device=cpu)
        assert took_s / 2 < expected < 4 * took_s, (name, expected)
        assert deadline.deadline_s(expected, deadline.DEFAULT_MULTIPLE,
                                   deadline.DEFAULT_FLOOR_S) > 2 * took_s


def test_group_timeout_outlasts_no_deadline_by_more_than_the_grace():
    deadlines = {"a": Deadline(60.0, 1.0), "b": Deadline(240.0, 60.0)}
    assert pg_timeout_s(deadlines, {}) == 240 + GRACE_S + BACKSTOP_S
    assert pg_timeout_s(deadlines, {"OVERLAP_PG_TIMEOUT_S": "30"}) is None  # impl.dist reads it
    assert pg_timeout_s({}, {}) is None


def test_resuming_after_the_last_benchmark_leaves_nothing_to_run(tmp_path, capsys):
    """One line and exit 0: a finished pass is not an error, and nothing is launched."""
    code = main(["--quick", "--skip-mpi", "--results-dir", str(tmp_path), "--",
                 STUCK, "-o", f"python_files={Path(STUCK).name}",
                 "--resume-after", f"{STUCK}::test_after"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip() == ("[suite] nothing left to run: --resume-after names the last benchmark "
                           "the pytest arguments select; nothing launched, nothing written")
    assert not any(tmp_path.iterdir())


GIL = "tests/hang_bench/gil_benchmarks.py"


def test_a_rank_holding_the_gil_is_named_with_its_stack(tmp_path):
    """Rank 1 spins in C holding the GIL while rank 0 waits in an all-reduce: rank 1's stack
    comes from faulthandler's C-level dump at its deadline, the hang names rank 1 (the one
    that did not arrive, not the waiting rank 0), and the pass ends within the deadline plus
    the launcher's margins, keeping the benchmark that finished."""
    started = time.monotonic()
    passes, codes, hung, log = run_logged([stuck_pass(tmp_path, GIL)], tmp_path / "log.txt")
    took = time.monotonic() - started
    (hang,) = hung
    assert hang["benchmark"] == f"{GIL}::test_gil_held"
    assert hang["stuck"] == [1]
    assert hang["ranks"]["1"]["frame"] == hangs.NO_PYTHON_THREAD
    assert hang["ranks"]["0"]["innermost"].endswith(" in all_reduce")
    assert "[suite] the other ranks waited for rank(s) 1" in log
    dump = log.split("[suite] rank 1, faulthandler's dump:", 1)[1]
    assert f'{GIL}", line' in dump and "in test_gil_held" in dump
    assert len(passes) == 1 and codes[0] != 0  # nothing after it: no fresh pass
    document = json.loads(passes[0].output.read_text())
    assert [b["name"] for b in document["benchmarks"]] == ["test_before"]
    assert document["suite"]["hangs"][0]["stuck"] == [1]
    assert took < STARTUP_S + DEADLINE_S + GRACE_S, took


ROOT = Path(__file__).resolve().parent.parent

# A plugin: rank 0's hang record takes OVERLAP_TEST_RECORD_DELAY_S to write (an fsync on a busy
# disk), longer than the two polls after which a C-level dump answers for a rank.
SLOW_RECORD = """
import os, time
from suite import hangs

_write = hangs.write_record


def _slow(base, record):
    if record["rank"] == 0:
        time.sleep(float(os.environ["OVERLAP_TEST_RECORD_DELAY_S"]))
    return _write(base, record)


hangs.write_record = _slow
"""


# A plugin: rank 0's results write at a hang (conftest.py's _write_hang) takes
# OVERLAP_TEST_HANG_WRITE_DELAY_S (a busy disk).
SLOW_HANG_WRITE = """
import os, time, traceback
import impl.atomic

_write = impl.atomic.write_bytes_atomic


def _slow(path, data):
    if any(frame.name == "_write_hang" for frame in traceback.extract_stack()):
        time.sleep(float(os.environ["OVERLAP_TEST_HANG_WRITE_DELAY_S"]))
    return _write(path, data)


impl.atomic.write_bytes_atomic = _slow
"""


def test_the_other_ranks_outlive_rank_0s_results_write(tmp_path):
    """torchrun kills every rank once one exits: the other ranks wait for rank 0 to write
    what finished and the hang, or a slow write lost the pass's file."""
    (tmp_path / "slow_hang_write.py").write_text(SLOW_HANG_WRITE)
    step = stuck_pass(tmp_path)
    step.command += ["-p", "slow_hang_write", "-k", "before or collective"]
    step.env.update(PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]),
                    OVERLAP_TEST_HANG_WRITE_DELAY_S="4")
    passes, _, hung, log = run_logged([step], tmp_path / "log.txt")
    (hang,) = hung
    assert hang["stuck"] == [0, 1], log[-3000:]
    document = json.loads(passes[0].output.read_text())
    assert [b["name"] for b in document["benchmarks"]] == ["test_before"]
    assert document["suite"]["hangs"][0]["benchmark"] == f"{STUCK}::test_stuck_collective"


def test_a_slow_record_still_answers_for_its_rank(tmp_path):
    """A rank whose Python runs is named by its record, however long the write takes within
    the grace: its C-level dump must not answer for it meanwhile, or the other rank exits,
    torchrun kills this one mid-write, and the hang names it as holding the GIL."""
    (tmp_path / "slow_record.py").write_text(SLOW_RECORD)
    step = stuck_pass(tmp_path)
    step.command += ["-p", "slow_record", "-k", "before or collective"]
    step.env.update(PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]),
                    OVERLAP_TEST_RECORD_DELAY_S=str(2 * POLL_S + 2))
    _, _, hung, log = run_logged([step], tmp_path / "log.txt")
    (hang,) = hung
    assert hang["stuck"] == [0, 1], log[-3000:]
    assert hang["ranks"]["0"]["innermost"].endswith(" in all_reduce")
    assert hang["ranks"]["1"]["innermost"].endswith(" in recv")
    assert "faulthandler's dump:" not in log
