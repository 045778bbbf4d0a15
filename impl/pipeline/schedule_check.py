"""Correctness: a pipeline schedule must end with the weights of single-device training.

Single-device training is the whole batch through the whole model with the same SGD step
(the ``sequential`` strategy without a group); every stage compares its layers with the same
layers there. Every stage reads the same batch each step (rank 0's of ``make_batch``).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from impl.pipeline import PipelineOptions, build_schedule, cut_stage
from impl.strategies import StrategyOptions, build_strategy
from impl.strategy_check import max_abs_diff
from impl.workloads import MLPConfig, build_model, make_batch


def single_device_weights(workload: MLPConfig, device: torch.device, lr: float, steps: int,
                          seed: int = 0) -> list[torch.Tensor]:
    model = build_model(workload, device, seed)
    runner = build_strategy("sequential", model, workload, None, StrategyOptions(lr=lr))
    try:
        for step in range(steps):
            runner.step(make_batch(workload, device, seed, 0, step))
    finally:
        runner.close()
    return [layer.weight.detach().clone() for layer in model.layers]


def pipeline_weights(schedule: str, workload: MLPConfig, group: dist.ProcessGroup | None,
                     device: torch.device, options: PipelineOptions, steps: int,
                     seed: int = 0) -> tuple[range, list[torch.Tensor]]:
    """This rank's stage after ``steps`` steps: its layer indices and their weights."""
    stages = dist.get_world_size(group) if group is not None else 1
    index = dist.get_rank(group) if group is not None else 0
    stage = cut_stage(build_model(workload, device, seed), workload, stages, index)
    runner = build_schedule(schedule, stage, workload, group, options)
    try:
        for step in range(steps):
            runner.step(make_batch(workload, device, seed, 0, step))
        runner.finish_timeline()
    finally:
        runner.close()
    return stage.layers, [layer.weight.detach().clone() for layer in stage.module.layers]


def max_abs_err_vs_single(schedule: str, workload: MLPConfig, group: dist.ProcessGroup | None,
                          device: torch.device, options: PipelineOptions, steps: int = 3,
                          seed: int = 0, reference: list[torch.Tensor] | None = None) -> float:
    """Largest |w_pipeline − w_single_device| after ``steps`` steps, over every stage.

    ``reference``: single_device_weights of the same workload, lr, steps and seed, when the
    caller already has them (one reference serves every schedule and m).
    """
    layers, weights = pipeline_weights(schedule, workload, group, device, options, steps, seed)
    if reference is None:
        reference = single_device_weights(workload, device, options.lr, steps, seed)
    error = torch.tensor(max_abs_diff(weights, [reference[i] for i in layers]), device=device)
    if group is not None and dist.get_world_size(group) > 1:
        dist.all_reduce(error, op=dist.ReduceOp.MAX, group=group)
    return error.item()
