"""The model against every measured cell: predicted step and hidden fraction beside measured.

For each interleaved overlap cell with communication (a comparison row: world size > 1, its
compute-only and comm-only timelines kept), every variant measured in it is predicted from
that cell's compute-only step, the α–β fit of the workload's comm-only times (impl/costmodel/
inputs.py) and the interference row, and, beside it, by the same model without interference
(which should be optimistic by about the measured slowdown). Nothing of the overlapped steps
is an input.

    checks = validate(rows)          # rows: impl.rows.merge.benchmark_rows of result files, merged
    print("\n".join(format_checks(checks)), by_strategy(checks))

The goal (issue 30): per strategy, median |error| ≤ 5% and max ≤ 10% of the step, and the
hidden-communication fraction within 0.1. A check that misses says why (``reason``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from impl import metrics
from impl.costmodel import variant_plans
from impl.costmodel.compute import (
    ReadyProfile,
    backward_kernel_ms,
    known_workload,
    parameter_layout,
)
from impl.costmodel.fabric import Fabric, MeasuredSweep
from impl.costmodel.fabric_file import load_fabric
from impl.costmodel.inputs import (
    comm_fabrics,
    compute_profile,
    fabric_key,
    interference,
    run_name,
    value,
)
from impl.costmodel.lanes import LaneEffects
from impl.costmodel.scale import compute_band
from impl.costmodel.schedule import Plan, simulate
from impl.costmodel.variant_plans import Interference
from impl.rows.kinds import COMPARISON, REFERENCE, STEP, is_older_step
from impl.rows.predictions import SUMMARY

# A cell's row is a comparison row, or (before interleaving) a step row, which declares the
# fields read from both (workload, chunks, world_size, profile, device, backend) alike; a
# strategy's figures in a comparison row are named as a step row's.
CELL_ROW, STEP_ROW = COMPARISON.names, STEP.names
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
    interleaved: bool = True  # False: measured before interleaving (no intervals)
    backend: str | None = None
    sequential_excess: float | None = None  # Cell.sequential_excess, for the reason
    run: int | None = None  # the run index of the measured cell
    measured_efficiency: dict | None = None  # the cell's overlap-efficiency estimate
    predicted_efficiency: float | None = None
    limit_ms: float | None = None  # predicted max(compute-only, comm-only): the efficiency's
    overhead_ms: float | None = None  # added from the other cells (impl/costmodel/overhead.py)
    compute_band: float = 0.0  # relative half-width of the compute-only input's 95% interval

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


def copy_fabric(device: str | None, comm: Fabric | MeasuredSweep, world: int) -> Fabric | None:
    """The copy engines at ``world`` ranks: the fabric file's bandwidth for this GPU model,
    with the cell's own α (one synchronised launch per chunk, as every collective has)."""
    name = COPY_FABRICS.get(device or "")
    copy = load_fabric(name).copy_alpha_beta(world) if name else None
    return None if copy is None else Fabric(comm.alpha_ms, copy.beta_ms_per_byte)


def measured_variants(row: dict) -> dict[str, tuple[dict, float | None]]:
    """Every variant of a comparison row with a step estimate: (estimate, hidden fraction)."""
    sequential = row[CELL_ROW.references][REFERENCE.sequential_ms]
    found = {row[CELL_ROW.sequential_reference]: (sequential, None)}
    for name, figures in (row.get(CELL_ROW.strategies) or {}).items():
        found[name] = (figures[STEP_ROW.step_ms],
                       value(figures.get(STEP_ROW.hidden_comm_fraction)))
    return found


@dataclass(frozen=True)
class Cell:
    """A measured cell: the row holding its references, its compute-only step and variants."""

    row: dict
    compute: dict  # the row whose compute-only timeline and time the model starts from
    variants: dict[str, tuple[dict, float | None]]
    interleaved: bool

    @property
    def efficiencies(self) -> dict[str, dict]:
        """Each variant's measured overlap efficiency (an estimate with its interval)."""
        efficiency = STEP_ROW.overlap_efficiency
        return {name: figures[efficiency]
                for name, figures in (self.row.get(CELL_ROW.strategies) or {}).items()
                if self.interleaved and isinstance(figures.get(efficiency), dict)}

    def sequential_excess(self) -> float | None:
        """sequential / (compute-only + comm-only) − 1 in this cell: what sequential, with
        nothing to overlap, costs beyond its parts (a diagnostic, never a model input)."""
        references = self.row.get(CELL_ROW.references) or {}
        # an interleaved cell's references, else (a step row) the row's own figures
        compute = (value(references.get(REFERENCE.compute_only_ms))
                   or self.row.get(STEP_ROW.compute_only_ms))
        comm = value(references.get(REFERENCE.comm_only_ms)) or self.row.get(STEP_ROW.comm_only_ms)
        sequential = self.variants.get(self.row[CELL_ROW.sequential_reference])
        if not compute or not comm or sequential is None:
            return None
        return sequential[0]["value"] / (compute + comm) - 1


