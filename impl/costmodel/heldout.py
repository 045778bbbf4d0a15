"""Held-out validation: each measured cell predicted from inputs none of which came from it.

A cell (accuracy.Cell: one run's workload, K, world size and profile) is predicted under
each split (``SPLITS``), a rule for where its three inputs come from:

- ``other runs`` (the headline): the compute-only step of the same workload and GPU model
  from another run (the newest; the cell's K preferred, else the finest chunks); each
  all-reduce timed by the suite's all-reduce sweep (suite/bench_allreduce.py) of another
  run at the cell's world size, backend and profile (fabric.MeasuredSweep); the
  interference from another run (inputs.interference, the cell's run excluded);
- ``leave-one-K-out``: the cell's run, nothing at its K: the workload's compute-only step
  at the nearest other K, the α–β fit of its comm-only times at every other K;
- ``leave-one-workload-out``: the α–β fit of the comm-only times of the run's other
  workloads only (compute at another K, as above);
- ``in-cell``: the cell's own inputs (accuracy.in_cell_inputs), a consistency check only.

Beside them, the trivial predictor "step = the cell's measured sequential step". Then, on
the headline split, what a user of the model relies on beyond one step time: the order of
every pair of variants the measurements separate (paired 95% interval of the per-round
difference excludes zero, impl/stats.py), the best variant per cell (or "cannot separate"
where another is predicted within the pair band of the best's step, impl/costmodel/pairs.py)
and the overlap efficiency.

    python -m impl.costmodel.validate --markdown results/h200x2 results/h200x4 results/h200x1
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from impl import stats
from impl.costmodel import accuracy, overhead, pairs, variant_plans
from impl.costmodel.compute import known_workload, parameter_layout
from impl.costmodel.fabric import Fabric, fit_fabric, measured_sweep
from impl.costmodel.inputs import comm_fabrics, fabric_key, interference, run_name, value
from impl.costmodel.lanes import ALONE_READ, ANY_GPU, NO_LANE, LaneEffects, lane_effects, lanes_over
from impl.costmodel.scale import PREDICTED_VARIANTS, step_band
from impl.rows.kinds import ALLREDUCE, COMPARISON, MEASURED, REFERENCE, STEP, is_older_step
from impl.strategy_records import strategy_of

# A cell's row, and the rows compared with it, are comparison rows or (before interleaving)
# step rows, which declare the fields read from both alike; the sweeps are all-reduce rows.
CELL_ROW, STEP_ROW, SWEEP_ROW = COMPARISON.names, STEP.names, ALLREDUCE.names
SPLITS = ("other runs", "leave-one-K-out", "leave-one-workload-out", "in-cell")
HEADLINE = "other runs"
# Every split's overhead, and that of predictions beyond the cells, is fitted where a cell's
# compute and communication inputs come from its own run: "other runs" residuals also carry
# one run's compute step against another's, which the band is to cover, not the overhead; and
# the band, from "other runs" errors, is then that of the predictions as they are made.
# Fitted on "other runs", every protocol split of docs/costmodel.md had larger errors on
# chunked, threaded and DDP than fitted within runs.
OVERHEAD_SPLIT = "leave-one-K-out"
TRIVIAL = "step = sequential"
EFFICIENCY_GOAL = 0.10  # predicted efficiency within ±0.10 where the measured interval allows


def _compute_rows(rows: Sequence[dict], workload: str, device: str | None) -> list[dict]:
    """Rows holding a compute-only step of ``workload`` on ``device``: interleaved cells (any
    world size) and one-rank sequential step rows of runs before interleaving."""
    found = []
    for row in rows:
        if (row.get(CELL_ROW.workload) != workload or row.get(CELL_ROW.device) != device
                or device is None):
            continue
        interleaved = (COMPARISON.holds(row)
                       and "compute-only" in (row.get(CELL_ROW.timelines) or {}))
        alone = (is_older_step(row) and row.get(STEP_ROW.strategy) == "sequential"
                 and row.get(STEP_ROW.world_size) == 1 and row.get(STEP_ROW.timeline)
                 and row.get(STEP_ROW.real, True))
        if interleaved or alone:
            found.append(row)
    return found


def _nearest_compute(candidates: list[dict], chunks: int) -> dict | None:
    """The cell's K first, then the nearest K (finer on a tie), then the newest run."""
    if not candidates:
        return None
    return min(candidates, key=lambda r: (abs(r[CELL_ROW.chunks] - chunks), -r[CELL_ROW.chunks],
                                          -(r.get("run") or 0)))


