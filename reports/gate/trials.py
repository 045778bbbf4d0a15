"""How often the gate cries wolf, and how often it catches a real slowdown, on this machine.

    python -m reports.gate.trials --pairs 40 --out results/cpu-2core/gate-trials.json
    python -m reports.gate.trials --target gpu --pairs 20 --max-minutes 9 \\
        --out results/h200x1/gate-trials.json [--resume]

Each trial is what the gate meets in CI, made for real, in fresh processes:

1. a baseline run, then a candidate run of the target's benchmarks: the same code (an
   unchanged pair) or the candidate with ``--extra-compute`` more real compute in every step
   (a slowed pair: MLPConfig.extra_compute through the target's environment variable);
2. the baseline file made into a baseline the way CI makes one, with the run-to-run spread of
   calibration runs of the same code made before the trials and kept out of them
   (``python -m reports.gate --update-baseline BASE --spread-from CALIBRATION...``);
3. the gate as CI runs it: ``python -m reports.gate BASELINE CANDIDATE --confirm
   --candidate-env VAR=EXTRA --json ...``: the files-only verdict, then the interleaved
   re-run of the suspect benchmarks (baseline code: the commit recorded in the baseline file,
   checked out in a temporary worktree; or this tree where there is no git repository).

Unchanged and slowed pairs alternate, so slow changes of the machine hit both kinds alike.
Every pair records the files-only verdict, the re-run's, the gate's exit status, and the
machine's load: the 1-minute load average before and after, and the busiest other processes.
Rates: false alarms (unchanged pairs the gate failed) and detections (slowed pairs it failed),
per pair and files-only too, each with its 95% Clopper-Pearson interval (impl/stats.py
``proportion``, scipy.stats.binomtest).

The slowdown is measured before the trials, in one process: plain and slowed steps of the
target's workload interleaved (suite/harness.py ``measure_interleaved``), its ratio with a 95%
interval (impl/stats.py ``ratio``); the slowed pairs' re-runs measure it again across
processes. The JSON is rewritten whole after every pair (impl/atomic.py), so ``--resume``
continues a run that was stopped or that ran out of ``--max-minutes``.

Targets: ``cpu`` (default) is tests/gate_bench/gate_workload.py, real MLP training steps on one
CPU thread, about 8 s per process on the idle 2-core machine (a pair with its re-run about 2
minutes, so 40 + 40 pairs took 2 h 18 min: ``--max-minutes`` and ``--resume``); ``gpu`` is
the same workload with a bf16 4096-wide MLP on one GPU, about 10 s per process on the H200
(mostly starting Python and CUDA; a slowed pair with 4 blocks a side about 90 s); ``gpu-quick``
is the suite's quick-mode step benchmarks at world size 1 (sequential and chunked, K = 10, the
805M-parameter MLP, slowed through OVERLAP_EXTRA_COMPUTE), longer per process; ``suite-quick``
gates whole suite files: each side is ``python -m suite.run --quick --skip-mpi -- --workloads
mlp_tiny --chunks 1,10`` (2 gloo ranks, every quick benchmark of the suite on the small MLP,
about a minute on the idle 2-core machine), slowed through OVERLAP_EXTRA_COMPUTE. With
``--files-only`` the gate runs without ``--confirm``: what the files alone say about whole
suites, pair after pair (exit 3, UNCONFIRMED, whenever any of their benchmarks looks slower);
``--kinds unchanged`` runs only the unchanged pairs, for the false-alarm rate alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from impl import stats
from impl.atomic import write_json_atomic
from impl.rows.gate_records import GATE, GATE_ROW, RERUN, TRIAL_PAIR, TRIAL_ROW, TRIALS
from reports.gate.trials_record import PAIR_KINDS, load_now, machine, summarise

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "tests" / "gate_bench" / "gate_workload.py"


@dataclass(frozen=True)
class Target:
    """What a trial runs: pytest arguments selecting benchmarks, and how to slow them."""

    name: str
    pytest_args: tuple[str, ...]
    slowdown_env: str  # environment variable carrying the candidate's extra compute
    workload: str  # the MLP the in-process slowdown measurement uses ("gate": gate_mlp)
    device: str
    env: dict[str, str] = field(default_factory=dict)
    # Whole suite files: python -m suite.run with these arguments ("--results-dir" is added).
    launcher_args: tuple[str, ...] | None = None


TARGETS = {
    "cpu": Target("cpu", ("tests/gate_bench/gate_workload.py::test_gate_mlp_step",),
                  "GATE_EXTRA_COMPUTE", "gate", "cpu", {"OMP_NUM_THREADS": "1"}),
    "gpu": Target("gpu", ("tests/gate_bench/gate_workload.py::test_gate_gpu_mlp_step",),
                  "GATE_EXTRA_COMPUTE", "gate", "cuda"),
    "gpu-quick": Target("gpu-quick", ("suite/bench_overlap.py", "--suite-mode", "quick",
                                      "--world-sizes", "1", "--strategies", "sequential,chunked",
                                      "--chunks", "10", "-k", "test_overlap"),
                        "OVERLAP_EXTRA_COMPUTE", "mlp_8192x12_bf16", "cuda"),
    "suite-quick": Target("suite-quick", (), "OVERLAP_EXTRA_COMPUTE", "mlp_tiny", "cpu",
                          launcher_args=("--quick", "--skip-mpi", "--", "--workloads", "mlp_tiny",
                                         "--chunks", "1,10")),
}


def gate_mlp(device_type: str, extra_compute: float = 0.0):
    """The gate workload's MLP (tests/gate_bench/gate_workload.py) for a device type, with
    ``extra_compute``: impl/presets.py's gate presets."""
    from dataclasses import replace

    from impl.presets import gate_mlp_512x8, gate_mlp_4096x8_bf16

    config = gate_mlp_4096x8_bf16() if device_type == "cuda" else gate_mlp_512x8()
    return replace(config, extra_compute=extra_compute)


