"""The gate's confirmation by interleaved re-run (reports/gate/confirm.py).

The decision and the id -> command mapping are checked on their own; the whole path (a git
revision checked out in a temporary worktree, blocks alternating between it and the working
tree, the paired decision, the exit status) runs for real on a tiny benchmark in a temporary
git repository: numpy matrix products, TINY_WORK times as many in a slowed candidate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from impl.rows.files import load_results
from reports.gate import cli as gate
from reports.gate import confirm as gate_confirm
from reports.gate.comparison import compare
from reports.gate.confirm import (
    Confirmation,
    ConfirmError,
    Recipe,
    block_command,
    block_value,
    checkout,
    decide_paired,
    keyword_expression,
    narrowed,
    paired_throughput_ratio,
    recipe_for,
    run_block,
    schedule,
)
from tests.committed import RESULTS
from tests.gate.test_slowdown import slower

ROOT = Path(__file__).resolve().parent.parent.parent
QUICK_CPU = RESULTS / "cpu-2core" / "20261121T232934Z.json"
DEFAULT_GPU = RESULTS / "h200x4" / "20261122T001808Z.json"
DEFAULT_CPU = RESULTS / "cpu-2core" / "20261123T102810Z-dp9q3287.json"


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    # The blocks and runs below are processes of their own: one BLAS thread each, set before
    # anything in them can import numpy, so they do not fight the test run for the two cores.
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "1")


# --- the decision ---------------------------------------------------------------------------


def test_schedule_alternates_which_side_goes_first():
    assert schedule(4) == ["baseline", "candidate", "candidate", "baseline",
                           "baseline", "candidate", "candidate", "baseline"]
    with pytest.raises(ValueError, match="even number >= 2, got 3"):
        schedule(3)


def test_paired_ratio_is_the_trimmed_geometric_mean_of_pair_ratios():
    base = np.array([1.0, 1.0, 1.0, 1.0, 1.0])
    cand = np.array([1.1, 1.1, 1.1, 1.1, 5.0])  # one block hit by a neighbour's burst
    # 20% trimmed: the 5.0 pair and the highest 1/1.1 pair go, three 1/1.1 remain.
    assert paired_throughput_ratio(base, cand) == pytest.approx(1 / 1.1)


def test_a_block_is_worth_its_fastest_round_so_a_burst_that_holds_it_does_not_count():
    rng = np.random.default_rng(3)
    quiet = 0.030 * np.exp(np.abs(rng.normal(0.0, 0.05, 60)))  # interference only adds time
    burst = np.concatenate([quiet[:10], quiet[10:] * 1.4])  # a neighbour holds 50 of 60 rounds
    assert block_value(quiet) == quiet.min()
    assert block_value(quiet) <= block_value(burst) < 1.03 * block_value(quiet)
    # Block pairs of unchanged code, one of each four hit by such a burst on the candidate side.
    base = [block_value(quiet * (1 + i / 100)) for i in range(8)]
    cand = [block_value((burst if i % 4 == 0 else quiet) * (1 + i / 100)) for i in range(8)]
    assert decide_paired(base, cand, threshold=0.05).outcome == "cleared"
    by_median = [float(np.median((burst if i % 4 == 0 else quiet) * (1 + i / 100)))
                 for i in range(8)]
    assert by_median[0] > 1.3 * base[0]  # what the median of a burst-held block reads


def block_times(ratio: float, pairs: int = 6, seed: int = 0, drift: float = 0.3):
    """Block median round times: a machine whose speed wanders by ``drift`` between pairs,
    each pair's two blocks close together (1% apart)."""
    rng = np.random.default_rng(seed)
    speed = np.exp(rng.normal(0.0, drift, pairs))
    base = 0.02 * speed * np.exp(rng.normal(0.0, 0.01, pairs))
    return list(base), list(0.02 * speed / ratio * np.exp(rng.normal(0.0, 0.01, pairs)))


def test_a_ten_percent_slowdown_is_confirmed_despite_drift_between_pairs():
    confirmation = decide_paired(*block_times(1 / 1.1), threshold=0.05)
    assert confirmation.verdict == "regressed"
    assert confirmation.ratio.high < 0.95
    assert "lies above the 5% threshold" in confirmation.reason


