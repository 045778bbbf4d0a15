"""The interleaved overlap cells as the report reads them: pure functions over comparison rows.

A *cell* is one comparison row of suite/bench_overlap.py (``kind: "comparison"``): one
workload × K × world size × profile whose variants ran in the same shuffled rounds, with the
paired figures of impl/comparisons.py, each an ``impl.stats.Estimate`` as JSON (value, low,
high, rounds: the median and its 95% bootstrap interval, paired by round). This module
chooses which cell answers the question, compares strategies from the stored per-round values
with impl.stats (no other resampler), and gathers what the figures draw. No file access, no
formatting.

    for answer in cells.answers(rows):
        print(answer["cell"]["workload"], answer["best"], answer["figures"]["vs_sequential"])
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence

from impl import metrics, stats
from impl.metrics import LOST_TIME_PARTS
from impl.rows.kinds import (
    COMPARISON,
    INTERFERENCE,
    MEASURED,
    METERED,
    REFERENCE,
    STEP,
    STEP_TIMELINE,
    is_older_step,
)
from impl.rows.report_records import ENERGY_CHECK, FINDING
from impl.stats import NO_DIFFERENCE, Estimate
from impl.strategy_records import overlaps_in_k_chunks

# A cell is a comparison row: cell[CELL.workload]. A strategy's figures in it (figures) are
# named as a step row's; the rows measured before interleaving are step rows.
CELL, STEP_ROW, INTERFERENCE_ROW = COMPARISON.names, STEP.names, INTERFERENCE.names
COMPUTE_ONLY, COMM_ONLY = "compute-only", "comm-only"  # impl/comparisons.py's reference names
DDP, DDP_DEFAULT = "ddp", "ddp-25mb"
# The K an answer is read from: fixed before looking at the data, so its interval is honest.
# It is the largest K of the suite's default CPU and GPU grids (suite/conftest.py) and the K of
# the same-run comparisons in docs/ANCHORS.md.
ANSWER_CHUNKS = 20
# The course study simulated 300 ms of compute and 200 ms of communication per chunk
# (docs/ANCHORS.md): communication:compute 2:3, compute:communication 1.5.
STUDY_COMPUTE_TO_COMM = 1.5
# docs/ANCHORS.md's reference models: the GPU data-parallel MLP and the CPU one.
REFERENCE_WORKLOADS = ("mlp_8192x12_bf16", "mlp_1024x8")
# The workloads listed and drawn first, in this order: the reference models, then the CPU
# default grid's MLP at the course study's regime and the quick mode's MLP.
FIRST_WORKLOADS = (*REFERENCE_WORKLOADS, "mlp_1024x8_b64", "mlp_tiny")
# The order of the cells' tables and figures, then any other name by name. Not the records'
# reading order (impl/strategy_records.py), which lists copy-engine and each named variant
# beside its strategy: that would reorder the committed report's rows.
VARIANT_ORDER = (COMPUTE_ONLY, COMM_ONLY, "sequential", "mpi-sequential", "threaded", "chunked",
                 "mpi", DDP, DDP_DEFAULT)


def variant_rank(name: str) -> tuple[int, str]:
    order = VARIANT_ORDER
    return (order.index(name) if name in order else len(order), name)


def workload_rank(name: str) -> tuple[int, str]:
    order = FIRST_WORKLOADS
    return (order.index(name) if name in order else len(order), name)


# --- rows -----------------------------------------------------------------------------------


def cells(rows: Iterable[dict]) -> list[dict]:
    """Every comparison row, by machine, profile, world size, workload, reference and K."""
    return sorted((r for r in rows if COMPARISON.holds(r)), key=cell_sort)


def cell_sort(cell: dict) -> tuple:
    return (cell["machine"], cell[CELL.profile], cell[CELL.world_size],
            workload_rank(cell[CELL.workload]), cell.get(CELL.sequential_reference) or "",
            cell[CELL.chunks])


def old_format_steps(rows: Iterable[dict]) -> list[dict]:
    """Step rows measured before interleaving: references taken at other moments, no
    intervals. The report shows them in an appendix only."""
    return [r for r in rows if is_older_step(r) and r.get(STEP_ROW.real, True)]


def estimate(data: dict | None) -> Estimate | None:
    return None if not data else Estimate.from_json(data)


def value(data: dict | None) -> float | None:
    return None if not data else data.get("value")


def round_ms(cell: dict, variant: str) -> list[float]:
    """Per round, the median step time of ``variant``: suite.harness.Measurement.round_ms of
    the stored per-step times."""
    # the measurement's own step_ms (per variant, per round), not the step row's field
    return [statistics.median(steps) for steps in cell[CELL.measurement][MEASURED.step_ms][variant]]


def compare(cell: dict, candidate: str, reference: str) -> dict:
    """``candidate`` against ``reference`` in the same rounds: impl.comparisons.versus
    (speedup = reference / candidate, paired difference, verdict)."""
    from impl.comparisons import versus  # imports torch: only where cells are compared

    return versus(round_ms(cell, candidate), round_ms(cell, reference))


def figures(cell: dict, strategy: str) -> dict:
    return cell[CELL.strategies][strategy]


def compared(cell: dict) -> list[str]:
    """The cell's compared strategies that have figures and per-round times."""
    timed = (cell.get(CELL.measurement) or {}).get(MEASURED.step_ms) or {}
    return [s for s in cell.get(CELL.compared) or cell[CELL.strategies]
            if s in cell[CELL.strategies] and s in timed]


