"""What a strategy's communication lane costs beside backward, read off other cells' timelines.

The fabric times a collective alone. Beside backward, each kernel the communication stream
launches (NCCL's all-reduce kernel; the copy-engine's barrier, add and barrier kernels; an
update share's SGD kernel) waits for SMs that backward's GEMM holds. In the committed 2× H200
timelines an update share takes 0.08 ms after backward and 0.20–0.29 ms beside the
batch-1024 MLP's 0.24 ms GEMMs, 1.22–1.43 ms beside the batch-8192 MLP's 1.69 ms ones: the
same 0.5–0.9 GEMMs in both workloads. So the lane is counted in backward GEMMs d (the cell's
compute-only backward / the GEMMs it runs, compute.backward_kernel_ms), and a prediction
multiplies by its own cell's d:

- ``update_kernels``: (mean duration of the update shares wholly beside backward − mean of
  those after it) / d, for a variant that updates inside the overlap; read from the cells of
  *other workloads* (leave-one-workload-out: it carries across them);
- ``beside_kernels``: the same for the collectives, only where chunks are equal in bytes;
  read from the *same workload's* other cells (other K, other runs), for the threaded
  strategy (``LANE_READ`` says why only it): a collective's wait does not carry across
  workloads in GEMMs (threaded 0.6–1.3 beside the batch-1024 MLP, 0.3–0.4 beside the
  batch-8192 one; the copy-engine 1.7–1.8 in three cells, 1.0 in the fourth) nor in ms;
- ``launch_ms`` = median of (launch − max(the chunk's data final, the end of the previous job
  on the lane)), the host's hand-off (the threaded strategy's thread), with the collectives;
- ``alone``: for the copy-engine, whose all-reduce is barriers, peer copies and an add kernel
  that no fabric file times (0.33 ms for 80 MB after backward, where 390 GB/s of peer copies
  would give 0.25), α–β fitted to its collectives after backward in other workloads' cells
  (bytes = the gradient buffer / K).

Every reading comes from the variant's overlapped timelines in *other* cells (never the
predicted one; any run) of the same GPU model, world size and fabric profile; each is the
median over those cells; with none, 0 (said so).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from impl.costmodel import variant_plans
from impl.costmodel.compute import backward_kernels, known_workload, parameter_layout
from impl.costmodel.fabric import Fabric, fit_fabric
from impl.rows.kinds import COMPARISON, STEP, STEP_TIMELINE, is_older_step

# The variants whose collectives' wait is read (from the same workload): the threaded
# strategy's, equal in bytes. DDP's buckets differ in bytes; a 1 MB first chunk or chunks
# cut at layers too. Chunked's wait is what the per-step overhead fitted on the other cells
# already carries: read as well, it put chunked's held-out error on 2× H200 from 0.2% / 0.8%
# to 4.3% / 8.7%. The copy-engine's does not carry across K on the batch-8192 MLP (1.7 GEMMs
# per collective at K = 5, 1.0 at K = 20) nor across workloads: read from the same
# workload, the copy-engine's largest held-out error was 12% and 74 of 93 separated pairs
# were ordered right; from the other workloads 15% and 69; left out, 76 (docs/costmodel.md).
# A cell's row is a comparison row or (before interleaving) a step row, which declare the
# fields read from both alike.
CELL_ROW, STEP_ROW = COMPARISON.names, STEP.names
LANE_READ = ("threaded",)
ALONE_READ = ("copy-engine",)  # no fabric file times its all-reduce (module docstring)


@dataclass(frozen=True)
class LaneEffects:
    """A variant's communication lane beside backward: how many of backward's GEMMs a
    collective and an update share launched beside it wait for, the host's hand-off before
    each launch, its collectives alone where read, and where it all comes from."""

    beside_kernels: float = 0.0
    launch_ms: float = 0.0
    update_kernels: float = 0.0
    alone: Fabric | None = None
    source: str = "no other cell's timeline: collectives as fast beside backward as alone"

    def beside_ms(self, kernel_ms: float) -> float:
        """What a collective launched beside backward adds, where its GEMMs last kernel_ms."""
        return self.beside_kernels * kernel_ms

    def update_beside_ms(self, kernel_ms: float) -> float:
        return self.update_kernels * kernel_ms


@dataclass(frozen=True)
class Reading:
    """One overlapped timeline's lane: excesses in milliseconds (None: cannot say), the
    median hand-off, and the mean duration of its collectives after backward."""

    beside_ms: float | None
    launch_ms: float | None
    update_ms: float | None = None
    alone_ms: float | None = None


def _excess(jobs: list[dict], start: float, end: float) -> float | None:
    """Mean duration of ``jobs`` wholly inside [start, end] − mean of those after end."""
    beside = [i["end_ms"] - i["start_ms"] for i in jobs
              if i["start_ms"] >= start and i["end_ms"] <= end]
    alone = [i["end_ms"] - i["start_ms"] for i in jobs if i["start_ms"] >= end]
    if not beside or not alone:
        return None
    return max(0.0, statistics.fmean(beside) - statistics.fmean(alone))


def timeline_effects(timeline: dict) -> Reading:
    """The lane of one overlapped timeline (impl/timeline intervals)."""
    intervals = timeline.get(STEP_TIMELINE.intervals) or []
    backward = [i for i in intervals if i["lane"] == "compute"
                and i["label"].startswith("backward")]
    comm = sorted((i for i in intervals if i["lane"] == "comm"), key=lambda i: i["start_ms"])
    if not backward or not comm:
        return Reading(None, None)
    start, end = min(i["start_ms"] for i in backward), max(i["end_ms"] for i in backward)
    shares = [i for i in intervals if i["label"].startswith("update c")]  # on the comm lane
    after = [i["end_ms"] - i["start_ms"] for i in comm if i["start_ms"] >= end]
    ready = {i["chunk"]: i["end_ms"] for i in backward}
    waits, previous_end = [], float("-inf")
    # The lane is the collectives and the update shares that follow them on the same stream.
    for i in sorted([*comm, *shares], key=lambda i: i["start_ms"]):
        if i["lane"] == "comm" and i.get("chunk") in ready:
            waits.append(max(0.0, i["start_ms"] - max(ready[i["chunk"]], previous_end)))
        previous_end = i["end_ms"]
    return Reading(_excess(comm, start, end), statistics.median(waits) if waits else None,
                   _excess(shares, start, end) if shares else None,
                   statistics.fmean(after) if after else None)


def _timelines(row: dict, name: str) -> dict | None:
    """Variant ``name``'s overlapped timeline in a row: a comparison row's, or a step row's
    (measured before interleaving) of that strategy."""
    if COMPARISON.holds(row):
        return (row.get(CELL_ROW.timelines) or {}).get(name)
    if is_older_step(row) and row.get(STEP_ROW.strategy) == name:
        return row.get(STEP_ROW.timeline)
    return None


# What names an older step row's cell: its sequential step's timeline stands in for the
# compute-only one that such runs did not measure.
OLDER_CELL = ("machine", "run", STEP_ROW.workload, STEP_ROW.chunks, STEP_ROW.world_size,
              STEP_ROW.profile)


def older_sequential(rows: Sequence[dict]) -> dict[tuple, dict | None]:
    """The timeline of each older run's sequential step, by the cell (OLDER_CELL) it names;
    built once per read of ``rows``, because every row's kernel looks its cell up."""
    found: dict[tuple, dict | None] = {}
    for r in rows:
        if is_older_step(r) and r.get(STEP_ROW.strategy) == "sequential":
            found.setdefault(tuple(r.get(k) for k in OLDER_CELL), r.get(STEP_ROW.timeline))
    return found


