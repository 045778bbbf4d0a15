"""The run's budget: what each benchmark is expected to take, the plan a run prints before it
starts, the progress line with an ETA while a pass runs, and expected against actual after.

    planned benchmark = rate(machine, study) · expected_s
    planned pass      = start_s(machine, pass) + Σ planned benchmarks

``expected_s`` is the time a benchmark's deadline is made from (suite/deadline.py): its work at
deliberately low rates, counted once per measurement (the first row of a cell; suite/watchdog.py
``Deadline.own_s``). ``rate`` scales it to what runs took: for each machine class (``gpu`` or
``cpu``) and study, Σ duration / Σ expected over the committed whole runs (no -k, no
narrowed axis) that recorded their benchmarks' durations (``suite.passes[].timing`` in their
files); ``start_s`` is what a pass took beyond its benchmarks (launch, imports, process
groups), the median over those runs.
suite/calibrate.py fits them into suite/budget_rates.json and predicts each committed run from
the others only (docs/budget.md).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from impl.rows.gate_records import TIMED

# What a mode's whole run should take (docs/budget.md); a benchmark planned longer than its
# mode's budget is refused before anything launches.
MODE_BUDGET_S = {"quick": 300.0, "default": 600.0, "full": 4 * 3600.0}
RATES_FILE = Path(__file__).with_name("budget_rates.json")
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
    fitted = (f"rates fitted on {len(rates.runs)} committed runs (python -m suite.calibrate "
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
            full = " or run --full" if planned <= MODE_BUDGET_S["full"] else ""
            return (f"{name} is expected to take {planned:.0f} s, more than the {mode} mode's "
                    f"budget of {budget:.0f} s: narrow it (--workloads, -k){full}")
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
            nodeid: {TIMED.study: self.deadlines[nodeid].study,
                     TIMED.expected_s: round(self.deadlines[nodeid].own_s, 3),
                     TIMED.duration_s: round(seconds, 3)}
            for nodeid, seconds in self.durations.items()}}


