"""What a strategy's communication lane costs beside backward, read off other cells' timelines.

The fabric times a collective alone. Beside backward it runs slower, by an amount that
depends on the strategy: the copy-engine's add kernel and NCCL's reduction kernels wait for
the SMs backward's GEMMs hold, and peer copies share HBM with them. On 2× H200 at K = 20 the
copy-engine's 80 MB all-reduce takes 0.33 ms after backward and 0.64–0.83 ms beside it
(mlp_8192x12_b1024), 1.5–2.9 ms beside the batch-8192 MLP's larger GEMMs; NCCL's (chunked)
0.30 ms alone, 0.33–0.50 beside. The threaded strategy also launches each chunk late: its
thread waits for the chunk's event, then launches (30–90 µs).

Both are read, for the variants of ``LANE_READ`` (below: why only those), from the variant's
overlapped timeline in *other* cells (never the predicted one; any run) of the same GPU
model, workload, world size and fabric profile:

- ``beside_ms`` = mean duration of the collectives that ran wholly beside backward − mean
  duration of those that ran after it (one timeline, so the fabric's absolute speed cancels;
  only where chunks are equal in bytes);
- ``launch_ms`` = median of (launch − max(the chunk's data final, the previous collective's
  end)), the host's hand-off.

Each is the median over the other cells that have it; with none, 0 (said so).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from impl.costmodel import variant_plans

# The variants whose lane is read: the threaded strategy's. Its collectives are equal in bytes
# (a difference of durations compares like with like). Chunked's is what the per-step
# overhead fitted on the other cells already carries: read as well, it put chunked's held-out
# error on 2× H200 from 0.2% / 0.8% to 4.3% / 8.7%. The copy-engine's does not carry across
# K: 0.43–0.48 ms per collective at K = 5 and 0.41 at K = 20 on the batch-1024 MLP, but 2.9
# and 1.7 ms on the batch-8192 MLP (neither a fixed wait nor a rate); read from the other K
# it put that cell at +13% (docs/costmodel.md). DDP's buckets differ in bytes.
LANE_READ = ("threaded",)


@dataclass(frozen=True)
class LaneEffects:
    """A variant's communication lane beside backward: how much longer a collective lasts
    launched beside it, and the host's hand-off before each launch, with their source."""

    beside_ms: float = 0.0
    launch_ms: float = 0.0
    source: str = "no other cell's timeline: collectives as fast beside backward as alone"


def timeline_effects(timeline: dict) -> tuple[float | None, float | None]:
    """(beside − alone mean collective duration ms, median hand-off ms) of one overlapped
    timeline (impl/timeline intervals); None where the timeline cannot say."""
    intervals = timeline.get("intervals") or []
    backward = [i for i in intervals if i["lane"] == "compute"
                and i["label"].startswith("backward")]
    comm = sorted((i for i in intervals if i["lane"] == "comm"), key=lambda i: i["start_ms"])
    if not backward or not comm:
        return None, None
    start, end = min(i["start_ms"] for i in backward), max(i["end_ms"] for i in backward)
    beside = [i["end_ms"] - i["start_ms"] for i in comm
              if i["start_ms"] >= start and i["end_ms"] <= end]
    alone = [i["end_ms"] - i["start_ms"] for i in comm if i["start_ms"] >= end]
    extra = (max(0.0, statistics.fmean(beside) - statistics.fmean(alone))
             if beside and alone else None)
    ready = {i["chunk"]: i["end_ms"] for i in backward}
    waits, previous_end = [], float("-inf")
    for i in comm:
        if i.get("chunk") in ready:
            waits.append(max(0.0, i["start_ms"] - max(ready[i["chunk"]], previous_end)))
        previous_end = i["end_ms"]
    return extra, (statistics.median(waits) if waits else None)


def _timelines(row: dict, name: str) -> dict | None:
    """Variant ``name``'s overlapped timeline in a row: a comparison row's, or a step row's
    (measured before interleaving) of that strategy."""
    if row.get("kind") == "comparison":
        return (row.get("timelines") or {}).get(name)
    if row.get("kind") == "step" and row.get("strategy") == name and "intervals" not in row:
        return row.get("timeline")
    return None


NO_LANE = LaneEffects()  # nothing read: as fast beside backward as alone, no hand-off
SAME_CELL_KIND = ("device", "workload", "world_size", "profile")


def lane_effects(rows: Sequence[dict], cell: dict, name: str,
                 same: tuple[str, ...] = SAME_CELL_KIND) -> LaneEffects:
    """Variant ``name``'s lane in the cell of row ``cell``, from every other cell of ``rows``
    (any run) that agrees with it on ``same`` (by default the GPU model, workload, world size
    and profile; at other GPU counts, ``{"device": ..., "workload": ...}`` and those two)."""
    strategy, options = variant_plans.variant(name)
    if strategy not in LANE_READ or options.get("first_chunk_mb") \
            or options.get("chunk_split", "bytes") != "bytes":
        return LaneEffects(source=f"{name}: lane not read (LANE_READ says why)")

    def same_cell(row: dict) -> bool:
        return all(row.get(k) == cell.get(k) for k in ("machine", "run", "chunks"))

    extras, waits = [], []
    for row in rows:
        if any(row.get(k) != cell.get(k) for k in same) or same_cell(row):
            continue
        timeline = _timelines(row, name)
        if timeline:
            extra, wait = timeline_effects(timeline)
            extras += [extra] if extra is not None else []
            waits += [wait] if wait is not None else []
    if not extras and not waits:
        return LaneEffects()
    beside = statistics.median(extras) if extras else 0.0
    launch = statistics.median(waits) if waits else 0.0
    return LaneEffects(beside, launch, f"{name}'s collectives {beside * 1e3:+.0f} µs beside "
                       f"backward, launch {launch * 1e3:.0f} µs after ready ({len(extras)} "
                       "other cells' timelines)")
