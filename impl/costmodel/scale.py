"""Predictions beyond the measured machine: every strategy at 8 to 1024 GPUs on a fabric file.

Data parallelism keeps each GPU's work: the compute-only step measured on one GPU (or any
compute-only timeline of the results) stays as it is, the gradient bytes too, and only the
all-reduces grow with the world size, as the fabric file says (impl/costmodel/fabric.py). The
interference is the workload's measured one (its interference row: beside NCCL all-reduces;
without one, beside the memory-bound add kernel, which is what NCCL's reduction kernels are;
else none), assumed the same across nodes.

Stragglers: the compute-only step's measured per-step spread σ enters at n ranks as the
expected maximum of n draws (mean + σ·E[max of n standard normals]), since every step
waits at its all-reduces for the slowest rank: weak-scaling efficiency (one GPU's
compute-only step / the step at n) falls with n even where communication is hidden.

    predictions = predict(rows, load_fabric("ib400-h200x8"))   # rows: one results file's
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from scipy import integrate
from scipy.stats import norm

from impl import metrics
from impl.costmodel import overhead, variant_plans
from impl.costmodel.compute import (
    ReadyProfile,
    backward_kernel_ms,
    known_workload,
    parameter_layout,
)
from impl.costmodel.fabric import MeasuredSweep, NodeFabric, measured_sweep
from impl.costmodel.inputs import compute_profile, interference, run_name
from impl.costmodel.lanes import ANY_GPU, NO_LANE, LaneEffects
from impl.costmodel.schedule import simulate
from impl.rows.kinds import ALLREDUCE, COMPARISON, MEASURED, REFERENCE, STEP

# The row predicted from is a comparison row or (an older file) a step row, which declare the
# fields read from both alike; the sweeps are all-reduce rows.
CELL_ROW, STEP_ROW, SWEEP_ROW = COMPARISON.names, STEP.names, ALLREDUCE.names
WORLDS = (8, 16, 32, 64, 128, 256, 512, 1024)
NO_EFFICIENCY = ("no overlap efficiency: the step's band is wider than the headroom S − L "
                 "(the sequential step less the limit), so E = (S − T)/(S − L) could be anything")
# The strategies and named variants predicted, in the order the prediction's tables list them:
# those torchrun measures on one node, DDP at its default cap, and chunked with its update.
PREDICTED_VARIANTS = ("sequential", "chunked", "threaded", "copy-engine", "ddp", "ddp-25mb",
                      "chunked+update")
# The K of the predictions: the K the report's answer is read at (reports.cells.ANSWER_CHUNKS),
# fixed before the data.
PREDICTION_CHUNKS = 20


@dataclass(frozen=True)
class Source:
    """One workload's compute side: its compute-only step and interference, and whence."""

    workload: str
    profile: ReadyProfile
    interference: variant_plans.Interference
    about: str
    device: str | None = None  # the GPU model (or cpu) the compute-only step ran on
    spread_ms: float = 0.0  # standard deviation of the compute-only step over its steps
    compute_band: float = 0.0  # relative half-width of the compute-only step's 95% interval


def compute_band(row: dict) -> float:
    """The compute-only step's 95% interval as a relative half-width (0 where not given)."""
    estimate = (row.get(CELL_ROW.references) or {}).get(REFERENCE.compute_only_ms) or {}
    if estimate.get("low") is None or estimate.get("high") is None or not estimate.get("value"):
        return 0.0
    return (estimate["high"] - estimate["low"]) / 2 / estimate["value"]


def step_band(held_out: float | None, compute: float) -> float | None:
    """A predicted step's relative band: the strategy's held-out error (median |error| on
    cells the model was not built from) and the compute-only input's interval, added in
    quadrature as independent errors; None where the strategy has no held-out error."""
    return None if held_out is None else math.hypot(held_out, compute)


