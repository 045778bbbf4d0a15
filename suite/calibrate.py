"""Fitting the run's budget on committed runs, and checking it on runs it was not fitted on.

Each benchmark a committed pass timed gets the expected seconds the *current* code gives it,
collected again here with torch shown the run's GPUs (suite/shown_gpus.py), so an estimate
changed since the run leaves no stale figure in the fit; the rates are Σ duration / Σ expected
per machine class and study, the start the median of what each pass took beyond its
benchmarks (suite/budget.py has the formulas).

    python -m suite.calibrate --check results        # each run predicted from the others only
    python -m suite.calibrate --fit results          # rewrite suite/budget_rates.json
    python -m suite.calibrate --runs results         # the measured default runs (docs/budget.md)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from impl.rows.gate_records import PASS, TIMED
from suite.budget import RATES_FILE, Rates, base_pass, minutes

ROOT = Path(__file__).resolve().parent.parent

# --- what the current code expects of a pass, collected here --------------------------------

PLAN_DUMP_ENV = "OVERLAP_DUMP_PLAN"  # where pytest_collection_finish below writes the plan


def pytest_collection_finish(session) -> None:
    """As a pytest plugin (``-p suite.calibrate``): the collected benchmarks' study and expected
    seconds, by node id, into the file OVERLAP_DUMP_PLAN names."""
    if target := os.environ.get(PLAN_DUMP_ENV):
        planned = getattr(session.config, "suite_deadlines", {})
        Path(target).write_text(json.dumps({nodeid: [d.study, d.own_s]
                                            for nodeid, d in planned.items()}))


def collected(pytest_args: list[str], env: Mapping[str, str], gpus: int,
              scratch: Path) -> dict[str, tuple[str, float]]:
    """{node id: (study, expected seconds it adds)} of a pass with ``pytest_args``, as the
    current code plans it for a machine of ``gpus`` GPUs (shown to torch on a CPU machine:
    suite/shown_gpus.py), in a process of its own."""
    handle, name = tempfile.mkstemp(prefix="plan-", suffix=".json", dir=scratch)
    os.close(handle)
    dump = Path(name)
    dump.unlink()  # written by the collection: its absence afterwards means it failed
    shown = ["-p", "suite.shown_gpus"] if gpus else []
    environment = {**os.environ, "OVERLAP_BACKEND": "nccl" if gpus else "gloo", **env,
                   "OVERLAP_SHOWN_GPUS": str(gpus), PLAN_DUMP_ENV: str(dump),
                   "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    quiet = [arg for arg in pytest_args if arg != "-v"]
    out = subprocess.run([sys.executable, "-m", "pytest", *shown, "-p", "suite.calibrate",
                          "--collect-only", "-q", *quiet], env=environment, cwd=ROOT,
                         capture_output=True, text=True, check=False)
    if not dump.exists():
        raise RuntimeError(f"collecting {shlex.join(quiet)} failed: {out.stdout[-1500:]}"
                           f"{out.stderr[-1500:]}")
    return {nodeid: (study, own) for nodeid, (study, own) in json.loads(dump.read_text()).items()}


# --- fitting and checking on committed runs -----------------------------------------------


@dataclass(frozen=True)
class TimedPass:
    """A pass of a committed run that recorded its benchmarks' durations."""

    run: str
    name: str
    machine: str
    wall_s: float | None  # None: recovered after its launcher ended (suite/run_files.py)
    benchmarks: tuple[tuple[str, float, float], ...]  # (study, expected_s, duration_s)
    superseded_s: float = 0.0  # the durations SUPERSEDED leaves out, on both sides of a check


# Options of a whole run: what the plan is made for. A run narrowed by anything else (-k,
# --workloads, another deadline floor...) measured other work than it, and is not fitted on.
WHOLE_RUN_OPTIONS = {"--quick": 0, "--full": 0, "--skip-mpi": 0, "--results-dir": 1,
                     "--ranks": 1}


def whole_run(command: str | None) -> bool:
    """Whether ``suite.command`` (``python -m suite.run ...``) ran a whole mode."""
    try:
        words = shlex.split(command or "")
    except ValueError:  # not a command line this launcher wrote
        return False
    if words[:3] != ["python", "-m", "suite.run"]:
        return False
    at = 3
    while at < len(words):
        if words[at] not in WHOLE_RUN_OPTIONS:
            return False
        at += 1 + WHOLE_RUN_OPTIONS[words[at]]
    return True


# Durations a later change of the code made unrepresentative: (run file, pass or "*", study)
# -> why. They stay in the files; the fit leaves them out.
SUPERSEDED = {
    **{("20261127T135955Z-7im9itx9.json", "*", study):
       "measured on every rank at once, before a study of one device ran on rank 0 alone (the "
       "one_device marker): the ranks shared the host's cores" for study in ("GEMM", "hybrid")},
    ("20261127T172120Z-q3ah0pvf.json", "torchrun nvlink", "hybrid"):
        "rank 0 measured it alone while the other ranks spun in NCCL's barrier, one core each, "
        "before they waited asleep (impl/dist.py: idle_barrier)",
    ("20261128T024824Z-id1sxdtx.json", "*", "hybrid"):
        "the digits study's CPU rows trained with all 63 host threads (129 s), before they took "
        "the thread count they train fastest at (3 s since)",
}


