"""Pipeline schedules as plans: what each stage computes, in which order, and which messages
it posts between two computations. Pure functions; the executor (schedules.py) follows them.

GPipe: all m forwards, then all m backwards (micro-batches 0..m−1 both times).
1F1B: stage s runs min(p − s − 1, m) warm-up forwards, then one forward and one backward in
turn, then the remaining backwards (PipeDream-Flush, as Megatron-LM and
torch.distributed.pipelining's Schedule1F1B).

Activations go from stage s to s + 1 after a forward, gradients from s + 1 to s after a
backward. Between two computations a stage posts its messages as *groups*
(``batch_isend_irecv``, an NCCL group on GPU): the sends the finished computation produced,
then the receive the next one needs. NCCL's point-to-point rules, which gloo does not enforce:

1. A rank runs its groups one after another (one NCCL stream), and a send blocks until the
   peer has posted the receive, so a plan can deadlock.
2. Two peers must group their messages to each other the same way: a send and a receive go
   into one group on one side only if the peer puts their counterparts into one group too
   (NCCL calls differently grouped point-to-point undefined: NVIDIA/nccl#1279). The first
   group between two ranks also sets up NCCL's point-to-point connections for the directions
   it holds, and both sides exchange their set-up data in one message each: a group of a send
   and a receive facing a receive alone gives sizes that disagree, one side fails ("Message
   truncated") and the other connects to garbage and waits for ever. GPipe's plan used to
   pair, on stage s, the last forward's send with the first backward's receive while stage
   s + 1 posts them apart (it computes in between): the pipeline benchmark's first row hung
   on 2 H200 (results/h200x2/logs/20261123T0957-pipeline-bench-hung.log).

So a send and a receive with the same peer share a group only where the peer's counterparts
share one as well (1F1B's steady state: Megatron-LM's send_forward_recv_backward facing
send_backward_recv_forward; torch's Schedule1F1B fuses the same pairs); everything else is a
group of one message. ``check_deadlock_free`` replays every stage's groups under both rules
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


Groups = list[list[Op]]


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


def peer(op: Op, stage: int) -> int:
    """The other end of ``op`` as seen from ``stage``."""
    return op.message.dst if op.message.src == stage else op.message.src


def _slots(schedule: str, stage: int, stages: int, microbatches: int) -> list[list[Op]]:
    """Slot i: the messages posted before computation i (the sends of computation i − 1, then
    the receive of computation i); the last slot holds the last computation's sends."""
    plan = actions(schedule, stage, stages, microbatches)
    slots, previous = [], None
    for action in plan:
        slots.append((_sends(previous, stage, stages) if previous else [])
                     + _receive(action, stage, stages))
        previous = action
    slots.append(_sends(previous, stage, stages))
    return slots


def message_groups(schedule: str, stage: int, stages: int, microbatches: int) -> list[Groups]:
    """Per slot (before computation i; the last after the last computation), the groups this
    stage posts there, in order. A send and a receive with the same peer share a group only
    where the peer posts their counterparts in one slot too (rule 2 of the module's docstring)."""
    every = [_slots(schedule, s, stages, microbatches) for s in range(stages)]
    slot_of = {(s, op.message): i for s, slots in enumerate(every)
               for i, slot in enumerate(slots) for op in slot}
    result = []
    for slot in every[stage]:
        groups: Groups = []
        for op in slot:
            other = peer(op, stage)
            partner = next((g for g in groups if len(g) == 1 and peer(g[0], stage) == other
                            and g[0].send != op.send
                            and slot_of[other, g[0].message] == slot_of[other, op.message]),
                           None)
            if partner is None:
                groups.append([op])
            else:
                partner.append(op)
        result.append(groups)
    return result


def check_deadlock_free(schedule: str, stages: int, microbatches: int) -> None:
    """RuntimeError when the stages' groups of this plan break NCCL's rules (see ``replay``)."""
    groups = [[g for slot in message_groups(schedule, s, stages, microbatches) for g in slot]
              for s in range(stages)]
    replay(groups, f"{schedule} with {stages} stages and {microbatches} micro-batches")


def _toward(group: list[Op], stage: int, other: int, mirror: bool = False) -> frozenset:
    """The messages of ``group`` between ``stage`` and ``other``, as (sent by ``stage``?,
    message); ``mirror`` flips the direction, so the two sides of a pair compare equal."""
    return frozenset((op.send != mirror, op.message) for op in group if peer(op, stage) == other)


def _label(group: list[Op]) -> list[str]:
    return [f"{'send' if op.send else 'recv'} {op.message.kind} {op.message.microbatch}"
            for op in group]


def check_same_grouping(groups: list[Groups], what: str) -> None:
    """RuntimeError naming the pair of stages whose messages to each other are grouped
    differently on the two sides (rule 2)."""
    for stage, per_stage in enumerate(groups):
        for other in sorted({peer(op, stage) for g in per_stage for op in g}):
            if other < stage:
                continue
            mine = {_toward(g, stage, other) for g in per_stage} - {frozenset()}
            theirs = {_toward(g, other, stage, mirror=True) for g in groups[other]} - {frozenset()}
            if mine != theirs:
                apart = [Op(send, m) for send, m in sorted(min(mine - theirs, key=sorted),
                                                            key=lambda op: (not op[0], op[1]))]
                raise RuntimeError(
                    f"{what} groups messages differently on stages {stage} and {other}: stage "
                    f"{stage} posts {_label(apart)} as one group, stage {other} does not; NCCL "
                    "needs both sides of a pair to group their messages the same way")


def replay(groups: list[Groups], what: str) -> None:
    """Replay every stage's groups (in posting order) with NCCL's point-to-point rules.

    Each stage works through its groups in order (computation never blocks). A group is done
    only together with its counterparts: every peer it addresses must have, as its current
    group, the one holding the same messages between the two (checked to exist first,
    ``check_same_grouping``), and so on for their peers. RuntimeError names the waiting groups
    when no stage can move and some have not finished.
    """
    check_same_grouping(groups, what)
    groups = [[g for g in per_stage if g] for per_stage in groups]
    stages = len(groups)
    at = [0] * stages
    while any(at[s] < len(groups[s]) for s in range(stages)):
        current = {s: groups[s][at[s]] for s in range(stages) if at[s] < len(groups[s])}
        ready = set(current)
        changed = True
        while changed:  # drop a group whose counterpart is not current (or is itself dropped)
            changed = False
            for s in sorted(ready):
                if any(other not in ready or _toward(current[s], s, other)
                       != _toward(current[other], other, s, mirror=True)
                       for other in {peer(op, s) for op in current[s]}):
                    ready.discard(s)
                    changed = True
        if not ready:
            waiting = {s: _label(g) for s, g in current.items()}
            raise RuntimeError(f"{what} would deadlock; stages wait in {waiting}")
        for s in ready:
            at[s] += 1