def step_spread_ms(row: dict) -> float:
    """The standard deviation of a comparison row's compute-only step over every measured
    step (all rounds): how much one rank's step varies; 0 where the row keeps no steps."""
    # the measurement's per-variant, per-round step times
    timed = (row.get(CELL_ROW.measurement) or {}).get(MEASURED.step_ms) or {}
    steps = timed.get("compute-only") or []
    flat = [float(t) for round_steps in steps for t in round_steps]
    return float(np.std(flat, ddof=1)) if len(flat) >= 2 else 0.0


@lru_cache(maxsize=64)
def expected_max_of_normals(n: int) -> float:
    """E[max of n independent standard normal draws]: ∫ x · n φ(x) Φ(x)^(n−1) dx (0 at n = 1,
    0.564 at 2, about 3.2 at 1024). Every all-reduce waits for the slowest of the n ranks,
    so each step is the compute of the slowest rank: mean + σ · this."""
    if n == 1:
        return 0.0
    value, _ = integrate.quad(lambda x: x * n * norm.pdf(x) * norm.cdf(x) ** (n - 1), -12, 12,
                              limit=200)
    return value


@dataclass(frozen=True)
class Prediction:
    workload: str
    strategy: str
    world_size: int
    step_ms: float | None
    exposed_comm_ms: float | None
    hidden_fraction: float | None
    overlap_efficiency: float | None
    note: str | None = None  # why there is no prediction, or what it assumes
    straggler_ms: float = 0.0  # the wait for the slowest rank, included in step_ms
    weak_scaling: float | None = None  # compute-only step on one GPU / step at world_size
    band: float | None = None  # relative half-width of the step's band; None: no band known
    overhead_ms: float = 0.0  # beyond the schedule (impl/costmodel/overhead.py), in step_ms

    @property
    def step_range(self) -> tuple[float, float] | None:
        """The step's band: step · (1 ± band)."""
        if self.step_ms is None or self.band is None:
            return None
        return self.step_ms * (1 - self.band), self.step_ms * (1 + self.band)


def _profile_rows(rows: Sequence[dict]) -> dict[str, dict]:
    """Per workload, the row to predict from: an interleaved cell's compute-only step (else a
    one-rank sequential step of an older file), the one with the most chunks."""
    found: dict[str, dict] = {}
    for row in rows:
        timeline = (row.get(CELL_ROW.timelines) or {}).get("compute-only") if COMPARISON.holds(
            row) else (row.get(STEP_ROW.timeline) if STEP.holds(row)
                       and row.get(STEP_ROW.strategy) == "sequential"
                       and row.get(STEP_ROW.world_size) == 1 else None)
        if not timeline:
            continue
        best = found.get(row[CELL_ROW.workload])
        # Interleaved cells before older step rows (as the report reads runs), then more chunks.
        rank = (COMPARISON.holds(row), row[CELL_ROW.chunks])
        if best is None or rank > (COMPARISON.holds(best), best[CELL_ROW.chunks]):
            found[row[CELL_ROW.workload]] = row
    return found


def sources(rows: Sequence[dict]) -> list[Source]:
    """Every workload of ``rows`` with a compute-only timeline."""
    found = []
    for workload, row in sorted(_profile_rows(rows).items()):
        if not known_workload(workload):
            continue  # no parameter layout to cut (validation lists such cells)
        try:
            profile = compute_profile(row)
        except (ValueError, KeyError, TypeError):
            continue  # an unreadable timeline: nothing to predict from
        found.append(Source(workload, profile,
                            interference(rows, workload, row.get(CELL_ROW.device),
                                         row.get(CELL_ROW.profile), row.get("machine")),
                            f"compute-only {profile.compute_only_ms:.3g} ms "
                            f"({row.get('machine')}, K = {row['chunks']}, "
                            f"{row.get('device') or 'device not recorded'})",
                            row.get(CELL_ROW.device), step_spread_ms(row), compute_band(row)))
    return found