def is_mpi(cell: dict) -> bool:
    return cell.get(CELL.sequential_reference) == "mpi-sequential"


# --- which cell answers the question ----------------------------------------------------------


def group_key(cell: dict) -> tuple:
    """Cells that differ only in K: one workload on one machine, fabric, world and reference."""
    return (cell["machine"], cell[CELL.profile], cell[CELL.world_size], cell[CELL.workload],
            cell.get(CELL.sequential_reference))


def groups(rows: Iterable[dict]) -> list[list[dict]]:
    found: dict[tuple, list[dict]] = defaultdict(list)
    for cell in cells(rows):
        found[group_key(cell)].append(cell)
    return list(found.values())


def answer_cell(group: Sequence[dict]) -> tuple[dict, str]:
    """The cell of a K sweep the answer is read from, and why that one.

    K = ANSWER_CHUNKS where measured (chosen before the data were seen); otherwise the
    measured K > 1 nearest to it; K = 1 only when nothing else was measured.
    """
    by_k = {cell[CELL.chunks]: cell for cell in group}
    if ANSWER_CHUNKS in by_k:
        return by_k[ANSWER_CHUNKS], (f"K = {ANSWER_CHUNKS}, the suite's default chunk count, "
                                     "fixed before the data were seen")
    above_one = [k for k in by_k if k > 1]
    if above_one:
        chunks = min(above_one, key=lambda k: (abs(math.log(k / ANSWER_CHUNKS)), -k))
        return by_k[chunks], (f"K = {chunks}, the measured chunk count nearest the default "
                              f"K = {ANSWER_CHUNKS}, which this run did not measure")
    return by_k[1], "K = 1, the only chunk count measured: one chunk, nothing can overlap"


def speedup(cell: dict, strategy: str) -> float:
    """The median speedup over sequential (for ranking; -inf where undefined)."""
    found = value(figures(cell, strategy)["vs_sequential"]["speedup"])
    return -math.inf if found is None else found


def best_strategy(cell: dict) -> str:
    """The compared strategy with the largest median speedup over sequential."""
    return max(compared(cell), key=lambda s: (speedup(cell, s), -variant_rank(s)[0]))


def answer(group: Sequence[dict]) -> dict:
    """The answer of one workload on one machine, fabric and world size.

    ``cell``/``why``: the cell read (answer_cell); ``best``: its strategy with the largest
    median speedup over sequential; ``versus``: best against every other compared strategy in
    the same rounds; ``best_k``: over every K > 1 and strategy (but DDP at 25 MB, which does
    not depend on K), the largest median speedup (optimistic: the best of ``candidates``
    noisy figures), or None unless it is at another K and above the answer's.
    """
    cell, why = answer_cell(group)
    best = best_strategy(cell)
    versus = {other: compare(cell, best, other) for other in compared(cell) if other != best}
    # DDP at its 25 MB default does not depend on K: its best "K" would only pick noise.
    pairs = [(c, s) for c in group if c[CELL.chunks] > 1 for s in compared(c) if s != DDP_DEFAULT]
    best_k = None
    if pairs:
        top_cell, top = max(pairs, key=lambda p: speedup(*p))
        if (top_cell[CELL.chunks] != cell[CELL.chunks]
                and speedup(top_cell, top) > speedup(cell, best)):
            best_k = {"cell": top_cell, STEP_ROW.strategy: top, "figures": figures(top_cell, top)}
    return {"cell": cell, "why": why, "best": best, "figures": figures(cell, best),
            "versus": versus, "best_k": best_k, "candidates": len(pairs)}