@pytest.mark.parametrize("seed", range(5))
def test_unchanged_code_is_cleared_despite_drift_between_pairs(seed):
    confirmation = decide_paired(*block_times(1.0, seed=seed), threshold=0.05)
    assert confirmation.verdict == "unchanged" and confirmation.outcome == "cleared"
    assert confirmation.reason.endswith("lies below the 5% threshold: cleared")


def test_a_noisy_re_run_is_inconclusive_not_a_regression():
    base, cand = block_times(1 / 1.1, seed=1)
    noise = np.exp(np.random.default_rng(2).normal(0.0, 0.3, len(cand)))  # blocks 30% apart
    confirmation = decide_paired(base, list(np.array(cand) * noise), threshold=0.05)
    assert confirmation.verdict == "unchanged" and confirmation.outcome == "inconclusive"
    assert confirmation.ratio.low < 0.95 < confirmation.ratio.high
    assert "(inconclusive: it reaches across it)" in confirmation.reason


def test_a_three_percent_slowdown_is_below_a_five_percent_threshold():
    confirmation = decide_paired(*block_times(1 / 1.03, drift=0.0), threshold=0.05)
    assert confirmation.ratio.high < 1 < 1 / confirmation.ratio.value
    assert confirmation.verdict == "unchanged" and confirmation.outcome == "cleared"


def test_an_inconclusive_re_run_grows_until_its_interval_decides(monkeypatch):
    """Blocks of a 9% slowdown, ln ratios spread by 6%: here eight pairs reach across the 5%
    threshold and sixteen lie above it; the benchmark decided at eight is left alone."""
    rng = np.random.default_rng(2)
    runs = []

    slowdown, spread = {"slow": 1.09, "same": 1.0}, {"slow": 0.06, "same": 0.01}

    def fake_interleave(names, commands, trees, envs, blocks, log, progress):
        runs.append(list(names))
        return {"baseline": {name: [0.030] * blocks for name in names},
                "candidate": {name: list(0.030 * slowdown[name]
                                         * np.exp(rng.normal(0.0, spread[name], blocks)))
                              for name in names}}

    monkeypatch.setattr(gate_confirm, "interleave", fake_interleave)
    recipe = Recipe(None)
    benchmarks = [{"fullname": name} for name in ("slow", "same")]
    confirmations = gate_confirm.confirm(benchmarks, recipe, {}, {}, {"slow": 0.05,
                                                                      "same": 0.05}, blocks=8)
    assert runs[0] == ["slow", "same"] and all(names == ["slow"] for names in runs[1:])
    assert confirmations["same"].outcome == "cleared"
    assert len(confirmations["same"].baseline_block_s) == 8
    slow = confirmations["slow"]
    assert len(runs) == 2 and len(slow.baseline_block_s) == 16
    assert slow.verdict == "regressed" and slow.ratio.high < 0.95


def test_a_re_run_stops_growing_at_its_cap(monkeypatch):
    monkeypatch.setattr(gate_confirm, "interleave", lambda names, *_, **__: {
        "baseline": {n: [0.030, 0.030] for n in names},
        "candidate": {n: [0.030 * 1.06, 0.030 / 1.02] for n in names}})
    recipe = Recipe(None)
    (confirmation,) = gate_confirm.confirm([{"fullname": "x"}], recipe, {}, {}, {"x": 0.05},
                                           blocks=2, max_blocks=6).values()
    assert confirmation.outcome == "inconclusive" and len(confirmation.baseline_block_s) == 6


