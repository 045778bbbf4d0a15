"""The run's budget: what each benchmark is expected to take, the plan a run prints before it
starts, the progress line with an ETA while a pass runs, and expected against actual after.

    planned benchmark = rate(machine, study) · expected_s
    planned pass      = start_s(machine, pass) + Σ planned benchmarks

``expected_s`` is the time a benchmark's deadline is made from (impl/deadline.py): its work at
deliberately low rates, counted once per measurement (the first row of a cell; suite/watchdog.py
``Deadline.own_s``). ``rate`` scales it to what runs took: for each machine class (``gpu`` or
``cpu``) and study, Σ duration / Σ expected over the committed whole runs (no -k, no
narrowed axis) that recorded their benchmarks' durations (``suite.passes[].timing`` in their
files); ``start_s`` is what a pass took beyond its benchmarks (launch, imports, process
groups), the median over those runs.
``python -m suite.budget --calibrate`` fits them into suite/budget_rates.json;
``python -m suite.budget --check`` predicts each committed run from the others only and prints
the error (docs/budget.md).

    python -m suite.budget --check results            # held-out error of the plan
    python -m suite.budget --calibrate results        # refit suite/budget_rates.json
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
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# What a mode's whole run should take (docs/budget.md); a benchmark planned longer than its
# mode's budget is refused before anything launches.
MODE_BUDGET_S = {"quick": 300.0, "default": 600.0, "full": 4 * 3600.0}
RATES_FILE = Path(__file__).with_name("budget_rates.json")
ROOT = Path(__file__).resolve().parent.parent
UNFITTED_START_S = 30.0  # a pass no committed run has timed: torchrun, imports, groups
PROGRESS_EVERY_S = 20.0  # a pass's progress line at most this often (and after the last)


def machine_class(gpus: int) -> str:
    return "gpu" if gpus else "cpu"


@dataclass(frozen=True)
class Rates:
    """Fitted scale factors: rate[machine][study], start_s[machine][pass name]."""

    rate: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    start_s: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    runs: tuple[str, ...] = ()  # the files they were fitted on

    def benchmark_s(self, machine: str, study: str, expected_s: float) -> float:
        rates = self.rate.get(machine, {})
        # A study no run has timed on this machine class: the class's pooled rate, else none.
        factor = rates.get(study, rates.get("*", 1.0))
        return factor * expected_s

    def pass_start_s(self, machine: str, name: str) -> float:
        return self.start_s.get(machine, {}).get(base_pass(name), UNFITTED_START_S)

    def to_json(self) -> dict:
        return {"rate": self.rate, "start_s": self.start_s, "runs": list(self.runs)}


def base_pass(name: str) -> str:
    return name.removesuffix(" (resumed)")


def load_rates(path: Path = RATES_FILE) -> Rates:
    """The committed rates; none fitted (every rate 1) where the file is absent."""
    if not path.exists():
        return Rates()
    data = json.loads(path.read_text())
    return Rates(data["rate"], data["start_s"], tuple(data["runs"]))


# --- the plan and the progress line -------------------------------------------------------


@dataclass
class PassPlan:
    """What one pass is planned to take, by study: benchmarks and seconds."""

    name: str
    machine: str
    benchmarks: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    start_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.start_s + sum(self.seconds.values())

    def add(self, study: str, planned_s: float) -> None:
        self.benchmarks[study] += 1
        self.seconds[study] += planned_s


def pass_plan(name: str, machine: str, deadlines: Iterable, rates: Rates) -> PassPlan:
    """``deadlines``: the pass's ``Deadline`` of every benchmark (suite/watchdog.py)."""
    plan = PassPlan(name, machine, start_s=rates.pass_start_s(machine, name))
    for deadline in deadlines:
        plan.add(deadline.study, rates.benchmark_s(machine, deadline.study, deadline.own_s))
    return plan


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def plan_lines(plans: list[PassPlan], mode: str, where: str, rates: Rates) -> list[str]:
    """The plan printed before a run: benchmarks and expected minutes per pass and study."""
    budget = MODE_BUDGET_S[mode]
    total = sum(plan.total_s for plan in plans)
    fitted = (f"rates fitted on {len(rates.runs)} committed runs (python -m suite.budget "
              "--check gives their held-out error)" if rates.runs else "no fitted rates")
    lines = [f"[suite] plan: {mode} mode on {where}, {minutes(total)} expected against a "
             f"budget of {minutes(budget)} ({fitted})"]
    for plan in plans:
        count = sum(plan.benchmarks.values())
        lines.append(f"[suite]   {plan.name}: {count} benchmarks, {minutes(plan.total_s)} "
                     f"(start {plan.start_s:.0f} s)")
        for study in sorted(plan.seconds, key=plan.seconds.get, reverse=True):
            lines.append(f"[suite]     {study:<16} {plan.benchmarks[study]:>4} benchmarks  "
                         f"{minutes(plan.seconds[study]):>9}")
    return lines