def answers(rows: Iterable[dict]) -> list[dict]:
    """One answer per workload, machine, fabric and world size ≥ 2 (where the answer cell
    compared any strategy)."""
    return [answer(group) for group in groups(rows)
            if group[0][CELL.world_size] > 1 and compared(answer_cell(group)[0])]


def verdict_text(verdict: str, other: str) -> str:
    if verdict == NO_DIFFERENCE:
        return f"no significant difference from {other}"
    return f"{verdict} than {other}"


def world_one(rows: Iterable[dict]) -> list[dict]:
    """World-size-1 cells: sequential against compute-only, the same computation (the
    all-reduce of one rank is a no-op), with their paired comparison (keyed as
    impl.comparisons.versus keys it: found[kinds.PAIRED.difference_ms])."""
    return [{"cell": cell, **cell[CELL.references][REFERENCE.sequential_vs_compute_only]}
            for cell in cells(rows) if cell[CELL.world_size] == 1]


# --- notes on efficiencies --------------------------------------------------------------------


def bucket_count(cell: dict, strategy: str) -> int | None:
    return (cell.get(CELL.ddp_bucket_counts) or {}).get(strategy)


def other_chunking(cell: dict, strategy: str) -> bool:
    """True when a strategy does not communicate in the cell's K chunks (DDP's buckets)."""
    buckets = bucket_count(cell, strategy)
    return buckets is not None and buckets != cell[CELL.chunks]


def efficiency_note(cell: dict, strategy: str) -> str | None:
    """Why a strategy's overlap efficiency is missing or needs reading with care, or None."""
    found = figures(cell, strategy).get(STEP_ROW.overlap_efficiency)
    buckets = bucket_count(cell, strategy)
    if cell[CELL.world_size] == 1:
        return "world size 1: no communication, so no efficiency"
    if other_chunking(cell, strategy):
        return (f"DDP made {buckets} bucket(s), not K = {cell['chunks']} chunks: the limit and "
                f"the schedule bound describe K-chunk all-reduces, so no efficiency "
                f"(other chunking)")
    if cell[CELL.chunks] == 1 and overlaps_in_k_chunks(strategy):
        return ("K = 1: the only chunk is ready when backward ends, so nothing can overlap; "
                "a reference point, not a candidate")
    if not found or found.get("value") is None:
        return ("undefined: sequential is at or below the limit max(compute-only, comm-only), "
                "so there is nothing to hide")
    if found.get("low") is None:
        return ("no interval: some resamples had no headroom (sequential at or below the "
                "limit), so the efficiency is not resolved")
    if found["value"] < 0:
        return "negative: the step was slower than sequential"
    if found["value"] > 1:
        return ("above 1: the step beat max(compute-only, comm-only) measured in the same "
                "rounds; where the interval reaches below 1 that is noise, otherwise that "
                "reference does not bound this strategy (its communication ran faster "
                "overlapped than comm-only's back-to-back chunks)")
    return None


MPI_NOTE = ("MPI cells are measured against their own references under mpirun "
            "(mpi-sequential, and comm-only over MPI), not the torch.distributed ones.")


# --- where the lost time goes -----------------------------------------------------------------


def lost_time(cell: dict) -> list[dict]:
    """Per compared strategy: the parts of step − compute-only (impl.metrics.lost_time_ms,
    medians over rounds with intervals), their sum and the measured gap."""
    table = []
    for strategy in compared(cell):
        lost = figures(cell, strategy)["lost_time"]
        table.append({STEP_ROW.strategy: strategy,
                      **{part: lost[part] for part in LOST_TIME_PARTS},
                      "parts_sum_ms": lost["parts_sum_ms"], "gap_ms": lost["gap_ms"]})
    return table


