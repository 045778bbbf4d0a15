"""Choosing K: predict the step time of each chunk count from a cost model, then recommend.

The model has three measured inputs, all taken on the machine it advises:

- the fabric: an α–β model of all-reduce time, t(b) = α + β·b per all-reduce (α: the latency
  and launch cost of one all-reduce, β: time per byte), fitted by least squares on the
  comm-only time of the whole gradient buffer cut into each candidate K (K·α + β·bytes), so
  it sees back-to-back launches as the strategy makes them;
- the compute: when each gradient becomes final, from one compute-only step cut into the
  finest chunks (``ready_profile``): chunk c of a K-way cut is ready when its last element is;
- the interference: by how much backward slows while an all-reduce runs beside it
  (``interference_rate``, suite/bench_interference.py's slowdown − 1).

``predict_step_ms`` runs the schedule of ``impl.metrics.schedule_bound_ms`` with modelled
all-reduce durations and adds the interference on the communication that overlaps backward.
Horovod tunes its fusion buffer by Bayesian optimisation over measured runs; DDP has no
tuner; this model needs one compute-only step, one all-reduce sweep and one interference
figure, and its predictions are measured against the real steps (suite/bench_autotune.py).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from impl import metrics
from impl.gradients import chunk_bounds


@dataclass(frozen=True)
class Fabric:
    """t(b) = alpha_ms + beta_ms_per_byte · b: one all-reduce of b bytes per rank."""

    alpha_ms: float
    beta_ms_per_byte: float

    def all_reduce_ms(self, size_bytes: float) -> float:
        return self.alpha_ms + self.beta_ms_per_byte * size_bytes

    @property
    def bandwidth_gbps(self) -> float:
        """1/β as algbw in GB/s (nccl-tests' algbw: bytes per rank over time)."""
        return 1e-6 / self.beta_ms_per_byte if self.beta_ms_per_byte > 0 else float("inf")


def fit_fabric(launches: Sequence[int], total_bytes: Sequence[float],
               times_ms: Sequence[float]) -> Fabric:
    """Least-squares α and β from measurements of ``launches[i]`` all-reduces moving
    ``total_bytes[i]`` bytes per rank in ``times_ms[i]``: time = launches·α + bytes·β.

    Both are kept ≥ 0 (a negative one would only mean the measurements cannot see it).
    """
    design = np.column_stack([np.asarray(launches, float), np.asarray(total_bytes, float)])
    times = np.asarray(times_ms, float)
    if np.linalg.matrix_rank(design) < 2:
        raise ValueError("fitting α and β needs measurements at two or more chunk counts "
                         f"(launches {sorted(set(launches))})")
    (alpha, beta), *_ = np.linalg.lstsq(design, times, rcond=None)
    if alpha < 0:
        alpha, beta = 0.0, float(times @ design[:, 1] / (design[:, 1] @ design[:, 1]))
    if beta < 0:
        alpha, beta = float(times @ design[:, 0] / (design[:, 0] @ design[:, 0])), 0.0
    return Fabric(float(alpha), float(beta))


@dataclass(frozen=True)
class ReadyProfile:
    """When each part of the flat gradient buffer is final, from a compute-only step.

    ``ends[i]`` is the element offset where fine chunk i ends and ``ready_ms[i]`` when it was
    ready; ``backward_end_ms`` and ``update_ms`` are that step's.
    """

    ends: tuple[int, ...]
    ready_ms: tuple[float, ...]
    backward_end_ms: float
    update_ms: float
    element_size: int

    @property
    def total_elements(self) -> int:
        return self.ends[-1]

    def ready_at(self, element_end: int) -> float:
        """When the elements up to ``element_end`` are all final."""
        index = bisect.bisect_left(self.ends, element_end)
        return self.ready_ms[min(index, len(self.ready_ms) - 1)]


def equal_chunk_ends(total: int, chunks: int) -> list[int]:
    """Where K equal chunks of ``total`` elements end: impl/gradients.py's ``bytes`` split."""
    return chunk_bounds([(0, total)], chunks)[1:]


def predict_step_ms(profile: ReadyProfile, fabric: Fabric, chunks: int,
                    interference_rate: float = 0.0) -> dict:
    """Predicted step time of an overlapping strategy at K = ``chunks``.

    The schedule of ``metrics.schedule_bound_ms`` with chunk c's all-reduce lasting
    t(bytes_c) from the α–β fit and starting at max(ready_c, end of c−1's); then backward is
    stretched by ``interference_rate`` × the all-reduce time that overlaps it.
    """
    ends = equal_chunk_ends(profile.total_elements, chunks)
    starts = [0, *ends[:-1]]
    ready = [profile.ready_at(end) for end in ends]
    durations = [fabric.all_reduce_ms((e - s) * profile.element_size)
                 for s, e in zip(starts, ends)]
    overlapped, comm_end = 0.0, 0.0
    for ready_c, duration in zip(ready, durations):
        start = max(ready_c, comm_end)
        comm_end = start + duration
        overlapped += max(0.0, min(comm_end, profile.backward_end_ms) - start)
    slowed_backward_end = profile.backward_end_ms + interference_rate * overlapped
    bound = metrics.schedule_bound_ms(ready, durations, profile.backward_end_ms,
                                      profile.update_ms)
    # The bound plus the interference: max(slowed backward end, last all-reduce end) + update.
    step = max(slowed_backward_end, comm_end) + profile.update_ms
    return {"chunks": chunks, "predicted_ms": step, "bound_ms": bound,
            "comm_ms": sum(durations), "overlapped_comm_ms": overlapped}


def recommend(predictions: Sequence[dict]) -> dict:
    """The prediction with the smallest step; ties go to the smaller K (fewer launches)."""
    return min(predictions, key=lambda p: (round(p["predicted_ms"], 9), p["chunks"]))