def other_runs(cell: accuracy.Cell, rows: Sequence[dict]) -> accuracy.Inputs | str:
    row = cell.row
    if row.get(CELL_ROW.sequential_reference) != "sequential":
        return "MPI's all-reduce: the suite's all-reduce sweep times NCCL and gloo only"
    others = [r for r in rows if r.get("run") != row.get("run")]
    compute = _nearest_compute(
        _compute_rows(others, row[CELL_ROW.workload], row.get(CELL_ROW.device)),
        row[CELL_ROW.chunks])
    if compute is None:
        return f"no compute-only step of {row['workload']} on {row.get('device')} in another run"
    # the all-reduce rows of the cell's setting in other runs
    sweep = [r for r in others if ALLREDUCE.holds(r)
             and all(r.get(field) == row.get(field) for field in (
                 SWEEP_ROW.world_size, SWEEP_ROW.device, SWEEP_ROW.profile, SWEEP_ROW.backend))]
    runs = sorted({(r.get("machine"), r.get("run"), run_name(r)) for r in sweep})
    if len({r[SWEEP_ROW.size_bytes] for r in sweep}) < 2:
        return (f"no all-reduce sweep at {row['world_size']} ranks, {row.get('backend')}, "
                f"profile {row.get('profile')} in another run")
    comm = measured_sweep(sweep, "")
    source = (f"all-reduce sweep at {row['world_size']} ranks ({len(comm.sizes_bytes)} sizes, "
              f"{', '.join(f'{m} {name}' for m, _, name in runs)})")
    return accuracy.Inputs(compute, comm, source,
                           interference(rows, row[CELL_ROW.workload], row.get(CELL_ROW.device),
                                        row.get(CELL_ROW.profile), row.get("machine"),
                                        exclude_run=row.get("run")))


def _same_run(cell: accuracy.Cell, rows: Sequence[dict], keep) -> accuracy.Inputs | str:
    """The cell's run with the comm-only times that ``keep(row)`` allows, fitted as α–β."""
    row = cell.row
    key = fabric_key(row)
    comm_rows = [r for r in rows if COMPARISON.holds(r) and keep(r)
                 and fabric_key(r)[:2] == key[:2] and fabric_key(r)[3:] == key[3:]]
    points = [(r[CELL_ROW.chunks], parameter_layout(r[CELL_ROW.workload])[0][-1][1]
               * parameter_layout(r[CELL_ROW.workload])[1],
               value(r[CELL_ROW.references][REFERENCE.comm_only_ms]))
              for r in comm_rows if known_workload(r[CELL_ROW.workload])
              and value((r.get(CELL_ROW.references) or {}).get(REFERENCE.comm_only_ms))]
    if not points:
        return "no other comm-only time in its run"
    launches, total, times = zip(*points)
    try:
        comm = fit_fabric(launches, total, times)
        how = "α–β fit"
    except ValueError:  # one chunk count: all of it is bandwidth
        comm = Fabric(0.0, sum(times) / sum(total))
        how = "one chunk count, α not separable (taken as 0)"
    others = [r for r in _compute_rows(rows, row[CELL_ROW.workload], row.get(CELL_ROW.device))
              if r.get("run") == row.get("run") and r[CELL_ROW.chunks] != row[CELL_ROW.chunks]]
    compute = _nearest_compute(others, row[CELL_ROW.chunks])
    if compute is None:
        return "no compute-only step at another K in its run"
    source = (f"{how} on comm-only at K = {', '.join(map(str, sorted(set(launches))))} "
              f"({len(points)} cells of its run)")
    return accuracy.Inputs(compute, comm, source,
                           interference(rows, row[CELL_ROW.workload], row.get(CELL_ROW.device),
                                        row.get(CELL_ROW.profile), row.get("machine")))


def leave_one_k_out(cell: accuracy.Cell, rows: Sequence[dict]) -> accuracy.Inputs | str:
    row = cell.row
    if not cell.interleaved:
        return "measured before interleaving: no comm-only reference per cell to leave out"
    return _same_run(cell, rows, lambda r: r[CELL_ROW.workload] == row[CELL_ROW.workload]
                     and r[CELL_ROW.chunks] != row[CELL_ROW.chunks])


def leave_one_workload_out(cell: accuracy.Cell, rows: Sequence[dict]) -> accuracy.Inputs | str:
    if not cell.interleaved:
        return "measured before interleaving: no comm-only reference per cell to leave out"
    return _same_run(cell, rows, lambda r: r[CELL_ROW.workload] != cell.row[CELL_ROW.workload])


def in_cell(cell: accuracy.Cell, rows: Sequence[dict]) -> accuracy.Inputs | str:
    fits = comm_fabrics(rows)
    if fabric_key(cell.row) not in fits:
        return "no comm-only time in the cell"
    return accuracy.in_cell_inputs(cell, rows, fits)