def interleaved_cells(rows: Sequence[dict]) -> list[Cell]:
    return [Cell(r, r, measured_variants(r), True) for r in rows
            if COMPARISON.holds(r) and r.get(CELL_ROW.world_size, 1) > 1
            and "compute-only" in (r.get(CELL_ROW.timelines) or {})]


def earlier_cells(rows: Sequence[dict]) -> list[Cell]:
    """Cells of step rows measured before interleaving (each variant at its own moment):
    their compute-only step is the one-rank sequential row of the same machine, workload
    and K (newest run first), their comm-only time the rows' own."""
    old = [r for r in rows
           if is_older_step(r) and r.get(STEP_ROW.timeline) and r.get(STEP_ROW.real, True)]
    alone = {}
    for r in sorted(old, key=lambda r: r.get("run") or 0):
        if r.get(STEP_ROW.world_size) == 1 and r.get(STEP_ROW.strategy) == "sequential":
            alone[r.get("machine"), r[STEP_ROW.workload], r[STEP_ROW.chunks]] = r
    cells: dict[tuple, Cell] = {}  # the first row of a cell holds it, each adds its variant
    for r in old:
        compute = alone.get((r.get("machine"), r[STEP_ROW.workload], r[STEP_ROW.chunks]))
        if (r.get(STEP_ROW.world_size, 1) > 1 and compute is not None
                and r.get(STEP_ROW.comm_only_ms)):
            key = (*fabric_key(r), r[STEP_ROW.chunks])
            cell = cells.setdefault(key, Cell(r, compute, {}, False))
            cell.variants[r[STEP_ROW.strategy]] = ({"value": r[STEP_ROW.step_ms]},
                                                   r.get(STEP_ROW.hidden_comm_fraction))
    return list(cells.values())


def unreadable(cell: Cell) -> str | None:
    """Why the model cannot start from this cell's compute-only step, or None."""
    if not known_workload(cell.row[CELL_ROW.workload]):
        return (f"workload {cell.row['workload']!r} is not a model preset of impl/presets.py: its "
                "parameter layout is unknown")
    try:
        compute_profile({**cell.compute, CELL_ROW.chunks: cell.row[CELL_ROW.chunks]})
    except (ValueError, KeyError, TypeError) as error:
        return f"its compute-only timeline cannot be read ({error})"
    return None


@dataclass(frozen=True)
class Inputs:
    """What one cell is predicted from, each with where it came from: a row holding a
    compute-only step (its own K), an all-reduce model (``all_reduce_ms(bytes)``) and the
    interference."""

    compute: dict
    comm: Fabric | MeasuredSweep
    comm_source: str
    interference: Interference

    @property
    def about(self) -> str:
        compute = self.compute
        return (f"compute-only {compute.get('machine')} {run_name(compute)} K = "
                f"{compute.get('chunks')}; {self.comm_source}; {self.interference.source}")


def in_cell_inputs(cell: Cell, rows: Sequence[dict], fits: dict) -> Inputs:
    """The cell's own inputs: its compute-only step, the α–β fit of its run's comm-only
    times (``comm_fabrics``) and the interference of its machine (a consistency check:
    every input but the interference row comes from the cell's own run)."""
    row = cell.row
    comm, fit_text = fits[fabric_key(row)]  # known workload: comm_fabrics has its fit
    return Inputs({**cell.compute, CELL_ROW.chunks: row[CELL_ROW.chunks]}, comm, fit_text,
                  interference(rows, row[CELL_ROW.workload], row.get(CELL_ROW.device),
                               row.get(CELL_ROW.profile), row.get("machine")))


def _limit(profile: ReadyProfile, plan: Plan) -> float:
    """The predicted limit: max(compute-only, the plan's all-reduces back to back)."""
    comm_only = sum(c.duration_ms for c in plan.collectives)
    return float(metrics.limit_ms(profile.compute_only_ms, comm_only))


