"""The compute side of the model: when each part of the gradient buffer is final.

A ``ReadyProfile`` comes from one compute-only step (the suite records its timeline in every
overlap cell, with each chunk's backward interval): chunk c of the flat gradient buffer
(impl/gradients.py: parameters in the order backward produces them) is final when its
interval ends. Times are on the compute-only step's clock, with nothing communicating.

Where a strategy cuts the buffer differently (DDP's buckets of whole parameters, a 1 MB
first chunk), a range of elements is final when the parameter holding its last element is,
and a parameter is final no later than the first chunk it overlaps: chunks are cut without
regard to parameters, so a chunk ends when its last parameter does (``ready_of``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import lru_cache

from impl.chunking import chunk_bounds
from impl.rows.kinds import STEP_TIMELINE


@dataclass(frozen=True)
class ReadyProfile:
    """When each part of the flat gradient buffer is final, from a compute-only step.

    ``ends[i]`` is the element offset where chunk i ends and ``ready_ms[i]`` when it was
    ready; ``backward_end_ms`` and ``update_ms`` are that step's. ``backward_start_ms`` is
    where backward began (the end of forward) and ``step_ms`` the compute-only step time the
    prediction starts from (the median over rounds; None: the timeline's own end).
    """

    ends: tuple[int, ...]
    ready_ms: tuple[float, ...]
    backward_end_ms: float
    update_ms: float
    element_size: int
    backward_start_ms: float = 0.0
    step_ms: float | None = None

    @property
    def total_elements(self) -> int:
        return self.ends[-1]

    @property
    def total_bytes(self) -> int:
        return self.total_elements * self.element_size

    @property
    def end_ms(self) -> float:
        """The compute-only step's end on its own clock: backward, then the update."""
        return self.backward_end_ms + self.update_ms

    @property
    def compute_only_ms(self) -> float:
        return self.step_ms if self.step_ms is not None else self.end_ms

    def ready_at(self, element_end: int) -> float:
        """When the chunk holding element ``element_end`` − 1 is final (all of it)."""
        index = bisect.bisect_left(self.ends, element_end)
        return self.ready_ms[min(index, len(self.ready_ms) - 1)]

    def ready_of(self, element_end: int,
                 spans: tuple[tuple[int, int], ...] | None = None) -> float:
        """When elements [0, element_end) are all final: when the parameter holding element
        ``element_end`` − 1 is, which is no later than the first chunk that parameter
        overlaps (``spans``: the parameters' element ranges). Without spans, its chunk's."""
        if not spans:
            return self.ready_at(element_end)
        index = bisect.bisect_right([start for start, _ in spans], element_end - 1) - 1
        first_element = spans[max(index, 0)][0]
        return self.ready_at(first_element + 1)


def profile_from_timeline(timeline: dict, ends: list[int] | tuple[int, ...], element_size: int,
                          step_ms: float | None = None) -> ReadyProfile:
    """A ReadyProfile from a compute-only step's timeline (impl.timeline.Timeline.to_json) and
    the element offsets where its chunks end."""
    compute = [i for i in timeline[STEP_TIMELINE.intervals] if i["lane"] == "compute"]
    backward = sorted((i for i in compute if i["label"].startswith("backward")
                       and i["chunk"] is not None), key=lambda i: i["chunk"])
    if len(backward) != len(ends):
        raise ValueError(f"the compute-only timeline has {len(backward)} backward chunks for "
                         f"{len(ends)} chunk ends")
    forward = [i["end_ms"] for i in compute if i["label"] == "forward"]
    update = [i for i in compute if i["label"].startswith("update")]
    backward_end = max(i["end_ms"] for i in backward)
    update_ms = sum(i["end_ms"] - i["start_ms"] for i in update)
    # Time between backward's end and the update's start (a launch) belongs to the step too.
    gap = min((i["start_ms"] for i in update), default=backward_end) - backward_end
    return ReadyProfile(tuple(ends), tuple(i["end_ms"] for i in backward), backward_end,
                        update_ms + max(gap, 0.0), element_size,
                        backward_start_ms=min(forward, default=0.0), step_ms=step_ms)


def known_workload(workload: object) -> bool:
    """Whether ``workload`` names a model preset of impl/presets.py (whose layout the model
    reads); a results file may hold others (a newer suite's, or a renamed one)."""
    from impl.presets import MODELS

    return isinstance(workload, str) and workload in MODELS


@lru_cache(maxsize=32)
def parameter_layout(workload: str) -> tuple[tuple[tuple[int, int], ...], int]:
    """(element range of each parameter in the flat gradient buffer, bytes per element) of a
    preset, read from its model on the meta device (no memory): impl/gradients.py's order."""
    import torch

    from impl.presets import preset
    from impl.workloads import build_model

    # Shapes only, as the overlap benchmark reads them (suite/bench_overlap.py, cells): the
    # first normal_ on the meta device imports torch._dynamo, once per process (2–4 s on the
    # 2-core machine).
    model = build_model(preset(workload), torch.device("meta"))
    params = [p for p in reversed(list(model.parameters())) if p.requires_grad]
    spans, offset = [], 0
    for param in params:
        spans.append((offset, offset + param.numel()))
        offset += param.numel()
    return tuple(spans), params[0].element_size()


@lru_cache(maxsize=32)
def backward_kernels(workload: str) -> int:
    """How many GEMMs a backward of preset ``workload`` runs: two per weight matrix (the
    gradient of its input and of its weight), read from its model on the meta device."""
    import torch

    from impl.presets import preset
    from impl.workloads import build_model

    model = build_model(preset(workload), torch.device("meta"))
    return 2 * sum(1 for p in model.parameters() if p.requires_grad and p.dim() >= 2)


def backward_kernel_ms(profile: ReadyProfile, workload: str) -> float:
    """The mean duration of one of backward's GEMMs in a compute-only step: the time a kernel
    launched beside backward waits behind the one running (impl/costmodel/lanes.py)."""
    return (profile.backward_end_ms - profile.backward_start_ms) / backward_kernels(workload)


def chunk_ends(spans: tuple[tuple[int, int], ...], chunks: int, split: str = "bytes",
               first_chunk_elements: int | None = None) -> list[int]:
    """Where each of the K chunks ends: impl/chunking.py's ``chunk_bounds``."""
    return chunk_bounds(list(spans), chunks, split, first_chunk_elements)[1:]


def equal_chunk_ends(total: int, chunks: int) -> list[int]:
    """Where K equal chunks of ``total`` elements end: impl/gradients.py's ``bytes`` split."""
    return chunk_bounds([(0, total)], chunks)[1:]


def bucket_ends(spans: tuple[tuple[int, int], ...], element_size: int,
                cap_bytes: float) -> list[int]:
    """Where DDP's buckets end: whole parameters in backward order, a bucket closed once it
    holds ``cap_bytes`` or more (torch's ``_compute_bucket_assignment_by_size``; the suite
    always sets the cap, so the first bucket has the same cap as the others)."""
    ends, size = [], 0
    for start, end in spans:
        size += (end - start) * element_size
        if size >= cap_bytes:
            ends.append(end)
            size = 0
    if not ends or ends[-1] != spans[-1][1]:
        ends.append(spans[-1][1])
    return ends
