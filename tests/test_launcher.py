"""suite.run refuses bad input before anything starts, and stops cleanly on a signal."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from impl import capabilities
from suite.launch import process_tree
from suite.pass_watch import ranks_in
from suite.run import main
from suite.run_files import run_name

ROOT = Path(__file__).resolve().parent.parent
LABEL = "launch-test"


def _suite_run(results: Path, *args: str, env: dict | None = None, **popen) -> subprocess.Popen:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "OVERLAP_MACHINE_LABEL": LABEL,
               **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "suite.run", "--results-dir", str(results),
                             *args], cwd=ROOT, env=environ, text=True, start_new_session=True,
                            **popen)


BAD_INPUT = [
    (["--chunks", "0"], {}, "--chunks: '0' is not an integer from 1 to"),
    (["--strategies", "nope"], {}, "--strategies: 'nope' is not one of sequential"),
    (["--workloads", "nope"], {}, "--workloads: 'nope' is not one of"),
    (["--world-sizes", "0"], {}, "--world-sizes: '0' is not an integer ≥ 1"),
    (["--sampler-period-ms", "0"], {}, "--sampler-period-ms='0': choose a number from 1 to"),
    (["--quik"], {}, "unrecognized arguments: --quik"),
    (["--", "--chunks", "0"], {}, "pytest: --chunks: '0' is not an integer from 1 to"),
    (["--", "--quik"], {}, "pytest: unrecognized arguments: --quik"),
    (["--ranks", "0"], {}, "--ranks=0: choose 1 to"),
    (["--results-dir", ""], {}, "--results-dir='': give a folder (default: results)"),
    ([], {"OVERLAP_MACHINE_LABEL": ".."}, "OVERLAP_MACHINE_LABEL='..' is not allowed"),
    ([], {"OVERLAP_MACHINE_LABEL": "."}, "OVERLAP_MACHINE_LABEL='.' is not allowed"),
    ([], {"OVERLAP_MACHINE_LABEL": "a/../b"}, "OVERLAP_MACHINE_LABEL='a/../b' is not allowed"),
    ([], {"OVERLAP_MACHINE_LABEL": "baselines"}, "OVERLAP_MACHINE_LABEL='baselines' is not"),
    ([], {"OVERLAP_PG_TIMEOUT_S": "99999999999999"},
     "OVERLAP_PG_TIMEOUT_S='99999999999999' is not allowed; use an integer from 1 to 86400"),
    ([], {"OVERLAP_PG_TIMEOUT_S": "0"}, "OVERLAP_PG_TIMEOUT_S='0' is not allowed; use an integer"),
    (["--", "--resume-after", ""], {}, "pytest: --resume-after: give a benchmark's node id"),
]
CPU_ONLY_BAD_INPUT = [
    (["--profiles", "socket"], {}, "--profiles=socket: interconnect profiles are NCCL settings"),
    (["--profiles", "shm"], {}, "--profiles=shm: interconnect profiles are NCCL settings"),
    ([], {"OVERLAP_PROFILE": "nvlink", "NCCL_P2P_DISABLE": "1"},
     "OVERLAP_PROFILE=nvlink: interconnect profiles are NCCL settings"),
    ([], {"OVERLAP_BACKEND": "nccl"}, "OVERLAP_BACKEND=nccl: needs 1 CUDA GPU"),
]
NO_GPU = pytest.mark.skipif(capabilities.gpu_count() > 0, reason="checks a CPU-only machine")


@pytest.mark.parametrize("args, env, expected", [
    *BAD_INPUT, *(pytest.param(*case, marks=NO_GPU) for case in CPU_ONLY_BAD_INPUT)])
def test_bad_input_is_one_line_before_anything_starts(tmp_path, monkeypatch, capsys, args, env,
                                                      expected):
    results = tmp_path / "results"
    if args[:1] == ["--"]:  # pytest reads these: in a process of its own, as in a real run
        run = _suite_run(results, "--quick", *args, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
        out, err = run.communicate(timeout=120)
        code = run.returncode
    else:  # in this process: the checks need no fresh interpreter
        for name, value in {"OVERLAP_MACHINE_LABEL": LABEL, **env}.items():
            monkeypatch.setenv(name, value)
        code = main(["--results-dir", str(results), "--quick", *args])
        out, err = capsys.readouterr()
    assert code == 2, err
    assert err.splitlines() == [err.strip()] and expected in err, err
    assert "[suite]" not in out  # no pass was planned or launched
    assert not results.exists()


# Runs suite.run's main with the passes recorded instead of launched (exit 5: nothing ran).
PLAN_ONLY = """
import sys, suite.run as run
def record(self, command, env, watch=None):
    print("LAUNCH", " ".join(command), flush=True)
    return 5