def predict_one(source: Source, strategy: str, world: int, fabric: NodeFabric,
                chunks: int = PREDICTION_CHUNKS, held_out: float | None = None,
                overhead_ms: float = 0.0, lane: LaneEffects = NO_LANE,
                sweep: MeasuredSweep | None = None) -> Prediction:
    """One strategy at one world size; ``held_out``: the strategy's held-out error (its
    band's main part, ``step_band``); ``overhead_ms``: its cost beyond the schedule on this
    GPU model (heldout.overheads); ``lane``: its collectives beside backward and its
    hand-off, read on the measured cells (impl/costmodel/lanes.py); ``sweep``: the suite's
    all-reduce sweep at this world size on this GPU model, which times NCCL's all-reduces
    in place of the fabric file (``sweeps``)."""
    spans, _ = parameter_layout(source.workload)
    profile = source.profile  # its finest chunks: every cut's readiness is read off them
    base = variant_plans.variant(strategy)[0]
    copy = fabric.copy_alpha_beta(world)
    if copy is not None and lane.alone is not None:
        copy = lane.alone  # its all-reduce as measured after backward (impl/costmodel/lanes.py)
    if base == "copy-engine" and copy is None:
        why = ("no copy-engine bandwidth in the fabric file" if fabric.copy_gbps is None
               else f"peer copies reach only the {fabric.gpus_per_node} GPUs of a node")
        return Prediction(source.workload, strategy, world, None, None, None, None, why)
    comm = sweep or fabric.at_world(world)

    kernel = backward_kernel_ms(profile, source.workload)
    planned = variant_plans.plan(strategy, profile, chunks, spans, comm, copy, source.interference,
                                 lane.launch_ms, lane.beside_ms(kernel),
                                 lane.update_beside_ms(kernel))
    reference = variant_plans.plan("sequential", profile, chunks, spans, comm)
    outcome, sequential = simulate(profile, planned), simulate(profile, reference)
    comm_only = sum(c.duration_ms for c in reference.collectives)
    limit = float(metrics.limit_ms(profile.compute_only_ms, comm_only))
    # As in the measured cells: efficiencies compare with references at K chunks, so only a
    # strategy that communicates in K pieces has one (DDP's buckets may be fewer).
    same_chunking = len(planned.collectives) == len(reference.collectives)
    efficiency = None if base in variant_plans.AFTER_BACKWARD or not same_chunking else \
        metrics.overlap_efficiency(sequential.step_ms, outcome.step_ms + overhead_ms, limit)
    note = (f"its lane as read on the measured cells, taken to hold at every count: {lane.source}"
            if base == "threaded" or lane.update_kernels else None)
    if not same_chunking:
        count = len(planned.collectives)
        note = (f"{count} bucket{'s' if count != 1 else ''}, not K = {chunks} chunks: no "
                "overlap efficiency (its references are at K)")
    # Stragglers: each rank's step varies by the measured spread; the step waits for the
    # slowest of ``world`` ranks (expected_max_of_normals), so weak scaling is not flat.
    straggler = source.spread_ms * expected_max_of_normals(world)
    step = outcome.step_ms + overhead_ms + straggler
    band = step_band(held_out, source.compute_band)
    headroom = sequential.step_ms - limit  # what overlap can save at most
    if efficiency is not None and band is not None and band * step >= headroom:
        # E = (S − T)/(S − L): a step known only to ± more than S − L leaves E anywhere.
        efficiency = None
        note = NO_EFFICIENCY  # one wording: the report lists each note once per strategy
    return Prediction(source.workload, strategy, world, step,
                      outcome.exposed_comm_ms, outcome.hidden_fraction, efficiency, note,
                      straggler, profile.compute_only_ms / step, band, overhead_ms)


