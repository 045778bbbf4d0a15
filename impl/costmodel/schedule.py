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
  the SMs that backward's GEMM holds), which delays the collectives after it; the wait comes
  first and slows no compute: a kernel waiting for SMs runs none of its blocks, so backward
  runs ``slowdown`` times slower only for the collective's own duration (counted through the
  wait as well, the 4-rank threaded steps were predicted up to 11% slow);
- the update follows the last collective and backward, or, with the update inside the
  overlap, each chunk's share (update / K) follows its collective on the communication lane.

Times are on the compute-only step's clock (impl/costmodel/compute.py). The predicted step is the
measured compute-only step plus the delay the schedule adds to its end; with ``slowdown`` = 1
and no hand-off it equals ``impl.metrics.schedule_bound_ms`` (tests/costmodel/test_model.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    check_plan(plan)
    jobs = plan.collectives
    share_ms = profile.update_ms / len(jobs) if plan.update_in_overlap and jobs else 0.0
    run = Run(plan, release_times(profile, plan), profile.backward_end_ms, share_ms,
              t=profile.backward_start_ms, progress=profile.backward_start_ms)
    run.to_the_end()
    return outcome(profile, plan, run)


def check_plan(plan: Plan) -> None:
    """Work beside other work only slows down: a plan that says otherwise is refused."""
    if plan.slowdown < 1 or plan.beside_ms < 0 or plan.update_beside_ms < 0:
        raise ValueError(f"slowdown={plan.slowdown}, beside_ms={plan.beside_ms}, "
                         f"update_beside_ms={plan.update_beside_ms}: work beside other work "
                         "cannot speed up; allowed slowdown ≥ 1, beside_ms and "
                         "update_beside_ms ≥ 0")


def release_times(profile: ReadyProfile, plan: Plan) -> list[float]:
    """When each collective's data is final, on the compute-only clock, within backward (at
    its end for the sequential strategy); they must come in that order."""
    begin, backward_end = profile.backward_start_ms, profile.backward_end_ms
    releases = [backward_end if plan.after_backward else min(max(c.ready_ms, begin), backward_end)
                for c in plan.collectives]
    if any(b < a for a, b in zip(releases, releases[1:])):
        raise ValueError("collectives must be given in the order their data becomes final")
    return releases


@dataclass
class Run:
    """The schedule as it runs, event to event: the wall clock, backward's progress on the
    compute-only clock, and the communication lane (what runs on it, what comes next)."""

    plan: Plan
    releases: list[float]  # compute-only clock: when collective i's data is final
    backward_end: float  # compute-only clock
    share_ms: float  # one chunk's update share, with the update inside the overlap
    t: float  # wall clock
    progress: float  # how far backward has got, on the compute-only clock
    released_at: list[float] = field(default_factory=list)  # wall time collective i was final
    intervals: list[tuple[str, str, int | None, float, float]] = field(default_factory=list)
    lane_free: float = float("-inf")
    # (what, index, remaining, start, the part of remaining that runs: the rest is its wait)
    running: tuple[str, int, float, float, float] | None = None
    following: int = 0  # the next collective to launch
    pending_update: int | None = None  # the chunk whose update share runs next
    backward_done: float | None = None  # wall time backward ended

    def to_the_end(self) -> None:
        """Runs event to event until backward has ended and the lane is empty."""
        if self.progress >= self.backward_end:
            self.backward_done = self.t
        while True:
            self.release()
            computing = self.progress < self.backward_end - EPSILON_MS
            if not computing and self.backward_done is None:
                self.backward_done = self.t
            wait = self.launch(computing) if self.running is None else None
            # backward runs slower only beside a running collective: not beside an update
            # share, nor while the collective still waits for SMs (module docstring)
            slowed = computing and self.running is not None and self.running[0] == "comm" \
                and self.running[2] <= self.running[4] + EPSILON_MS
            rate = 1.0 / self.plan.slowdown if slowed else 1.0
            dt = self.next_event_ms(computing, rate, wait)
            if dt is None:
                break
            self.advance(dt, computing, rate)
        if self.backward_done is None:
            self.backward_done = self.t

    def release(self) -> None:
        """Marks the wall time of every collective whose data backward has made final."""
        jobs, done = self.plan.collectives, self.released_at
        while len(done) < len(jobs) and self.progress >= self.releases[len(done)] - EPSILON_MS:
            done.append(self.t)

    def launch(self, computing: bool) -> float | None:
        """Starts the next job on the idle lane: a pending update share, else the next released
        collective once its hand-off is over. The time to wait for that hand-off, if any."""
        plan = self.plan
        if self.pending_update is not None:
            self.running = ("update", self.pending_update,
                            self.share_ms + (plan.update_beside_ms if computing else 0.0), self.t,
                            self.share_ms)
            self.pending_update = None
        elif self.following < len(self.released_at):
            earliest = max(self.released_at[self.following], self.lane_free) + plan.handoff_ms
            if self.t < earliest - EPSILON_MS:
                return earliest - self.t
            alone = plan.collectives[self.following].duration_ms
            self.running = ("comm", self.following,
                            alone + (plan.beside_ms if computing else 0.0), self.t, alone)
        return None

    def next_event_ms(self, computing: bool, rate: float, wait: float | None) -> float | None:
        """Wall time to the next event: backward reaches the next release or its end, the
        running job ends, or a hand-off is over. None when nothing is left to happen."""
        steps = []
        if computing:
            target = self.backward_end
            if len(self.released_at) < len(self.plan.collectives):
                target = min(target, self.releases[len(self.released_at)])
            steps.append((target - self.progress) / rate)
        if self.running is not None:
            steps.append(self.running[2])
            if self.running[2] > self.running[4] + EPSILON_MS:  # its wait ends
                steps.append(self.running[2] - self.running[4])
        if wait is not None:
            steps.append(wait)
        return max(min(steps), 0.0) if steps else None

    def advance(self, dt: float, computing: bool, rate: float) -> None:
        """Moves the clock by ``dt``: backward progresses at ``rate``, and the running job,
        if it ends, is recorded and frees the lane (a collective's end releases its update
        share, with the update inside the overlap)."""
        self.t += dt
        if computing:
            self.progress = min(self.backward_end, self.progress + dt * rate)
        if self.running is None:
            return
        what, index, remaining, start, runs = self.running
        remaining -= dt
        self.running = (what, index, remaining, start, runs)
        if remaining > EPSILON_MS:
            return
        self.intervals.append(("comm" if what == "comm" else "compute",
                               f"{'all-reduce' if what == 'comm' else 'update'} c{index}",
                               index, start, self.t))
        self.running, self.lane_free = None, self.t
        if what == "comm":
            self.following += 1
            if self.plan.update_in_overlap:
                self.pending_update = index


def outcome(profile: ReadyProfile, plan: Plan, run: Run) -> Outcome:
    """The step once the lane is empty: the update after it (unless it ran in the overlap),
    and how much of the communication compute hid."""
    backward_done, intervals = run.backward_done, list(run.intervals)
    end = max(backward_done, run.lane_free)
    if not plan.update_in_overlap or not plan.collectives:
        intervals.append(("compute", "update", None, end, end + profile.update_ms))
        end += profile.update_ms
    compute = [(profile.backward_start_ms, backward_done)]
    comm = [(a, b) for lane, _, _, a, b in intervals if lane == "comm"]
    covered = metrics.covered_ms(comm)
    return Outcome(step_ms=profile.compute_only_ms + end - profile.end_ms, comm_ms=covered,
                   exposed_comm_ms=metrics.exposed_comm_ms(compute, comm),
                   compute_slowdown_ms=backward_done - profile.backward_end_ms,
                   backward_end_ms=backward_done,
                   intervals=(("compute", "forward+backward", None, 0.0, backward_done),
                              *intervals))
