"""A full disk loses nothing finished: every failed write is one line, whole files stay.

The disk fills in two places: while a pass checkpoints its results file after every benchmark
(conftest.py), and when the launcher merges the passes' files (suite/run.py). Both are
simulated with ENOSPC from impl.atomic, the one place results are written. Where the tests
run as root and may mount, a real full filesystem (a 1 MiB tmpfs filled before the run) is
the results folder, so that every write the run makes meets it: the launcher's own files,
each rank's stacks file and hang record, the checkpoints and the merged file
(docs/failures.md); elsewhere those tests skip with the reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

# A plugin (pytest) or prelude (launcher) making writes under OVERLAP_TEST_FULL_DIR fail as a
# full disk does, after OVERLAP_TEST_WRITES_LEFT of them succeeded.
FULL_DISK = """
import errno, os
import impl.atomic

_write = impl.atomic.write_bytes_atomic
_left = [int(os.environ["OVERLAP_TEST_WRITES_LEFT"])]


def _full(path, data):
    if not str(path).startswith(os.environ["OVERLAP_TEST_FULL_DIR"]):
        return _write(path, data)
    if _left[0] <= 0:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    _left[0] -= 1
    return _write(path, data)


impl.atomic.write_bytes_atomic = _full
"""


def test_a_disk_that_fills_during_a_pass_keeps_the_last_checkpoint(tmp_path):
    (tmp_path / "full_disk.py").write_text(FULL_DISK)
    results = tmp_path / "results" / "pass.json"
    results.parent.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]),
           "OVERLAP_TEST_WRITES_LEFT": "1", "OVERLAP_TEST_FULL_DIR": str(results.parent),
           "TMPDIR": str(tmp_path / "spare")}
    (tmp_path / "spare").mkdir()
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "full_disk", "-p",
                          "no:cacheprovider", "suite/bench_synthetic.py", "--suite-mode", "quick",
                          "--results-json", str(results)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    assert "Traceback" not in output and " ERROR" not in output, output[-3000:]
    lines = [line for line in output.splitlines() if line.startswith("[suite] rank 0")]
    assert lines[0] == (f"[suite] rank 0: cannot write {results}: [Errno 28] No space left on "
                        f"device: '{results}'; the run goes on and writes it again after the "
                        "next benchmark (the last whole checkpoint stays)")
    assert len(lines) == 2 and "could not all be written" in lines[1], lines
    kept = json.loads(results.read_text())
    assert len(kept["benchmarks"]) == 1 and kept["suite"]["partial"] is True
    # The whole pass went to the temporary folder, which had room.
    (spare,) = (tmp_path / "spare").glob("overlap-results-*.json")
    assert f"all of them are in {spare} instead" in lines[1]
    whole = json.loads(spare.read_text())
    assert len(whole["benchmarks"]) == 2 and whole["suite"]["partial"] is False


LAUNCH_WITH_FULL_DISK = FULL_DISK + """
import json, sys
from pathlib import Path
import suite.run as run

document = json.loads(Path(sys.argv[1]).read_text())


def fake_pass(self, command, env, watch=None):
    # A pass that finished: its whole file in the scratch folder, as conftest.py writes it.
    Path(command[command.index("--results-json") + 1]).write_text(json.dumps(document))
    return 0


run.Launcher.run = fake_pass
sys.exit(run.main(sys.argv[2:]))
"""


def test_a_merge_on_a_full_disk_keeps_each_pass_file(tmp_path):
    source = DATA / "cpu-2core-trimmed.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OVERLAP_MACHINE_LABEL": "full-disk",
           "OVERLAP_TEST_WRITES_LEFT": "0", "OVERLAP_TEST_FULL_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", LAUNCH_WITH_FULL_DISK, str(source),
                          "--results-dir", str(tmp_path), "--quick", "--skip-mpi", "--",
                          "--workloads", "mlp_tiny"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 1, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    folder = tmp_path / "full-disk"
    (kept,) = folder.iterdir()  # no scratch folder left, no merged file
    assert kept.name.endswith("-gloo-tcp.json")
    assert json.loads(kept.read_text()) == json.loads(source.read_text())
    errors = run.stderr.strip().splitlines()
    assert errors == [
        f"[suite] error: cannot write {folder / kept.name.replace('-gloo-tcp', '')}: [Errno 28] "
        f"No space left on device: '{folder / kept.name.replace('-gloo-tcp', '')}'",
        f"[suite] kept what the passes finished, one whole file per pass: {kept}"]


LAUNCH_ON_A_FULL_DISK = """
import json, sys
from pathlib import Path
import suite.run as run
from suite.run_files import fallback_path

document = json.loads(Path(sys.argv[1]).read_text())


def full_from_the_start(self, command, env, watch=None):
    # No checkpoint could be written: the pass kept its whole file in the temporary folder,
    # as conftest.py does.
    output = command[command.index("--results-json") + 1]
    fallback_path(output).write_text(json.dumps(document))
    return 0


