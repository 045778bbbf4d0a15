"""How often the gate cries wolf, and how often it catches a real slowdown, on this machine.

Runs tests/gate_bench/gate_workload.py (real CPU training steps) in fresh processes, in pairs:
baseline then an identical candidate (any "regressed" is a false positive), and baseline then
a candidate with ``--slowdown`` more real compute (each "regressed" is a detection). Every pair
is judged by reports.gate's ``decide``, the rule the gate applies, and the counts go to JSON:

    python -m reports.gate_trials --trials 20 --out results/cpu-2core/gate-trials.json

About 6 s per run on the 2-core CPU machine, so 20 + 20 pairs take about 8 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

from reports.gate import Rule, decide
from reports.results import load_results, round_times

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "tests" / "gate_bench" / "gate_workload.py"


def run_workload(out: Path, extra_compute: float = 0.0, rounds: int = 60,
                 warmup: int = 5) -> Path:
    """Benchmark the gate workload in a fresh process; the pytest-benchmark JSON goes to out."""
    env = {key: value for key, value in os.environ.items() if key != "GITHUB_STEP_SUMMARY"}
    env.update(GATE_EXTRA_COMPUTE=str(extra_compute), GATE_ROUNDS=str(rounds),
               GATE_WARMUP=str(warmup), OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "pytest", str(WORKLOAD), "-q", "-p", "no:cacheprovider",
               # the file matches no python_files pattern on purpose, and the suite's root
               # conftest (process groups, fingerprints) has no business in this run
               "-o", "python_files=gate_workload.py", f"--confcutdir={WORKLOAD.parent}",
               f"--benchmark-json={out}", "--benchmark-save-data"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        raise RuntimeError(f"gate workload (extra_compute={extra_compute}) failed with exit "
                           f"{result.returncode}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return out


def _rounds(path: Path) -> list[float]:
    (benchmark,) = load_results(path).benchmarks
    return round_times(benchmark)


def trial(folder: Path, index: int, slowdown: float, rounds: int, rule: Rule) -> dict:
    """One baseline/candidate pair; returns the gate's verdict and numbers for it."""
    load_before = os.getloadavg()[0]
    base = run_workload(folder / f"base-{index}.json", 0.0, rounds)
    cand = run_workload(folder / f"cand-{index}.json", slowdown, rounds)
    decision = decide(_rounds(base), _rounds(cand), rule)
    # The 1-minute load average around the pair: other jobs on the machine show up here.
    return {"verdict": decision.verdict, "ratio": round(decision.ratio, 4),
            "p_slower": decision.p_slower, "ci": decision.ci,
            "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)]}


def summarise(trials: list[dict], slowdown: float) -> dict:
    verdicts = {v: sum(t["verdict"] == v for t in trials) for v in ("regressed", "improved",
                                                                     "unchanged")}
    rate_name = "detection_rate" if slowdown > 0 else "false_positive_rate"
    return {"extra_compute": slowdown, "trials": len(trials), "verdicts": verdicts,
            rate_name: verdicts["regressed"] / len(trials), "pairs": trials}


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    models = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return models[0] if models else platform.machine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.gate_trials",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="pairs of each kind")
    parser.add_argument("--slowdown", type=float, default=0.1,
                        help="extra compute of the slowed candidate (default 0.1)")
    parser.add_argument("--rounds", type=int, default=60, help="rounds per run (default 60)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    rule = Rule()
    results: dict[str, list[dict]] = {"unchanged": [], "slowed": []}
    with tempfile.TemporaryDirectory(prefix="gate-trials-") as folder:
        for index in range(args.trials):
            # Interleaved, so slow drifts of the machine hit both kinds of pair alike.
            for kind, slowdown in (("unchanged", 0.0), ("slowed", args.slowdown)):
                outcome = trial(Path(folder), len(results[kind]), slowdown, args.rounds, rule)
                results[kind].append(outcome)
                print(f"{kind:>9} {index + 1}/{args.trials}: {outcome['verdict']:<9} "
                      f"ratio {outcome['ratio']:.3f}", flush=True)
    report = {
        "what": "false positives and detections of reports.gate on real CPU training steps",
        "command": "python -m reports.gate_trials " + shlex.join(argv or sys.argv[1:]),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu": cpu_model(), "cpu_cores": os.cpu_count(),
                    "python": platform.python_version(), "torch": version("torch"),
                    "threads_per_run": 1},
        "workload": {"file": str(WORKLOAD.relative_to(ROOT)), "rounds": args.rounds,
                     "warmup": 5},
        "rule": {"threshold": rule.threshold, "alpha": rule.alpha,
                 "min_rounds": rule.min_rounds, "test": "one-sided Mann-Whitney U"},
        "unchanged": summarise(results["unchanged"], 0.0),
        "slowed": summarise(results["slowed"], args.slowdown),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"false positives {report['unchanged']['verdicts']['regressed']}/{args.trials}, "
          f"detections {report['slowed']['verdicts']['regressed']}/{args.trials}; "
          f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