def cell_lane(rows: Sequence[dict], row: dict, name: str) -> LaneEffects:
    """Variant ``name``'s lane in the checked cell of ``row``, found as a prediction's is
    (scale.lane_for): over the other cells of its GPU model, world size and profile where
    anything was read there, else of its GPU model at any world size. Without the second
    step, the 4-rank cells of 27 Nov, the first with an update inside the overlap at 4 ranks,
    were checked with update shares as fast beside backward as alone (chunked+update and
    threaded+update 24% fast), while the prediction of the same cell reads them at 2 ranks."""
    lane = lane_effects(rows, row, name)
    return lane if lane != NO_LANE else lane_effects(rows, row, name, (CELL_ROW.device,))


RULES = {"other runs": other_runs, "leave-one-K-out": leave_one_k_out,
         "leave-one-workload-out": leave_one_workload_out, "in-cell": in_cell}


def checks_by_split(rows: Sequence[dict], cells: Sequence[accuracy.Cell]) -> dict[str, list]:
    """Every split's checks of ``cells`` (inputs drawn from ``rows``: every run's rows), each
    with its variant's overhead fitted on the other cells of OVERHEAD_SPLIT
    (impl/costmodel/overhead.py)."""
    known = [c for c in cells if known_workload(c.row[CELL_ROW.workload])]
    lanes = {id(cell): functools.partial(cell_lane, rows, cell.row) for cell in known}
    device = {_cell_key(c.row): c.row.get(CELL_ROW.device) for c in known}
    raw = {split: [check for cell in known
                   for check in accuracy.check_cell(cell, RULES[split](cell, rows),
                                                    lanes[id(cell)])]
           for split in SPLITS}
    return {split: overhead.calibrated(
                raw[split], lambda check: _check_key(check)[:-1],
                lambda check: (device[_check_key(check)[:-1]], check.world_size),
                fitted_on=raw[OVERHEAD_SPLIT])
            for split in SPLITS}


def trivial_errors(cells: Sequence[accuracy.Cell]) -> dict[tuple, float]:
    """Per (machine, run, workload, K, world, profile, variant): measured sequential / step − 1."""
    errors = {}
    for cell in cells:
        if cell.row[CELL_ROW.sequential_reference] not in cell.variants:
            continue  # a cell measured before interleaving without its sequential step
        sequential = cell.variants[cell.row[CELL_ROW.sequential_reference]][0]["value"]
        for name, (estimate, _) in cell.variants.items():
            errors[(*_cell_key(cell.row), name)] = sequential / estimate["value"] - 1
    return errors


REPRODUCE = accuracy.STEP_GOAL_MAX  # two measurements further apart cannot test the goal


@dataclass(frozen=True)
class Unreproduced:
    """A variant of a cell whose measurements in two runs differ by more than ``REPRODUCE``:
    the one validated (the newest, ``measured_ms``) and the farthest other (``other_ms``),
    each with its run's name (inputs.run_name: its file)."""

    key: tuple  # _check_key of the check
    measured_ms: float
    other_ms: float
    other_run: str
    measured_run: str


def _measurements(row: dict) -> dict[str, float]:
    """Each variant's measured step in one row: a comparison row's variants, or a step row's
    strategy (measured before interleaving)."""
    if COMPARISON.holds(row):
        return {name: estimate["value"]
                for name, (estimate, _) in accuracy.measured_variants(row).items()}
    if is_older_step(row) and row.get(STEP_ROW.real, True):
        return {row[STEP_ROW.strategy]: row[STEP_ROW.step_ms]}
    return {}


def unreproduced(cells: Sequence[accuracy.Cell], rows: Sequence[dict]) -> dict[tuple, Unreproduced]:
    """Per check key, the cells whose variant was measured in another run (``rows``: every
    run) more than ``REPRODUCE`` away from the measurement validated: such a cell cannot
    validate a model whose goal is that close, so the summaries leave it out and say so."""
    found = {}
    for cell in cells:
        key = _cell_key(cell.row)
        same = [r for r in rows
                if r.get(CELL_ROW.workload) == key[2] and r.get(CELL_ROW.chunks) == key[3]
                and r.get(CELL_ROW.world_size) == key[4] and r.get(CELL_ROW.profile) == key[5]
                and r.get("machine") == key[0]]  # the validated row itself differs by 0
        for name, (estimate, _) in cell.variants.items():
            others = [(ms, run_name(r)) for r in same
                      if (ms := _measurements(r).get(name)) is not None]
            if not others:
                continue
            farthest = max(others, key=lambda o: abs(o[0] / estimate["value"] - 1))
            if abs(farthest[0] / estimate["value"] - 1) > REPRODUCE:
                found[(*key, name)] = Unreproduced((*key, name), estimate["value"], *farthest,
                                                   run_name(cell.row))
    return found


