"""Numerical faults and concurrency: NaN on one rank is caught, long runs stay exact."""

from __future__ import annotations

import math

import pytest
import torch

from impl.finite import NonFiniteGradient
from impl.presets import preset
from impl.strategies import StrategyOptions, build_strategy
from impl.strategy_check import max_abs_diff, train
from impl.workloads import build_model, make_batch
from tests.multirank import run_ranks

POISONED_RANK, POISONED_STEP = 1, 2


def poisoned_run(context, strategy_name: str) -> dict:
    """Train 4 steps; rank 1's batch at step 2 holds a NaN. Report what each rank saw."""
    workload = preset("mlp_tiny")
    group = context.group(context.world_size)
    model = build_model(workload, context.device)
    strategy = build_strategy(strategy_name, model, workload, group, StrategyOptions(chunks=4))
    before = None
    try:
        for step in range(4):
            batch = make_batch(workload, context.device, rank=context.rank, step=step)
            if (context.rank, step) == (POISONED_RANK, POISONED_STEP):
                batch.inputs[3, 7] = math.nan
            if step == POISONED_STEP:
                before = [p.detach().clone() for p in model.parameters()]
            strategy.step(batch)
    except NonFiniteGradient as error:
        after = [p.detach().clone() for p in model.parameters()]
        return {"error": str(error), "step": step, "unchanged": max_abs_diff(before, after) == 0}
    finally:
        strategy.close()
    return {"error": None}


@pytest.mark.parametrize("strategy", ["sequential", "chunked", "threaded", "ddp"])
def test_nan_on_one_rank_is_reported_and_not_averaged(strategy):
    results = run_ranks(poisoned_run, 2, strategy)
    for rank, seen in enumerate(results):
        assert seen["error"] is not None, f"rank {rank} did not notice the NaN"
        assert seen["step"] == POISONED_STEP
        assert seen["unchanged"], f"rank {rank} updated its weights with a NaN gradient"
        assert seen["error"].startswith("step 2 (counting from 0): non-finite gradients")
        assert "the update was skipped on every rank" in seen["error"]
        if strategy == "ddp":  # DDP averages inside backward: the rank cannot be known
            assert "after DDP's averaging in layers.0.weight, layers.1.weight" in seen["error"]
        else:  # parameters in the order backward finalised them
            assert "before averaging on rank 1: layers.7.weight, layers.6.weight" in seen["error"]
            assert "rank 0:" not in seen["error"]


def stress(context) -> dict:
    """200 steps in four segments with different K on one model, vs 200 sequential steps."""
    workload = preset("mlp_tiny")
    group = context.group(context.world_size)
    reference = train("sequential", workload, group, context.device, StrategyOptions(lr=0.02),
                      steps=200)
    errors = {}
    for name in ("chunked", "threaded"):
        model = build_model(workload, context.device)
        step = 0
        for chunks in (7, 1, 64, 13):
            strategy = build_strategy(name, model, workload, group,
                                      StrategyOptions(chunks=chunks, lr=0.02))
            for _ in range(50):
                strategy.step(make_batch(workload, context.device, rank=context.rank, step=step))
                step += 1
            strategy.close()
        errors[name] = max_abs_diff([p.detach() for p in model.parameters()], reference)
    return errors


def test_stress_changing_chunk_counts_keeps_sequential_weights():
    for rank, errors in enumerate(run_ranks(stress, 2)):
        for name, error in errors.items():
            assert error <= 1e-5, (rank, name, error)


def test_chunk_count_rebinding_keeps_gradients_views():
    workload = preset("mlp_tiny")
    model = build_model(workload, torch.device("cpu"))
    first = build_strategy("chunked", model, workload, None, StrategyOptions(chunks=3))
    first.close()
    second = build_strategy("chunked", model, workload, None, StrategyOptions(chunks=9))
    buffer = second.flat.buffer
    for param in model.parameters():
        assert param.grad.data_ptr() >= buffer.data_ptr()
        assert param.grad.data_ptr() < buffer.data_ptr() + buffer.numel() * buffer.element_size()
    second.close()
