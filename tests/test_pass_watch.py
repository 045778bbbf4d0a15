"""Nothing in a pass waits without a limit (suite/pass_watch.py): a rank stopped inside a
benchmark, or after the last one, is named with its stack and the pass ends, keeping what
finished (2 gloo ranks, short deadlines), under torchrun and under mpirun."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from impl import capabilities
from suite import hangs, pass_watch
from suite.run import Pass, free_port, is_open_mpi, run_exit_status
from tests.test_deadline import DEADLINE_S, run_logged, stuck_pass

STOPPED = "tests/hang_bench/stopped_benchmarks.py"
END_S = 5  # the processes' end after the launcher's SIGTERM


def mpirun_pass(folder: Path) -> Pass:
    """The same benchmarks under mpirun, as suite.run's mpi pass launches them."""
    launcher = capabilities.mpi_launcher()
    extra = ["--allow-run-as-root", "--oversubscribe"] if is_open_mpi(launcher) else []
    output = folder / "mpi.json.tmp"
    command = [launcher, *extra, "-n", "2", sys.executable, "-m", "pytest", STOPPED, "-o",
               f"python_files={Path(STOPPED).name}", "-p", "no:cacheprovider", "-q",
               "--deadline-floor-s", str(DEADLINE_S), "--deadline-multiple", "0",
               "--results-json", str(output)]
    return Pass("mpirun", command, {"MASTER_PORT": str(free_port())}, output)


@pytest.fixture(scope="module", params=[
    "torchrun", pytest.param("mpirun", marks=pytest.mark.skipif(
        capabilities.missing_mpi() is not None, reason=str(capabilities.missing_mpi())))])
def stalled(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("stalled")
    step = stuck_pass(folder, STOPPED) if request.param == "torchrun" else mpirun_pass(folder)
    passes, codes, hung, log = run_logged([step], folder / "log.txt")
    return passes, codes, hung, log


@pytest.mark.slow
def test_a_rank_stopped_inside_a_benchmark_is_named_with_its_stack(stalled):
    passes, codes, hung, log = stalled
    inside, after = hung
    assert inside["benchmark"] == f"{STOPPED}::test_stopped"
    assert inside["stuck"] == [1]  # the stopped rank, not rank 0 waiting in its all-reduce
    assert inside["ranks"]["0"]["innermost"].endswith(" in all_reduce")
    assert inside["stalled"].startswith("rank(s) 0 passed a deadline and rank 1 (pid ")
    assert inside["stalled"].endswith(", stopped) cannot answer")
    # Continued for its stack, rank 1 dumped it where it was stopped; a record its watchdog
    # may have written after that is left out.
    assert inside["ranks"]["1"]["frame"] == hangs.NO_PYTHON_THREAD
    first_pass = log.split(f"[suite] {passes[1].name}:")[0]
    dump = first_pass.split("[suite] rank 1, faulthandler's dump:")[1]
    assert "in stop_here" in dump and f'{STOPPED}", line 42 in test_stopped' in dump
    # The fresh pass went on with test_last.
    assert [step.name for step in passes] == [passes[0].name, f"{passes[0].name} (resumed)"]
    rows = [b["name"] for step in passes for b in json.loads(step.output.read_text())["benchmarks"]]
    assert rows == ["test_before", "test_last"]


@pytest.mark.slow
def test_a_rank_stopped_after_the_last_benchmark_ends_the_pass(stalled):
    passes, codes, hung, log = stalled
    after = hung[1]
    assert after["pass"] == passes[1].name
    assert after["benchmark"] == f"after {STOPPED}::test_last"
    assert after["stuck"] == [1]
    assert after["stalled"].startswith("rank(s) 0 ended ")
    assert "rank 1 (pid " in after["stalled"] and ", stopped) did not" in after["stalled"]
    assert "[suite] the pass has stalled: rank(s) 0 ended" in log
    dump = log.split("[suite] rank 1, faulthandler's dump:")[-1]
    assert "in stop_here" in dump
    document = json.loads(passes[1].output.read_text())
    assert [b["name"] for b in document["benchmarks"]] == ["test_last"]
    assert document["suite"]["partial"] is False  # rank 0 finished the pass
    # The launcher ended it with SIGKILL: a hang (3), never the 137 of an out-of-memory kill.
    assert codes[1] == -9 and passes[1].stalled == after["stalled"]
    assert run_exit_status(passes, codes, hung, None, True) == 3


def test_the_pass_deadline_is_its_benchmarks_plus_the_margins():
    assert pass_watch.pass_deadline_s(100.0) == (100.0 + pass_watch.START_MARGIN_S
                                                 + pass_watch.END_MARGIN_S)


def test_a_pass_past_its_deadline_has_stalled(tmp_path):
    watch = pass_watch.PassWatch(deadline_s=0.0, results=tmp_path / "r.json")
    time.sleep(0.01)
    why, running = watch.stalled({})
    assert why.startswith("the pass has run 0 s, past its deadline of 0 s")
    assert running == {}