def predict(rows: Sequence[dict], fabric: NodeFabric, worlds: Sequence[int] = WORLDS,
            strategies: Sequence[str] = PREDICTED_VARIANTS, chunks: int = PREDICTION_CHUNKS,
            held_out: dict[str, float] | None = None,
            overheads: dict[tuple, float] | None = None,
            lanes: dict[tuple, LaneEffects] | None = None,
            sweeps: dict[tuple, MeasuredSweep] | None = None
            ) -> tuple[list[Source], list[Prediction]]:
    """Every strategy of every workload with a compute-only timeline in ``rows``, at every
    world size the fabric describes; ``held_out``: each strategy's held-out error, for the
    bands (heldout.relative_bands); ``overheads``: its cost beyond the schedule by GPU model,
    world size and strategy (heldout.overheads, read by overhead.overhead_for); ``lanes``:
    per (GPU model, world size, workload, strategy) and per (GPU model, workload, strategy)
    its lane beside backward (heldout.HeldOut.lanes, read by ``lane_for``; none where absent);
    ``sweeps``: per (GPU model, world size) the measured all-reduce sweep (``sweeps``; the
    fabric file where absent)."""
    found = sources(rows)
    sizes = [w for w in worlds if fabric.max_gpus is None or w <= fabric.max_gpus]
    return found, [predict_one(s, strategy, world, fabric, chunks,
                               (held_out or {}).get(strategy),
                               overhead.overhead_for(overheads or {}, s.device, world, strategy),
                               lane_for(lanes or {}, s.device, world, s.workload, strategy),
                               (sweeps or {}).get((s.device, world)))
                   for s in found for strategy in strategies for world in sizes]


def lane_for(lanes: dict[tuple, LaneEffects], device: str | None, world: int, workload: str,
             variant: str) -> LaneEffects:
    """A prediction's lane: read at its GPU model and world size where something was read
    there, else at its GPU model over every world size, else none. The collectives alone (the
    copy-engine's), where its GPU model has none at this world size, come from another GPU
    model's cells at it (``ANY_GPU``): at 4 ranks the copy-engine's all-reduce ran far below
    the fabric file's peer-copy bandwidth, on H200 as on H100."""
    lane = lanes.get((device, world, workload, variant))
    if lane is None or lane == NO_LANE:
        lane = lanes.get((device, workload, variant), NO_LANE)
    other = lanes.get((ANY_GPU, world, workload, variant))
    if lane.alone is None and other is not None and other.alone is not None:
        lane = replace(lane, alone=other.alone,
                       source=f"{lane.source}; all-reduce alone from another GPU model's "
                              f"cells at {world} ranks ({other.source})")
    return lane


def sweeps(rows: Sequence[dict], profile: str = "nvlink") -> dict[tuple, MeasuredSweep]:
    """Per (GPU model, world size), NCCL's all-reduce as the suite's sweep measured it
    (suite/bench_allreduce.py rows of ``profile``), the newest run's: the fabric file's one
    bandwidth for every world size was 5–31% off the 2-rank sweep, and a world size's own
    sweep carries its protocol and channel choices."""
    newest: dict[tuple, int] = {}  # run: the file's index, oldest first (validate.load_rows)
    for row in rows:
        if ALLREDUCE.holds(row) and row.get(SWEEP_ROW.backend) == "nccl" \
                and row.get(SWEEP_ROW.profile) == profile and row.get(SWEEP_ROW.device):
            key = (row[SWEEP_ROW.device], row[SWEEP_ROW.world_size])
            newest[key] = max(newest.get(key, -1), row.get("run") or 0)
    found = {}
    for (device, world), run in newest.items():
        mine = [r for r in rows if ALLREDUCE.holds(r) and r.get(SWEEP_ROW.device) == device
                and r.get(SWEEP_ROW.world_size) == world and (r.get("run") or 0) == run
                and r.get(SWEEP_ROW.backend) == "nccl" and r.get(SWEEP_ROW.profile) == profile]
        if len({r[SWEEP_ROW.size_bytes] for r in mine}) >= 2:
            found[device, world] = measured_sweep(
                mine, f"all-reduce sweep at {world} ranks ({run_name(mine[0])})")
    return found


def separable(predictions: Sequence[Prediction]) -> tuple[Prediction, list[Prediction]] | None:
    """The fastest predicted strategy of one workload at one world size, and those whose
    band overlaps its band (it cannot be told apart from them); None without a step."""
    stepped = [p for p in predictions if p.step_ms is not None]
    if not stepped:
        return None
    best = min(stepped, key=lambda p: p.step_ms)
    if best.step_range is None:
        return best, [p for p in stepped if p is not best]
    return best, [p for p in stepped if p is not best and (
        p.step_range is None or p.step_range[0] <= best.step_range[1])]