def backward_ms(timeline: dict) -> float:
    """The backward compute time of one step's timeline (every backward interval, summed)."""
    return sum(i["end_ms"] - i["start_ms"] for i in timeline[STEP_TIMELINE.intervals]
               if i["lane"] == "compute" and i["label"].startswith("backward"))


def finding(cell: dict, strategy: str) -> dict:
    """What the main finding sentence of a cell states for ``strategy``: its hidden fraction,
    its largest lost-time part, and the backward time of the representative (median-round)
    steps of compute-only and of the strategy."""
    lost = figures(cell, strategy)["lost_time"]
    parts = {part: value(lost[part]) or 0.0 for part in LOST_TIME_PARTS}
    timelines = cell.get(CELL.timelines) or {}
    reference, own = timelines.get(COMPUTE_ONLY), timelines.get(strategy)
    return {STEP_ROW.strategy: strategy,
            FINDING.hidden: figures(cell, strategy).get(STEP_ROW.hidden_comm_fraction),
            FINDING.largest: max(parts, key=lambda p: parts[p]), FINDING.parts: lost,
            FINDING.backward_reference_ms: backward_ms(reference) if reference else None,
            FINDING.backward_ms: backward_ms(own) if own else None}


# --- regimes and the course study -----------------------------------------------------------


def regime_points(rows: Iterable[dict]) -> list[dict]:
    """Speedup over sequential against the measured compute:communication ratio, per compared
    strategy of every cell with communication and K > 1 (K = 1 cannot overlap). Strategies
    that do not send the K chunks (DDP with another bucket count) are left out: the ratio and
    sequential describe K-chunk communication, which theirs is not."""
    points = []
    for cell in cells(rows):
        ratio = cell[CELL.references].get(REFERENCE.compute_to_comm)
        if cell[CELL.world_size] == 1 or cell[CELL.chunks] == 1 or not (value(ratio) or 0) > 0:
            continue
        for strategy in compared(cell):
            if other_chunking(cell, strategy):
                continue
            points.append({"cell": cell, STEP_ROW.strategy: strategy, "ratio": ratio,
                           "speedup": figures(cell, strategy)["vs_sequential"]["speedup"]})
    return points


def fabric_key(cell: dict) -> tuple[str, str]:
    return cell["machine"], cell[CELL.profile]


def nearest_to_study(rows: Iterable[dict]) -> list[dict]:
    """Per machine and fabric: the torch.distributed cell (K > 1, world ≥ 2) whose measured
    compute:communication ratio is nearest the study's 1.5 (on a log scale), with the
    strategy the study's phase 4 describes (chunked) and the best one there."""
    nearest: dict[tuple, dict] = {}
    for cell in cells(rows):
        ratio = value(cell[CELL.references].get("compute_to_comm"))
        if (cell[CELL.world_size] == 1 or cell[CELL.chunks] == 1 or not (ratio or 0) > 0
                or is_mpi(cell) or not compared(cell)):
            continue
        distance = abs(math.log(ratio / STUDY_COMPUTE_TO_COMM))
        key = fabric_key(cell)
        if key not in nearest or distance < nearest[key]["distance"]:
            nearest[key] = {"cell": cell, "distance": distance,
                            "ratio": cell[CELL.references]["compute_to_comm"]}
    for entry in nearest.values():
        entry["best"] = best_strategy(entry["cell"])
    return [nearest[key] for key in sorted(nearest)]


def reference_ratios(rows: Iterable[dict]) -> list[dict]:
    """Per machine and fabric, the compute:communication ratio of the reference workload's
    answer cell at the largest world size (the setting users would train in)."""
    found: dict[tuple, dict] = {}
    for entry in answers(rows):
        cell = entry["cell"]
        if cell[CELL.workload] not in REFERENCE_WORKLOADS or is_mpi(cell):
            continue
        key = fabric_key(cell)
        if key not in found or cell[CELL.world_size] > found[key]["cell"][CELL.world_size]:
            found[key] = {"cell": cell, "ratio": cell[CELL.references].get("compute_to_comm")}
    return [found[key] for key in sorted(found)]


