"""The model against every measured cell: predicted step and hidden fraction beside measured.

For each interleaved overlap cell with communication (a comparison row: world size > 1, its
compute-only and comm-only timelines kept), every variant measured in it is predicted from
that cell's compute-only step, the α–β fit of the workload's comm-only times (impl/model/
inputs.py) and the interference row, and, beside it, by the same model without interference
(which should be optimistic by about the measured slowdown). Nothing of the overlapped steps
is an input.

    checks = validate(rows)          # rows: analysis.benchmark_rows of result files, merged
    for line in summary(checks): print(line)

The goal (issue 30): per strategy, median |error| ≤ 5% and max ≤ 10% of the step, and the
hidden-communication fraction within 0.1. A check that misses says why (``reason``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from impl.model import plans
from impl.model.compute import parameter_layout
from impl.model.fabric import Fabric
from impl.model.fabric_file import load_fabric
from impl.model.inputs import comm_fabrics, compute_profile, fabric_key, interference, value
from impl.model.schedule import simulate

STEP_GOAL_MEDIAN, STEP_GOAL_MAX, HIDDEN_GOAL = 0.05, 0.10, 0.1
# The fabric file whose copy-engine bandwidth times the copy-engine strategy on a GPU model.
COPY_FABRICS = {"NVIDIA H200": "nvlink-h200x8", "NVIDIA H100 80GB HBM3": "nvlink-h100x8"}


@dataclass(frozen=True)
class Check:
    """One variant of one measured cell, predicted."""

    machine: str
    workload: str
    chunks: int
    world_size: int
    profile: str
    variant: str
    measured_ms: float
    measured_low: float | None
    measured_high: float | None
    predicted_ms: float | None
    calm_ms: float | None  # the same model without interference
    measured_hidden: float | None
    predicted_hidden: float | None
    inputs: str  # where the fabric and the interference came from
    unmodelled: str | None = None  # what the model cannot see, or why it cannot predict

    @property
    def error(self) -> float | None:
        """predicted / measured − 1."""
        return None if self.predicted_ms is None else self.predicted_ms / self.measured_ms - 1

    @property
    def calm_error(self) -> float | None:
        return None if self.calm_ms is None else self.calm_ms / self.measured_ms - 1

    @property
    def hidden_gap(self) -> float | None:
        if self.measured_hidden is None or self.predicted_hidden is None:
            return None
        return self.predicted_hidden - self.measured_hidden

    @property
    def missed(self) -> bool:
        return (self.error is None or abs(self.error) > STEP_GOAL_MAX
                or (self.hidden_gap is not None and abs(self.hidden_gap) > HIDDEN_GOAL))


def copy_fabric(device: str | None, comm: Fabric, world: int) -> Fabric | None:
    """The copy engines at ``world`` ranks: the fabric file's bandwidth for this GPU model,
    with the cell's own α (one synchronised launch per chunk, as every collective has)."""
    name = COPY_FABRICS.get(device or "")
    if name is None:
        return None
    node = load_fabric(name)
    copy = node.copy_all_reduce_ms(0.0, world)
    if copy is None:
        return None
    per_byte = node.copy_all_reduce_ms(1e9, world) / 1e9 - copy / 1e9
    return Fabric(comm.alpha_ms, per_byte)


def measured_variants(row: dict) -> dict[str, tuple[dict, float | None]]:
    """Every variant of a comparison row with a step estimate: (estimate, hidden fraction)."""
    found = {row["sequential_reference"]: (row["references"]["sequential_ms"], None)}
    for name, figures in (row.get("strategies") or {}).items():
        found[name] = (figures["step_ms"], value(figures.get("hidden_comm_fraction")))
    return found


