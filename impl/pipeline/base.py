"""The one contract every pipeline schedule fills.

Built from (stage, workload config, the pipeline's process group, options); ``step(batch)``
runs the step's micro-batches through this rank's stage (forwards, backwards, the messages to
the neighbouring stages), accumulates their gradients and applies the SGD update, and leaves
``timeline`` describing what this stage did when. Every rank of the group holds one stage and
calls ``step`` with the same batch: the first stage reads its inputs, the last its targets.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
import torch.distributed as dist

from impl.metrics import covered_ms
from impl.pipeline.stages import Stage, check_pipeline_workload
from impl.timeline import TimedSteps, Timeline, TimelineRecorder
from impl.workloads import Batch, MLPConfig, check_batch


@dataclass(frozen=True)
class PipelineOptions:
    microbatches: int = 4
    lr: float = 1e-3
    recompute: bool = False  # keep only each micro-batch's input; redo its forward in backward


class PipelineSchedule(TimedSteps, ABC):
    name: str = ""

    @classmethod
    def unsupported(cls, stages: int, microbatches: int) -> str | None:
        """Why this schedule cannot run ``microbatches`` over ``stages``, or None."""
        return None

    def __init__(self, stage: Stage, workload: MLPConfig, group: dist.ProcessGroup | None,
                 options: PipelineOptions):
        check_pipeline_workload(workload, stage.count, options.microbatches)
        if reason := self.unsupported(stage.count, options.microbatches):
            raise ValueError(reason)
        group_size = dist.get_world_size(group) if group is not None else 1
        if group_size != stage.count:
            raise ValueError(f"a pipeline of {stage.count} stages needs a group of "
                             f"{stage.count} ranks, got {group_size}")
        self.stage, self.workload, self.group, self.options = stage, workload, group, options
        self.device = stage.device
        self.recorder = TimelineRecorder(self.device)
        self.timeline = Timeline()
        self.steps_done = 0

    def check(self, batch: Batch) -> None:
        check_batch(self.workload, batch)

    @abstractmethod
    def _step(self, batch: Batch) -> None: ...

    def busy_ms(self) -> float:
        """Union of the last resolved step's compute intervals on this stage."""
        return covered_ms(self.timeline.lane("compute"))

    def close(self) -> None:
        """Release what the schedule holds; it cannot step afterwards."""

    def peer_rank(self, stage_index: int) -> int:
        """Global rank of the group's ``stage_index``-th rank (what send/recv address)."""
        if self.group is None:
            return stage_index
        return dist.get_global_rank(self.group, stage_index)

    @torch.no_grad()
    def _sgd_update(self) -> None:
        """w -= lr · g: gradients already hold the whole batch's mean (losses scaled by 1/m)."""
        start = self.recorder.mark()
        params = [p for p in self.stage.module.parameters() if p.grad is not None]
        torch._foreach_add_(params, [p.grad for p in params], alpha=-self.options.lr)
        self.recorder.add("compute", "update", None, start, self.recorder.mark())