def _kernel_ms(older: dict[tuple, dict | None], row: dict) -> float | None:
    """The mean backward GEMM of a row's cell, from its compute-only timeline (a comparison
    row's) or, measured before interleaving, the same run's sequential step at its K
    (``older``, from older_sequential)."""
    if not known_workload(row.get(CELL_ROW.workload)):
        return None
    timeline = (row.get(CELL_ROW.timelines) or {}).get("compute-only")
    if timeline is None:
        timeline = older.get(tuple(row.get(k) for k in OLDER_CELL))
    backward = [i for i in (timeline or {}).get(STEP_TIMELINE.intervals) or []
                if i["lane"] == "compute" and i["label"].startswith("backward")]
    if not backward:
        return None
    span = max(i["end_ms"] for i in backward) - min(i["start_ms"] for i in backward)
    return span / backward_kernels(row[CELL_ROW.workload])


NO_LANE = LaneEffects()  # nothing read: as fast beside backward as alone, no hand-off
ANY_GPU = "any GPU model"  # lanes read over every GPU model at a world size (scale.lane_for)
SAME_CELL_KIND = (CELL_ROW.device, CELL_ROW.world_size, CELL_ROW.profile)


def lane_effects(rows: Sequence[dict], cell: dict, name: str,
                 same: tuple[str, ...] = SAME_CELL_KIND) -> LaneEffects:
    """Variant ``name``'s lane in the cell of row ``cell``, from the cells of ``rows`` (any
    run) of other workloads that agree with it on ``same`` (by default the GPU model, world
    size and profile; at other GPU counts, ``{"device": ...}`` and ``("device",)``)."""
    strategy, options = variant_plans.variant(name)
    read_lane = strategy in LANE_READ and not options.get("first_chunk_mb") \
        and options.get("chunk_split", "bytes") == "bytes"
    read_update = bool(options.get("update_in_overlap"))
    if not (read_lane or read_update or strategy in ALONE_READ):
        return LaneEffects(source=f"{name}: lane not read (LANE_READ says why)")
    beside, updates, waits, alone = [], [], [], []
    older = older_sequential(rows)
    for row in rows:
        if any(row.get(k) != cell.get(k) for k in same) \
                or all(row.get(k) == cell.get(k) for k in ("machine", "run", CELL_ROW.chunks,
                                                            CELL_ROW.workload)) \
                or not (kernel := _kernel_ms(older, row)):
            continue  # another kind of cell, or the predicted cell itself
        same_workload = row.get(CELL_ROW.workload) == cell.get(CELL_ROW.workload)
        found = timeline_effects(timeline) if (timeline := _timelines(row, name)) else None
        if found and read_lane and same_workload:
            beside += [found.beside_ms / kernel] if found.beside_ms is not None else []
            waits += [found.launch_ms] if found.launch_ms is not None else []
        if found and read_update and not same_workload and found.update_ms is not None:
            updates.append(found.update_ms / kernel)
        # The base strategy's collectives alone: the same all-reduce as its variants'.
        if strategy in ALONE_READ and not same_workload \
                and (timeline := _timelines(row, strategy)) \
                and (base := timeline_effects(timeline)).alone_ms is not None:
            spans, element_size = parameter_layout(row[CELL_ROW.workload])
            alone.append((spans[-1][1] * element_size / row[CELL_ROW.chunks], base.alone_ms))
    if not (beside or waits or updates or alone):
        return LaneEffects()
    effects = LaneEffects(statistics.median(beside) if beside else 0.0,
                          statistics.median(waits) if waits else 0.0,
                          statistics.median(updates) if updates else 0.0,
                          _alone(alone))
    return LaneEffects(effects.beside_kernels, effects.launch_ms, effects.update_kernels,
                       effects.alone, _describe(name, effects, len(beside), len(updates),
                                                len(alone)))