def over_budget(deadlines: Mapping[str, object], machine: str, mode: str,
                rates: Rates) -> str | None:
    """One line naming the first benchmark planned longer than its mode's whole budget."""
    budget = MODE_BUDGET_S[mode]
    for name, deadline in deadlines.items():
        planned = rates.benchmark_s(machine, deadline.study, deadline.own_s)
        if planned > budget:
            return (f"{name} is expected to take {planned:.0f} s, more than the {mode} mode's "
                    f"budget of {budget:.0f} s: narrow it (--workloads, -k) or run --full")
    return None


def progress_line(done: int, total: int, elapsed_s: float, planned_done_s: float,
                  planned_total_s: float) -> str:
    """One pass's progress: the ETA scales what is left of its plan by how the pass has gone
    so far against its plan."""
    pace = elapsed_s / planned_done_s if planned_done_s > 0 else 1.0
    eta = (planned_total_s - planned_done_s) * pace
    return (f"[suite] progress: {done}/{total} benchmarks, {minutes(elapsed_s)} elapsed "
            f"(plan {minutes(planned_done_s)}), ETA {minutes(eta)}")


def outcome_line(name: str, planned_s: float, actual_s: float) -> str:
    error = (planned_s - actual_s) / actual_s if actual_s > 0 else float("nan")
    return (f"[suite] {name}: expected {minutes(planned_s)}, took {minutes(actual_s)} "
            f"(plan {error:+.0%})")


class PassTiming:
    """Rank 0's record of its pass: every benchmark's study, expected and measured seconds
    (the results file keeps it: ``suite.timing``), and a progress line with an ETA at most
    every PROGRESS_EVERY_S and after the last benchmark."""

    def __init__(self, deadlines: Mapping[str, object], gpus: int, rates: Rates, say,
                 clock=time.monotonic):
        self.gpus, self.machine = gpus, machine_class(gpus)
        self.say, self.clock = say, clock
        self.deadlines = deadlines
        self.planned = {nodeid: rates.benchmark_s(self.machine, d.study, d.own_s)
                        for nodeid, d in deadlines.items()}
        self.planned_total = sum(self.planned.values())
        self.started = self.last_line = clock()
        self.planned_done = 0.0
        self.durations: dict[str, float] = {}

    def finished(self, nodeid: str, seconds: float) -> None:
        if nodeid not in self.deadlines:
            return
        self.durations[nodeid] = seconds
        self.planned_done += self.planned[nodeid]
        now = self.clock()
        last = len(self.durations) == len(self.deadlines)
        if last or now - self.last_line >= PROGRESS_EVERY_S:
            self.last_line = now
            self.say(progress_line(len(self.durations), len(self.deadlines), now - self.started,
                                   self.planned_done, self.planned_total))

    def to_json(self) -> dict:
        return {"machine": self.machine, "gpus": self.gpus, "benchmarks": {
            nodeid: {"study": self.deadlines[nodeid].study,
                     "expected_s": round(self.deadlines[nodeid].own_s, 3),
                     "duration_s": round(seconds, 3)}
            for nodeid, seconds in self.durations.items()}}


