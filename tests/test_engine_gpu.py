"""The engine on GPUs with NCCL: equality with sequential (fp32 and bf16) and real overlap.

Skips without two CUDA GPUs. On the GPU machine:
    python -m pytest tests/test_engine_gpu.py -q -rs
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from impl import capabilities, metrics
from impl.gradients import max_chunks
from impl.presets import preset
from impl.strategies import StrategyOptions, build_strategy
from impl.strategies.knobs import chunking_problem, variant_strategy
from impl.strategy_check import max_abs_diff, train, weight_tolerance
from impl.workloads import DTYPES, MLPConfig, build_model, make_batch
from tests.multirank import run_ranks

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(capabilities.missing_gpu(2) is not None,
                                 reason=capabilities.missing_gpu(2) or "")]

STRATEGIES = ("sequential", "threaded", "chunked", "copy-engine", "ddp")
# Named variants (impl/strategies/knobs.py) checked at one chunk count.
VARIANTS = ("chunked+update", "threaded+update", "copy-engine+update", "chunked+priority",
            "chunked+ctas8", "chunked+carveout32", "chunked+layers", "chunked+first1mb")
LR, STEPS = 0.02, 5
WORKLOADS = {
    "mlp_tiny": preset("mlp_tiny"),
    "gpt_tiny": preset("gpt_tiny"),
    "mlp_tiny_bf16": MLPConfig("mlp_tiny_bf16", width=256, depth=8, batch=64, dtype="bf16"),
}
NCCL = {"OVERLAP_BACKEND": "nccl"}


def errors_per_strategy(context, workload_name: str) -> dict:
    """On one rank: max |w − w_sequential| per strategy × K, and the spread across ranks."""
    workload = WORKLOADS[workload_name]
    group = context.group(context.world_size)
    reference = train("sequential", workload, group, context.device, StrategyOptions(lr=LR),
                      STEPS)
    largest = max(w.abs().max().item() for w in reference)
    limit = max_chunks(build_model(workload, context.device))
    results = {"tolerance": weight_tolerance(DTYPES[workload.dtype], largest),
               "weights": {}}
    for strategy in STRATEGIES:
        for chunks in (1, 5, limit):
            weights = train(strategy, workload, group, context.device,
                            StrategyOptions(chunks=chunks, lr=LR), STEPS)
            results[strategy, chunks] = max_abs_diff(weights, reference)
            results["weights"][strategy, chunks] = [w.cpu() for w in weights]
    meta = build_model(workload, torch.device("meta"))
    for name in VARIANTS:
        if chunking_problem(name, 5, meta, workload.name):
            continue  # a 1 MiB first chunk of a 1 MiB model: the other workloads cover it
        strategy, options = variant_strategy(name, chunks=5)
        weights = train(strategy, workload, group, context.device,
                        dataclasses.replace(options, lr=LR), STEPS)
        results[name, 5] = max_abs_diff(weights, reference)
        results["weights"][name, 5] = [w.cpu() for w in weights]
    return results


def test_every_variant_is_checked_on_some_workload():
    fitting = {name: [w for w, config in WORKLOADS.items() if not chunking_problem(
        name, 5, build_model(config, torch.device("meta")), w)] for name in VARIANTS}
    assert all(fitting.values()), fitting


@pytest.fixture(scope="module", params=[1, 2], ids=lambda w: f"world{w}")
def gpu_results(request):
    world = request.param
    return world, {name: run_ranks(errors_per_strategy, world, name, env=NCCL)
                   for name in WORKLOADS}


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_gpu_weights_equal_sequential_on_every_rank(gpu_results, workload):
    world, results = gpu_results
    ranks = results[workload]
    tolerance = ranks[0]["tolerance"]
    for rank, per_rank in enumerate(ranks):
        for key, error in per_rank.items():
            if isinstance(key, tuple):
                assert error <= tolerance, (workload, world, rank, key, error, tolerance)
    for key, weights in ranks[0]["weights"].items():
        for rank in range(1, world):
            assert max_abs_diff(ranks[rank]["weights"][key], weights) == 0.0, (key, rank)


def gpu_timelines(context) -> dict:
    workload = MLPConfig("mlp_4096x8_bf16", width=4096, depth=8, batch=4096, dtype="bf16")
    group = context.group(context.world_size)
    out = {}
    for name in ("sequential", "chunked", "threaded", "copy-engine"):
        strategy = build_strategy(name, build_model(workload, context.device), workload, group,
                                  StrategyOptions(chunks=8))
        for step in range(3):
            strategy.step(make_batch(workload, context.device, rank=context.rank, step=step))
        timeline = strategy.finish_timeline()
        out[name] = (timeline.lane("compute"), timeline.lane("comm"))
        strategy.close()
    torch.cuda.synchronize()
    return out


def test_gpu_chunked_overlaps_and_sequential_does_not():
    lanes = run_ranks(gpu_timelines, 2, env=NCCL)[0]
    compute, comm = lanes["sequential"]
    assert len(comm) == 8 and metrics.overlap_ms(compute, comm) == 0.0
    for name in ("chunked", "threaded", "copy-engine"):
        compute, comm = lanes[name]
        assert len(comm) == 8
        assert metrics.overlap_ms(compute, comm) > 0, name
