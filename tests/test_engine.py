"""Every strategy ends with the sequential strategy's weights, identical on every rank."""

from __future__ import annotations

import pytest
import torch

from impl.gradients import max_chunks
from impl.presets import preset
from impl.strategies import StrategyOptions
from impl.strategy_check import max_abs_diff, train
from impl.workloads import build_model
from tests.multirank import run_ranks

STRATEGIES = ("sequential", "threaded", "chunked", "ddp")
WORKLOADS = ("mlp_tiny", "gpt_tiny", "seed_layer_1024x512")
STEPS = 5
# Large enough that every workload's weights move well past the comparison tolerance.
LR = 0.02


def chunk_counts(workload: str) -> tuple[int, ...]:
    return (1, 5, max_chunks(build_model(preset(workload), torch.device("cpu"))))


def weights_per_strategy(context, workload_name: str) -> dict:
    """On one rank: final weights of every strategy × K, and of sequential at K=1."""
    workload = preset(workload_name)
    group = context.group(context.world_size)
    results = {}
    reference = train("sequential", workload, group, context.device, StrategyOptions(lr=LR), STEPS)
    for strategy in STRATEGIES:
        for chunks in chunk_counts(workload_name):
            weights = train(strategy, workload, group, context.device,
                            StrategyOptions(chunks=chunks, lr=LR), STEPS)
            results[strategy, chunks] = [w.numpy() for w in weights]
    results["reference"] = [w.numpy() for w in reference]
    return results


@pytest.fixture(scope="module", params=[1, 2], ids=lambda w: f"world{w}")
def trained(request):
    world = request.param
    return world, {name: run_ranks(weights_per_strategy, world, name) for name in WORKLOADS}


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("chunk_choice", ["1", "5", "max"])
def test_weights_equal_sequential_on_every_rank(trained, workload, strategy, chunk_choice):
    world, results = trained
    chunks = {"1": 1, "5": 5, "max": chunk_counts(workload)[2]}[chunk_choice]
    ranks = results[workload]
    reference = [torch.from_numpy(w) for w in ranks[0]["reference"]]
    initial = list(build_model(preset(workload), torch.device("cpu")).parameters())
    assert max_abs_diff(reference, initial) > 1e-3, "training did not change the weights"
    for rank, per_rank in enumerate(ranks):
        weights = [torch.from_numpy(w) for w in per_rank[strategy, chunks]]
        for got, want in zip(weights, reference):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6,
                                       msg=f"rank {rank} {strategy} K={chunks} world={world}")


def test_every_strategy_and_variant_says_what_it_does_in_one_line():
    from impl.strategies import STRATEGIES, summary
    from impl.strategies.knobs import VARIANTS

    assert summary("chunked") == ("each chunk's all-reduce starts asynchronously the moment "
                                  "its last gradient is ready")
    # A class's own docstring before its module's: the MPI reference shares mpi's module.
    assert summary("mpi-sequential") == ("every Iallreduce starts after the whole backward "
                                         "(no overlap)")
    assert summary("chunked+update") == "chunked with update_in_overlap=True"
    assert all(summary(name) and "\n" not in summary(name) for name in [*STRATEGIES, *VARIANTS])
    with pytest.raises(ValueError, match="unknown strategy 'pipelined'; choose one of"):
        summary("pipelined")