def test_max_blocks_below_blocks_is_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        gate.parse_args(["a.json", "b.json", "--confirm-blocks", "8", "--confirm-max-blocks", "4"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "--confirm-max-blocks 4 is below --confirm-blocks 8; use at least as many")


def test_missing_blocks_leave_the_benchmark_unconfirmed():
    confirmation = decide_paired([0.02, None], [0.03, 0.03], threshold=0.05)
    assert confirmation.verdict is None
    assert confirmation.reason == "not re-measured: missing from 1 of 4 blocks"


def test_row_verdicts_say_where_they_come_from():
    base = compare({"x": bench(0.02)}, {"x": bench(0.03)}).rows[0]
    assert base.verdict_text == "regressed (unconfirmed: files only)" and base.suspect
    regressed = Confirmation("regressed", "re-run: ...", None, 0.05)
    cleared = Confirmation("unchanged", "re-run: ...", None, 0.05)
    missing = Confirmation(None, "not re-measured", None, 0.05)
    assert replace(base, confirmation=regressed).verdict_text == (
        "regressed (confirmed by re-run)")
    assert replace(base, confirmation=cleared).verdict == "unchanged"
    assert replace(base, confirmation=cleared).verdict_text == (
        "unchanged (re-run; files: regressed)")
    assert replace(base, confirmation=missing).verdict_text == (
        "regressed (unconfirmed: not re-measured)")


def bench(median: float, rounds: int = 20, name: str = "x") -> dict:
    data = list(median * np.exp(np.random.default_rng(1).normal(0, 0.01, rounds)))
    return {"name": name, "fullname": name, "group": None, "extra_info": {},
            "stats": {"median": float(np.median(data)), "data": data}}


# --- from an id to a command ----------------------------------------------------------------


def test_recipe_reuses_the_recorded_launcher_arguments():
    results = load_results(QUICK_CPU)
    recipe = recipe_for(results.data, str(QUICK_CPU))
    assert recipe == Recipe(("--quick", "--ranks", "8", "--skip-mpi"),
                            ("--workloads", "mlp_tiny", "--chunks", "1,10", "--strategies",
                             "sequential,chunked,threaded,ddp"))
    names = ["suite/bench_overlap.py::test_step[mlp_tiny-ddp-K10-w2-gloo-tcp]",
             "suite/bench_overlap.py::test_step[mlp_tiny-chunked-K1-w8-gloo-tcp]"]
    command = block_command(narrowed(recipe, [b for b in results.benchmarks
                                              if b["fullname"] in names]), names, Path("/t"))
    assert command[1:] == ["-m", "suite.run", "--quick", "--ranks", "8", "--skip-mpi",
                           "--results-dir", "/t", "--", "--workloads", "mlp_tiny", "--chunks",
                           "1,10", "--strategies", "sequential,chunked,threaded,ddp", "-k",
                           "test_step[mlp_tiny-ddp-K10-w2-gloo-tcp] or "
                           "test_step[mlp_tiny-chunked-K1-w8-gloo-tcp]"]


def test_recipe_keeps_only_the_profiles_and_passes_the_ids_need():
    results = load_results(DEFAULT_GPU)
    recipe = recipe_for(results.data, str(DEFAULT_GPU))
    assert recipe.launcher_args == ()  # --results-dir /root/out/results is dropped
    steps = [b for b in results.benchmarks if b["extra_info"].get("strategy") == "chunked"][:2]
    assert narrowed(recipe, steps).launcher_args == ("--profiles", "nvlink", "--skip-mpi")
    mpi = [b for b in results.benchmarks if b["extra_info"].get("strategy") == "mpi"][:1]
    assert narrowed(recipe, mpi).launcher_args == ("--profiles", "nvlink")


def test_rows_without_a_profile_keep_every_recorded_pass():
    """Pipeline, hybrid, digits and synthetic rows record no profile; gloo rows record one that
    is not an NCCL profile: neither narrows the launcher's passes, and neither is sorted
    against the other (a TypeError once, on every real suite file)."""
    results = load_results(DEFAULT_CPU)
    recipe = recipe_for(results.data, str(DEFAULT_CPU))
    kinds = {}
    for benchmark in results.benchmarks:
        kinds.setdefault("profile" in benchmark["extra_info"], benchmark)
    assert set(kinds) == {True, False}
    assert narrowed(recipe, list(kinds.values())).launcher_args == ("--skip-mpi",)
    gpu = load_results(DEFAULT_GPU)
    step = next(b for b in gpu.benchmarks if b["extra_info"].get("profile") == "nvlink")
    no_profile = {**step, "extra_info": {k: v for k, v in step["extra_info"].items()
                                         if k != "profile"}}
    assert narrowed(recipe_for(gpu.data, "f"), [step, no_profile]).launcher_args == (
        "--skip-mpi",)


def test_plain_pytest_files_run_their_node_ids():
    command = block_command(Recipe(None), ["tests/b.py::test_x[a-1]"], Path("/t"))
    assert command[1:] == ["-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "tests/b.py::test_x[a-1]", "--benchmark-json=/t/block.json",
                           "--benchmark-save-data"]
    assert recipe_for({"suite": {"launcher_command": None}}, "f") == Recipe(None)
    assert recipe_for({"suite": {"launcher_command": None, "mode": "quick"}}, "f") == Recipe(
        None, ("--suite-mode", "quick"))
    command = block_command(Recipe(None, ("--suite-mode", "quick")), ["t.py::x"], Path("/t"))
    assert command[6:9] == ["t.py::x", "--suite-mode", "quick"]


def test_plain_pytest_blocks_keep_the_recorded_grid_options():
    # suite.command as conftest.py records it: sys.argv joined by spaces
    command = ("pytest/__main__.py -q suite/bench_overlap.py --suite-mode quick --world-sizes 1 "
               "--strategies=sequential,chunked --chunks 10 -k test_overlap "
               "--benchmark-json=/r/x.json --results-json /r/y.json")
    recipe = recipe_for({"suite": {"launcher_command": None, "mode": "quick",
                                   "command": command}}, "f")
    assert recipe == Recipe(None, ("--suite-mode", "quick", "--world-sizes", "1",
                                   "--strategies=sequential,chunked", "--chunks", "10"))


def test_names_pytest_k_cannot_express_are_refused():
    assert keyword_expression(["a.py::test[x y]"]) is None
    assert keyword_expression(["a.py::test[=]"]) is None
    assert keyword_expression(["a.py::test[w2-1MiB]", "a.py::test[w2-1MiB]"]) == (
        "test[w2-1MiB]")
    with pytest.raises(ConfirmError, match=r"cannot select a.py::test\[x y\] with pytest -k"):
        block_command(Recipe(()), ["a.py::test[x y]"], Path("/t"))
    with pytest.raises(ConfirmError, match="is not 'python -m suite.run ...'"):
        recipe_for({"suite": {"launcher_command": "torchrun -m pytest"}}, "f")


def test_a_launcher_block_runs_exactly_the_named_id(tmp_path):
    """One real block through python -m suite.run on CPU: -k selects the one id asked for."""
    name = "suite/bench_overlap.py::test_overlap[mlp_tiny-sequential-K1-w1-gloo-tcp]"
    recipe = Recipe(("--quick", "--ranks", "1", "--skip-mpi"),
                    ("--workloads", "mlp_tiny", "--strategies", "sequential,chunked",
                     "--chunks", "1", "--world-sizes", "1"))
    log: list[str] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    measured = run_block(block_command(recipe, [name], tmp_path), ROOT, env, tmp_path, log,
                         "block 1/2 (baseline)")
    assert list(measured) == [name], log
    assert len(measured[name]) == 6  # quick mode on CPU: 6 rounds (suite/harness.py)


# --- the whole path, for real, in a temporary repository -------------------------------------

# About 20 ms a round at TINY_WORK=1 on one core of the 2-core machine: long enough that a
# scheduler hiccup is a small part of a round.
TINY_BENCH = '''
import os

import numpy as np


def test_tiny(benchmark):
    work = int(os.environ.get("TINY_WORK", "1"))
    a = np.random.default_rng(0).random((256, 256))

    def step():
        for _ in range(12 * work):
            a @ a

    benchmark.pedantic(step, rounds=15, warmup_rounds=2)
'''


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def tiny_repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "bench_tiny.py").write_text(textwrap.dedent(TINY_BENCH))
    (repo / "pytest.ini").write_text("[pytest]\npython_files = bench_*.py\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "tiny")
    return repo


def tiny_run(repo: Path, out: Path, work: int) -> Path:
    env = {**os.environ, "TINY_WORK": str(work)}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "bench_tiny.py::test_tiny", f"--benchmark-json={out}",
                    "--benchmark-save-data"], cwd=repo, env=env, check=True,
                   capture_output=True)
    return out