run.Launcher.run = full_from_the_start
sys.exit(run.main(sys.argv[2:]))
"""


def test_a_disk_full_from_the_start_names_where_the_results_are(tmp_path):
    """The launcher's last line names the file in the temporary folder, not "nothing
    written"."""
    source = DATA / "cpu-2core-trimmed.json"
    spare = tmp_path / "spare"
    spare.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OVERLAP_MACHINE_LABEL": "full-disk",
           "TMPDIR": str(spare)}
    run = subprocess.run([sys.executable, "-c", LAUNCH_ON_A_FULL_DISK, str(source),
                          "--results-dir", str(tmp_path / "results"), "--quick", "--skip-mpi",
                          "--", "--workloads", "mlp_tiny"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stderr[-3000:]
    (kept,) = spare.glob("overlap-results-*-gloo-tcp.json")
    assert json.loads(kept.read_text()) == json.loads(source.read_text())
    assert run.stderr.strip().splitlines()[-1] == (
        f"[suite] the results folder {tmp_path / 'results' / 'full-disk'} had no room for "
        f"every pass's results; they are kept whole in {kept}")


# --- a real full filesystem ---------------------------------------------------------------------


@pytest.fixture
def full_tmpfs(tmp_path):
    """A 1 MiB tmpfs, mounted and filled to the last byte before the run (root only)."""
    folder = tmp_path / "full"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (run as root, or see docs/failures.md)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        with open(folder / "fill", "wb", buffering=0) as fill, contextlib.suppress(OSError):
            while True:
                fill.write(b"\0" * 4096)
        assert os.statvfs(folder).f_bavail == 0
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)


def run_suite(results: Path, spare: Path, *pytest_args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OVERLAP_MACHINE_LABEL": "full-disk",
           "TMPDIR": str(spare)}
    return subprocess.run([sys.executable, "-m", "suite.run", "--quick", "--skip-mpi",
                           "--results-dir", str(results), "--", *pytest_args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_disk_full_from_the_start_measures_everything(full_tmpfs, tmp_path):
    """No write beside the results can stop a benchmark: each refused one is a line, every
    benchmark runs, and the whole pass is kept in the temporary folder, which the last line
    names (exit 1: not all could be written where asked)."""
    spare = tmp_path / "spare"
    spare.mkdir()
    run = run_suite(full_tmpfs, spare, "-k", "test_allreduce")
    output = run.stdout + run.stderr
    assert run.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    passed = re.findall(r"::(test_allreduce\S*) PASSED", run.stdout)
    assert passed, run.stdout[-3000:]
    (kept,) = spare.glob("overlap-results-*-gloo-tcp.json")
    document = json.loads(kept.read_text())
    assert [b["name"] for b in document["benchmarks"]] == passed
    assert document["suite"]["partial"] is False
    folder = full_tmpfs / "full-disk"
    scratch = next(iter(re.findall(rf"{re.escape(str(folder))}/(\.[^/]+\.run)/", run.stdout)))
    pass_file = folder / scratch / "gloo-tcp.json.tmp"
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    progress = [line for line in lines if line.startswith("[suite] progress: ")]
    assert progress == [
        "[suite] progress: 3/3 benchmarks, 0.0 min elapsed (plan 0.0 min), ETA 0.0 min"]
    lines = [line for line in lines if line not in progress]
    assert lines == [
        f"[deadline] rank 0: cannot write {pass_file}.stacks-rank0.txt: [Errno 28] No space "
        "left on device; the benchmarks go on (at a deadline every stack still goes to the log)",
        f"[suite] rank 0: cannot write {pass_file}: [Errno 28] No space left on device; the "
        "run goes on and writes it again after the next benchmark (the last whole checkpoint "
        "stays)",
        "[suite] rank 0: the results of this pass could not all be written ([Errno 28] No "
        f"space left on device); all of them are in {kept} instead (no checkpoint of it could "
        f"be written as {pass_file})",
        f"[suite] the results folder {folder} had no room for every pass's results; they are "
        f"kept whole in {kept}"]
    assert sorted(p.name for p in full_tmpfs.iterdir()) == ["fill"]  # no scratch folder left


STUCK = "tests/hang_bench/stuck_benchmarks.py"


@pytest.mark.slow
def test_a_hang_on_a_full_disk_is_stopped_and_the_rest_runs(full_tmpfs, tmp_path):
    """The hang records go to the temporary folder: the launcher still names the hang and
    goes on after it in a fresh pass; what finished before it is kept (exit 3, a hang)."""
    spare = tmp_path / "spare"
    spare.mkdir()
    run = run_suite(full_tmpfs, spare, STUCK, "-o", f"python_files={Path(STUCK).name}",
                    "-k", "stuck_benchmarks and (before or collective or after)",
                    "--deadline-floor-s", "10", "--deadline-multiple", "0")
    output = run.stdout + run.stderr
    assert run.returncode == 3, output[-3000:]
    # Each refused write is one line; the one traceback is torchrun's report of the rank its
    # watchdog stopped (ChildFailedError, as in every hang under torchrun).
    assert all(line.startswith(("[suite] ", "[deadline] ")) for line in output.splitlines()
               if "No space left" in line), output[-3000:]
    assert output.count("Traceback") == output.count("ChildFailedError:") == 1, output[-3000:]
    assert f"[suite] {STUCK}::test_stuck_collective passed its deadline of 10 s" in run.stdout
    assert "[suite] the other ranks waited for rank(s) 0, 1" in run.stdout  # both in torch
    hung, resumed = sorted(spare.glob("overlap-results-*.json"))
    assert hung.name.endswith("-gloo-tcp.json") and resumed.name.endswith("-gloo-tcp.resume1.json")
    first = json.loads(hung.read_text())
    assert [b["name"] for b in first["benchmarks"]] == ["test_before"]
    assert first["suite"]["partial"] is True
    assert first["suite"]["hangs"][0]["benchmark"] == f"{STUCK}::test_stuck_collective"
    assert [b["name"] for b in json.loads(resumed.read_text())["benchmarks"]] == ["test_after"]
    assert not list(spare.glob("*.hang-rank*.json"))  # the records went with the run
    assert run.stderr.strip().splitlines()[-1] == (
        f"[suite] the results folder {full_tmpfs / 'full-disk'} had no room for every pass's "
        f"results; they are kept whole in {hung}, {resumed}")