def _cell_key(row: dict) -> tuple:
    return (row.get("machine"), row.get("run"), row[CELL_ROW.workload], row[CELL_ROW.chunks],
            row[CELL_ROW.world_size], row.get(CELL_ROW.profile))


def _check_key(check: accuracy.Check) -> tuple:
    return (check.machine, check.run, check.workload, check.chunks, check.world_size,
            check.profile, check.variant)


@dataclass(frozen=True)
class Summary:
    """One strategy under one split: cells predicted, median and max |error|."""

    cells: int
    median_abs_error: float
    max_abs_error: float


def summarise(errors: Sequence[float]) -> Summary | None:
    if not errors:
        return None
    absolute = [abs(e) for e in errors]
    return Summary(len(absolute), statistics.median(absolute), max(absolute))


def strategy_table(by_split: dict[str, list], trivial: dict[tuple, float],
                   unreproducible: dict[tuple, Unreproduced] | None = None) -> dict:
    """{(machine, variant): {split or TRIVIAL: Summary}} over modelled variants, every column
    on the checks the headline split predicted (a split that cannot predict some has fewer),
    leaving out the cells that do not reproduce (``unreproduced``)."""
    headline = {_check_key(c) for c in by_split[HEADLINE]
                if c.unmodelled is None and c.error is not None
                and _check_key(c) not in (unreproducible or {})}
    table: dict[tuple[str, str], dict[str, Summary | None]] = {}
    for machine, name in sorted({(key[0], key[-1]) for key in headline},
                                key=lambda k: (k[0], _variant_rank(k[1]))):
        mine = {key for key in headline if key[0] == machine and key[-1] == name}
        table[machine, name] = {
            split: summarise([c.error for c in checks if _check_key(c) in mine
                              and c.error is not None and c.unmodelled is None])
            for split, checks in by_split.items()}
        table[machine, name][TRIVIAL] = summarise([trivial[k] for k in mine if k in trivial])
    return table


def _variant_rank(name: str) -> tuple:
    """Strategies in the order the predictions list them (PREDICTED_VARIANTS), each
    strategy's named variants after it, then any other name."""
    order = tuple(dict.fromkeys(strategy_of(predicted) for predicted in PREDICTED_VARIANTS))
    strategy = strategy_of(name)
    return (order.index(strategy) if strategy in order else len(order), name != strategy, name)


BAND_COVERAGE = 0.90  # a band holds this share of held-out measurements


def band_error(check: accuracy.Check) -> float | None:
    """|measured / predicted − 1|: how far a measurement lies from its prediction, relative
    to the prediction, as a band step · (1 ± band) is."""
    if check.predicted_ms is None or check.unmodelled is not None or not check.predicted_ms:
        return None
    return abs(check.measured_ms / check.predicted_ms - 1)


def conformal_band(errors: Sequence[float], coverage: float = BAND_COVERAGE) -> float | None:
    """The split-conformal half-width for ``coverage`` from held-out errors: the
    ⌈(n + 1) · coverage⌉-th smallest, which covers a further exchangeable measurement with
    probability ≥ coverage; with too few errors for that rank (n < 9 at 90%), the largest,
    whose coverage is only n / (n + 1). None without errors."""
    if not errors:
        return None
    ordered = sorted(errors)
    rank = math.ceil((len(ordered) + 1) * coverage)
    return ordered[min(rank, len(ordered)) - 1]


def _family_errors(checks: Sequence[accuracy.Check], variant: str,
                   keep=lambda check: True) -> list[float]:
    """The band errors of ``variant``'s strategy and its knob variants (their step is the
    strategy's step plus the knob: one family of errors, which a single knob's few cells
    cannot estimate alone)."""
    strategy = variant_plans.variant(variant)[0]
    return [e for c in checks if variant_plans.variant(c.variant)[0] == strategy and keep(c)
            and (e := band_error(c)) is not None]


def relative_bands(checks: Sequence[accuracy.Check]) -> dict[str, float]:
    """Per variant, its band for predictions: the conformal 90% half-width
    (``conformal_band``) of its strategy family's held-out errors on the headline split
    (cells the model was not built from), every machine pooled."""
    found = {}
    for name in {c.variant for c in checks}:
        if (band := conformal_band(_family_errors(checks, name))) is not None:
            found[name] = band
    return found