def _env(extra: dict[str, str]) -> dict[str, str]:
    """This environment, this tree first on PYTHONPATH, plus ``extra``."""
    env = {key: value for key, value in os.environ.items() if key != "GITHUB_STEP_SUMMARY"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return {**env, **extra}


def target_command(target: Target, out: Path) -> list[str]:
    """The command that benchmarks ``target``: plain pytest writing ``out``, or the suite's
    launcher writing its results file under the folder ``out.with_suffix(".run")``."""
    if target.launcher_args is None:
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                *target.pytest_args, f"--benchmark-json={out}", "--benchmark-save-data"]
    args = list(target.launcher_args)
    at = args.index("--") if "--" in args else len(args)
    return [sys.executable, "-m", "suite.run", *args[:at], "--results-dir",
            str(out.with_suffix(".run")), *args[at:]]


def run_target(target: Target, out: Path, extra_compute: float = 0.0) -> Path:
    """Benchmark the target in a fresh process; its results file is moved to ``out``."""
    command = target_command(target, out)
    env = _env({**target.env, target.slowdown_env: str(extra_compute)})
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} (extra_compute={extra_compute}) failed with "
                           f"exit {result.returncode}:\n{result.stdout[-3000:]}"
                           f"{result.stderr[-3000:]}")
    if target.launcher_args is not None:
        from impl.rows.files import find_result_files

        (written,) = find_result_files(out.with_suffix(".run"))
        written.replace(out)
        shutil.rmtree(out.with_suffix(".run"))
    return out


# --- the slowdown, measured in one process ----------------------------------------------------


def _mlp(target: Target, extra_compute: float):
    if target.workload == "gate":
        return gate_mlp(target.device, extra_compute)
    from dataclasses import replace

    from impl.presets import preset

    return replace(preset(target.workload), extra_compute=extra_compute)


class _CpuTimed:
    """A step that also sums its thread CPU time: on a machine shared with other jobs, time
    spent waiting for a core inflates wall-clock steps but not the work they do."""

    def __init__(self, step):
        self.step, self.cpu_s, self.steps = step, 0.0, 0

    def __call__(self) -> None:
        started = time.thread_time()
        self.step()
        self.cpu_s += time.thread_time() - started
        self.steps += 1

    def after_round(self) -> dict:
        cpu_ms, self.cpu_s, self.steps = self.cpu_s * 1e3 / self.steps, 0.0, 0
        return {"cpu_ms": cpu_ms}


