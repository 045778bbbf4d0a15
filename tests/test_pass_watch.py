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


def mpirun_pass(folder: Path, benchmarks: str = STOPPED, *plugins: str) -> Pass:
    """The same benchmarks under mpirun, as suite.run's mpi pass launches them."""
    launcher = capabilities.mpi_launcher()
    extra = ["--allow-run-as-root", "--oversubscribe"] if is_open_mpi(launcher) else []
    output = folder / "mpi.json.tmp"
    loaded = [part for plugin in ("suite.rank_start", *plugins) for part in ("-p", plugin)]
    command = [launcher, *extra, "-n", "2", sys.executable, "-m", "pytest", *loaded, benchmarks,
               "-o", f"python_files={Path(benchmarks).name}", "-p", "no:cacheprovider", "-q",
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


FINALIZE = "tests/hang_bench/finalize_benchmarks.py"


@pytest.mark.slow
@pytest.mark.skipif(capabilities.missing_mpi() is not None,
                    reason=str(capabilities.missing_mpi()))
def test_under_mpirun_a_rank_waiting_in_mpi_finalize_is_not_blamed(tmp_path):
    """Rank 1 stops after its last benchmark; rank 0 finishes its session and waits in MPI's
    finalize for it, so its process never ends. The pass ends within 15 s of rank 0's session
    end (SESSION_END_MARGIN_S, then the stack and the end), naming rank 1 alone, with its
    stack; what rank 0 wrote is whole."""
    step = mpirun_pass(tmp_path, FINALIZE, "tests.plugins.stop_at_session_end")
    passes, codes, hung, log = run_logged([step], tmp_path / "log.txt")
    ended = time.time()
    (hang,) = hung
    assert hang["benchmark"] == f"after {FINALIZE}::test_last"
    assert hang["stuck"] == [1] and list(hang["ranks"]) == ["1"]
    assert hang["stalled"].startswith("rank(s) 0 finished (waiting to exit) "), hang["stalled"]
    assert "and rank 1 (pid " in hang["stalled"] and hang["stalled"].endswith(", stopped) did not")
    assert "[suite] the other ranks waited for rank(s) 1\n" in log
    dump = log.split("[suite] rank 1, faulthandler's dump:")[1]
    assert "in pytest_sessionfinish" in dump and "stop_at_session_end.py" in dump
    assert "rank 0, faulthandler's dump" not in log  # the innocent rank was not asked
    finished = hangs.done_path(step.output, 0).stat().st_mtime
    assert ended - finished < 15, ended - finished
    document = json.loads(step.output.read_text())
    assert [b["name"] for b in document["benchmarks"]] == ["test_last"]
    assert document["suite"]["partial"] is False
    assert codes == [-9] and run_exit_status(passes, codes, hung, None, True) == 3


def test_the_pass_deadline_is_its_benchmarks_plus_the_margins():
    assert pass_watch.pass_deadline_s(100.0) == (100.0 + pass_watch.START_MARGIN_S
                                                 + pass_watch.END_MARGIN_S)


def test_a_pass_past_its_deadline_has_stalled(tmp_path):
    watch = pass_watch.PassWatch(deadline_s=0.0, results=tmp_path / "r.json")
    time.sleep(0.01)
    why, running = watch.stalled({})
    assert why.startswith("the pass has run 0 s, past its deadline of 0 s")
    assert running == {}


class Ranks:
    """The pass's ranks as PassWatch sees them (rank -> pid), which are stopped, and a clock."""

    def __init__(self, monkeypatch, running: dict[int, int], halted: set[int] = frozenset()):
        self.running, self.halted, self.now = running, set(halted), 1000.0
        monkeypatch.setattr(pass_watch, "ranks_in", lambda processes: dict(self.running))
        monkeypatch.setattr(pass_watch, "stopped", lambda pid: pid in self.halted)
        monkeypatch.setattr(pass_watch.time, "monotonic", lambda: self.now)


def finish(results: Path, rank: int) -> None:
    hangs.done_path(results, rank).touch()  # what the rank's watchdog writes at its end


def test_a_rank_not_done_after_rank_0_finished_is_stuck(tmp_path, monkeypatch):
    """MPI: rank 0 finished its session and waits in finalize (its process stays)."""
    ranks = Ranks(monkeypatch, {0: 100, 1: 101})
    watch = pass_watch.PassWatch(deadline_s=1e6, results=tmp_path / "r.json")
    assert watch.stalled({}) is None
    finish(tmp_path / "r.json", 0)
    assert watch.stalled({}) is None  # the clock starts
    ranks.now += pass_watch.SESSION_END_MARGIN_S
    assert watch.stalled({}) is None
    ranks.now += 0.5
    why, stuck = watch.stalled({})
    assert stuck == {1: 101}  # not rank 0, though its process is still there
    assert why == ("rank(s) 0 finished (waiting to exit) 6 s ago and rank 1 (pid 101) did not")


def test_rank_0_still_writing_after_the_others_finished_has_the_longer_margin(tmp_path,
                                                                              monkeypatch):
    ranks = Ranks(monkeypatch, {0: 100, 1: 101})
    watch = pass_watch.PassWatch(deadline_s=1e6, results=tmp_path / "r.json")
    finish(tmp_path / "r.json", 1)
    assert watch.stalled({}) is None
    ranks.now += pass_watch.SESSION_END_MARGIN_S + 1
    assert watch.stalled({}) is None  # rank 0 writes the results last
    ranks.now += pass_watch.END_MARGIN_S
    why, stuck = watch.stalled({})
    assert stuck == {0: 100} and why.startswith("rank(s) 1 finished (waiting to exit) ")


def test_a_finished_rank_stopped_at_its_exit_is_stuck(tmp_path, monkeypatch):
    """torchrun: rank 0 ended; rank 1 finished its session but stopped at its exit."""
    ranks = Ranks(monkeypatch, {0: 100, 1: 101}, halted={101})
    watch = pass_watch.PassWatch(deadline_s=1e6, results=tmp_path / "r.json")
    assert watch.stalled({}) is None
    finish(tmp_path / "r.json", 0), finish(tmp_path / "r.json", 1)
    del ranks.running[0]
    assert watch.stalled({}) is None
    ranks.now += pass_watch.SESSION_END_MARGIN_S + 1
    why, stuck = watch.stalled({})
    assert stuck == {1: 101}
    assert why == "rank(s) 0 ended 6 s ago and rank 1 (pid 101, stopped) did not"


def test_ranks_slow_to_exit_after_their_sessions_have_the_longer_margin(tmp_path, monkeypatch):
    """Every rank finished; one ended, one is still exiting, none stopped: not yet stuck."""
    ranks = Ranks(monkeypatch, {0: 100, 1: 101})
    watch = pass_watch.PassWatch(deadline_s=1e6, results=tmp_path / "r.json")
    assert watch.stalled({}) is None
    finish(tmp_path / "r.json", 0), finish(tmp_path / "r.json", 1)
    del ranks.running[0]
    assert watch.stalled({}) is None
    ranks.now += pass_watch.SESSION_END_MARGIN_S + 1
    assert watch.stalled({}) is None
    ranks.now += pass_watch.END_MARGIN_S
    assert watch.stalled({})[1] == {1: 101}


def test_past_its_deadline_a_pass_names_the_ranks_not_done(tmp_path, monkeypatch):
    ranks = Ranks(monkeypatch, {0: 100, 1: 101})
    watch = pass_watch.PassWatch(deadline_s=10.0, results=tmp_path / "r.json",
                                 started=ranks.now)
    finish(tmp_path / "r.json", 0)
    ranks.now += 11
    why, stuck = watch.stalled({})
    assert why.startswith("the pass has run 11 s, past its deadline of 10 s") and stuck == {
        1: 101}