def is_superseded(run: str, name: str, study: str) -> bool:
    return (run, name, study) in SUPERSEDED or (run, "*", study) in SUPERSEDED


def machine_gpus(document: dict, timing: dict) -> int:
    """The GPUs of the machine a run was made on: recorded with its timing, else read off its
    label (``h200x2``: 2; ``cpu-2core``: none)."""
    if "gpus" in timing:
        return timing["gpus"]
    label = document.get("suite", {}).get("label", "")
    match = re.search(r"x(\d+)$", label)
    return int(match[1]) if match and timing["machine"] == "gpu" else 0


def pass_collection(command: str, env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The pytest arguments of a recorded pass command, and the environment that collects them
    as its launch saw them (its world size, mpirun or not)."""
    from suite.conftest import COLLECT_MPI_ENV, COLLECT_WORLD_ENV

    words = shlex.split(command)
    arguments = words[words.index("pytest") + 1:]
    if "--results-json" in arguments:
        at = arguments.index("--results-json")
        del arguments[at:at + 2]
    world = next((w.split("=", 1)[1] for w in words if w.startswith("--nproc-per-node=")),
                 None)
    collect_env = {**env}
    if world is None and "-n" in words:  # mpirun -n N
        world = words[words.index("-n") + 1]
        collect_env[COLLECT_MPI_ENV] = "1"
    collect_env[COLLECT_WORLD_ENV] = world or "1"
    return arguments, collect_env


def timed_passes(path: Path, document: dict, scratch: Path,
                 plans: dict | None = None) -> list[TimedPass]:
    """The passes of a whole run that ended well and recorded their benchmarks' durations,
    each benchmark with the expected seconds the current code gives it (collected again here:
    an estimate changed since the run does not leave stale figures in the fit). Benchmarks the
    current code no longer plans drop out. ``plans`` caches collections across runs."""
    if not whole_run(document.get("suite", {}).get("command")):
        return []
    plans = {} if plans is None else plans
    found = []
    for entry in document.get("suite", {}).get("passes", []):
        timing = entry.get(PASS.timing)
        # A pass that failed is left out; one recovered after its launcher ended (exit None,
        # no wall time) still timed each benchmark it finished: its rates count, not its start.
        if not timing or entry.get(PASS.exit) not in (0, 5, None):
            continue
        arguments, env = pass_collection(entry[PASS.command], entry.get(PASS.env) or {})
        gpus = machine_gpus(document, timing)
        key = (tuple(arguments), tuple(sorted(env.items())), gpus)
        if key not in plans:
            plans[key] = collected(arguments, env, gpus, scratch)
        now = plans[key]
        rows, superseded = [], 0.0
        for nodeid, recorded in timing["benchmarks"].items():
            if is_superseded(path.name, entry[PASS.name], recorded[TIMED.study]):
                superseded += recorded[TIMED.duration_s]
            elif nodeid in now:
                rows.append((*now[nodeid], recorded[TIMED.duration_s]))
            else:  # no longer planned: its time stays out of both sides
                superseded += recorded[TIMED.duration_s]
        found.append(TimedPass(str(path), base_pass(entry[PASS.name]), timing["machine"],
                               entry[PASS.wall_s], tuple(rows), superseded))
    return found


def fit(passes: list[TimedPass]) -> Rates:
    """Σ duration / Σ expected per machine class and study (and pooled: "*"); the median
    start per machine class and pass."""
    sums = defaultdict(lambda: [0.0, 0.0])
    starts = defaultdict(list)
    for timed in passes:
        for study, expected, duration in timed.benchmarks:
            for key in ((timed.machine, study), (timed.machine, "*")):
                sums[key][0] += duration
                sums[key][1] += expected
        if timed.wall_s is not None:
            starts[timed.machine, timed.name].append(
                timed.wall_s - timed.superseded_s - sum(d for _, _, d in timed.benchmarks))
    rate = defaultdict(dict)
    for (machine, study), (duration, expected) in sums.items():
        if expected > 0:
            rate[machine][study] = duration / expected
    start_s = defaultdict(dict)
    for (machine, name), values in starts.items():
        start_s[machine][name] = max(0.0, statistics.median(values))
    runs = tuple(sorted({timed.run for timed in passes}))
    return Rates(dict(rate), dict(start_s), runs)


def predicted_s(timed: TimedPass, rates: Rates) -> float:
    """The pass's plan from ``rates``; what SUPERSEDED leaves out counts as it was measured."""
    return timed.superseded_s + rates.pass_start_s(timed.machine, timed.name) + sum(
        rates.benchmark_s(timed.machine, study, expected)
        for study, expected, _ in timed.benchmarks)


def held_out(passes: list[TimedPass]) -> list[tuple[str, float | None, float]]:
    """Every run predicted from the other runs only: (run, predicted s, actual s), the run's
    passes summed. None where no other run of its machine class exists: unfitted rates (every
    rate 1) would be scored as if they were a prediction."""
    results = []
    whole = {t.run for t in passes} - {t.run for t in passes if t.wall_s is None}
    for run in sorted(whole):
        others = [timed for timed in passes if timed.run != run]
        mine = [timed for timed in passes if timed.run == run]
        predicted = None
        if {t.machine for t in mine} <= {t.machine for t in others}:
            rates = fit(others)
            predicted = sum(predicted_s(t, rates) for t in mine)
        results.append((run, predicted, sum(t.wall_s for t in mine)))
    return results


def load_passes(paths: list[str]) -> list[TimedPass]:
    passes, plans = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        for path in result_files(paths):
            document = read_json(path)
            if isinstance(document, dict):
                passes.extend(timed_passes(path, document, Path(scratch), plans))
    return passes


RUNS_BEGIN = "<!-- generated by: python -m suite.calibrate --runs results -->"
RUNS_END = "<!-- end of generated text -->"


def runs_table(paths: list[str]) -> list[str]:
    """The committed whole runs that timed their passes: machine, GPUs, commit, each pass's
    wall time, the whole run's (its passes'), the plan printed before it and its hangs."""
    lines = ["| run | GPUs | commit | passes (wall time) | whole run | plan printed before it "
             "| hangs |", "|---|---|---|---|---|---|---|"]
    for path in result_files(paths):
        document = read_json(path)
        suite = document.get("suite", {}) if isinstance(document, dict) else {}
        passes = [p for p in suite.get("passes", []) if p.get(PASS.timing)]
        if not passes or not whole_run(suite.get("command")):
            continue
        gpus = machine_gpus(document, passes[0][PASS.timing])
        timed = [p for p in suite["passes"] if p.get(PASS.wall_s) is not None]
        planned = [p[PASS.planned_s] for p in suite["passes"]
                   if p.get(PASS.planned_s) is not None and "(resumed)" not in p[PASS.name]]
        each = ", ".join(f"{p[PASS.name]} {p[PASS.wall_s]:.0f} s (exit {p[PASS.exit]})"
                         if p in timed else f"{p[PASS.name]} (recovered: no wall time)"
                         for p in suite["passes"] if p in timed or p.get(PASS.timing))
        # A run recovered after its launcher ended has no whole wall time nor printed plan.
        whole = minutes(sum(p[PASS.wall_s] for p in timed)) if timed else "—"
        if timed and suite.get("recovered_as"):  # passes that left no file are not in it
            whole += " (recovered)"
        commit = document.get("commit_info", {}).get("id", "")[:7]
        lines.append(f"| {suite['label']}/{path.name} | {gpus} | {commit} | {each} | "
                     f"{whole} | {minutes(sum(planned)) if planned else '—'} | "
                     f"{len(suite.get('hangs', []))} |")
    return lines


def result_files(paths: list[str]) -> list[Path]:
    files = []
    for given in map(Path, paths):
        files.extend(sorted(given.rglob("*.json")) if given.is_dir() else [given])
    return files


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def with_runs_table(text: str, lines: list[str]) -> str:
    """``text`` (docs/budget.md) with its generated runs table replaced by ``lines``."""
    start, end = text.index(RUNS_BEGIN) + len(RUNS_BEGIN), text.index(RUNS_END)
    return text[:start] + "\n" + "\n".join(lines) + "\n" + text[end:]


DOC = ROOT / "docs" / "budget.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suite.calibrate",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", default=["results"])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--fit", action="store_true",
                        help=f"fit the rates and write {RATES_FILE.name}")
    action.add_argument("--check", action="store_true",
                        help="predict each run from the others and print the error")
    action.add_argument("--runs", action="store_true",
                        help=f"rewrite the table of measured runs in {DOC.name}")
    args = parser.parse_args(argv)
    if args.runs:
        DOC.write_text(with_runs_table(DOC.read_text(), runs_table(args.paths)))
        print(f"wrote the runs table of {DOC}")
        return 0
    passes = load_passes(args.paths)
    if not passes:
        print(f"error: no run in {', '.join(args.paths)} recorded its benchmarks' durations",
              file=sys.stderr)
        return 2
    if args.fit:
        rates = fit(passes)
        RATES_FILE.write_text(json.dumps(rates.to_json(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {RATES_FILE} from {len(rates.runs)} runs")
        return 0
    errors = []
    for run, predicted, actual in held_out(passes):
        if predicted is None:
            print(f"{run}: took {minutes(actual)}; no other run of its machine class to "
                  "predict it from")
            continue
        errors.append((predicted - actual) / actual)
        print(f"{run}: predicted {minutes(predicted)} from the other runs, took "
              f"{minutes(actual)} ({errors[-1]:+.0%})")
    if len(errors) > 1:
        print(f"held-out error over {len(errors)} runs: median |error| "
              f"{statistics.median(abs(e) for e in errors):.0%}, largest "
              f"{max(errors, key=abs):+.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