def check_cell(cell: Cell, inputs: Inputs | str,
               lanes: Callable[[str], LaneEffects] | None = None) -> list[Check]:
    """Every variant of one cell, predicted from ``inputs`` and compared (none predicted
    where the model cannot read the cell, ``unreadable``, or ``inputs`` says why none);
    ``lanes(variant)``: its collectives beside backward, read off other cells
    (impl/costmodel/lanes.py; none given: as fast beside backward as alone)."""
    row = cell.row
    problem = unreadable(cell) or (inputs if isinstance(inputs, str) else None)
    if problem is None:
        try:
            profile = compute_profile(inputs.compute)
        except (ValueError, KeyError, TypeError) as error:
            problem = f"its compute-only input cannot be read ({error})"
    if problem is not None:
        return [Check(row.get("machine"), row[CELL_ROW.workload], row[CELL_ROW.chunks],
                      row[CELL_ROW.world_size], row.get(CELL_ROW.profile), name,
                      estimate["value"], estimate.get("low"), estimate.get("high"), None, None,
                      hidden, None, "", problem,
                      cell.interleaved, row.get(CELL_ROW.backend), cell.sequential_excess())
                for name, (estimate, hidden) in cell.variants.items()]
    spans, _ = parameter_layout(row[CELL_ROW.workload])
    comm, slowdown = inputs.comm, inputs.interference
    copy = copy_fabric(row.get(CELL_ROW.device), comm, row[CELL_ROW.world_size])
    about = inputs.about
    if copy is not None:
        about += (f"; peer copies at {copy.bandwidth_gbps:.3g} GB/s algbw "
                  f"(fabrics/{COPY_FABRICS[row.get('device')]}.toml)")
    reference = variant_plans.plan("sequential", profile, row[CELL_ROW.chunks], spans, comm)
    sequential = simulate(profile, reference)
    checks = []
    for name, (estimate, hidden) in cell.variants.items():
        unseen = variant_plans.unmodelled(name)
        predicted = calm = efficiency = None
        if variant_plans.variant(name)[0] == "copy-engine" and copy is None:
            unseen = f"no copy-engine bandwidth for {row.get('device')} in fabrics/"
        elif variant_plans.variant(name)[0] in variant_plans.MODELLED:
            lane = lanes(name) if lanes else LaneEffects()
            kernel = backward_kernel_ms(profile, row[CELL_ROW.workload])
            plan = variant_plans.plan(name, profile, row[CELL_ROW.chunks], spans, comm,
                                      lane.alone or copy, slowdown, lane.launch_ms,
                                      lane.beside_ms(kernel), lane.update_beside_ms(kernel))
            predicted = simulate(profile, plan)
            calm = simulate(profile, replace(plan, slowdown=1.0))
            efficiency = metrics.overlap_efficiency(sequential.step_ms, predicted.step_ms,
                                                    _limit(profile, reference))
        checks.append(Check(
            row.get("machine"), row[CELL_ROW.workload], row[CELL_ROW.chunks],
            row[CELL_ROW.world_size], row.get(CELL_ROW.profile), name,
            estimate["value"], estimate.get("low"), estimate.get("high"),
            predicted.step_ms if predicted else None,
            calm.step_ms if calm else None, hidden,
            predicted.hidden_fraction if predicted else None,
            about, unseen, cell.interleaved, row.get(CELL_ROW.backend),
            cell.sequential_excess(), run=row.get("run"),
            measured_efficiency=cell.efficiencies.get(name), predicted_efficiency=efficiency,
            limit_ms=_limit(profile, reference) if predicted else None,
            compute_band=compute_band(inputs.compute)))
    return checks


def measured_cells(rows: Sequence[dict]) -> list[Cell]:
    """Every measured cell with communication: interleaved ones first, then those measured
    before interleaving."""
    return [*interleaved_cells(rows), *earlier_cells(rows)]


def validate(rows: Sequence[dict]) -> list[Check]:
    """Every variant of every measured cell with communication in ``rows``: interleaved
    cells first, then those measured before interleaving."""
    fits = comm_fabrics(rows)
    cells = [c for c in measured_cells(rows)
             if fabric_key(c.row) in fits or not known_workload(c.row[CELL_ROW.workload])]
    return [check for cell in cells
            for check in check_cell(cell, in_cell_inputs(cell, rows, fits)
                                    if known_workload(cell.row[CELL_ROW.workload]) else "")]


