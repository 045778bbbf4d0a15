"""The formula of every metric of the suite, once, beside the docstring the report quotes.

Each metric's name, unit and definition live with the rows that carry them
(impl/rows/metric_fields.py: ``STEP_FIELDS`` / ``ALLREDUCE_FIELDS``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np


def limit_ms(compute_only_ms, comm_only_ms):
    """limit = max(compute_only, comm_only): no overlap scheme can beat it.

    Works on floats and, element-wise, on numpy arrays (bootstrap resamples).
    """
    return np.maximum(compute_only_ms, comm_only_ms)


def efficiency(sequential_ms, step_ms, best_ms):
    """(sequential − step) / (sequential − best), NaN where sequential is already at best.

    ``best`` is the limit (overlap efficiency) or the schedule bound (bound efficiency). With
    nothing to hide the ratio is meaningless, so it is undefined rather than a huge or
    negative number. Element-wise on numpy arrays.
    """
    sequential_ms, step_ms, best_ms = (np.asarray(v, dtype=float)
                                       for v in (sequential_ms, step_ms, best_ms))
    headroom = sequential_ms - best_ms
    defined = headroom > 1e-9 * np.maximum(np.abs(sequential_ms), 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(defined, (sequential_ms - step_ms) / headroom, np.nan)


def overlap_efficiency(sequential_ms: float, step_ms: float, limit: float) -> float | None:
    """(sequential − step) / (sequential − limit); None when sequential is already at the limit."""
    value = float(efficiency(sequential_ms, step_ms, limit))
    return None if math.isnan(value) else value


def ideal_speedup(compute_to_comm):
    """Speedup over sequential of a perfect overlap: (compute + comm) / max(compute, comm).

    With r = compute/comm that is (r + 1) / max(r, 1): 2 at r = 1, and → 1 as either side
    dominates. It assumes sequential = compute + comm (no launch or synchronisation cost).
    """
    ratio = np.asarray(compute_to_comm, dtype=float)
    return (ratio + 1) / np.maximum(ratio, 1)


def schedule_bound_ms(ready_ms: Sequence[float], comm_ms: Sequence[float],
                      backward_end_ms: float, update_ms: float,
                      update_in_overlap: bool = False) -> float:
    """The step of a perfect overlap with zero interference, for this chunking.

    Chunk c becomes ready at ``ready_ms[c]`` (compute-only run) and its all-reduce alone takes
    ``comm_ms[c]`` (comm-only run). All-reduces of one process group run one after another,
    so chunk c's starts at max(ready_c, end of chunk c−1's). The step ends at
    max(backward end, last all-reduce end) plus the update, which needs every chunk.
    Tighter than max(compute, comm): a chunk cannot be sent before it exists, and the last
    chunk's all-reduce can never be hidden.

    With the update inside the overlap (``update_in_overlap``), each chunk's share of the
    update (update / K) follows its all-reduce on the communication side and the step ends at
    max(backward end, end of the last chunk's update): only the last share stays on the
    critical path, so such a step can beat compute-only, whose update comes after backward.
    """
    if len(ready_ms) != len(comm_ms):
        raise ValueError(f"{len(ready_ms)} ready times for {len(comm_ms)} chunk durations")
    share = update_ms / len(comm_ms) if update_in_overlap and comm_ms else 0.0
    comm_end = 0.0
    for ready, duration in zip(ready_ms, comm_ms):
        comm_end = max(ready, comm_end) + duration + share
    if update_in_overlap:
        return max(backward_end_ms, comm_end)
    return max(backward_end_ms, comm_end) + update_ms


def samples_per_s(world_size: int, batch: int, step_ms: float) -> float:
    """Samples per second over all ranks: world_size · batch / step time."""
    return world_size * batch / (step_ms / 1e3)


def algbw_gbps(size_bytes: int, time_ms: float) -> float:
    """algbw = size / time, in GB/s with GB = 1e9 bytes (nccl-tests)."""
    return size_bytes / (time_ms / 1e3) / 1e9


def busbw_gbps(size_bytes: int, time_ms: float, world_size: int) -> float:
    """busbw = algbw · 2(n−1)/n for all-reduce (nccl-tests' PERFORMANCE.md)."""
    return algbw_gbps(size_bytes, time_ms) * 2 * (world_size - 1) / world_size


def merge_intervals(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Union of half-open intervals as a sorted list of disjoint ones."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def covered_ms(intervals: Sequence[tuple[float, float]]) -> float:
    return sum(end - start for start, end in merge_intervals(intervals))


def overlap_ms(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> float:
    """Length of the time covered by both interval sets."""
    total, a_union, b_union = 0.0, merge_intervals(a), merge_intervals(b)
    i = j = 0
    while i < len(a_union) and j < len(b_union):
        start = max(a_union[i][0], b_union[j][0])
        end = min(a_union[i][1], b_union[j][1])
        total += max(0.0, end - start)
        if a_union[i][1] < b_union[j][1]:
            i += 1
        else:
            j += 1
    return total


def exposed_comm_ms(compute: Sequence[tuple[float, float]],
                    comm: Sequence[tuple[float, float]]) -> float:
    """Communication time not covered by compute: covered(comm) − overlap(compute, comm)."""
    return covered_ms(comm) - overlap_ms(compute, comm)


LOST_TIME_PARTS = ("exposed_comm_ms", "compute_slowdown_ms", "other_ms")


def lost_time_ms(compute: Sequence[tuple[float, float]], comm: Sequence[tuple[float, float]],
                 backward_ms: float, span_ms: float,
                 reference_compute: Sequence[tuple[float, float]], reference_backward_ms: float,
                 reference_span_ms: float) -> dict[str, float]:
    """Where step − compute-only goes, from the step's timeline and the compute-only run's.

    - exposed communication = covered(comm) − overlap(compute, comm): communication that no
      compute hides;
    - compute slowdown = the step's backward compute intervals − the compute-only run's,
      summed over chunks: compute slowed by communication running beside it (SMs, memory
      bandwidth and L2 shared with the all-reduce);
    - other = forward and update changes plus the change in idle time (neither compute nor
      communication running: launches, stream waits, synchronisation).

    The three parts sum to span − reference span, the timelines' own step lengths; comparing
    that sum with the clocks' step − compute-only checks the timelines.
    """
    exposed = exposed_comm_ms(compute, comm)
    slowdown = backward_ms - reference_backward_ms
    busy, reference_busy = covered_ms(compute), covered_ms(reference_compute)
    other_compute = (busy - backward_ms) - (reference_busy - reference_backward_ms)
    idle = (span_ms - busy - exposed) - (reference_span_ms - reference_busy)
    return {"exposed_comm_ms": exposed, "compute_slowdown_ms": slowdown,
            "other_ms": other_compute + idle}


def hidden_comm_fraction(
    compute: Sequence[tuple[float, float]], comm: Sequence[tuple[float, float]]
) -> float | None:
    """Communication time overlapped by compute / communication time (HTA's definition).

    None when the step communicated nothing (world size 1).
    """
    comm_time = covered_ms(comm)
    if comm_time == 0:
        return None
    return overlap_ms(compute, comm) / comm_time


def energy_counter_resolved(segments_j: Sequence[float]) -> bool:
    """Whether every metered segment of a variant read some energy. NVML's total-energy
    counter advances in steps (on one H100, about 64 J every 100 ms): a segment shorter than a
    step reads 0 or a whole step, so the variant's sum tells where the counter's steps fell, not
    what the variant drew."""
    return all(joules > 0 for joules in segments_j)


NO_ENERGY_COUNTER = "no NVML energy counter in this run"
COUNTER_DID_NOT_ADVANCE = ("NVML's energy counter did not advance in every segment of this "
                           "variant: its segments are shorter than the counter's step")


def energy_left_out(segments_j: Sequence[float] | None, no_counter: str | None = None
                    ) -> str | None:
    """Why a variant's energy per step is left out, in the words a table footnote quotes, or
    None where every metered segment read some energy (energy_counter_resolved). ``no_counter``:
    why the run had no NVML energy counter (the sampler's reason), where it said."""
    if not segments_j:
        return f"{NO_ENERGY_COUNTER} ({no_counter})" if no_counter else NO_ENERGY_COUNTER
    return None if energy_counter_resolved(segments_j) else COUNTER_DID_NOT_ADVANCE


def energy_per_step_j(energy_delta_j: float, steps: int) -> float:
    """NVML total-energy difference over the timed rounds divided by the steps they ran."""
    return energy_delta_j / steps


def samples_per_joule(world_size: int, batch: int, energy_per_step: float) -> float:
    """Samples processed per joule: world_size · batch / energy per step."""
    return world_size * batch / energy_per_step