def confirm_gate(capsys, repo: Path, baseline: Path, candidate: Path, *extra: str):
    code = gate.main([str(baseline), str(candidate), "--confirm", "--baseline-rev", "HEAD",
                      "--candidate-tree", str(repo), "--confirm-blocks", "4",
                      "--confirm-max-blocks", "4", "--threshold", "0.25",
                      "--summary", str(repo.parent / "s.md"),
                      "--confirm-log", str(repo.parent / "confirm.log"),
                      "--json", str(repo.parent / "gate.json"), *extra])
    out, err = capsys.readouterr()
    return code, out, err, json.loads((repo.parent / "gate.json").read_text())


def test_a_slowed_candidate_is_confirmed_by_the_interleaved_re_run(tiny_repo, capsys):
    """Four times the work: four block pairs on a busy 2-core machine spread a 2x slowdown's
    paired interval across the 25% threshold now and then; a 4x one stays far above it."""
    baseline = tiny_run(tiny_repo, tiny_repo.parent / "base.json", work=1)
    candidate = tiny_run(tiny_repo, tiny_repo.parent / "cand.json", work=4)
    code, out, err, verdicts = confirm_gate(capsys, tiny_repo, baseline, candidate,
                                            "--candidate-env", "TINY_WORK=4")
    assert code == 1, out + err
    (row,) = verdicts["rows"]
    assert row["files_verdict"] == "regressed" and row["suspect"]
    assert row["verdict_text"] == "regressed (confirmed by re-run)"
    blocks = row["confirmation"]
    assert len(blocks["baseline_block_s"]) == len(blocks["candidate_block_s"]) == 4
    assert blocks["ratio"]["high"] < 0.75
    assert "confirm: block 8/8 (baseline)" in out  # B C C B B C C B: the last is the baseline
    assert "Throughput gate: FAIL (1 regressed, 0 improved, 0 unchanged)" in out
    assert git(tiny_repo, "worktree", "list").count("\n") == 1  # the checkout is gone