run.Launcher.run = record
sys.exit(run.main(sys.argv[1:]))
"""


def test_a_selection_of_two_rank_benchmarks_passes_the_pre_launch_check(tmp_path):
    """The check collects each pass for the world it launches (2 gloo ranks here), so a -k
    naming ids that exist only there is not refused as selecting nothing."""
    selection = "test_allreduce and w2"
    result = subprocess.run(
        [sys.executable, "-c", PLAN_ONLY, "--results-dir", str(tmp_path), "--quick",
         "--skip-mpi", "--", "--workloads", "mlp_tiny", "-k", selection],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "OVERLAP_MACHINE_LABEL": LABEL},
        capture_output=True, text=True, timeout=300)
    assert "LAUNCH" in result.stdout, result.stderr[-2000:]
    assert f"-k '{selection}'" in result.stdout
    refused = subprocess.run(
        [sys.executable, "-c", PLAN_ONLY, "--results-dir", str(tmp_path), "--quick", "--",
         "-k", "w2 and no_such_benchmark"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "OVERLAP_MACHINE_LABEL": LABEL},
        capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "LAUNCH" not in refused.stdout
    assert refused.stderr.strip() == (
        "error: no benchmark of the suite is selected by the pytest arguments -k 'w2 and "
        "no_such_benchmark' (torchrun gloo-tcp" + (", mpirun)" if capabilities.missing_mpi()
                                                   is None else ")")), refused.stderr


def test_results_dir_that_is_a_file_is_refused(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("x")
    run = _suite_run(taken, "--quick", stderr=subprocess.PIPE)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 2
    assert err.strip() == f"error: --results-dir={taken}: {taken} is a file, not a folder"
    assert taken.read_text() == "x"


def test_runs_started_in_the_same_second_get_their_own_names(tmp_path):
    names = [run_name(tmp_path) for _ in range(20)]
    assert len({name for name, _ in names}) == 20
    assert len({scratch for _, scratch in names}) == 20
    assert all(scratch.is_dir() and scratch.parent == tmp_path for _, scratch in names)


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _alive(pids) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()
            and Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"]


def _ended_whole(run: subprocess.Popen, results: Path, tree: dict, status: int) -> dict:
    """The launcher ended with ``status`` (a hang fails at the 30 s guard; how fast it ends is
    a timing, not asserted), no process of its tree left, one whole results file marked
    partial, no scratch folder, and no traceback in its output."""
    output, _ = run.communicate(timeout=30)
    assert run.returncode == status, output[-3000:]
    assert _alive(tree) == [], f"processes left running: {_alive(tree)}"
    assert "Traceback" not in output and "SignalException" not in output, output[-3000:]
    files = list((results / LABEL).glob("*.json"))
    assert len(files) == 1, files
    assert not list((results / LABEL).glob(".*")), "scratch files left behind"
    document = json.loads(files[0].read_text())
    assert document["suite"]["partial"] is True
    return document


def _stop_and_check(run: subprocess.Popen, results: Path, signum: int) -> dict:
    tree = process_tree(run.pid)
    run.send_signal(signum)  # what a terminal's Ctrl-C or `timeout` delivers to the launcher
    document = _ended_whole(run, results, tree, 128 + signum)
    assert document["suite"]["stopped_by"] == signal.Signals(signum).name
    return document


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_torchrun_stops_everything_and_keeps_what_finished(tmp_path, signum):
    results = tmp_path / "results"
    run = _suite_run(results, "--quick", "--skip-mpi", "--", "--workloads", "mlp_tiny",
                     "--chunks", "1", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # The pass checkpoints after each benchmark: stop once the first one is in the file.
    _wait_for(lambda: list((results / LABEL).glob(".*.run/*.json.tmp")), 240,
              "the first checkpoint")
    document = _stop_and_check(run, results, signum)
    assert document["benchmarks"], "the benchmarks that finished are kept"
    assert all("nvlink" not in b["fullname"] for b in document["benchmarks"])


@pytest.mark.skipif(capabilities.missing_mpi() is not None, reason="needs mpirun and mpi4py")
def test_signal_during_mpirun_stops_everything(tmp_path):
    results = tmp_path / "results"
    # The torchrun pass selects nothing that runs there (mpi runs only under mpirun).
    run = _suite_run(results, "--quick", "--", "--workloads", "mlp_tiny", "--chunks", "1",
                     "--strategies", "mpi", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _wait_for(lambda: list((results / LABEL).glob(".*.run/mpi.json.tmp")), 240,
              "the mpirun pass's first checkpoint")
    document = _stop_and_check(run, results, signal.SIGTERM)
    assert [p["name"] for p in document["suite"]["passes"]] == ["torchrun gloo-tcp", "mpirun"]


def test_a_killed_torchrun_agent_takes_its_workers_along(tmp_path):
    """SIGKILL to torchrun's agent (the out-of-memory killer, a hard kill) leaves nobody to stop
    the workers: they end with their parent, the launcher sweeps the pass's tree and keeps what
    finished, and exits as a shell reports the pass's death (128 + 9)."""
    results = tmp_path / "results"
    run = _suite_run(results, "--quick", "--skip-mpi", "--", "--workloads", "mlp_tiny",
                     "--chunks", "1", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _wait_for(lambda: list((results / LABEL).glob(".*.run/*.json.tmp")), 240,
              "the first checkpoint")
    tree = process_tree(run.pid)
    agent = next(pid for pid in tree if "torch.distributed.run" in
                 Path(f"/proc/{pid}/cmdline").read_text())
    workers = [pid for pid in tree if pid not in (run.pid, agent)]
    assert len(workers) >= 2, tree
    os.kill(agent, signal.SIGKILL)
    document = _ended_whole(run, results, tree, 128 + signal.SIGKILL)
    assert document["benchmarks"] and document["suite"]["failed_passes"] == ["torchrun gloo-tcp"]


def test_a_stop_before_any_pass_is_one_line_and_creates_nothing(tmp_path):
    """Ctrl-C while the launcher imports torch or checks its arguments (its first seconds)."""
    results = tmp_path / "results"
    run = _suite_run(results, "--quick", "--skip-mpi", stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE)
    time.sleep(1.5)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=30)
    assert run.returncode == 128 + signal.SIGINT
    assert err.splitlines() == ["[suite] SIGINT before any pass started: nothing launched, "
                                "nothing written"], err
    assert out == "" and not results.exists()