def bands(checks: Sequence[accuracy.Check]) -> dict[tuple, float]:
    """Per check, its relative band, propagated as a prediction's is (scale.step_band): the
    conformal 90% half-width of its strategy family's errors over the other cells
    (leave-one-cell-out, so no check's own error widens its band) and its compute-only
    input's 95% interval, added in quadrature."""
    found = {}
    for check in checks:
        cell = _check_key(check)[:-1]
        band = conformal_band(_family_errors(checks, check.variant,
                                             lambda c, cell=cell: _check_key(c)[:-1] != cell))
        found[_check_key(check)] = step_band(band, check.compute_band) \
            if band is not None else float("nan")
    return found


def _round_medians(row: dict, name: str) -> list[float] | None:
    # a comparison row's per-variant, per-round step times
    steps = ((row.get(CELL_ROW.measurement) or {}).get(MEASURED.step_ms) or {}).get(name)
    return [float(np.median(r)) for r in steps] if steps else None


@dataclass(frozen=True)
class Decisions:
    """What the model decides on the headline split, scored against the measurements."""

    pairs_separated: int
    pairs_right: int
    cells: int
    picks_right: int
    picks_unseparated: int
    picks_wrong: list[str]
    efficiency_compared: int
    efficiency_within: int
    efficiency_errors: list[float]
    misordered: tuple[Misordered, ...] = ()
    efficiency_unresolved: int = 0  # compared cells whose predicted band exceeds the goal
    pairs_right_apart: int = 0  # ordered right, the two predictions' bands apart
    pair_band: float | None = None  # pooled over every cell (each hedge leaves its own out)
    hedges_holding_slowest: int = 0  # its slowest measured apart from its best


@dataclass(frozen=True)
class Misordered:
    """A pair the measurements separate and the model orders the other way: ``slower`` was
    measured slower than ``faster`` by ``measured_ms`` [low, high] (paired 95% interval over
    rounds), the model put it ``predicted_ms`` faster."""

    cell: str
    slower: str
    faster: str
    measured_ms: float
    low_ms: float
    high_ms: float
    relative: float  # measured_ms / the faster variant's measured step
    predicted_ms: float
    bands_apart: bool  # the two predictions' bands do not overlap: a confident wrong order


def efficiency_band(sequential_ms: float, step_ms: float, limit_ms: float,
                    sequential_band: float, step_band: float, limit_band: float) -> float:
    """The half-width of a predicted overlap efficiency E = (S − T) / (S − L): the relative
    bands of the predicted sequential step S, step T and limit L propagated through E as
    independent errors, √((∂E/∂S·S·bS)² + (∂E/∂T·T·bT)² + (∂E/∂L·L·bL)²), with
    ∂E/∂S = (T − L)/(S − L)², ∂E/∂T = −1/(S − L), ∂E/∂L = (S − T)/(S − L)²."""
    window = sequential_ms - limit_ms
    if window <= 0:
        return float("inf")  # nothing to overlap: any efficiency is as likely as another
    return math.hypot((step_ms - limit_ms) / window ** 2 * sequential_ms * sequential_band,
                      step_ms * step_band / window,
                      (sequential_ms - step_ms) / window ** 2 * limit_ms * limit_band)


def _limit_bands(by_cell: dict[tuple, list[accuracy.Check]],
                 rows: dict[tuple, dict]) -> dict[tuple, float]:
    """Per cell, the relative band of its predicted limit: the median |predicted / measured
    limit − 1| of the *other* cells (leave-one-cell-out, as ``bands``)."""
    errors = {}
    for key, group in by_cell.items():
        measured = value((rows[key].get(CELL_ROW.references) or {}).get(REFERENCE.limit_ms))
        predicted = next((c.limit_ms for c in group if c.limit_ms is not None), None)
        if measured and predicted:
            errors[key] = abs(predicted / measured - 1)
    return {key: statistics.median(e for k, e in errors.items() if k != key)
            for key in by_cell if len(errors) - (key in errors) > 0}