def old_format_ratios(rows: Iterable[dict]) -> list[dict]:
    """compute-only / comm-only of the reference GPU workload in step rows measured before
    interleaving (one value per machine, fabric and world size, no interval)."""
    found: dict[tuple, dict] = {}
    for row in old_format_steps(rows):
        if row[STEP_ROW.workload] != REFERENCE_WORKLOADS[0] or row[STEP_ROW.world_size] < 2:
            continue
        if not row.get(STEP_ROW.comm_only_ms):
            continue
        key = (row["machine"], row[STEP_ROW.profile], row[STEP_ROW.world_size])
        compute_only, comm_only = row[STEP_ROW.compute_only_ms], row[STEP_ROW.comm_only_ms]
        found.setdefault(key, {"machine": row["machine"], STEP_ROW.profile: key[1],
                               STEP_ROW.world_size: key[2], "run": row["run"],
                               "ratio": compute_only / comm_only,
                               STEP_ROW.compute_only_ms: compute_only,
                               STEP_ROW.comm_only_ms: comm_only,
                               STEP_ROW.chunks: row[STEP_ROW.chunks]})
    return [found[key] for key in sorted(found)]


# --- choosing what the step-anatomy chapter draws ----------------------------------------------


def anatomy_cells(rows: Iterable[dict]) -> list[dict]:
    """Per machine and fabric, the cell whose steps are drawn: the answer cell of the
    reference workload (else the first workload) at the largest world size. A machine that
    measured only one rank (nothing to overlap) is drawn only where no machine of the report
    communicated; its cells stay in the appendix of every cell."""
    chosen: dict[tuple, dict] = {}
    for group in groups(rows):
        cell, _ = answer_cell(group)
        if is_mpi(cell):
            continue
        key = fabric_key(cell)
        rank = (cell[CELL.world_size], -workload_rank(cell[CELL.workload])[0])
        if key not in chosen or rank > chosen[key]["rank"]:
            chosen[key] = {"cell": cell, "rank": rank}
    drawn = [chosen[key]["cell"] for key in sorted(chosen)]
    if any(cell[CELL.world_size] > 1 for cell in drawn):
        drawn = [cell for cell in drawn if cell[CELL.world_size] > 1]
    return drawn


# --- interference and energy ------------------------------------------------------------------


def interference(rows: Iterable[dict]) -> list[dict]:
    """The interference rows: GEMM alone and beside each kind of traffic, per workload."""
    return sorted((r for r in rows if INTERFERENCE.holds(r)),
                  key=lambda r: (r["machine"], r[INTERFERENCE_ROW.profile],
                                 r[INTERFERENCE_ROW.world_size],
                                 workload_rank(r[INTERFERENCE_ROW.workload])))


def energy_check(cell: dict) -> list[dict]:
    """Per variant of a cell with NVML energy per segment: energy per step (counter difference
    over each round's segment / its steps) against mean power × step time, paired by round.

    Mean power is the run's GPUs' mean NVML power over the whole cell, summed over GPUs; the
    ratio (energy per step) / (power × step) is 1 where both describe the same thing. It
    differs because a segment also holds the round's sync and barrier, the energy counter
    advances in steps, and power differs between variants while the mean is the cell's. A
    variant where some segment read no energy is left out (metrics.energy_counter_resolved): its
    segments are shorter than the counter's step, and each reads 0 or a whole step.
    """
    nvml = cell.get(CELL.nvml) or {}
    energy = {variant: joules for variant, joules in
              ((cell.get(CELL.measurement) or {}).get(MEASURED.energy_j) or {}).items()
              if metrics.energy_counter_resolved(joules)}
    powers = [p for p in (nvml.get(METERED.mean) or {}).get("power_w") or [] if p is not None]
    if not energy or not powers:
        return []
    power_w = sum(powers)
    steps = cell[CELL.measurement][MEASURED.steps_per_round]
    timed = cell[CELL.measurement][MEASURED.step_ms]
    table = []
    for variant in sorted((v for v in energy if v in timed), key=variant_rank):
        per_step = [joules / max(steps, 1) for joules in energy[variant]]
        predicted = [power_w * ms / 1e3 for ms in round_ms(cell, variant)]
        if len(per_step) != len(predicted):
            continue
        table.append({ENERGY_CHECK.variant: variant, ENERGY_CHECK.power_w: power_w,
                      # the energy column is keyed as a step row's
                      STEP_ROW.energy_per_step_j: stats.median(per_step).to_json(),
                      ENERGY_CHECK.power_times_step_j: stats.median(predicted).to_json(),
                      ENERGY_CHECK.ratio: stats.ratio(per_step, predicted).to_json()})
    return table
