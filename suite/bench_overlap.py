"""The overlap benchmark: strategy × chunk count × world size × workload (× profile per run).

Every row carries its correctness check (max |w − w_sequential| after a few steps, asserted
within tolerance before timing) and the reference measurements that make it interpretable:
compute-only, comm-only at the same chunking, sequential at the same chunking, and the limit.

    nox -s bench                                   # what the machine has
    torchrun --nproc-per-node 2 --local-ranks-filter 0 -m pytest suite/bench_overlap.py \\
        --workloads mlp_tiny --chunks 1,10 --results-json /tmp/r.json
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

import pytest
import torch

from impl import capabilities, metrics
from impl.check import max_abs_err_vs_sequential, weight_tolerance
from impl.gradients import max_chunks
from impl.strategies import StrategyOptions, build_strategy
from impl.workloads import DTYPES, build_model, describe, preset
from suite.conftest import suite_axes, under_mpirun
from suite.harness import (
    StepClock,
    batches,
    make_round,
    measure_comm_only_ms,
    measure_step_ms,
    torch_all_reduce_chunks,
)


@dataclass(frozen=True)
class Case:
    workload: str
    strategy: str
    chunks: int
    world_size: int
    profile: str

    @property
    def id(self) -> str:
        return f"{self.workload}-{self.strategy}-K{self.chunks}-w{self.world_size}-{self.profile}"


def pytest_generate_tests(metafunc):
    if "case" not in metafunc.fixturenames:
        return
    axes = suite_axes(metafunc.config)
    cases = [Case(w, s, k, n, axes["profile"]) for w in axes["workloads"]
             for n in axes["world_sizes"] for k in axes["chunks"] for s in axes["strategies"]]
    metafunc.parametrize("case", cases, ids=[c.id for c in cases])


def skip_reason(case: Case, launched_world: int) -> str | None:
    if reason := capabilities.missing_world(case.world_size, launched_world):
        return reason
    kernel = getattr(preset(case.workload), "kernel", "cublas")
    if kernel != "cublas" and (reason := capabilities.missing_gpu()):
        return f"{case.workload} runs hand-written CUDA kernels: {reason}"
    if case.strategy == "synthetic":
        return "synthetic sleeps instead of computing: benchmarked apart in bench_synthetic.py"
    if case.strategy == "mpi" and not under_mpirun():
        return "mpi runs under mpirun: nox -s bench runs it in a pass of its own"
    if case.strategy == "mpi" and (reason := capabilities.missing_mpi()):
        return reason
    if case.strategy == "mpi" and case.world_size != launched_world:
        return "mpi runs over all launched MPI ranks"
    return None


def references(cache: dict, case: Case, context, group, rounds) -> dict:
    """compute-only, comm-only and sequential at this chunking, measured once per key."""
    workload = preset(case.workload)
    options = StrategyOptions(chunks=case.chunks, check_finite=False)
    compute_key = ("compute", case.workload)
    if compute_key not in cache:
        cache[compute_key] = measure_step_ms("sequential", workload, None, context.device,
                                             options, rounds, context.rank)
    # MPI is its own transport: its references are MPI's too.
    sequential = "mpi-sequential" if case.strategy == "mpi" else "sequential"
    key = (case.workload, case.world_size, case.chunks, sequential)
    if key not in cache:
        sequential_ms = measure_step_ms(sequential, workload, group, context.device, options,
                                        rounds, context.rank)
        comm_only_ms = 0.0
        if case.world_size > 1:
            model = build_model(workload, context.device)
            runner = build_strategy(sequential, model, workload, group, options)
            launch = (runner.all_reduce_all if sequential == "mpi-sequential"
                      else torch_all_reduce_chunks(runner.flat.chunks, group))
            comm_only_ms = measure_comm_only_ms(launch, context.device, group, rounds)
            runner.close()
        cache[key] = {"sequential_ms": sequential_ms, "comm_only_ms": comm_only_ms,
                      "sequential_reference": sequential}
    return {"compute_only_ms": cache[compute_key], **cache[key]}


def test_step(benchmark, case, dist_context, rounds, reference_cache, sampler_factory):
    context = dist_context
    if reason := skip_reason(case, context.world_size):
        pytest.skip(reason)
    workload = preset(case.workload)
    model = build_model(workload, context.device)
    if case.chunks > max_chunks(model):
        pytest.skip(f"K={case.chunks} exceeds the {max_chunks(model)} chunks of {case.workload}")
    group = context.group(case.world_size)
    if group is None:
        pytest.skip(f"rank {context.rank} is outside the {case.world_size}-rank group")
    # Correctness first (with the NaN/Inf check on): a fast wrong answer is a failure.
    error = max_abs_err_vs_sequential(case.strategy, workload, group, context.device,
                                      StrategyOptions(chunks=case.chunks),
                                      steps=rounds.check_steps)
    # Timed rounds without the per-step finite check: it is a CPU-GPU sync point.
    options = StrategyOptions(chunks=case.chunks, check_finite=False)
    largest = max(p.detach().abs().max().item() for p in model.parameters())
    tolerance = weight_tolerance(DTYPES[workload.dtype], largest)
    assert error <= tolerance, (f"{case.id}: weights differ from sequential by {error:.3g} "
                                f"(tolerance {tolerance:.3g})")
    refs = references(reference_cache, case, context, group, rounds)

    strategy = build_strategy(case.strategy, model, workload, group, options)
    clock = StepClock(context.device)
    one_round = make_round(strategy, batches(workload, context.device, context.rank), rounds,
                           clock, group)
    for _ in range(rounds.warmup):  # warmup outside pedantic, so the sampler sees timed rounds
        one_round()
    clock.marks.clear()
    sampler = sampler_factory(case.world_size) if context.rank == 0 else None
    if sampler is not None:
        sampler.start()
    benchmark.group = f"{case.workload}-w{case.world_size}-{context.profile}"
    benchmark.pedantic(one_round, rounds=rounds.rounds, iterations=1, warmup_rounds=0)
    samples = sampler.stop() if sampler is not None else None
    step_times = clock.step_ms()
    timeline = strategy.finish_timeline()
    bucket_count = getattr(strategy, "bucket_count", None)
    strategy.close()

    step_ms = statistics.median(step_times)
    samples_per_round = case.world_size * workload.batch * rounds.steps_per_round
    limit = metrics.limit_ms(refs["compute_only_ms"], refs["comm_only_ms"])
    info = {
        "kind": "step", "real": True, "strategy": case.strategy, "workload": case.workload,
        "chunks": case.chunks, "world_size": case.world_size, "profile": context.profile,
        "backend": context.backend, "device": torch.cuda.get_device_name(context.device)
        if context.device.type == "cuda" else capabilities.default_device().type,
        "step_ms": step_ms, "step_ms_all": step_times,
        "samples_per_s": metrics.samples_per_s(case.world_size, workload.batch, step_ms),
        "samples_per_round": samples_per_round, **refs, "limit_ms": limit,
        # With one rank there is no communication to hide: efficiency is undefined.
        "overlap_efficiency": metrics.overlap_efficiency(refs["sequential_ms"], step_ms, limit)
        if case.world_size > 1 else None,
        "hidden_comm_fraction": timeline.hidden_comm_fraction(),
        "max_abs_err_vs_sequential": error, "tolerance": tolerance,
        "timeline": timeline.to_json(), "config": describe(workload), "options": asdict(options),
        "ddp_bucket_count": bucket_count,
    }
    info.update(wall_vs_event(benchmark, step_ms, rounds.steps_per_round))
    info.update(energy(samples, rounds.timed_steps, case.world_size, workload.batch))
    benchmark.extra_info.update(info)


def wall_vs_event(benchmark, step_ms: float, steps_per_round: int) -> dict:
    """Wall-clock round time (pytest-benchmark, includes sync and barrier) vs device time."""
    stats = getattr(benchmark, "stats", None)
    if stats is None:
        return {"wall_step_ms": None, "wall_vs_event_rel_diff": None}
    wall_ms = stats.stats.median * 1e3 / steps_per_round
    return {"wall_step_ms": wall_ms, "wall_vs_event_rel_diff": (wall_ms - step_ms) / step_ms}


def energy(samples, steps: int, world_size: int, batch: int) -> dict:
    if samples is None:
        return {"nvml": {"available": False, "reason": capabilities.missing_nvml()
                         or "no GPU in this run"},
                "energy_per_step_j": None, "samples_per_joule": None}
    summary = samples.summary(steps)
    per_step = summary.get("energy_per_step_j")
    return {"nvml": summary, "nvml_series": samples.to_json() if samples.available else None,
            "energy_per_step_j": per_step,
            "samples_per_joule": metrics.samples_per_joule(world_size, batch, per_step)
            if per_step else None}


def test_sampler_overhead(benchmark, dist_context, rounds, sampler_factory, pytestconfig):
    """Step time with the NVML sampler on vs off, interleaved in blocks (target < 1%)."""
    context = dist_context
    if context.rank != 0:
        pytest.skip("the sampler runs on rank 0; this measures it there alone")
    sampler = sampler_factory(1)
    if sampler is None or not sampler.available:
        pytest.skip(capabilities.missing_nvml() or "no GPU in this run")
    workload = preset(suite_axes(pytestconfig)["workloads"][0])
    strategy = build_strategy("sequential", build_model(workload, context.device), workload,
                              None, StrategyOptions(check_finite=False))
    clock = StepClock(context.device)
    one_round = make_round(strategy, batches(workload, context.device, 0), rounds, clock, None)
    for _ in range(rounds.warmup):
        one_round()
    medians = {"off": [], "on": []}
    for block in range(6):  # off, on, off, on, ...: drifts (clocks, heat) hit both alike
        state = "on" if block % 2 else "off"
        clock.marks.clear()
        if state == "on":
            sampler.start()
        for _ in range(rounds.rounds):
            one_round()
        if state == "on":
            sampler.stop()
        medians[state].append(statistics.median(clock.step_ms()))
    strategy.close()
    off, on = statistics.median(medians["off"]), statistics.median(medians["on"])
    benchmark.group = "nvml-sampler-overhead"
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info.update({
        "kind": "sampler_overhead", "workload": workload.name, "period_ms": sampler.period_ms,
        "step_ms_sampler_off": off, "step_ms_sampler_on": on,
        "overhead_pct": (on - off) / off * 100, "blocks": medians,
    })