def by_strategy(checks: Sequence[Check], interleaved: bool = True) -> dict[tuple, dict]:
    """Per (machine, variant): cells, median and max |error|, median error without
    interference, worst hidden gap, over the interleaved cells (or the earlier ones)."""
    groups: dict[tuple, list[Check]] = {}
    for check in checks:
        if check.error is not None and check.unmodelled is None \
                and check.interleaved == interleaved:
            groups.setdefault((check.machine, check.variant), []).append(check)
    table = {}
    for key, group in groups.items():
        errors = [abs(c.error) for c in group]
        gaps = [abs(c.hidden_gap) for c in group if c.hidden_gap is not None]
        table[key] = {
            SUMMARY.cells: len(group), SUMMARY.median_abs_error: statistics.median(errors),
            SUMMARY.max_abs_error: max(errors),
            SUMMARY.median_calm_error: statistics.median(c.calm_error for c in group),
            SUMMARY.max_hidden_gap: max(gaps) if gaps else None,
            SUMMARY.meets_goal: statistics.median(errors) <= STEP_GOAL_MEDIAN
            and max(errors) <= STEP_GOAL_MAX and (not gaps or max(gaps) <= HIDDEN_GOAL)}
    return table


# What the model has no input for, per strategy: why a GPU cell of it can miss the goal.
UNMEASURED = {
    "threaded": "the host thread's hand-off and its all-reduces beside backward, read off "
                "other cells' timelines (impl/costmodel/lanes.py), vary from cell to cell",
    "copy-engine": "its peer copies and add kernel run slower beside backward than alone "
                   "(the interference rows time the GEMMs, not the traffic)",
    "ddp": "DDP divides each bucket on the compute stream before its all-reduce, and its "
           "all-reduces run slower beside backward",
    "update": "its update shares wait behind backward's GEMMs (impl/costmodel/lanes.py, read "
              "off other workloads) and its all-reduces beside backward are slower than alone",
}


def reason(check: Check) -> str:
    """Why a check misses the goal: what the model cannot see in that cell."""
    if check.unmodelled:
        return f"not modelled: {check.unmodelled}"
    parts = []
    if not check.interleaved:
        parts.append("measured before interleaving: each variant and the references at "
                     "other moments, which drift ±3% (docs/ANCHORS.md)")
    if check.backend == "gloo" and check.sequential_excess is not None:
        parts.append(f"2 ranks on 2 shared cores: sequential, with nothing to overlap, is "
                     f"{check.sequential_excess:+.0%} over compute-only + comm-only here "
                     "(rank skew at each collective, gloo's threads taking cores), a cost "
                     "no input measures")
    elif check.error is not None and check.error < -STEP_GOAL_MAX:
        strategy, options = variant_plans.variant(check.variant)
        gap = UNMEASURED["update"] if options.get("update_in_overlap") else UNMEASURED.get(
            strategy, "communication slowed beside compute, which no row measures")
        parts.append(f"optimistic: {gap}")
    elif check.error is not None and check.error > STEP_GOAL_MAX:
        parts.append("pessimistic: the interference row slows this step's compute more than "
                     "the step shows" if check.calm_error is not None
                     and abs(check.calm_error) <= STEP_GOAL_MAX
                     else "pessimistic even without interference")
    if check.hidden_gap is not None and abs(check.hidden_gap) > HIDDEN_GOAL:
        parts.append(f"hidden fraction off by {check.hidden_gap:+.2f}")
    return "; ".join(parts) or "within the goal"


def format_checks(checks: Sequence[Check]) -> list[str]:
    """The validation table as text lines (the CLI and the report's appendix read these)."""
    lines = [f"{'machine':10} {'workload':24} {'K':>3} {'w':>2} {'variant':20} "
             f"{'measured':>9} {'model':>9} {'err':>7} {'no-intf':>7} {'hid m/p':>9}"]
    cell = None
    for c in checks:
        if (c.machine, c.workload, c.chunks, c.world_size, c.profile, c.interleaved) != cell:
            cell = (c.machine, c.workload, c.chunks, c.world_size, c.profile, c.interleaved)
            lines.append(f"  inputs: {c.inputs or c.unmodelled}"
                         + ("" if c.interleaved else " (measured before interleaving)"))
        err = "—" if c.error is None else f"{c.error:+.1%}"
        calm = "—" if c.calm_error is None else f"{c.calm_error:+.1%}"
        hidden = ("—" if c.measured_hidden is None or c.predicted_hidden is None
                  else f"{c.measured_hidden:.2f}/{c.predicted_hidden:.2f}")
        model = "—" if c.predicted_ms is None else f"{c.predicted_ms:.2f}"
        lines.append(f"{c.machine:10} {c.workload:24} {c.chunks:>3} {c.world_size:>2} "
                     f"{c.variant:20} {c.measured_ms:>9.2f} {model:>9} {err:>7} {calm:>7} "
                     f"{hidden:>9}" + (f"  {reason(c)}" if c.missed else ""))
    return lines
