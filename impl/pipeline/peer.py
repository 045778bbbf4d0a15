"""The peer: torch.distributed.pipelining's ScheduleGPipe and Schedule1F1B on the same stage.

Same split, same micro-batches, same loss (the library divides each micro-batch's gradient
by m, ``scale_grads``), same SGD update after the library's step. The library's step is one
opaque call, so its timeline holds that call and the update: no per-micro-batch intervals,
and no bubble is measured for it.
"""

from __future__ import annotations

import torch.distributed as dist

from impl.capabilities import missing_pipelining
from impl.pipeline.base import PipelineOptions, PipelineSchedule
from impl.pipeline.stages import Stage
from impl.workloads import Batch, MLPConfig, loss_fn


class TorchPipeliningSchedule(PipelineSchedule):
    library_schedule = ""

    def __init__(self, stage: Stage, workload: MLPConfig, group: dist.ProcessGroup | None,
                 options: PipelineOptions):
        super().__init__(stage, workload, group, options)
        if reason := missing_pipelining():
            raise RuntimeError(reason)
        if options.recompute:
            raise ValueError(f"{self.name}: recompute is an option of this suite's GPipe only")
        from torch.distributed import pipelining

        self.library_stage = pipelining.PipelineStage(
            submodule=stage.module, stage_index=stage.index, num_stages=stage.count,
            device=self.device, group=group)
        schedule_class = getattr(pipelining, self.library_schedule)
        self.schedule = schedule_class(
            self.library_stage, n_microbatches=options.microbatches,
            loss_fn=lambda output, target: loss_fn(workload, output, target))
        self.recorder.notes.append(f"{self.library_schedule} of torch.distributed.pipelining: "
                                   "one interval per step, no bubble measured")

    def _step(self, batch: Batch) -> None:
        for param in self.stage.module.parameters():
            param.grad = None
        start = self.recorder.mark()
        inputs = (batch.inputs,) if self.stage.is_first else ()
        target = batch.targets if self.stage.is_last else None
        self.schedule.step(*inputs, target=target)
        self.recorder.add("compute", f"{self.library_schedule}.step", None, start,
                          self.recorder.mark())
        self._sgd_update()

    def busy_ms(self) -> None:
        return None


class TorchGPipe(TorchPipeliningSchedule):
    name, library_schedule = "torch-gpipe", "ScheduleGPipe"


class TorchOneFOneB(TorchPipeliningSchedule):
    name, library_schedule = "torch-1f1b", "Schedule1F1B"

    @classmethod
    def unsupported(cls, stages: int, microbatches: int) -> str | None:
        if microbatches < stages:
            return (f"torch.distributed.pipelining's Schedule1F1B needs at least as many "
                    f"micro-batches as stages (m={microbatches}, p={stages})")
        return None
