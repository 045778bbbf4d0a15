"""Pipeline schedules as plans: what each stage computes, in which order, and which messages
it posts between two computations. Pure functions; the executor (schedules.py) follows them.

GPipe: all m forwards, then all m backwards (micro-batches 0..m−1 both times).
1F1B: stage s runs min(p − s − 1, m) warm-up forwards, then one forward and one backward in
turn, then the remaining backwards (PipeDream-Flush, as Megatron-LM and
torch.distributed.pipelining's Schedule1F1B).

Activations go from stage s to s + 1 after a forward, gradients from s + 1 to s after a
backward. Between two computations a stage posts one *group* (``batch_isend_irecv``, an NCCL
group on GPU): the sends the finished computation produced and the receive the next one needs
(Megatron-LM's send_forward_recv_backward / send_backward_recv_forward are such groups).
NCCL point-to-point blocks until both sides are posted and runs a rank's groups in order, so
a plan can deadlock; ``check_deadlock_free`` replays every stage's groups under those rules,
and the executor refuses a plan that fails it.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULE_NAMES = ("gpipe", "1f1b")
MICROBATCH_COUNTS = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class Action:
    kind: str  # "F" (forward) or "B" (backward)
    microbatch: int


@dataclass(frozen=True)
class Message:
    kind: str  # "activation" (stage s to s + 1) or "gradient" (stage s + 1 to s)
    microbatch: int
    src: int
    dst: int


@dataclass(frozen=True)
class Op:
    send: bool  # True: this stage sends ``message``; False: it receives it
    message: Message


def check_counts(stages: int, microbatches: int) -> None:
    """ValueError naming the value when the stage count or m is not an integer ≥ 1: every
    pipeline entry point checks them first (a zero would divide later)."""
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
        raise ValueError(f"stages={stages!r}: choose an integer ≥ 1")
    if isinstance(microbatches, bool) or not isinstance(microbatches, int) or microbatches < 1:
        raise ValueError(f"microbatches={microbatches!r}: choose an integer ≥ 1 (the suite runs "
                         f"{', '.join(map(str, MICROBATCH_COUNTS))})")


def check_plan_args(schedule: str, stages: int, microbatches: int) -> None:
    """ValueError naming the value when the schedule, stage count or m is not allowed."""
    if schedule not in SCHEDULE_NAMES:
        raise ValueError(f"unknown pipeline schedule {schedule!r}; choose one of "
                         f"{list(SCHEDULE_NAMES)}")
    check_counts(stages, microbatches)


def actions(schedule: str, stage: int, stages: int, microbatches: int) -> list[Action]:
    """The computations of ``stage`` in one step, in order."""
    check_plan_args(schedule, stages, microbatches)
    m = microbatches
    forwards = [Action("F", i) for i in range(m)]
    backwards = [Action("B", i) for i in range(m)]
    if schedule == "gpipe":
        return forwards + backwards
    warmup = min(stages - stage - 1, m)
    plan = forwards[:warmup]
    for i in range(m - warmup):  # steady state: one forward, then the oldest backward
        plan += [forwards[warmup + i], backwards[i]]
    return plan + backwards[m - warmup:]


def _sends(action: Action, stage: int, stages: int) -> list[Op]:
    if action.kind == "F" and stage < stages - 1:
        return [Op(True, Message("activation", action.microbatch, stage, stage + 1))]
    if action.kind == "B" and stage > 0:
        return [Op(True, Message("gradient", action.microbatch, stage, stage - 1))]
    return []


def _receive(action: Action, stage: int, stages: int) -> list[Op]:
    if action.kind == "F" and stage > 0:
        return [Op(False, Message("activation", action.microbatch, stage - 1, stage))]
    if action.kind == "B" and stage < stages - 1:
        return [Op(False, Message("gradient", action.microbatch, stage + 1, stage))]
    return []


def message_groups(schedule: str, stage: int, stages: int, microbatches: int) -> list[list[Op]]:
    """Group i is posted before computation i; the last group (index len(actions)) after the
    last computation. Group i holds the sends of computation i − 1 and the receive of i."""
    plan = actions(schedule, stage, stages, microbatches)
    groups, previous = [], None
    for action in plan:
        sends = _sends(previous, stage, stages) if previous else []
        groups.append(sends + _receive(action, stage, stages))
        previous = action
    groups.append(_sends(previous, stage, stages))
    return groups


def check_deadlock_free(schedule: str, stages: int, microbatches: int) -> None:
    """RuntimeError when the stages' groups of this plan can deadlock (see ``replay``)."""
    groups = [message_groups(schedule, s, stages, microbatches) for s in range(stages)]
    replay(groups, f"{schedule} with {stages} stages and {microbatches} micro-batches")


def replay(groups: list[list[list[Op]]], what: str) -> None:
    """Replay every stage's groups with NCCL's blocking point-to-point rules.

    Each stage works through its groups in order (computation never blocks); a message
    completes when its send and its receive are both in the current groups of their stages;
    a group ends when all of its messages have completed. RuntimeError names the waiting
    groups when no stage can move and some have not finished.
    """
    groups = [[g for g in per_stage if g] for per_stage in groups]
    stages = len(groups)
    at, done = [0] * stages, set()
    while any(at[s] < len(groups[s]) for s in range(stages)):
        current = {s: groups[s][at[s]] for s in range(stages) if at[s] < len(groups[s])}
        posted = {(op.send, op.message) for group in current.values() for op in group}
        moved = False
        for op in (op for group in current.values() for op in group):
            if op.message not in done and (not op.send, op.message) in posted:
                done.add(op.message)
                moved = True
        for s, group in current.items():
            if all(op.message in done for op in group):
                at[s] += 1
                moved = True
        if not moved:
            waiting = {s: [f"{'send' if op.send else 'recv'} {op.message.kind} "
                           f"{op.message.microbatch}" for op in g] for s, g in current.items()}
            raise RuntimeError(f"{what} would deadlock; stages wait in {waiting}")
