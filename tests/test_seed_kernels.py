"""The seed layer through the hand-written kernels: every strategy runs on top of them.

On CPU the kernels are stood in for by torch ops with the same contract, which tests the
wiring (autograd function, gradient hooks, chunked communication); on a GPU the real
kernels must give sequential's weights with torch's own matmul.
"""

from __future__ import annotations

import pytest
import torch

from impl import capabilities
from impl.kernels import autograd, ops
from impl.presets import preset
from impl.strategies import StrategyOptions
from impl.strategy_check import max_abs_diff, train

CPU = torch.device("cpu")


@pytest.fixture
def torch_standins(monkeypatch):
    """ops' CUDA kernels replaced by torch on CPU, counting calls."""
    calls = {"forward": 0, "weight_grad": 0}

    def seed_forward(x, w):
        calls["forward"] += 1
        return x @ w

    def seed_weight_grad(x, grad_out):
        calls["weight_grad"] += 1
        return x.t() @ grad_out

    monkeypatch.setattr(ops, "seed_forward", seed_forward)
    monkeypatch.setattr(ops, "seed_weight_grad", seed_weight_grad)
    return calls


@pytest.mark.parametrize("strategy", ["sequential", "chunked", "threaded"])
def test_kernel_path_drives_every_strategy(torch_standins, strategy):
    reference = train("sequential", preset("seed_layer_1024x512"), None, CPU, StrategyOptions())
    weights = train(strategy, preset("seed_layer_1024x512_kernels"), None, CPU,
                    StrategyOptions(chunks=4))
    assert torch_standins == {"forward": 5, "weight_grad": 5}
    assert max_abs_diff(weights, reference) <= 1e-6


def test_unknown_kernel_names_the_choices():
    with pytest.raises(ValueError, match=r"unknown seed-layer kernel 'v9'; choose one of "
                                         r"seed, v1, v1c, v2, v3, v4, v5, v6, v7, cublas"):
        autograd.check_kernel("v9", torch.float32)
    with pytest.raises(TypeError, match="GEMM v4 does not take torch.float32"):
        autograd.check_kernel("v4", torch.float32)


@pytest.mark.gpu
@pytest.mark.skipif(capabilities.missing_gpu() is not None,
                    reason=capabilities.missing_gpu() or "")
@pytest.mark.parametrize("kernel", ["seed", "v1", "v2", "v3"])
def test_real_kernels_give_sequential_weights(kernel):
    from dataclasses import replace

    cuda = torch.device("cuda")
    reference = train("sequential", preset("seed_layer_1024x512"), None, cuda, StrategyOptions())
    workload = replace(preset("seed_layer_1024x512"), name=f"seed_{kernel}", kernel=kernel)
    weights = train("chunked", workload, None, cuda, StrategyOptions(chunks=4))
    largest = max(w.abs().max().item() for w in reference)
    assert max_abs_diff(weights, reference) <= 1e-5 * largest + 1e-6
