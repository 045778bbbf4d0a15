"""Every metric of the suite: its definition (quoted by the report) and its formula, once.

The benchmark's ``extra_info``, the terminal summary and the report all iterate over
``STEP_FIELDS`` / ``ALLREDUCE_FIELDS``, so they cannot disagree on names, units or meaning.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    name: str
    unit: str
    definition: str
    higher_is_better: bool | None = None


STEP_FIELDS: tuple[Field, ...] = (
    Field("step_ms", "ms", "Median time of one training step (forward, backward, gradient "
          "averaging, SGD update): CUDA events on GPU, perf_counter on CPU.", False),
    Field("samples_per_s", "1/s", "Samples per second over all ranks: "
          "world_size · batch / step time.", True),
    Field("compute_only_ms", "ms", "Median step time of the same workload on one rank with "
          "communication switched off.", False),
    Field("comm_only_ms", "ms", "Median time to all-reduce the same gradient chunks, launched "
          "back to back, with no compute.", False),
    Field("sequential_ms", "ms", "Median step time of the sequential strategy (whole backward, "
          "then the all-reduce of every chunk) at the same chunking.", False),
    Field("limit_ms", "ms", "limit = max(compute_only, comm_only): no overlap scheme can be "
          "faster.", False),
    Field("overlap_efficiency", "", "overlap efficiency = (sequential − step) / "
          "(sequential − limit): 0 is no gain over sequential, 1 is perfect overlap.", True),
    Field("hidden_comm_fraction", "", "Communication time overlapped by compute / communication "
          "time, from the step's timeline (Holistic Trace Analysis's definition).", True),
    Field("max_abs_err_vs_sequential", "", "Largest absolute weight difference to the "
          "sequential strategy after the correctness check's steps, over all ranks.", False),
    Field("energy_per_step_j", "J", "NVML total-energy counter difference over the timed "
          "rounds, summed over the GPUs of the run, divided by the steps.", False),
    Field("samples_per_joule", "1/J", "world_size · batch / energy per step.", True),
)

ALLREDUCE_FIELDS: tuple[Field, ...] = (
    Field("size_bytes", "B", "Message size per rank.", None),
    Field("time_ms", "ms", "Median time of one all-reduce (CUDA events on GPU).", False),
    Field("algbw_gbps", "GB/s", "algbw = size / time (nccl-tests' definition, GB = 1e9 B).",
          True),
    Field("busbw_gbps", "GB/s", "busbw = algbw · 2(n−1)/n for all-reduce (nccl-tests' "
          "definition): comparable across rank counts.", True),
    Field("wrong_elements", "", "Elements differing from the expected sum after the timed "
          "rounds (nccl-tests' #wrong).", False),
)


def limit_ms(compute_only_ms: float, comm_only_ms: float) -> float:
    """limit = max(compute_only, comm_only): no overlap scheme can beat it."""
    return max(compute_only_ms, comm_only_ms)


def overlap_efficiency(sequential_ms: float, step_ms: float, limit: float) -> float | None:
    """(sequential − step) / (sequential − limit); None when sequential is already at the limit.

    With nothing to hide (sequential ≤ limit) the ratio is meaningless, so it is left
    undefined rather than reported as a huge or negative number.
    """
    headroom = sequential_ms - limit
    if headroom <= 1e-9 * max(sequential_ms, 1e-12):
        return None
    return (sequential_ms - step_ms) / headroom


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


def energy_per_step_j(energy_delta_j: float, steps: int) -> float:
    """NVML total-energy difference over the timed rounds divided by the steps they ran."""
    return energy_delta_j / steps


def samples_per_joule(world_size: int, batch: int, energy_per_step: float) -> float:
    """Samples processed per joule: world_size · batch / energy per step."""
    return world_size * batch / energy_per_step