def decisions(checks: Sequence[accuracy.Check], cells: Sequence[accuracy.Cell]) -> Decisions:
    """Ranking of separated pairs, best pick per cell and efficiency error (module docstring),
    over the interleaved cells (their rounds are paired)."""
    band = bands(checks)
    by_cell = interleaved_cells(checks)
    pair_errors = {key: pairs.pair_errors([(c.predicted_ms, c.measured_ms) for c in group])
                   for key, group in by_cell.items()}
    rows = {_cell_key(c.row): c.row for c in cells}
    limit_band = _limit_bands(by_cell, rows)
    separated = right = right_apart = picks_right = unseparated = compared = within = 0
    unresolved = held_slowest = 0

    def apart(a: accuracy.Check, b: accuracy.Check) -> bool:
        """The predictions' bands (as the best pick's) do not overlap."""
        low, high = sorted((a, b), key=lambda c: c.predicted_ms)
        return low.predicted_ms * (1 + band[_check_key(low)]) < \
            high.predicted_ms * (1 - band[_check_key(high)])
    wrong, efficiency_errors, misordered = [], [], []
    for key, group in by_cell.items():
        row = rows[key]
        rounds = {c.variant: _round_medians(row, c.variant) for c in group}
        slower: dict[str, set[str]] = {c.variant: set() for c in group}  # clearly slower than
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                ra, rb = rounds[a.variant], rounds[b.variant]
                if not ra or not rb or len(ra) != len(rb):
                    continue
                diff = stats.difference(ra, rb)
                if not diff.excludes(0.0):
                    continue
                separated += 1
                slow, fast = (a, b) if diff.low > 0 else (b, a)
                slower[slow.variant].add(fast.variant)
                if slow.predicted_ms > fast.predicted_ms:
                    right += 1
                    right_apart += apart(slow, fast)
                    continue
                sign = 1 if slow is a else -1
                misordered.append(Misordered(
                    f"{row.get('machine')} {row['workload']} K = {row['chunks']}", slow.variant,
                    fast.variant, sign * diff.value, min(sign * diff.low, sign * diff.high),
                    max(sign * diff.low, sign * diff.high), sign * diff.value / fast.measured_ms,
                    fast.predicted_ms - slow.predicted_ms, apart(slow, fast)))
        measured_best = {c.variant for c in group if not slower[c.variant]}
        hedged = cell_hedge(group, key, pair_errors)
        if not measured_best & set(hedged):
            picked = f"picked {hedged[0]}" if len(hedged) == 1 else \
                f"cannot separate {', '.join(hedged)}"
            wrong.append(f"{row.get('machine')} {row['workload']} K = {row['chunks']}: "
                         f"{picked}, measured best {', '.join(sorted(measured_best))}")
        elif len(hedged) > 1:
            unseparated += 1
            slowest = max(group, key=lambda c: c.measured_ms).variant
            held_slowest += slowest in hedged and bool(slower[slowest] & measured_best)
        else:
            picks_right += 1
        sequential = next((c for c in group
                           if c.variant == row[CELL_ROW.sequential_reference]), None)
        for c in group:
            measured = c.measured_efficiency
            if c.predicted_efficiency is None or not measured or measured.get("low") is None \
                    or measured["high"] - measured["low"] > 2 * EFFICIENCY_GOAL:
                continue
            compared += 1
            efficiency_errors.append(c.predicted_efficiency - measured["value"])
            if sequential is None or key not in limit_band or efficiency_band(
                    sequential.predicted_ms, c.predicted_ms, c.limit_ms,
                    band[_check_key(sequential)], band[_check_key(c)],
                    limit_band[key]) > EFFICIENCY_GOAL:
                unresolved += 1  # the model's own band is wider than the goal: cannot tell
            else:
                within += abs(efficiency_errors[-1]) <= EFFICIENCY_GOAL
    return Decisions(separated, right, len(by_cell), picks_right, unseparated, wrong, compared,
                     within, efficiency_errors,
                     tuple(sorted(misordered, key=lambda m: (m.cell, -m.relative))), unresolved,
                     right_apart, conformal_band([e for errors in pair_errors.values()
                                                  for e in errors]), held_slowest)


def cell_hedge(group: Sequence[accuracy.Check], key: tuple,
               pair_errors: dict[tuple, list[float]]) -> list[str]:
    """The variants of cell ``key`` that cannot be told from its predicted best, fastest
    first: those within the pair band of the *other* cells' pair errors (no cell's own errors
    narrow or widen its hedge); every variant where no other cell has a pair."""
    pair = conformal_band([e for k, errors in pair_errors.items() if k != key for e in errors])
    return pairs.hedge({c.variant: c.predicted_ms for c in group},
                       math.inf if pair is None else pair)


def interleaved_cells(checks: Sequence[accuracy.Check]) -> dict[tuple, list[accuracy.Check]]:
    """The predicted checks of each interleaved cell (their rounds are paired), by cell."""
    by_cell: dict[tuple, list[accuracy.Check]] = {}
    for check in checks:
        if check.interleaved and check.error is not None and check.unmodelled is None:
            by_cell.setdefault(_check_key(check)[:-1], []).append(check)
    return by_cell


def pair_band(checks: Sequence[accuracy.Check]) -> float | None:
    """The pair band for predictions (impl/costmodel/pairs.py): the conformal 90% half-width
    of the pair errors of every interleaved cell of ``checks`` (the headline split's)."""
    return conformal_band(pairs.pooled_errors(
        [(c.predicted_ms, c.measured_ms) for c in group]
        for group in interleaved_cells(checks).values()))


