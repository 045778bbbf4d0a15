"""Real CPU training steps for the gate's injected-slowdown test (not part of the test run).

Its name matches none of pytest's ``python_files`` patterns, so ``nox -s tests`` never collects
it; tests/test_gate_slowdown.py and reports/gate_trials.py run it explicitly:

    GATE_EXTRA_COMPUTE=0.1 python -m pytest tests/gate_bench/gate_workload.py \
        -o python_files=gate_workload.py --confcutdir=tests/gate_bench -p no:cacheprovider \
        --benchmark-json=out.json --benchmark-save-data

GATE_EXTRA_COMPUTE adds that fraction of real compute to every step (MLPConfig.extra_compute:
more rows through the first layer, forward and backward, not a sleep); GATE_ROUNDS and
GATE_WARMUP set the fixed round counts. One thread, because on a 2-core machine a second
intra-op thread competes with everything else running and widens the round-time spread.
"""

from __future__ import annotations

import os

import torch

from impl.strategies import StrategyOptions, build_strategy
from impl.workloads import MLPConfig, build_model, make_batch

# About 21 ms a step on one core of the 2-core CPU machine: 60 rounds take about 1.3 s.
WIDTH, DEPTH, BATCH = 512, 8, 128


def _env_number(name: str, default: str, kind: type) -> int | float:
    text = os.environ.get(name, default)
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a {kind.__name__}") from None


def test_gate_mlp_step(benchmark):
    torch.set_num_threads(1)
    extra_compute = _env_number("GATE_EXTRA_COMPUTE", "0", float)
    rounds = _env_number("GATE_ROUNDS", "60", int)
    warmup = _env_number("GATE_WARMUP", "5", int)
    config = MLPConfig("gate_mlp_512x8", width=WIDTH, depth=DEPTH, batch=BATCH,
                       extra_compute=extra_compute)
    device = torch.device("cpu")
    strategy = build_strategy("sequential", build_model(config, device), config, None,
                              StrategyOptions())
    batch = make_batch(config, device)  # made before timing: generation is not timed
    try:
        benchmark.pedantic(strategy.step, args=(batch,), rounds=rounds,
                           warmup_rounds=warmup, iterations=1)
    finally:
        strategy.close()
    benchmark.extra_info.update(kind="step", strategy="sequential", workload=config.name,
                                extra_compute=extra_compute, world_size=1, backend="none",
                                samples_per_round=BATCH)
    median = benchmark.stats.stats.median
    benchmark.extra_info["samples_per_s"] = BATCH / median
