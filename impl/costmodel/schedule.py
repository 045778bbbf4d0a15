"""The step of every strategy, from the compute-only step, the fabric and the interference.

One event-driven schedule serves every strategy (``simulate``); a strategy is a ``Plan``:
which collectives it issues (the K chunks, DDP's buckets, a 1 MB first chunk...), when each
may start, and what else it puts on the communication lane:

- collectives of one process group run one after another (one NCCL stream, one gloo queue),
  so collective j starts at max(its data is final, collective j−1 ended) — plus the host's
  hand-off where a thread waits for each chunk (``handoff_ms``); the sequential strategy
  releases every collective at backward's end;
- while a collective runs beside backward, backward runs ``slowdown`` times slower (the
  interference, impl/costmodel/interference.py): compute progress is integrated piecewise, so a
  slowed backward delays later chunks' readiness, and the collectives after them;
- a collective launched while backward computes lasts ``beside_ms`` longer than alone, an
  update share ``update_beside_ms`` (impl/costmodel/lanes.py: the lane's kernels wait for
  the SMs that backward's GEMM holds), which delays the collectives after it;
- the update follows the last collective and backward, or, with the update inside the
  overlap, each chunk's share (update / K) follows its collective on the communication lane.

Times are on the compute-only step's clock (impl/costmodel/compute.py). The predicted step is the
measured compute-only step plus the delay the schedule adds to its end; with ``slowdown`` = 1
and no hand-off it equals ``impl.metrics.schedule_bound_ms`` (tests/costmodel/test_model.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from impl import metrics
from impl.costmodel.compute import ReadyProfile

EPSILON_MS = 1e-9


@dataclass(frozen=True)
class Collective:
    ready_ms: float  # compute-only clock: when its data is final
    duration_ms: float  # alone, from the fabric
    size_bytes: float = 0.0


@dataclass(frozen=True)
class Plan:
    """What a strategy does in one step, as the model sees it."""

    collectives: tuple[Collective, ...]
    after_backward: bool = False  # sequential: every collective waits for backward's end
    update_in_overlap: bool = False
    slowdown: float = 1.0  # compute runs this many times slower beside a collective
    handoff_ms: float = 0.0  # host time from a chunk's readiness (or the previous end) to launch
    beside_ms: float = 0.0  # a collective launched beside backward lasts this much longer
    update_beside_ms: float = 0.0  # and an update share on the communication lane


@dataclass(frozen=True)
class Outcome:
    """A predicted step: its time and how its communication sat beside compute."""

    step_ms: float
    comm_ms: float  # time some collective was running
    exposed_comm_ms: float  # of which no compute ran beside it
    compute_slowdown_ms: float  # how much later backward ended than in the compute-only step
    backward_end_ms: float
    intervals: tuple[tuple[str, str, int | None, float, float], ...]

    @property
    def hidden_fraction(self) -> float | None:
        """Communication overlapped by compute / communication (HTA's definition)."""
        return None if self.comm_ms <= 0 else 1 - self.exposed_comm_ms / self.comm_ms


def simulate(profile: ReadyProfile, plan: Plan) -> Outcome:
    """The step ``plan`` makes of the compute-only step ``profile`` (module docstring)."""
    if plan.slowdown < 1 or plan.beside_ms < 0 or plan.update_beside_ms < 0:
        raise ValueError(f"slowdown={plan.slowdown}, beside_ms={plan.beside_ms}, "
                         f"update_beside_ms={plan.update_beside_ms}: work beside other work "
                         "cannot speed up; allowed slowdown ≥ 1, beside_ms and "
                         "update_beside_ms ≥ 0")
    begin, backward_end = profile.backward_start_ms, profile.backward_end_ms
    jobs = plan.collectives
    releases = [backward_end if plan.after_backward else min(max(c.ready_ms, begin),
                                                             backward_end) for c in jobs]
    if any(b < a for a, b in zip(releases, releases[1:])):
        raise ValueError("collectives must be given in the order their data becomes final")
    share = profile.update_ms / len(jobs) if plan.update_in_overlap and jobs else 0.0
    released_at: list[float] = []  # wall time at which collective i's data was final
    intervals, lane_free = [], float("-inf")
    running: tuple[str, int, float, float] | None = None  # (what, index, remaining, start)
    t = progress = begin  # wall clock, and how far backward has got on the compute-only clock
    backward_done = begin if progress >= backward_end else None
    following, pending_update = 0, None
    while True:
        while len(released_at) < len(jobs) and progress >= releases[len(released_at)] - \
                EPSILON_MS:
            released_at.append(t)
        computing = progress < backward_end - EPSILON_MS
        if not computing and backward_done is None:
            backward_done = t
        wait = None
        if running is None:
            if pending_update is not None:
                running = ("update", pending_update,
                           share + (plan.update_beside_ms if computing else 0.0), t)
                pending_update = None
            elif following < len(released_at):
                earliest = max(released_at[following], lane_free) + plan.handoff_ms
                if t >= earliest - EPSILON_MS:
                    running = ("comm", following, jobs[following].duration_ms
                               + (plan.beside_ms if computing else 0.0), t)
                else:
                    wait = earliest - t
        rate = 1.0 / plan.slowdown if computing and running and running[0] == "comm" else 1.0
        steps = []
        if computing:
            target = backward_end
            if len(released_at) < len(jobs):
                target = min(target, releases[len(released_at)])
            steps.append((target - progress) / rate)
        if running is not None:
            steps.append(running[2])
        if wait is not None:
            steps.append(wait)
        if not steps:
            break
        dt = max(min(steps), 0.0)
        t += dt
        if computing:
            progress = min(backward_end, progress + dt * rate)
        if running is not None:
            what, index, remaining, start = running
            remaining -= dt
            running = (what, index, remaining, start)
            if remaining <= EPSILON_MS:
                intervals.append(("comm" if what == "comm" else "compute",
                                  f"{'all-reduce' if what == 'comm' else 'update'} c{index}",
                                  index, start, t))
                running, lane_free = None, t
                if what == "comm":
                    following += 1
                    if plan.update_in_overlap:
                        pending_update = index
    backward_done = t if backward_done is None else backward_done
    end = max(backward_done, lane_free)
    if not plan.update_in_overlap or not jobs:
        intervals.append(("compute", "update", None, end, end + profile.update_ms))
        end += profile.update_ms
    compute = [(profile.backward_start_ms, backward_done)]
    comm = [(a, b) for lane, _, _, a, b in intervals if lane == "comm"]
    covered = metrics.covered_ms(comm)
    return Outcome(step_ms=profile.compute_only_ms + end - profile.end_ms, comm_ms=covered,
                   exposed_comm_ms=metrics.exposed_comm_ms(compute, comm),
                   compute_slowdown_ms=backward_done - backward_end,
                   backward_end_ms=backward_done,
                   intervals=(("compute", "forward+backward", None, 0.0, backward_done),
                              *intervals))