def unreproduced_lines(found: dict[tuple, Unreproduced], checks: Sequence[accuracy.Check]
                       ) -> list[str]:
    """Each cell the headline predicted that does not reproduce, with both measurements and
    the prediction (the doc and the report's chapter)."""
    predicted = {_check_key(c): c.predicted_ms for c in checks
                 if c.predicted_ms is not None and c.unmodelled is None}
    lines = []
    for key, u in sorted(found.items(), key=lambda kv: str(kv[0])):
        machine, _, workload, chunks, world, _, variant = key
        if (model := predicted.get(key)) is None:
            continue  # not in the table either
        lines.append(
            f"Does not reproduce: {machine} {workload} K = {chunks}, {world} ranks, {variant}: "
            f"{u.measured_ms:.2f} ms ({u.measured_run}, validated) against {u.other_ms:.2f} ms "
            f"({u.other_run}), {u.other_ms / u.measured_ms - 1:+.0%}, more than the "
            f"{REPRODUCE:.0%} goal: left out of the table (the model: {model:.2f} ms, "
            f"{model / u.measured_ms - 1:+.1%} against the first, "
            f"{model / u.other_ms - 1:+.1%} against the second).")
    return lines


def markdown(table: dict, decided: Decisions, unreproducible: Sequence[str] = ()) -> list[str]:
    """The held-out table, the cells that do not reproduce and the decisions as Markdown
    (docs/costmodel.md holds this)."""
    columns = [*SPLITS, TRIVIAL]
    lines = ["| machine | variant | " + " | ".join(f"{c}: median / max (cells)"
                                                 for c in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for (machine, name), by in table.items():
        lines.append(f"| {machine} | {name} | " + " | ".join(
            "—" if by[c] is None else f"{by[c].median_abs_error:.1%} / "
            f"{by[c].max_abs_error:.1%} ({by[c].cells})" for c in columns) + " |")
    lines += ["", *(f"- {line}" for line in [*decision_lines(decided), *unreproducible])]
    if decided.misordered:
        lines += ["", "Pairs ordered the wrong way (measured: slower − faster, paired 95% "
                      "interval; model: how much faster it put the slower one, and whether the "
                      "two predictions' bands overlap):", "",
                  "| cell | measured slower | than | measured | model | bands |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {m.cell} | {m.slower} | {m.faster} | {m.measured_ms:+.2f} ms "
                  f"[{m.low_ms:+.2f}, {m.high_ms:+.2f}] ({m.relative:+.1%}) | "
                  f"{m.predicted_ms:+.2f} ms | {'apart' if m.bands_apart else 'overlap'} |"
                  for m in decided.misordered]
    return lines


def decision_lines(decided: Decisions) -> list[str]:
    """The decisions in words, one sentence each (the doc and the report's chapter)."""
    efficiency = decided.efficiency_errors
    wrong_apart = sum(m.bands_apart for m in decided.misordered)
    lines = [f"Ranking: {decided.pairs_right} of {decided.pairs_separated} pairs that the "
             "measurements separate (paired 95% interval) ordered right by the predicted "
             "steps. With the predictions' bands (as for the best pick): "
             f"{decided.pairs_right_apart} ordered right with bands apart, {wrong_apart} "
             "ordered wrong with bands apart, "
             f"{decided.pairs_separated - decided.pairs_right_apart - wrong_apart} within "
             "overlapping bands (\"cannot separate\").",
             f"Best variant per cell: {decided.picks_right} right, "
             f"{decided.picks_unseparated} \"cannot separate\" (another variant predicted "
             f"within the pair band of the best's step: {pair_text(decided.pair_band)} over "
             "every cell, each cell's hedge from the others'), "
             f"{len(decided.picks_wrong)} wrong, of {decided.cells} interleaved cells; "
             f"{decided.hedges_holding_slowest} of the hedges hold the cell's slowest variant "
             "where the measurements separate it from the best."]
    lines += [f"Wrong pick: {text}." for text in decided.picks_wrong]
    if efficiency:
        resolved = decided.efficiency_compared - decided.efficiency_unresolved
        lines.append(f"Overlap efficiency: {decided.efficiency_within} of {resolved} within "
                     f"±{EFFICIENCY_GOAL:.2f} where the measured interval and the predicted "
                     f"band (efficiency_band: the held-out errors of sequential, step and limit "
                     f"propagated) are both narrower than that; {decided.efficiency_unresolved} "
                     f"more whose predicted band is wider: \"cannot tell\". Over all "
                     f"{decided.efficiency_compared} with a measured interval that narrow: "
                     f"median |error| {statistics.median(abs(e) for e in efficiency):.2f}, "
                     f"largest {max(efficiency, key=abs):+.2f}.")
    return lines


def pair_text(band: float | None) -> str:
    return "none (no cell of two variants)" if band is None else f"±{band:.1%}"


def overheads(checks: Sequence[accuracy.Check],
              cells: Sequence[accuracy.Cell]) -> dict[tuple, float]:
    """The overhead a prediction beyond the measured cells adds (impl/costmodel/overhead.py),
    keyed by its causes: per (GPU model, world size, variant) the median residual of its
    strategy over every measured cell of that GPU model and world size, and per (GPU model,
    variant) over every world size, for a world size no cell had (overhead.overhead_for)."""
    device = {_cell_key(c.row): c.row.get(CELL_ROW.device) for c in cells}
    predicted = [(device[_check_key(c)[:-1]], c) for c in checks
                 if c.predicted_ms is not None and c.overhead_ms is not None]
    residuals: dict[tuple, list[float]] = {}
    for gpu, check in predicted:
        if check.variant == variant_plans.variant(check.variant)[0]:
            residual = check.measured_ms - check.predicted_ms + check.overhead_ms
            residuals.setdefault((gpu, check.world_size, check.variant), []).append(residual)
            residuals.setdefault((gpu, check.variant), []).append(residual)
    # A knob variant takes its strategy's (overhead.py says why).
    found = {}
    for gpu, check in predicted:
        strategy = variant_plans.variant(check.variant)[0]
        found[gpu, check.world_size, check.variant] = overhead.overhead_ms(
            residuals.get((gpu, check.world_size, strategy), []))
        found[gpu, check.variant] = overhead.overhead_ms(residuals.get((gpu, strategy), []))
    return found



@dataclass(frozen=True)
class HeldOut:
    """What held-out validation finds: the table, the cells that do not reproduce (as
    lines), the headline split's decisions and the overheads for predictions beyond."""

    table: dict
    unreproduced: list[str]
    decisions: Decisions
    overheads: dict[tuple, float]
    lanes: dict[tuple, LaneEffects]  # per (GPU model[, world size], workload, variant)
    bands: dict[str, float]  # per variant, for predictions (relative_bands)
    pair_band: float | None = None  # for the best pick's hedge (pairs.py)


def gpu_cells(merged: Sequence[dict]) -> list[accuracy.Cell]:
    """The cells held-out validation predicts: every measured cell on a GPU (NCCL, 2 or more
    ranks) of ``merged``."""
    return [c for c in accuracy.measured_cells(merged) if c.row.get(CELL_ROW.device)
            and c.row.get(CELL_ROW.backend) == "nccl"]


def validate_held_out(rows: Sequence[dict], merged: Sequence[dict]) -> HeldOut:
    """Held-out validation of the cells of ``merged`` (the newest of each measurement), inputs
    drawn from ``rows`` (every run); the overheads are those for predictions beyond the
    cells (``overheads``)."""
    cells = gpu_cells(merged)
    by_split = checks_by_split(rows, cells)
    found = unreproduced(cells, rows)
    # For predictions: each variant's lane over the measured cells of its GPU model and
    # world size (the copy-engine's all-reduce alone ran at 2 ranks near the fabric file's
    # peer-copy bandwidth, at 4 far below it); and over any world size, for a count no cell
    # had (assumed to hold there, as the overhead is). scale.lane_for reads them.
    kinds = {(c.row.get(CELL_ROW.device), c.row[CELL_ROW.world_size], c.row[CELL_ROW.workload])
             for c in cells}
    lanes = {(device, workload, name): lanes_over(rows, name, workload, device=device)
             for device, workload in {(device, workload) for device, _, workload in kinds}
             for name in PREDICTED_VARIANTS}
    lanes.update({(device, world, workload, name): lanes_over(rows, name, workload, device, world)
                  for device, world, workload in kinds for name in PREDICTED_VARIANTS})
    lanes.update({(ANY_GPU, world, workload, name): lanes_over(rows, name, workload, world=world)
                  for world, workload in {(world, workload) for _, world, workload in kinds}
                  for name in ALONE_READ})
    return HeldOut(strategy_table(by_split, trivial_errors(cells), found),
                   unreproduced_lines(found, by_split[HEADLINE]),
                   decisions(by_split[HEADLINE], cells),
                   overheads(by_split[OVERHEAD_SPLIT], cells),
                   # Every headline check, those that do not reproduce too: a later run varies
                   # as much, and its band must cover that.
                   lanes, relative_bands(by_split[HEADLINE]), pair_band(by_split[HEADLINE]))
