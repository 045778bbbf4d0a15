"""Pipeline parallelism: one stage per rank, GPipe and 1F1B, and torch's own as the peer.

    stage = cut_stage(build_model(workload, device), workload, stages=p, index=rank)
    schedule = build_schedule("1f1b", stage, workload, group, PipelineOptions(microbatches=8))
    schedule.step(make_batch(workload, device))      # every rank, the same batch

A new schedule is one class filling ``PipelineSchedule`` plus one line in SCHEDULES.
"""

from __future__ import annotations

import torch.distributed as dist

from impl.pipeline.base import PipelineOptions, PipelineSchedule
from impl.pipeline.peer import TorchGPipe, TorchOneFOneB
from impl.pipeline.schedules import GPipeSchedule, OneFOneBSchedule
from impl.pipeline.stages import Stage, check_pipeline_workload, cut_stage
from impl.workloads import MLPConfig

SCHEDULES: dict[str, type[PipelineSchedule]] = {
    "gpipe": GPipeSchedule,
    "1f1b": OneFOneBSchedule,
    "torch-gpipe": TorchGPipe,
    "torch-1f1b": TorchOneFOneB,
}


def build_schedule(name: str, stage: Stage, workload: MLPConfig,
                   group: dist.ProcessGroup | None, options: PipelineOptions) -> PipelineSchedule:
    if name not in SCHEDULES:
        raise ValueError(f"unknown pipeline schedule {name!r}; choose one of {list(SCHEDULES)}")
    return SCHEDULES[name](stage, workload, group, options)


__all__ = ["SCHEDULES", "PipelineOptions", "PipelineSchedule", "Stage", "build_schedule",
           "check_pipeline_workload", "cut_stage"]
