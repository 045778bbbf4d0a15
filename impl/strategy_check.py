"""Correctness: every strategy must end with the sequential strategy's weights.

A fast wrong answer is a failure: the suite runs this before timing and stores the error
beside every timing row; the tests assert it.
"""

from __future__ import annotations

import gc
import math

import torch
import torch.distributed as dist

from impl.strategies import StrategyOptions, build_strategy
from impl.workloads import WorkloadConfig, build_model, make_batch


def train(strategy: str, workload: WorkloadConfig, group: dist.ProcessGroup | None,
          device: torch.device, options: StrategyOptions, steps: int = 5,
          seed: int = 0) -> list[torch.Tensor]:
    """Weights after ``steps`` steps of ``strategy`` from ``seed``, on this rank.

    The model's own weight tensors, not copies; its gradients and the strategy (buffers,
    buckets) are released before this returns, so a check of a model that fills much of the
    GPU holds one set of weights per finished training (impl/memory.py plans on it).
    """
    rank = dist.get_rank() if dist.is_initialized() else 0
    model = build_model(workload, device, seed)
    runner = build_strategy(strategy, model, workload, group, options)
    try:
        for step in range(steps):
            runner.step(make_batch(workload, device, seed, rank, step))
        runner.finish_timeline()
    finally:
        runner.close()
    weights = [p.detach() for p in model.parameters()]
    for param in model.parameters():
        param.grad = None
    del runner, model
    gc.collect()  # strategies hold reference cycles (hooks, threads): free their buffers now
    return weights


def max_abs_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """Largest |a − b| over every pair of tensors (``b``'s moved to ``a``'s device one by one)."""
    return max((x.float() - y.to(x.device).float()).abs().max().item() for x, y in zip(a, b))


def errors_vs_sequential(candidates: dict[str, tuple[str, StrategyOptions]],
                         workload: WorkloadConfig, group: dist.ProcessGroup | None,
                         device: torch.device, steps: int = 3, seed: int = 0) -> dict[str, float]:
    """Largest |w_candidate − w_sequential| after ``steps`` steps, over every rank of ``group``.

    ``candidates`` maps a name to (strategy, options); sequential runs once, at the first
    candidate's chunking (the chunking changes only the order of its all-reduces). Each error
    also folds in how far this rank's weights are from rank 0's, so ranks that drifted apart
    (a broken all-reduce) cannot pass.
    """
    first_options = next(iter(candidates.values()))[1]
    sequential = train("sequential", workload, group, device, first_options, steps, seed)
    if device.type == "cuda":  # on the host while the candidates train: one model at a time
        sequential = [w.to("cpu") for w in sequential]
    errors = {}
    for name, (strategy, options) in candidates.items():
        candidate = train(strategy, workload, group, device, options, steps, seed)
        error = torch.tensor(max_abs_diff(candidate, sequential), device=device)
        if group is not None and dist.get_world_size(group) > 1:
            for weight in candidate:  # one tensor's copy at a time
                reference = weight.clone()
                dist.broadcast(reference, src=dist.get_global_rank(group, 0), group=group)
                error = torch.maximum(error, (weight.float() - reference.float()).abs().max())
            dist.all_reduce(error, op=dist.ReduceOp.MAX, group=group)
        errors[name] = error.item()
        del candidate
    return errors


def max_abs_err_vs_sequential(strategy: str, workload: WorkloadConfig,
                              group: dist.ProcessGroup | None, device: torch.device,
                              options: StrategyOptions, steps: int = 3, seed: int = 0) -> float:
    """``errors_vs_sequential`` for one strategy."""
    return errors_vs_sequential({strategy: (strategy, options)}, workload, group, device, steps,
                                seed)[strategy]


def weight_tolerance(dtype: torch.dtype, max_abs_weight: float) -> float:
    """How far a strategy's weights may be from sequential's and still count as equal.

    fp32: 1e-5 · max|w| + 1e-6 (reduction-order rounding of the all-reduce). bf16/fp16: two
    units in the last place of the largest weight: a different summation order in the
    all-reduce can round an update to the neighbouring representable value.
    """
    if dtype == torch.float32:
        return 1e-5 * max_abs_weight + 1e-6
    mantissa_bits = {torch.bfloat16: 7, torch.float16: 10}[dtype]
    exponent = math.floor(math.log2(max_abs_weight)) if max_abs_weight > 0 else -126
    return 2.0 * 2.0 ** (exponent - mantissa_bits)