def test_a_killed_launcher_leaves_nothing_running(tmp_path):
    """SIGKILL to the launcher itself: its pass's own process ends with it, and the ranks with
    that; the last checkpoint stays whole in the scratch folder."""
    results = tmp_path / "results"
    run = _suite_run(results, "--quick", "--skip-mpi", "--", "--workloads", "mlp_tiny",
                     "--chunks", "1", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (checkpoint,) = _wait_for(lambda: list((results / LABEL).glob(".*.run/*.json.tmp")), 240,
                              "the first checkpoint")
    tree = process_tree(run.pid)
    assert len(tree) >= 4, tree  # launcher, torchrun, two ranks
    run.kill()
    run.wait(timeout=30)
    _wait_for(lambda: not _alive(tree), 10, "the pass to end with its launcher")
    assert json.loads(checkpoint.read_text())["benchmarks"]


@pytest.mark.slow
@pytest.mark.skipif(capabilities.missing_mpi() is not None,
                    reason=str(capabilities.missing_mpi()))
def test_mpi_ranks_end_within_5_s_of_a_launcher_killed_as_they_start(tmp_path):
    """SIGKILL to the launcher the moment mpirun has started both ranks, before they have
    imported torch: mpirun ends with the launcher, and the ranks with mpirun within 5 s
    (they arm that first thing, suite/rank_start.py, not after torch's import)."""
    results = tmp_path / "results"
    run = _suite_run(results, "--quick", "--", "--workloads", "mlp_tiny", "--chunks", "1",
                     "--strategies", "mpi", stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    ranks = _wait_for(lambda: len(found := ranks_in(process_tree(run.pid))) == 2 and found,
                      240, "both MPI ranks")
    tree = process_tree(run.pid)
    run.kill()
    killed = time.monotonic()
    run.wait(timeout=30)
    _wait_for(lambda: not _alive(tree), 30, "the ranks to end with their launcher")
    took = time.monotonic() - killed
    print(f"MPI ranks ended {took:.1f} s after their launcher was killed")
    assert took < 5, f"MPI ranks {sorted(ranks.values())} lived {took:.1f} s after the launcher"


def test_a_rank_knows_its_launcher_gone_from_its_pid_and_start_time():
    from suite.launch import _stat
    from suite.rank_start import LAUNCHER_ENV, launcher_gone

    me = f"{os.getpid()} {_stat(os.getpid())[1]}"
    assert not launcher_gone({LAUNCHER_ENV: me})
    assert launcher_gone({LAUNCHER_ENV: f"{os.getpid()} 1"})  # the pid, reused by another
    assert launcher_gone({LAUNCHER_ENV: "999999999 1"})
    assert not launcher_gone({})  # launched by hand: no suite launcher to end with


def leftover(results: Path, stamp: str, launcher: str | None, text: str) -> Path:
    """A scratch folder as a launcher leaves it when it is killed: a pass's checkpoint."""
    scratch = results / LABEL / f".{stamp}-x1y2.run"
    scratch.mkdir(parents=True)
    if launcher is not None:
        (scratch / "launcher").write_text(launcher)
    (scratch / "gloo-tcp.json.tmp").write_text(text)
    return scratch


def test_recover_merges_what_a_killed_launcher_left_and_names_what_it_cannot(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OVERLAP_MACHINE_LABEL", LABEL)
    results = tmp_path / "results"
    document = (ROOT / "tests" / "data" / "cpu-2core-trimmed.json").read_text()
    dead = leftover(results, "20261125T100000Z", "999999999 1", document)
    broken = leftover(results, "20261125T110000Z", None, '{"benchmarks": [')
    from suite.run_files import process_start
    alive = leftover(results, "20261125T120000Z", f"{os.getpid()} {process_start(os.getpid())}",
                     document)  # a run still going: not ours to touch
    assert main(["--recover", "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out.splitlines()
    merged = results / LABEL / "20261125T100000Z-x1y2.json"
    count = len(json.loads(document)["benchmarks"])
    assert out[0] == (f"[suite] recovered {count} benchmarks that an earlier run finished and "
                      f"never merged (its launcher ended first): wrote {merged}, marked partial")
    assert out[1].startswith(f"[suite] cannot recover {broken}: {broken / 'gloo-tcp.json.tmp'} (")
    assert len(out) == 2
    written = json.loads(merged.read_text())
    assert written["benchmarks"] == json.loads(document)["benchmarks"]
    assert written["suite"]["partial"] is True
    assert written["suite"]["stopped_by"] == "its launcher ended"
    assert not dead.exists() and broken.exists() and alive.exists()
    assert main(["--recover", "--results-dir", str(results)]) == 0  # nothing new
    assert capsys.readouterr().out.splitlines() == out[1:]


def test_a_recovered_pass_keeps_the_command_exit_and_wall_time_its_record_kept(
        tmp_path, monkeypatch):
    from suite.run_files import pass_record_path, write_pass_record

    monkeypatch.setenv("OVERLAP_MACHINE_LABEL", LABEL)
    results = tmp_path / "results"
    document = (ROOT / "tests" / "data" / "cpu-2core-trimmed.json").read_text()
    scratch = leftover(results, "20261125T100000Z", "999999999 1", document)
    output = scratch / "gloo-tcp.json.tmp"
    assert pass_record_path(output) == scratch / "gloo-tcp.pass.json"
    command = ["python", "-m", "torch.distributed.run", "-m", "pytest", "suite/bench_overlap.py"]
    write_pass_record(output, {"name": "torchrun gloo-tcp", "command": command,
                               "env": {"OVERLAP_PROFILE": "gloo-tcp"}, "planned_s": 300.0,
                               "exit": 0, "wall_s": 340.5})
    assert main(["--recover", "--results-dir", str(results)]) == 0
    written = json.loads((results / LABEL / "20261125T100000Z-x1y2.json").read_text())
    assert written["suite"]["passes"] == [{
        "name": "torchrun gloo-tcp", "command": shlex.join(command),
        "env": {"OVERLAP_PROFILE": "gloo-tcp"}, "exit": 0, "wall_s": 340.5,
        "planned_s": 300.0, "timing": None}]
    assert written["suite"]["failed_passes"] == []
