"""Cutting a workload's model into pipeline stages, one per rank of the pipeline's group.

An MLP of depth d over p stages: stage s holds layers [round(s·d/p), round((s+1)·d/p)), the
very ``nn.Linear`` objects of the model built by ``impl.workloads.build_model``, so a stage's
weights are the single-device model's weights of those layers and the two can be compared
after training.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from impl.pipeline.plans import check_counts
from impl.workloads import MLP, MLPConfig, WorkloadConfig, with_extra_compute


class MLPStage(nn.Module):
    """Layers [first, last) of an MLP: Linear then GELU, as ``impl.workloads.MLP``, with the
    stage's share of the model's extra compute (OVERLAP_EXTRA_COMPUTE, the gate's tests)."""

    def __init__(self, layers: list[nn.Linear], extra_compute: float = 0.0):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.extra_compute = extra_compute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.gelu(layer(x))
        return with_extra_compute(x, self.layers, self.extra_compute)


@dataclass
class Stage:
    module: nn.Module
    index: int
    count: int
    layers: range  # indices of the model's layers this stage holds

    @property
    def is_first(self) -> bool:
        return self.index == 0

    @property
    def is_last(self) -> bool:
        return self.index == self.count - 1

    @property
    def device(self) -> torch.device:
        return next(self.module.parameters()).device


def check_pipeline_workload(workload: WorkloadConfig, stages: int, microbatches: int) -> MLPConfig:
    """The workload as an MLPConfig, or ValueError naming what cannot be pipelined."""
    check_counts(stages, microbatches)
    if workload.kind != "mlp":
        raise ValueError(f"workload {workload.name!r} is a {workload.kind}: pipeline stages are "
                         "cut from MLP workloads only")
    if not 1 <= stages <= workload.depth:
        raise ValueError(f"stages={stages}: workload {workload.name!r} has {workload.depth} "
                         f"layers; choose 1 to {workload.depth} stages")
    if workload.batch % microbatches:
        raise ValueError(f"microbatches={microbatches} does not divide the batch of "
                         f"{workload.batch} rows of workload {workload.name!r}")
    return workload


def layer_range(depth: int, stages: int, index: int) -> range:
    return range(round(index * depth / stages), round((index + 1) * depth / stages))


def cut_stage(model: MLP, workload: MLPConfig, stages: int, index: int) -> Stage:
    """Stage ``index`` of ``stages``, sharing its parameters with ``model``."""
    check_pipeline_workload(workload, stages, 1)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < stages:
        raise ValueError(f"stage index {index!r}: a pipeline of {stages} stages has stages 0 to "
                         f"{stages - 1}")
    layers = layer_range(workload.depth, stages, index)
    return Stage(MLPStage([model.layers[i] for i in layers], workload.extra_compute), index,
                 stages, layers)