def measure_slowdown(target: Target, extra_compute: float, rounds: int = 30) -> dict:
    """Plain and slowed steps interleaved in one process: step time ratio with its interval
    (and, on CPU, the ratio of thread CPU time per step)."""
    import torch

    from impl.strategies import StrategyOptions, build_strategy
    from impl.workloads import build_model, make_batch
    from suite.harness import Rounds, Variant, measure_interleaved

    if target.device == "cpu":
        torch.set_num_threads(1)
    device = torch.device(target.device)
    variants, strategies = [], []
    for name, extra in (("plain", 0.0), ("slowed", extra_compute)):
        config = _mlp(target, extra)
        strategy = build_strategy("sequential", build_model(config, device), config, None,
                                  StrategyOptions())
        batch = make_batch(config, device)
        strategies.append(strategy)
        timed = _CpuTimed(lambda s=strategy, b=batch: s.step(b))
        variants.append(Variant(name, timed, timed.after_round if device.type == "cpu"
                                else None))
    try:
        measured = measure_interleaved(variants, Rounds(warmup=3, rounds=rounds,
                                                        steps_per_round=5), device, None)
    finally:
        for strategy in strategies:
            strategy.close()
    result = {
        "extra_compute": extra_compute,
        "step_time_ratio": stats.ratio(measured.round_ms("slowed"),
                                       measured.round_ms("plain")).to_json(),
        "plain_step_ms": stats.median(measured.round_ms("plain")).to_json(),
        "how": f"{rounds} rounds x 5 steps of each, interleaved in a shuffled order per round "
               "(suite/harness.py measure_interleaved); ratio = median slowed round / median "
               "plain round, 95% bootstrap interval paired by round"}
    if device.type == "cpu":
        cpu = {name: [r["cpu_ms"] for r in measured.extras[name]] for name in ("plain", "slowed")}
        result["cpu_time_ratio"] = stats.ratio(cpu["slowed"], cpu["plain"]).to_json()
    return result


# --- one trial ----------------------------------------------------------------------------------


def git_clean_commit() -> tuple[str | None, bool]:
    """(HEAD, whether tracked files are unmodified), or (None, False) outside a repository."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=False)
    if head.returncode != 0:
        return None, False
    status = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                             "--untracked-files=no"], capture_output=True, text=True, check=False)
    return head.stdout.strip(), status.returncode == 0 and not status.stdout.strip()


def gate_command(baseline: Path, candidate: Path, folder: Path, target: Target,
                 extra_compute: float, blocks: int, baseline_tree: Path | None,
                 confirm: bool = True) -> list[str]:
    """The gate's arguments for one pair (after ``python -m reports.gate``); files only
    without ``confirm``."""
    outputs = ["--json", str(folder / "gate.json"), "--summary", str(folder / "summary.md")]
    if not confirm:
        return [str(baseline), str(candidate), *outputs]
    command = [str(baseline), str(candidate), "--confirm",
               "--confirm-blocks", str(blocks), "--candidate-env",
               f"{target.slowdown_env}={extra_compute}", *outputs, "--confirm-log",
               str(folder / "confirm.log")]
    if baseline_tree is not None:
        command += ["--baseline-tree", str(baseline_tree)]
    return command


def _gate(target: Target, *args: str) -> subprocess.CompletedProcess:
    # The target's environment reaches the re-run's blocks through the gate's own.
    return subprocess.run([sys.executable, "-m", "reports.gate", *args], cwd=ROOT,
                          env=_env(target.env), capture_output=True, text=True, check=False)


def trial(kind: str, index: int, folder: Path, target: Target, extra_compute: float,
          calibration: list[Path], blocks: int, baseline_tree: Path | None,
          confirm: bool = True) -> dict:
    """One baseline/candidate pair judged by the gate; its record."""
    started, before = time.monotonic(), load_now()
    folder.mkdir(parents=True)
    extra = extra_compute if kind == "slowed" else 0.0
    base = run_target(target, folder / "base.json")
    cand = run_target(target, folder / "cand.json", extra)
    made = _gate(target, "--update-baseline", str(base), "--spread-from", *map(str, calibration),
                 "--baselines-dir", str(folder / "baselines"))
    if made.returncode != 0:
        raise RuntimeError(f"--update-baseline failed: {made.stderr.strip()}")
    (baseline,) = (folder / "baselines").glob("*.json")
    arguments = gate_command(baseline, cand, folder, target, extra, blocks, baseline_tree,
                             confirm)
    result = _gate(target, *arguments)
    if result.returncode not in (0, 1, 3):  # PASS, FAIL, UNCONFIRMED
        raise RuntimeError(f"gate exited {result.returncode}: {result.stderr.strip()}")
    verdicts = json.loads((folder / "gate.json").read_text())
    rows = [{TRIAL_ROW.fullname: r[GATE_ROW.fullname],
             TRIAL_ROW.files_verdict: r[GATE_ROW.files_verdict],
             TRIAL_ROW.files_ratio: r[GATE_ROW.ratio], TRIAL_ROW.threshold: r[GATE_ROW.threshold],
             TRIAL_ROW.suspect: r[GATE_ROW.suspect], TRIAL_ROW.verdict: r[GATE_ROW.verdict],
             TRIAL_ROW.rerun: r[GATE_ROW.confirmation]} for r in verdicts[GATE.rows]]
    return {TRIAL_PAIR.kind: kind, TRIAL_PAIR.index: index, TRIAL_PAIR.extra_compute: extra,
            TRIAL_PAIR.gate_exit: result.returncode, TRIAL_PAIR.regressed: result.returncode == 1,
            TRIAL_PAIR.unconfirmed: result.returncode == 3,
            TRIAL_PAIR.files_regressed: any(r[TRIAL_ROW.files_verdict] == "regressed"
                                            for r in rows),
            TRIAL_PAIR.rows: rows, TRIAL_PAIR.seconds: round(time.monotonic() - started, 1),
            TRIAL_PAIR.load_before: before, TRIAL_PAIR.load_after: load_now()}


def calibration_runs(target: Target, count: int, folder: Path) -> tuple[list[Path], bool]:
    """``count`` runs of unchanged code in ``folder`` for the spread; those a previous
    invocation left there (``--workdir``) are used again. Returns (paths, reused)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"calibration-{i}.json" for i in range(count)]
    reused = all(path.exists() for path in paths)
    if not reused:
        paths = [run_target(target, path) for path in paths]
    return paths, reused


