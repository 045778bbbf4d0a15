"""What ran when during one step: compute and communication intervals per chunk.

Marks are CUDA events on GPU (recorded on the stream that does the work) and
``perf_counter`` readings on CPU or for host-side work (MPI, gloo callbacks). Where a GPU
timeline mixes both (MPI), ``begin`` synchronises once so they share an origin; everything is
resolved to milliseconds after the step has finished, never inside it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from impl import metrics
from impl.rows.kinds import STEP_TIMELINE


class LateMark:
    """A host time filled in later, e.g. by a completion callback on another thread."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: float | None = None

    def set_now(self, *_: object) -> None:
        self.value = time.perf_counter()


Mark = torch.cuda.Event | float | LateMark


@dataclass(frozen=True)
class Interval:
    lane: str  # "compute" or "comm"
    label: str
    chunk: int | None
    start_ms: float
    end_ms: float


@dataclass
class Timeline:
    intervals: list[Interval] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lane(self, lane: str) -> list[tuple[float, float]]:
        return [(i.start_ms, i.end_ms) for i in self.intervals if i.lane == lane]

    def hidden_comm_fraction(self) -> float | None:
        return metrics.hidden_comm_fraction(self.lane("compute"), self.lane("comm"))

    def _labelled(self, prefix: str) -> list[Interval]:
        return [i for i in self.intervals if i.lane == "compute" and i.label.startswith(prefix)]

    def span_ms(self) -> float:
        """The step's length as the timeline sees it: the end of its last interval."""
        return max((i.end_ms for i in self.intervals), default=0.0)

    def backward_ms(self) -> float:
        return sum(i.end_ms - i.start_ms for i in self._labelled("backward"))

    def backward_end_ms(self) -> float:
        return max((i.end_ms for i in self._labelled("backward")), default=0.0)

    def update_ms(self) -> float:
        return sum(i.end_ms - i.start_ms for i in self._labelled("update"))

    def ready_ms(self) -> list[float]:
        """When each chunk's gradients were final (end of its backward interval), by chunk."""
        ready = {i.chunk: i.end_ms for i in self._labelled("backward") if i.chunk is not None}
        return [ready[c] for c in sorted(ready)]

    def comm_ms(self) -> list[float]:
        """How long each chunk's communication took, by chunk."""
        durations = {i.chunk: i.end_ms - i.start_ms for i in self.intervals
                     if i.lane == "comm" and i.chunk is not None}
        return [durations[c] for c in sorted(durations)]

    def lost_time_vs(self, compute_only: Timeline) -> dict[str, float]:
        """``metrics.lost_time_ms`` of this step against the compute-only run's step."""
        return metrics.lost_time_ms(self.lane("compute"), self.lane("comm"), self.backward_ms(),
                                    self.span_ms(), compute_only.lane("compute"),
                                    compute_only.backward_ms(), compute_only.span_ms())

    @classmethod
    def from_json(cls, data: dict) -> Timeline:
        return cls([Interval(**i) for i in data[STEP_TIMELINE.intervals]],
                   list(data.get(STEP_TIMELINE.notes, [])))

    def to_json(self) -> dict:
        return {STEP_TIMELINE.intervals: [asdict(i) for i in self.intervals],
                STEP_TIMELINE.notes: list(self.notes)}


class TimelineRecorder:
    def __init__(self, device: torch.device, host_marks: bool = False):
        self.cuda = device.type == "cuda"
        # Host readings beside CUDA events (MPI on GPU) need a common origin: a sync per step.
        self.host_marks = host_marks
        self._raw: list[tuple[str, str, int | None, Mark, Mark]] = []
        self.notes: list[str] = []

    def mark(self, stream: torch.cuda.Stream | None = None) -> Mark:
        """A device-side mark on ``stream`` (the current stream by default) or a host time."""
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record(stream)
        return event

    def begin(self) -> None:
        # A new list, not a cleared one: work of the previous step that ends during this one
        # (through a sink) stays in the previous step's timeline.
        self._raw = []
        if self.cuda and self.host_marks:
            torch.cuda.synchronize()  # CPU-GPU sync point: host and device marks share t=0
        self._host_origin = time.perf_counter()
        self._device_origin = self.mark() if self.cuda else None

    def add(self, lane: str, label: str, chunk: int | None, start: Mark, end: Mark) -> None:
        self._raw.append((lane, label, chunk, start, end))

    def sink(self) -> Callable[[str, str, int | None, Mark, Mark], None]:
        """``add`` for the current step only: for work that may end after the next step has
        begun (the delayed update's host Adam), so that it is drawn with the step it
        belongs to, ending after that step's other intervals."""
        raw = self._raw
        return lambda lane, label, chunk, start, end: raw.append((lane, label, chunk, start,
                                                                  end))

    def _ms(self, mark: Mark) -> float:
        if isinstance(mark, LateMark):
            if mark.value is None:
                raise RuntimeError("a completion mark was never set: the step did not wait "
                                   "for all its communication")
            mark = mark.value
        if isinstance(mark, float):
            return (mark - self._host_origin) * 1e3
        return self._device_origin.elapsed_time(mark)

    def resolve(self) -> Timeline:
        """Intervals in ms from the step's start. Call only after the step has synchronised.

        Collectives of one process group run one after another (one NCCL stream, one gloo
        queue), so a communication interval starts no earlier than the previous one ended:
        its mark may have been taken while it still waited in the queue.
        """
        intervals, previous_comm_end = [], float("-inf")
        for lane, label, chunk, start, end in self._raw:
            start_ms, end_ms = self._ms(start), self._ms(end)
            if lane == "comm":
                start_ms = min(max(start_ms, previous_comm_end), end_ms)
                previous_comm_end = end_ms
            intervals.append(Interval(lane, label, chunk, start_ms, end_ms))
        return Timeline(intervals, list(self.notes))


class TimedSteps:
    """What a training-step class with a timeline shares: ``step`` runs ``_step`` between the
    recorder's ``begin`` and the step count, ``finish_timeline`` resolves the last step.

    The class sets ``device``, ``recorder`` (a TimelineRecorder), ``timeline`` and
    ``steps_done``; ``check(batch)`` may reject a batch before anything runs.
    """

    device: torch.device
    recorder: TimelineRecorder
    timeline: Timeline
    steps_done: int

    def check(self, batch) -> None:
        """Raise ValueError for a batch this step cannot take (default: accept it)."""

    def step(self, batch):
        self.check(batch)
        self.recorder.begin()
        result = self._step(batch)
        self.steps_done += 1
        return result

    def _step(self, batch):
        raise NotImplementedError

    def finish_timeline(self) -> Timeline:
        """Resolve the last step's marks; synchronises, so call it outside timed regions."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.timeline = self.recorder.resolve()
        return self.timeline
