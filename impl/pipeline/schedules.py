"""GPipe and 1F1B, this suite's own: a stage follows its plan (plans.py), computing one
micro-batch at a time and posting, between two computations, the plan's groups of
point-to-point messages in order, each with ``batch_isend_irecv`` (an NCCL group on GPU,
gloo on CPU). ``posted`` keeps the groups of the last step as they were posted, so a test can
replay what really ran (plans.replay).

A group that holds a receive is waited on before the computation that needs it: on GPU a
stream wait (the host runs on), on CPU a blocking wait. A group of sends only is waited on at
the end of the step, so a stage does not stall until its neighbour has posted the receive.
Micro-batch losses are scaled by 1/m, so the accumulated gradient is the whole batch's mean,
as in single-device training.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from impl.pipeline.base import PipelineOptions, PipelineSchedule
from impl.pipeline.plans import Action, Groups, Op, actions, check_deadlock_free, message_groups
from impl.pipeline.stages import Stage
from impl.workloads import Batch, MLPConfig, loss_fn


class PlannedSchedule(PipelineSchedule):
    plan_name = ""

    def __init__(self, stage: Stage, workload: MLPConfig, group: dist.ProcessGroup | None,
                 options: PipelineOptions):
        super().__init__(stage, workload, group, options)
        m = options.microbatches
        check_deadlock_free(self.plan_name, stage.count, m)
        self.actions = actions(self.plan_name, stage.index, stage.count, m)
        self.groups = message_groups(self.plan_name, stage.index, stage.count, m)
        dtype = next(stage.module.parameters()).dtype
        self._buffer_spec = ((workload.batch // m, workload.width), dtype)
        if stage.count > 1 and self.device.type == "cuda":
            if torch.cuda.current_device() != self.device.index:
                # NCCL groups run on the current device's streams (torch's batch_isend_irecv
                # documentation): a stage on another GPU would hang in its first group.
                raise RuntimeError(f"stage {stage.index} lives on {self.device} but the current "
                                   f"CUDA device is {torch.cuda.current_device()}: call "
                                   "torch.cuda.set_device first")
            # NCCL: batch_isend_irecv must not be the group's first operation unless every
            # rank of the group joins that very call; a collective creates the communicator.
            # (Its point-to-point connections are made by the first group between two stages,
            # which the plan posts alike on both sides: plans.py, rule 2.)
            dist.all_reduce(torch.zeros(1, device=self.device), group=group)

    def _step(self, batch: Batch) -> None:
        m = self.options.microbatches
        self._inputs = list(batch.inputs.chunk(m)) if self.stage.is_first else [None] * m
        self._targets = batch.targets.chunk(m) if self.stage.is_last else None
        self._outputs: list[torch.Tensor | None] = [None] * m
        self._received: dict[tuple[str, int], torch.Tensor] = {}
        self._sending: dict[tuple[str, int], torch.Tensor] = {}
        self._unwaited: list = []
        self.posted: Groups = []
        for param in self.stage.module.parameters():
            param.grad = None
        for groups, action in zip(self.groups, self.actions):
            self._post(groups)
            self._compute(action)
        self._post(self.groups[-1])
        for work, _ in self._unwaited:  # sends only: their tensors must outlive the transfer
            work.wait()
        self._sgd_update()

    def _post(self, groups: Groups) -> None:
        for group in groups:
            self._post_group(group)
            self.posted.append(group)

    def _post_group(self, group: list[Op]) -> None:
        start = self.recorder.mark()
        shape, dtype = self._buffer_spec
        ops = []
        for op in group:
            key = (op.message.kind, op.message.microbatch)
            if op.send:
                ops.append(dist.P2POp(dist.isend, self._sending.pop(key),
                                      self.peer_rank(op.message.dst), self.group))
            else:
                buffer = torch.empty(shape, dtype=dtype, device=self.device)
                self._received[key] = buffer
                ops.append(dist.P2POp(dist.irecv, buffer, self.peer_rank(op.message.src),
                                      self.group))
        works = dist.batch_isend_irecv(ops)
        if any(not op.send for op in group):
            for work in works:
                work.wait()
            label = " + ".join(f"{'send' if op.send else 'recv'} {op.message.kind} "
                               f"{op.message.microbatch}" for op in group)
            self.recorder.add("comm", label, None, start, self.recorder.mark())
        else:  # sends only: no interval, their end is not observable without a wait
            self._unwaited += [(work, [op.tensor for op in ops]) for work in works]

    def _compute(self, action: Action) -> None:
        i = action.microbatch
        start = self.recorder.mark()
        if action.kind == "F":
            self._forward(i)
            label = f"forward {i}"
        else:
            self._backward(i)
            label = f"backward {i}"
        self.recorder.add("compute", label, i, start, self.recorder.mark())

    def _stage_input(self, i: int) -> torch.Tensor:
        if self.stage.is_first:
            return self._inputs[i]
        return self._received.pop(("activation", i)).requires_grad_()

    def _forward(self, i: int) -> None:
        x = self._stage_input(i)
        self._inputs[i] = x
        if self.options.recompute:
            with torch.no_grad():
                output = self.stage.module(x)
        else:
            output = self.stage.module(x)
        if self.stage.is_last:
            self._outputs[i] = output
        else:
            self._sending[("activation", i)] = output.detach()
            self._outputs[i] = output

    def _backward(self, i: int) -> None:
        x, output = self._inputs[i], self._outputs[i]
        if self.options.recompute:  # the forward again, this time keeping its activations
            output = self.stage.module(x)
        if self.stage.is_last:
            loss = loss_fn(self.workload, output, self._targets[i]) / self.options.microbatches
            loss.backward()
        else:
            output.backward(self._received.pop(("gradient", i)))
        if not self.stage.is_first:
            self._sending[("gradient", i)] = x.grad
        self._inputs[i] = self._outputs[i] = None  # this micro-batch's activations are done


class GPipeSchedule(PlannedSchedule):
    name = plan_name = "gpipe"


class OneFOneBSchedule(PlannedSchedule):
    name = plan_name = "1f1b"
