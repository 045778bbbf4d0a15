"""What the NVML sampler costs: the same steps with the sampler off and on, interleaved.

Two variants of the compute-only step, each on its own model, in the same rounds (shuffled
per round); the "on" variant's segments run with the sampler thread polling NVML. The overhead
is the paired ratio of their step times with its 95% interval (target: under 1%).
"""

from __future__ import annotations

import itertools

import pytest

from impl import capabilities, stats
from impl.rows.kinds import SAMPLER_OVERHEAD
from impl.rows.write import write_row
from impl.strategies import StrategyOptions, build_strategy
from impl.workloads import build_model
from suite.conftest import suite_axes
from suite.harness import Variant, batches, measure_interleaved, record_round_times


def sampler_variant(name: str, workload, context, sampler=None) -> tuple[Variant, object]:
    strategy = build_strategy("sequential", build_model(workload, context.device), workload,
                              None, StrategyOptions(check_finite=False))
    rotation = itertools.cycle(batches(workload, context.device, 0))
    variant = Variant(name, lambda: strategy.step(next(rotation)))
    if sampler is not None:
        variant.before_round, variant.after_round = sampler.start, sampler.stop
    return variant, strategy


def test_sampler_overhead(benchmark, dist_context, rounds, sampler_factory, pytestconfig):
    context = dist_context
    if context.rank != 0:
        pytest.skip("the sampler runs on rank 0; this measures it there alone")
    sampler = sampler_factory(1)
    if sampler is None or not sampler.available:
        pytest.skip(capabilities.missing_nvml() or "no GPU in this run")
    workload = suite_axes(pytestconfig)["workloads"][0]
    built = [sampler_variant("sampler-off", workload, context),
             sampler_variant("sampler-on", workload, context, sampler)]
    measurement = measure_interleaved([v for v, _ in built], rounds, context.device, None)
    for _, strategy in built:
        strategy.close()
    off, on = measurement.round_ms("sampler-off"), measurement.round_ms("sampler-on")
    overhead = stats.ratio(on, off)
    benchmark.group = "nvml-sampler-overhead"
    record_round_times(benchmark, [sum(s) / 1e3 for s in measurement.step_ms["sampler-on"]])
    write_row(benchmark, SAMPLER_OVERHEAD.row(
        workload=workload.name, period_ms=sampler.period_ms,
        step_ms_sampler_off=stats.median(off).value,
        step_ms_sampler_on=stats.median(on).value,
        overhead_pct=(overhead.value - 1) * 100,
        overhead_ratio=overhead.to_json(), verdict=stats.verdict(stats.difference(on, off),
                                                                 "faster", "slower"),
        measurement=measurement.to_json(),
    ))
