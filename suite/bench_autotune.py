"""autotune: a recommended K for this machine, and how well the cost model predicted it.

    python -m suite.run --skip-mpi -- -k autotune --workloads mlp_tiny     # CPU, 2 gloo ranks
    python -m suite.run --skip-mpi -- -k autotune --workloads mlp_8192x12_bf16   # GPUs

Measures the model's inputs (impl/costmodel/autotune.py): one compute-only step cut into the finest
chunks (when each gradient is ready), the comm-only time at every candidate K (the α–β fit),
and the slowdown of the dominant GEMM beside an all-reduce (interference).
Predicts the chunked strategy's step for each candidate K, recommends the fastest, then
measures chunked at every candidate K interleaved in the same rounds and prints predicted
against measured, with intervals, and whether the recommendation is within 2% of the best K
measured.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import asdict, replace

import torch

from impl import stats
from impl.costmodel import autotune
from impl.dist import slowest
from impl.gradients import max_chunks
from impl.rows.kinds import AUTOTUNE
from impl.rows.predictions import FITTED, TUNED
from impl.rows.write import write_row
from impl.strategies import StrategyOptions, build_strategy
from impl.workloads import WorkloadConfig, build_model
from suite.bench_interference import Interference, dominant_gemm
from suite.conftest import launched_world, suite_axes
from suite.harness import Variant, batches, measure_interleaved, record_round_times

CANDIDATES = (1, 2, 5, 10, 20, 50)
PROFILE_STEPS = 5
CLOSE_TO_BEST = 0.02  # a recommendation within 2% of the best measured K is a good one


def pytest_generate_tests(metafunc):
    if "autotune_workload" in metafunc.fixturenames:
        axes = suite_axes(metafunc.config)
        worlds = [launched_world()] if launched_world() > 1 else []
        metafunc.parametrize("autotune_workload", [(w, n) for w in axes["workloads"][:1]
                                                   for n in worlds],
                             ids=lambda c: f"{c[0].name}-w{c[1]}-{axes['profile']}")


def ready_profile(workload, context) -> autotune.ReadyProfile:
    """Median ready times over a few compute-only steps cut into the finest chunks."""
    model = build_model(workload, context.device)
    fine = max_chunks(model)
    runner = build_strategy("sequential", model, workload, None,
                            StrategyOptions(chunks=fine, check_finite=False))
    data = batches(workload, context.device, context.rank)
    timelines = []
    for step in range(PROFILE_STEPS + 1):
        runner.step(data[step % len(data)])
        if step:  # the first step warms up
            timelines.append(runner.finish_timeline())
    ends = tuple(runner.flat.bounds[1:])
    element_size = runner.flat.buffer.element_size()
    runner.close()
    ready = [statistics.median(t.ready_ms()[i] for t in timelines) for i in range(len(ends))]
    return autotune.ReadyProfile(ends, tuple(ready),
                                 statistics.median(t.backward_end_ms() for t in timelines),
                                 statistics.median(t.update_ms() for t in timelines),
                                 element_size)


def comm_only_sweep(workload, candidates: list[int], context, group, rounds) -> list[float]:
    """Comm-only time of the gradient buffer cut into each candidate K, launched as chunked
    launches it, the K values interleaved in the same rounds."""
    built = []
    for k in candidates:
        runner = build_strategy("chunked", build_model(workload, context.device), workload,
                                group, StrategyOptions(chunks=k, check_finite=False))
        runner.flat.buffer.normal_()
        built.append((Variant(f"K={k}", runner.communicate_only), runner))
    measurement = measure_interleaved([v for v, _ in built], rounds, context.device, group)
    for _, runner in built:
        runner.close()
    return [statistics.median(measurement.round_ms(f"K={k}")) for k in candidates]


def interference_rate(workload: WorkloadConfig, context, group, rounds) -> float:
    setup = Interference(dominant_gemm(workload), context.device, group)
    measurement = measure_interleaved([Variant("alone", setup.step(None)),
                                       Variant("beside", setup.step("all-reduce"))],
                                      rounds, context.device, group)
    ratio = stats.ratio(measurement.round_ms("beside"), measurement.round_ms("alone")).value
    return max(0.0, ratio - 1.0)


def agreed_inputs(profile: autotune.ReadyProfile, times: list[float], rate: float,
                  device, group) -> tuple[autotune.ReadyProfile, list[float], float]:
    """The model's inputs at the slowest rank's values, the same on every rank: each rank's
    own would make its own prediction and recommendation (impl/dist.py ``slowest``)."""
    ready = len(profile.ready_ms)
    agreed = slowest([*profile.ready_ms, profile.backward_end_ms, profile.update_ms, *times,
                      rate], group, device)
    profile = replace(profile, ready_ms=tuple(agreed[:ready]), backward_end_ms=agreed[ready],
                      update_ms=agreed[ready + 1])
    return profile, agreed[ready + 2:-1], agreed[-1]


def test_autotune(benchmark, autotune_workload, dist_context, rounds):
    workload, world = autotune_workload
    context = dist_context
    group = context.group(world)
    profile = ready_profile(workload, context)
    limit = max_chunks(build_model(workload, torch.device("meta")))
    candidates = [k for k in CANDIDATES if k <= limit]
    total_bytes = profile.total_elements * profile.element_size
    times = comm_only_sweep(workload, candidates, context, group, rounds)
    rate = interference_rate(workload, context, group, rounds)
    profile, times, rate = agreed_inputs(profile, times, rate, context.device, group)
    fabric = autotune.fit_fabric(candidates, [total_bytes] * len(candidates), times)
    predictions = [autotune.predict_step_ms(profile, fabric, k, rate) for k in candidates]
    recommended = autotune.recommend(predictions)

    built = []
    for k in candidates:
        runner = build_strategy("chunked", build_model(workload, context.device), workload,
                                group, StrategyOptions(chunks=k, check_finite=False))
        rotation = itertools.cycle(batches(workload, context.device, context.rank))
        built.append((Variant(f"K={k}", lambda r=runner, d=rotation: r.step(next(d))), runner))
    measurement = measure_interleaved([v for v, _ in built], rounds, context.device, group)
    for _, runner in built:
        runner.close()
    measured = {k: stats.median(measurement.round_ms(f"K={k}")) for k in candidates}
    best = min(candidates, key=lambda k: measured[k].value)
    recommended_chunks = recommended[TUNED.chunks]
    gap = stats.ratio(measurement.round_ms(f"K={recommended_chunks}"),
                      measurement.round_ms(f"K={best}"))
    rows = [{**p, TUNED.measured_ms: measured[p[TUNED.chunks]].to_json(),
             TUNED.relative_error: p[TUNED.predicted_ms] / measured[p[TUNED.chunks]].value - 1}
            for p in predictions]
    benchmark.group = f"autotune-w{world}-{context.profile}"
    record_round_times(benchmark, [sum(s) / 1e3 for s in
                                   measurement.step_ms[f"K={recommended_chunks}"]])
    write_row(benchmark, AUTOTUNE.row(
        workload=workload.name, world_size=world,
        profile=context.profile, backend=context.backend, strategy="chunked",
        fabric={FITTED.alpha_ms: fabric.alpha_ms,
                FITTED.beta_ms_per_byte: fabric.beta_ms_per_byte,
                # null where the fit saw no per-byte cost (β = 0): JSON has no infinity
                FITTED.bandwidth_gbps: fabric.bandwidth_gbps if fabric.beta_ms_per_byte > 0
                else None,
                FITTED.comm_only_ms: dict(zip(map(str, candidates), times)),
                FITTED.total_bytes: total_bytes},
        interference_rate=rate, ready_profile=asdict(profile), predictions=rows,
        recommended_chunks=recommended_chunks, best_measured_chunks=best,
        recommended_vs_best=gap.to_json(),
        within_2pct_of_best=gap.value is not None and gap.value <= 1 + CLOSE_TO_BEST,
        predicted_within_5pct=sum(abs(r[TUNED.relative_error]) <= 0.05 for r in rows),
        candidates=candidates, measurement=measurement.to_json(),
    ))
    if context.rank == 0:
        print(f"\nautotune {workload.name}, {world} ranks: recommended K={recommended_chunks} "
              f"(best measured K={best}, recommended/best {gap.value:.3f}); predicted vs "
              "measured: " + ", ".join(f"K={r[TUNED.chunks]} {r[TUNED.predicted_ms]:.3g}/"
                                       f"{r[TUNED.measured_ms]['value']:.3g} ms" for r in rows))