def lanes_over(rows: Sequence[dict], name: str, workload: str, device: str | None = None,
               world: int | None = None) -> LaneEffects:
    """``lane_effects`` for a prediction of ``workload``: over the cells of the GPU model and
    world size given, each of them where given, any where None."""
    given = {CELL_ROW.device: device, CELL_ROW.world_size: world}
    same = tuple(key for key, wanted in given.items() if wanted is not None)
    return lane_effects(rows, {**given, CELL_ROW.workload: workload}, name, same)


def _alone(points: list[tuple[float, float]]) -> Fabric | None:
    """α–β of (bytes, mean duration alone) points; None with fewer than two sizes."""
    if len({size for size, _ in points}) < 2:
        return None
    sizes, times = zip(*points)
    return fit_fabric([1] * len(points), sizes, times)


def _describe(name: str, effects: LaneEffects, lanes: int, updates: int, alone: int) -> str:
    """Where each part of a variant's lane came from, in one line."""
    parts = []
    if lanes:
        parts.append(f"collectives wait {effects.beside_kernels:.2f} backward GEMMs beside "
                     f"backward, launch {effects.launch_ms * 1e3:.0f} µs after ready ({lanes} "
                     "other cells of its workload)")
    if updates:
        parts.append(f"update shares wait {effects.update_kernels:.2f} GEMMs ({updates} cells "
                     "of other workloads)")
    if effects.alone is not None:
        parts.append(f"all-reduce alone {effects.alone.alpha_ms * 1e3:.0f} µs + bytes at "
                     f"{effects.alone.bandwidth_gbps:.0f} GB/s ({alone} cells of other "
                     "workloads)")
    return f"{name}: " + "; ".join(parts) if parts else f"{name}: nothing read"