def test_a_candidate_file_that_only_drifted_is_cleared_by_the_re_run(tiny_repo, capsys):
    """The candidate file is slow (the baseline's own rounds, twice as long: a file made while
    the machine was busy, as it were), but its code is the baseline's: the files say
    regressed, the interleaved re-run of the same code clears it. (A fresh run with twice the
    work is no such file: with two busy loops beside it, one measured less than 25% slower.)
    The re-run compares one code with itself; how often that still reads as a regression on
    a loaded machine is the gate trials' false-alarm rate (reports/gate/trials.py)."""
    baseline = tiny_run(tiny_repo, tiny_repo.parent / "base.json", work=1)
    candidate = slower(baseline, 2.0, tiny_repo.parent / "cand.json")
    code, out, err, verdicts = confirm_gate(capsys, tiny_repo, baseline, candidate)
    assert code == 0, out + err
    (row,) = verdicts["rows"]
    assert row["files_verdict"] == "regressed"
    assert row["verdict_text"] == "unchanged (re-run; files: regressed)"
    assert "Throughput gate: PASS" in out
    log = (tiny_repo.parent / "confirm.log").read_text()
    assert log.count("### block ") == 8 and "bench_tiny.py::test_tiny" in log

    # Files only, the same pair exits 3: regressed, but unconfirmed.
    code = gate.main([str(baseline), str(candidate), "--threshold", "0.25",
                      "--summary", str(tiny_repo.parent / "s.md")])
    out, _ = capsys.readouterr()
    assert code == 3
    assert "regressed (unconfirmed: files only)" in out
    assert "Throughput gate: UNCONFIRMED (1 regressed" in out


def test_an_unknown_revision_is_one_line(tiny_repo):
    with (pytest.raises(ConfirmError, match="baseline revision 'nope' is not a commit of"),
          checkout("nope", tiny_repo)):
        pass


def test_a_failing_block_names_the_block_and_the_error(tiny_repo, tmp_path):
    command = [sys.executable, "-c", "import sys; sys.exit('boom: no GPU')"]
    with pytest.raises(ConfirmError, match=r"block 3/8 \(candidate\) failed with exit 1: "
                                           "boom: no GPU"):
        run_block(command, tiny_repo, dict(os.environ), tmp_path, [], "block 3/8 (candidate)")
