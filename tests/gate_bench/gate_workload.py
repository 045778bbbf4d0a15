"""Real training steps for the gate's slowdown tests and trials (not part of the test run).

Its name matches none of pytest's ``python_files`` patterns, so ``nox -s tests`` never collects
it; reports/gate/trials.py runs it explicitly (tests/data/gate-step-baseline.json, the fixture of
tests/gate/test_slowdown.py, is one run of it):

    GATE_EXTRA_COMPUTE=0.1 python -m pytest tests/gate_bench/gate_workload.py::test_gate_mlp_step \
        -o python_files=gate_workload.py --confcutdir=tests/gate_bench -p no:cacheprovider \
        --benchmark-json=out.json --benchmark-save-data

GATE_EXTRA_COMPUTE adds that fraction of real compute to every step (MLPConfig.extra_compute:
more rows through the first layer, forward and backward, not a sleep); GATE_ROUNDS and
GATE_WARMUP set the fixed round counts. ``test_gate_mlp_step`` runs on one CPU thread, because
on a 2-core machine a second intra-op thread competes with everything else running and widens
the round-time spread; ``test_gate_gpu_mlp_step`` runs a larger bf16 MLP on the GPU, each round
ending when the device has finished the step.
"""

from __future__ import annotations

import os

import pytest
import torch

from impl.strategies import StrategyOptions, build_strategy
from impl.workloads import build_model, make_batch
from reports.gate.trials import gate_mlp


def _env_number(name: str, default: str, kind: type) -> int | float:
    text = os.environ.get(name, default)
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a {kind.__name__}") from None


def gate_step(benchmark, device: torch.device) -> None:
    """Benchmark sequential training steps of the device's gate MLP (reports/gate/trials.py
    ``gate_mlp``), with GATE_EXTRA_COMPUTE more real compute in every step."""
    extra_compute = _env_number("GATE_EXTRA_COMPUTE", "0", float)
    rounds = _env_number("GATE_ROUNDS", "60", int)
    warmup = _env_number("GATE_WARMUP", "5", int)
    config = gate_mlp(device.type, extra_compute)
    strategy = build_strategy("sequential", build_model(config, device), config, None,
                              StrategyOptions())
    batch = make_batch(config, device)  # made before timing: generation is not timed

    def step() -> None:
        strategy.step(batch)
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # the round is the step's device work, not its launch

    try:
        benchmark.pedantic(step, rounds=rounds, warmup_rounds=warmup, iterations=1)
    finally:
        strategy.close()
    step_ms = benchmark.stats.stats.median * 1e3
    # One rank, no communication: the step is its own compute-only, sequential and limit time
    # (the fields every step row carries, impl/rows/kinds.py; the gate reads them through it).
    benchmark.extra_info.update(kind="step", strategy="sequential", workload=config.name,
                                extra_compute=extra_compute, world_size=1, backend="none",
                                samples_per_round=config.batch, chunks=1, profile="none",
                                step_ms=step_ms, compute_only_ms=step_ms, comm_only_ms=0.0,
                                sequential_ms=step_ms, limit_ms=step_ms)
    benchmark.extra_info["samples_per_s"] = config.batch / benchmark.stats.stats.median


def test_gate_mlp_step(benchmark):
    torch.set_num_threads(1)
    gate_step(benchmark, torch.device("cpu"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gate_gpu_mlp_step(benchmark):
    gate_step(benchmark, torch.device("cuda"))