# --- command line -------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m reports.gate.trials",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=sorted(TARGETS), default="cpu")
    parser.add_argument("--pairs", type=int, default=40, help="pairs of each kind (default 40)")
    parser.add_argument("--extra-compute", type=float, default=0.1,
                        help="MLPConfig.extra_compute of the slowed candidates (default 0.1)")
    parser.add_argument("--calibration-runs", type=int, default=8,
                        help="runs of unchanged code for the spread (default 8)")
    parser.add_argument("--confirm-blocks", type=int, default=None,
                        help="the gate's --confirm-blocks (default: the gate's default)")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="start no pair after this many minutes (then --resume)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the pairs already in --out (same target and settings)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the calibration runs here, for --resume to use again "
                             "(default: a temporary folder)")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="run with uncommitted changes (the baseline side then runs the "
                             "commit, the candidate side the modified tree)")
    parser.add_argument("--files-only", action="store_true",
                        help="gate without --confirm: the files-only verdict alone")
    parser.add_argument("--kinds", default=",".join(PAIR_KINDS),
                        help=f"comma-separated pair kinds to run (default {','.join(PAIR_KINDS)})")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.calibration_runs < 2 or not 0 < args.extra_compute <= 1:
        parser.error("--pairs >= 1, --calibration-runs >= 2 and 0 < --extra-compute <= 1")
    kinds = args.kinds.split(",")
    if any(kind not in PAIR_KINDS for kind in kinds):
        parser.error(f"--kinds={args.kinds}: choose from {', '.join(PAIR_KINDS)}")
    args.kinds = [kind for kind in PAIR_KINDS if kind in kinds]
    return args