# --- what the current code expects of a pass, collected here --------------------------------

PLAN_DUMP_ENV = "OVERLAP_DUMP_PLAN"  # where pytest_collection_finish below writes the plan


def pytest_collection_finish(session) -> None:
    """As a pytest plugin (``-p suite.budget``): the collected benchmarks' study and expected
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
    dump = scratch / f"plan-{len(list(scratch.iterdir()))}.json"
    shown = ["-p", "suite.shown_gpus"] if gpus else []
    environment = {**os.environ, "OVERLAP_BACKEND": "nccl" if gpus else "gloo", **env,
                   "OVERLAP_SHOWN_GPUS": str(gpus), PLAN_DUMP_ENV: str(dump),
                   "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    quiet = [arg for arg in pytest_args if arg != "-v"]
    out = subprocess.run([sys.executable, "-m", "pytest", *shown, "-p", "suite.budget",
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
    wall_s: float
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


# Durations a later change of the code made unrepresentative: (run file, study) -> why. They
# stay in the files; the fit leaves them out.
SUPERSEDED = {
    (run, study): "measured on every rank at once, before a study of one device ran on rank 0 "
                  "alone (the one_device marker): the ranks shared the host's cores"
    for run in ("20261127T135955Z-7im9itx9.json",) for study in ("GEMM", "hybrid")
}


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
        timing = entry.get("timing")
        if not timing or entry.get("wall_s") is None or entry.get("exit") not in (0, 5):
            continue
        arguments, env = pass_collection(entry["command"], entry.get("env") or {})
        gpus = machine_gpus(document, timing)
        key = (tuple(arguments), tuple(sorted(env.items())), gpus)
        if key not in plans:
            plans[key] = collected(arguments, env, gpus, scratch)
        now = plans[key]
        rows, superseded = [], 0.0
        for nodeid, recorded in timing["benchmarks"].items():
            if (path.name, recorded["study"]) in SUPERSEDED:
                superseded += recorded["duration_s"]
            elif nodeid in now:
                rows.append((*now[nodeid], recorded["duration_s"]))
            else:  # no longer planned: its time stays out of both sides
                superseded += recorded["duration_s"]
        found.append(TimedPass(str(path), base_pass(entry["name"]), timing["machine"],
                               entry["wall_s"], tuple(rows), superseded))
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


def held_out(passes: list[TimedPass]) -> list[tuple[str, float, float]]:
    """Every run predicted from the other runs only: (run, predicted s, actual s), the run's
    passes summed."""
    results = []
    for run in sorted({timed.run for timed in passes}):
        rates = fit([timed for timed in passes if timed.run != run])
        mine = [timed for timed in passes if timed.run == run]
        results.append((run, sum(predicted_s(t, rates) for t in mine),
                        sum(t.wall_s for t in mine)))
    return results


def load_passes(paths: list[str]) -> list[TimedPass]:
    files = []
    for given in map(Path, paths):
        files.extend(sorted(given.rglob("*.json")) if given.is_dir() else [given])
    passes, plans = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        for path in files:
            try:
                document = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(document, dict):
                passes.extend(timed_passes(path, document, Path(scratch), plans))
    return passes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suite.budget",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", default=["results"])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--calibrate", action="store_true",
                        help=f"fit the rates and write {RATES_FILE.name}")
    action.add_argument("--check", action="store_true",
                        help="predict each run from the others and print the error")
    args = parser.parse_args(argv)
    passes = load_passes(args.paths)
    if not passes:
        print(f"error: no run in {', '.join(args.paths)} recorded its benchmarks' durations",
              file=sys.stderr)
        return 2
    if args.calibrate:
        rates = fit(passes)
        RATES_FILE.write_text(json.dumps(rates.to_json(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {RATES_FILE} from {len(rates.runs)} runs")
        return 0
    errors = []
    for run, predicted, actual in held_out(passes):
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