def check_cell(row: dict, rows: Sequence[dict], fits: dict) -> list[Check]:
    """Every variant of one comparison row, predicted and compared."""
    profile = compute_profile(row)
    spans, _ = parameter_layout(row["workload"])
    comm, fit_text = fits[fabric_key(row)]
    slowdown = interference(rows, row.get("machine"), row["workload"], row.get("device"),
                            row.get("profile"))
    copy = copy_fabric(row.get("device"), comm, row["world_size"])
    checks = []
    for name, (estimate, hidden) in measured_variants(row).items():
        unseen = plans.unmodelled(name)
        predicted = calm = None
        strategy = plans.variant(name)[0]
        if strategy == "copy-engine" and copy is None:
            unseen = f"no copy-engine bandwidth for {row.get('device')} in fabrics/"
        if strategy in plans.MODELLED and not (strategy == "copy-engine" and copy is None):
            plan = plans.plan(name, profile, row["chunks"], spans, comm, copy, slowdown)
            predicted = simulate(profile, plan)
            calm = simulate(profile, replace(plan, slowdown=1.0))
        checks.append(Check(
            row.get("machine"), row["workload"], row["chunks"], row["world_size"],
            row.get("profile"), name, estimate["value"], estimate.get("low"),
            estimate.get("high"), predicted.step_ms if predicted else None,
            calm.step_ms if calm else None, hidden,
            predicted.hidden_fraction if predicted else None,
            f"{fit_text}; {slowdown.source}", unseen))
    return checks


def validate(rows: Sequence[dict]) -> list[Check]:
    """Every variant of every interleaved cell with communication in ``rows``."""
    fits = comm_fabrics(rows)
    cells = [r for r in rows if r.get("kind") == "comparison" and r.get("world_size", 1) > 1
             and "compute-only" in (r.get("timelines") or {}) and fabric_key(r) in fits]
    return [check for row in cells for check in check_cell(row, rows, fits)]


def by_strategy(checks: Sequence[Check]) -> dict[str, dict]:
    """Per variant: cells, median and max |error|, median calm error, worst hidden gap."""
    groups: dict[str, list[Check]] = {}
    for check in checks:
        if check.error is not None and check.unmodelled is None:
            groups.setdefault(check.variant, []).append(check)
    table = {}
    for name, group in groups.items():
        errors = [abs(c.error) for c in group]
        gaps = [abs(c.hidden_gap) for c in group if c.hidden_gap is not None]
        table[name] = {
            "cells": len(group), "median_abs_error": statistics.median(errors),
            "max_abs_error": max(errors),
            "median_calm_error": statistics.median(c.calm_error for c in group),
            "max_hidden_gap": max(gaps) if gaps else None,
            "meets_goal": statistics.median(errors) <= STEP_GOAL_MEDIAN
            and max(errors) <= STEP_GOAL_MAX and (not gaps or max(gaps) <= HIDDEN_GOAL)}
    return table


def reason(check: Check) -> str:
    """Why a check misses the goal, in the model's own terms."""
    if check.unmodelled:
        return f"not modelled: {check.unmodelled}"
    parts = []
    if check.error is not None and check.calm_error is not None:
        if check.error > STEP_GOAL_MAX and check.calm_error <= STEP_GOAL_MAX:
            parts.append("the interference row overstates this step's slowdown")
        elif check.error < -STEP_GOAL_MAX:
            parts.append("the step lost time the model has no term for (communication "
                         "slowed beside compute, host hand-offs, contention for cores)")
        elif check.error > STEP_GOAL_MAX:
            parts.append("the schedule is pessimistic even without interference")
    if check.hidden_gap is not None and abs(check.hidden_gap) > HIDDEN_GOAL:
        parts.append(f"hidden fraction off by {check.hidden_gap:+.2f}")
    return "; ".join(parts) or "within the goal"


def format_checks(checks: Sequence[Check]) -> list[str]:
    """The validation table as text lines (the CLI and the report's appendix read these)."""
    lines = [f"{'machine':10} {'workload':24} {'K':>3} {'w':>2} {'variant':20} "
             f"{'measured':>9} {'model':>9} {'err':>7} {'no-intf':>7} {'hid m/p':>9}"]
    for c in checks:
        err = "—" if c.error is None else f"{c.error:+.1%}"
        calm = "—" if c.calm_error is None else f"{c.calm_error:+.1%}"
        hidden = ("—" if c.measured_hidden is None or c.predicted_hidden is None
                  else f"{c.measured_hidden:.2f}/{c.predicted_hidden:.2f}")
        model = "—" if c.predicted_ms is None else f"{c.predicted_ms:.2f}"
        lines.append(f"{c.machine:10} {c.workload:24} {c.chunks:>3} {c.world_size:>2} "
                     f"{c.variant:20} {c.measured_ms:>9.2f} {model:>9} {err:>7} {calm:>7} "
                     f"{hidden:>9}" + (f"  {reason(c)}" if c.missed else ""))
    return lines
