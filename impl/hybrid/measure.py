"""Where the fine-grained hybrid's step goes: how much host work the GPU's compute hides.

From one step's timeline (impl/hybrid/offload.py's lanes: ``compute`` for the GPU's forward and
backward, ``comm`` for the copies to and from the host, ``host`` for host Adam):

- host work = the union of the copies and host Adam;
- the step's end = the end of its last interval, for the trainers that wait for their update;
  with the delayed update (``update_delay`` 1), the last compute interval or copy back to the
  device (what the next forward waits for), and host work after it (this step's Adam, still
  running) is ``carried_ms``: it runs beside the next step's forward, and if it delayed that
  step the step time shows it;
- exposed Adam = time inside the step where host Adam runs and no GPU compute does;
- exposed copies = time inside the step where only copies run (neither compute nor Adam);
- hidden host fraction = 1 − (exposed Adam + exposed copies) / host work;
- tail = the step's end − backward's end: what the update of the last gradient costs after it.

Host Adam's rate counts ADAM_BYTES_PER_PARAMETER per parameter over its busy time (the union
of its intervals), to be read against the machine's memory bandwidth.
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.hybrid.host_adam import ADAM_BYTES_PER_PARAMETER
from impl.metrics import covered_ms
from impl.rows.kinds import HYBRID_STEP
from impl.timeline import Timeline

Span = tuple[float, float]
ROW = HYBRID_STEP.names  # the figures are the hybrid_step row's fields of these names
HOST_WORK_FIGURES = (ROW.hidden_host_fraction, ROW.exposed_adam_ms, ROW.exposed_copies_ms,
                     ROW.carried_ms, ROW.tail_ms, ROW.host_adam_ms, ROW.host_adam_gbps)


def clipped(intervals: Sequence[Span], end_ms: float) -> list[Span]:
    """The parts of ``intervals`` before ``end_ms``."""
    return [(start, min(end, end_ms)) for start, end in intervals if start < end_ms]


def step_end_ms(timeline: Timeline, update_delay: int) -> float:
    if not update_delay:
        return timeline.span_ms()
    back = [i.end_ms for i in timeline.intervals
            if i.lane == "comm" and i.label.startswith("to device")]
    return max([*back, *(end for _, end in timeline.lane("compute"))])


def host_work_split(timeline: Timeline, parameters: int,
                    update_delay: int = 0) -> dict[str, float | None]:
    """The module's figures for one step (HOST_WORK_FIGURES); None where the step has no host
    work."""
    compute = timeline.lane("compute")
    adam, copies = timeline.lane("host"), timeline.lane("comm")
    step_end = step_end_ms(timeline, update_delay)
    host_work = covered_ms([*adam, *copies])
    if host_work == 0:
        return dict.fromkeys(HOST_WORK_FIGURES)
    busy = covered_ms(compute)
    inside_adam, inside_copies = clipped(adam, step_end), clipped(copies, step_end)
    with_adam = covered_ms([*compute, *inside_adam])
    exposed_adam = with_adam - busy
    exposed_copies = covered_ms([*compute, *inside_adam, *inside_copies]) - with_adam
    adam_ms = covered_ms(adam)
    return {
        ROW.hidden_host_fraction: 1 - (exposed_adam + exposed_copies) / host_work,
        ROW.exposed_adam_ms: exposed_adam, ROW.exposed_copies_ms: exposed_copies,
        ROW.carried_ms: host_work - covered_ms([*inside_adam, *inside_copies]),
        ROW.tail_ms: step_end - timeline.backward_end_ms(),
        ROW.host_adam_ms: adam_ms,
        ROW.host_adam_gbps: ADAM_BYTES_PER_PARAMETER * parameters / (adam_ms * 1e6)
        if adam_ms > 0 else None,
    }