def main(argv: list[str] | None = None) -> int:
    from reports.gate.confirm import BLOCK_VALUE, DEFAULT_BLOCKS, default_max_blocks

    args = parse_args(argv)
    target = TARGETS[args.target]
    blocks = args.confirm_blocks or DEFAULT_BLOCKS
    commit, clean = git_clean_commit()
    if commit is not None and not clean and not args.allow_dirty:
        print("gate_trials: error: uncommitted changes: the baseline side would run the commit "
              "and the candidate side the modified tree (commit first, or --allow-dirty)",
              file=sys.stderr)
        return 2
    # Without a repository there is no commit to check out: both sides run this tree.
    baseline_tree = None if commit is not None else ROOT
    started = time.monotonic()
    report = json.loads(args.out.read_text()) if args.resume and args.out.exists() else None
    if report is None:
        report = {
            TRIALS.what: "false alarms and detections of reports.gate (files-only verdict, then "
                         "the interleaved re-run) on real training steps",
            TRIALS.commands: [],
            TRIALS.created: datetime.now(timezone.utc).isoformat(timespec="seconds"),
            TRIALS.machine: machine(), TRIALS.code: {"git_commit": commit, "clean": clean},
            TRIALS.target: asdict(target),
            TRIALS.gate: {"threshold": 0.05, "alpha": 0.01, "confirm_blocks": blocks,
                     "confirm_max_blocks": default_max_blocks(blocks), "block_value": BLOCK_VALUE,
                     "files_only": args.files_only,
                     "command": "python -m reports.gate " + shlex.join(gate_command(
                         Path("BASELINE"), Path("CANDIDATE"), Path("PAIR"), target,
                         args.extra_compute, blocks, baseline_tree, not args.files_only))},
            TRIALS.slowdown: measure_slowdown(target, args.extra_compute),
            TRIALS.calibrations: [], TRIALS.pairs: []}
        print(f"slowdown: {report[TRIALS.slowdown]['step_time_ratio']}", flush=True)
    report[TRIALS.commands].append("python -m reports.gate.trials " + shlex.join(
        sys.argv[1:] if argv is None else argv))
    pairs = report[TRIALS.pairs]
    with tempfile.TemporaryDirectory(prefix="gate-trials-") as scratch:
        folder = Path(scratch)
        calibration, reused = calibration_runs(target, args.calibration_runs,
                                               args.workdir or folder)
        # A resumed run may be at a later commit: each invocation records its own.
        report[TRIALS.calibrations].append({"runs": len(calibration), "first_pair": len(pairs),
                                            "reused": reused, "load": load_now(),
                                            "code": {"git_commit": commit, "clean": clean}})
        while min(sum(p[TRIAL_PAIR.kind] == k for p in pairs) for k in args.kinds) < args.pairs:
            if args.max_minutes and time.monotonic() - started > args.max_minutes * 60:
                print(f"stopped after {args.max_minutes} minutes: --resume continues", flush=True)
                break
            counts = {k: sum(p[TRIAL_PAIR.kind] == k for p in pairs) for k in PAIR_KINDS}
            kind = args.kinds[len(pairs) % len(args.kinds)]
            if counts[kind] >= args.pairs:
                kind = next(k for k in args.kinds if counts[k] < args.pairs)
            index = counts[kind]
            pair = trial(kind, index, folder / f"pair-{len(pairs)}", target,
                         args.extra_compute, calibration, blocks, baseline_tree,
                         not args.files_only)
            pair[TRIAL_PAIR.calibration] = len(report[TRIALS.calibrations]) - 1
            pairs.append(pair)
            report[TRIALS.summary] = summarise(pairs)
            report[TRIALS.updated] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            write_json_atomic(args.out, report)
            rows = pair[TRIAL_PAIR.rows]
            verdicts = Counter(r[TRIAL_ROW.files_verdict] for r in rows)
            rerun = Counter(r[TRIAL_ROW.rerun][RERUN.outcome] for r in rows if r[TRIAL_ROW.rerun])
            print(f"{kind:>9} {index + 1}/{args.pairs}: files {dict(verdicts)}, re-run "
                  f"{dict(rerun)}, gate exit {pair[TRIAL_PAIR.gate_exit]}, load "
                  f"{pair[TRIAL_PAIR.load_before]['load_1min']}, {pair[TRIAL_PAIR.seconds]} s",
                  flush=True)
    summary = report.get(TRIALS.summary) or summarise(pairs)
    print(f"false alarms {summary['unchanged']['gate_failed']}, unconfirmed "
          f"{summary['unchanged']['gate_unconfirmed']}, detections "
          f"{summary['slowed']['gate_failed']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
