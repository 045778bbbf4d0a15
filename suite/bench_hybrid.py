"""The CPU–GPU hybrid benchmark and the study's experiments.

- offload: the fine-grained hybrid (gradients to the host during backward, Adam on the CPU in
  parallel threads) against the same copies and host Adam after backward, and against
  training all on the GPU; interleaved, with intervals and verdicts. Rank 0, its GPU.
- coarse: the coarse-grained hybrid (worker 0 on rank 0's GPU, worker 1 on rank 1's CPU cores,
  gloo between them), shares balanced from measured times, against each worker training the
  whole batch alone (worker0-alone, worker1-alone); 2 ranks.
- digits: the study's MLP on scikit-learn's digits (Adam, lr 1e-3, batch 100), loss and
  accuracy curves on CPU, GPU and both hybrids.
- gpt_forward: the study's decoder, time per forward for 10 iterations on CPU and GPU, each in
  a fresh process so the first iteration shows the warm-up.

On a CPU-only machine the "GPU" side is the CPU (rows say which device ran). One GPU and its
host, every row (two processes, one per worker; rank 0 takes the GPU):

    OVERLAP_BACKEND=gloo torchrun --standalone --nproc-per-node 2 --local-ranks-filter 0 \\
        -m pytest suite/bench_hybrid.py --results-json /tmp/hybrid.json
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace

import pytest
import torch
import torch.distributed as dist

from impl import capabilities, stats
from impl.hybrid import (
    HYBRID_FIELDS,
    HybridOptions,
    TrainingCheck,
    TrainingCheckFailed,
    build_trainer,
    check_training,
    host_initialised_model,
    loss_curves_match,
)
from impl.hybrid.base import CAST_ON_HOST, calibrated_loss_scale, learning_rate
from impl.hybrid.bounds import host_work_ms, measure_copy_rates, offload_bounds
from impl.hybrid.buckets import BUCKET_ELEMENTS, bucket_layout
from impl.hybrid.cast_side import HOST_CAST_SUFFIX, OVERLAPPED
from impl.hybrid.coarse import (
    CoarseHybrid,
    balance,
    cpu_worker_threads,
    even_shares,
    residual_imbalance,
    worker_device,
)
from impl.hybrid.contention import Beside, copies, gpu_steps
from impl.hybrid.crossover import (
    LADDER_POINTS,
    WITHIN,
    Ladder,
    LadderPoint,
    bound_crossover_tokens,
)
from impl.hybrid.deepspeed_adam import VARIANT as DEEPSPEED_VARIANT
from impl.hybrid.deepspeed_adam import check_against_torch, deepspeed_cpu_adam
from impl.hybrid.digits import (
    DIGITS_VARIANTS,
    DigitsConfig,
    classifier_threads,
    load_data,
    run_digits,
)
from impl.hybrid.goals import GOALS, meets
from impl.hybrid.gpt_forward import STUDY_TABLE, measure_in_fresh_process
from impl.hybrid.host_adam import ADAM_BYTES_PER_PARAMETER, HostAdam
from impl.hybrid.largest import NoModelOnlyTheOffloadHolds, measure_only_offload
from impl.hybrid.measure import HOST_WORK_FIGURES, host_work_split
from impl.hybrid.table import HOST_ADAM_VARIANT
from impl.presets import (
    gpt_1b_bf16,
    gpt_medium_fp16,
    gpt_small_bf16,
    gpt_study_w384_b2,
    mlp_256x8_b1024,
    mlp_4096x8_b8192,
    mlp_4096x24_b4096_bf16,
    mlp_8192x16_b2048_bf16,
    preset,
)
from impl.rows.kinds import (
    DIGITS_CURVE,
    GPT_FORWARD,
    HOST_ADAM,
    HYBRID_COMPARISON,
    HYBRID_STEP,
    OFFLOAD_CROSSOVER,
    OFFLOAD_ONLY,
)
from impl.rows.study_records import BALANCE, ROUND_EXTRA
from impl.rows.study_records import MEASURE_PHASE as PHASE
from impl.rows.write import write_row
from impl.settings import selected_backend
from impl.threads import fastest_threads
from impl.workloads import DTYPES, Batch, build_model, describe, loss_fn
from suite import deadline
from suite.conftest import launched_world
from suite.deadline import parameter_count
from suite.harness import Variant, batches, measure_interleaved, record_round_times, rounds_for
from suite.study_rows import comparison, round_seconds

OFFLOAD_VARIANTS = ("device-adam", "device-adam-foreach", "offload-after-backward",
                    "offload-overlap", "offload-overlap-dpu")
# The two overlapped offloads with the host casting: the default casts on the GPU
# (HybridOptions.cast); runs before it timed the GPU's cast as "+gpu-cast" twins.
CAST_VARIANTS = tuple(name + HOST_CAST_SUFFIX for name in OVERLAPPED)
# The offload as it was before its flat buckets (a bucket per tensor), in the same rounds, on
# members with tensors small enough to share a bucket: what the buckets changed.
PER_TENSOR_SUFFIX = "+per-tensor"
PER_TENSOR_VARIANTS = tuple(name + PER_TENSOR_SUFFIX for name in OVERLAPPED)
# The delayed update with host Adam on half the host's threads, beside the default (every core
# but one). On one H200 host (results/h200x1/20261127T234409Z-y28fxw6q.json) gpt_small_bf16's
# delayed update hid all of its host work yet ran 1.59× its bound, while the GEMM-bound fp32
# member sat at its bound: the thread that launches a decoder's many small kernels may be
# short of cores or memory bandwidth while host Adam holds the rest.
THREAD_VARIANTS = ("offload-overlap-dpu+half-threads",)
# The two overlapped offloads with their gradient hooks handing each bucket to a launching
# thread (HybridOptions.hand_off). A profile of gpt_small_bf16's delayed update on one H100
# (results/h100x1/logs/20261207T1649-dpu-profile/) had backward's thread 70.7 ms of 3 steps
# inside the hooks against fused GPU Adam's 1.7, and the GPU waiting: timed beside the
# default, the twin tells that wait from the rest.
HAND_OFF_SUFFIX = "+hand-off"
HAND_OFF_VARIANTS = tuple(name + HAND_OFF_SUFFIX for name in OVERLAPPED)
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
HEAVY_PARAMETERS = 500_000_000
HEAVY_VARIANTS = ("device-adam", *OVERLAPPED)
HEAVY_CHECK_PARAMETERS = 200_000_000
# Deliberately low rates for the offload's deadline (suite/deadline.py's habit): host Adam at
# 28 bytes a parameter (an H100 host reached 100-140 GB/s), and the check's fp32 reference
# (IEEE fp32, no TF32) per CPU thread or on a GPU (an H100 does about 50 TFLOP/s).
EXPECTED_HOST_ADAM_BYTES_PER_S = 20e9
EXPECTED_REFERENCE_FLOPS_PER_THREAD = 10e9
EXPECTED_REFERENCE_FLOPS_GPU = 10e12
HOST_ADAM_VARIANTS = (("fused", "grouped"), ("fused", "intra-op"), ("fused", "pool"),
                      ("foreach", "intra-op"), ("foreach", "pool"), ("single", "pool"))
BANDWIDTH_BYTES_PER_VALUE = 12  # a += s·b in fp32: read a and b, write a
FAILED = "FAILED: "  # an absent variant's reason that fails its row instead of skipping it
COARSE_VARIANTS = ("coarse-hybrid", "worker0-alone", "worker1-alone")
CHECK_ROWS = 512  # the offload check's batch rows: a CPU reference of a whole batch is slow
DIGITS_EPOCHS = {"quick": 5, "default": 30, "full": 100}  # CPU-only; with a GPU always 100
LOSS_CURVE_TOLERANCE = 0.05  # impl/hybrid/__init__.py: loss_curves_match
GPT_ITERATIONS = 10  # the study's; a CPU-only machine runs 2 (first and one more) outside
# --suite-mode full: one forward takes 5-9 s on 2 cores


def gpu_here() -> bool:
    return capabilities.gpu_count() > 0


def main_device() -> torch.device:
    """The GPU where there is one, whatever backend the process group uses (gloo here)."""
    return torch.device("cuda", 0) if gpu_here() else torch.device("cpu")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    threads = torch.get_num_threads()
    return f"cpu ({threads} thread{'' if threads == 1 else 's'})"  # reports.format reads it


def mlp_loss(workload):
    return lambda outputs, targets: loss_fn(workload, outputs, targets)


# --- fine-grained: offload overlapped vs after backward vs all on the GPU, on a family ------


_offload: dict[str, OffloadMeasured] = {}
# A member whose measurement failed: its error, which its other rows raise at once. Measured
# again per row, gpt_medium_fp16's twelve rows took 1.5-2.4 min each to fail on one H100.
_offload_failed: dict[str, str] = {}
_rates: dict = {}  # the run's rates for the bounds, measured once (offload_rates)
# The bounds' rates name host Adam's figures as its rows do; bound_figures names the offload's
# bound figures as its rows do.
ADAM_ROW, STEP_ROW = HOST_ADAM.names, HYBRID_STEP.names


def offload_family() -> dict[str, tuple]:
    """name -> (workload, suite modes that run it). A CPU-only machine runs mlp_tiny alone."""
    if not gpu_here():
        return {"mlp_tiny": (preset("mlp_tiny"), ("quick", "default", "full"))}
    every, full = ("quick", "default", "full"), ("full",)
    # The larger members in --full: host Adam bounds their steps (about 0.15 s for 403M
    # parameters, 0.4 s for 1.07B on one H100 host), so seven variants × 99 steps of the 403M
    # one took about 3 minutes, more than the default run can add; the 93M decoder puts a bf16
    # member in every GPU run. The fp16 decoder and the one over 1B parameters are --full's.
    return {w.name: (w, modes) for w, modes in (
        (mlp_4096x8_b8192(), every), (gpt_small_bf16(), every),
        (mlp_4096x24_b4096_bf16(), full), (mlp_8192x16_b2048_bf16(), full),
        (gpt_medium_fp16(), full), (gpt_1b_bf16(), full))}


OFFLOAD_FAMILY = ("mlp_4096x8_b8192", "mlp_4096x24_b4096_bf16", "gpt_small_bf16",
                  "mlp_8192x16_b2048_bf16", "gpt_medium_fp16", "gpt_1b_bf16", "mlp_tiny")
# The default run of a launch of several GPUs keeps the bf16 decoder alone of the family, and
# no CPU-against-GPU forward table: both are studies of one device, measured on rank 0 while
# the other GPUs wait, and the one-GPU default run measures the rest, the crossover ladders
# too (docs/budget.md).
SEVERAL_GPUS_DEFAULT_MEMBERS = ("gpt_small_bf16",)
ONE_GPU_STUDIES = ("test_gpt_forward", "test_offload_crossover")


def planned(item, mode: str) -> bool:
    """Whether the run in ``mode`` on this launch plans ``item`` (suite/conftest.py). An offload
    member outside this machine's family, or kept for other modes, is known not to run before
    anything launches: left out, it adds nothing to the plan (a skip would add its estimate)."""
    if item.originalname in ("test_offload", "test_offload_comparison"):
        modes = offload_family().get(item.callspec.params["member"], (None, ()))[1]
        if mode not in modes:
            return False
    if item.originalname == "test_host_adam_beside" and mode != "full":
        return False
    if (item.originalname == "test_offload_crossover"
            and item.callspec.params["member"] not in crossover_family(mode)):
        return False
    if mode != "default" or launched_world() < 2 or not gpu_here():
        return True
    if item.originalname in ONE_GPU_STUDIES:
        return False
    if item.originalname in ("test_offload", "test_offload_comparison"):
        return item.callspec.params["member"] in SEVERAL_GPUS_DEFAULT_MEMBERS
    return True


def offload_variants(workload) -> dict[str, tuple[str, dict]]:
    """variant -> (trainer, HybridOptions it sets beyond the defaults). Low-precision members
    also run the delayed and the overlapped offload with the cast on the host
    (impl/hybrid/offload.py; the default casts on the GPU): both sides measured. Members whose
    buckets hold several tensors also run those two a bucket per tensor (PER_TENSOR_VARIANTS).
    Members over HEAVY_PARAMETERS run the baseline and the two overlapped offloads alone: every
    variant's trainer lives through the interleaved rounds, and each offload holds its fp32
    master and state (16 bytes a parameter) on the host, 20 GB for the 1.25B decoder; with the
    cast, per-tensor and half-thread twins it would need 140 GB, more than a 125 GiB host has."""
    if parameter_count(workload) > HEAVY_PARAMETERS:
        return {name: (name, {}) for name in HEAVY_VARIANTS}
    variants = {name: (name, {}) for name in OFFLOAD_VARIANTS
                if not (name == "device-adam-foreach" and workload.dtype == "fp16")}
    if workload.dtype != "fp32":
        variants |= {name + HOST_CAST_SUFFIX: (name, {"cast": CAST_ON_HOST})
                     for name in OVERLAPPED}
    if len(layout(workload, BUCKET_ELEMENTS)) < len(layout(workload, 1)):
        variants |= {name + PER_TENSOR_SUFFIX: (name, {"bucket_elements": 1})
                     for name in OVERLAPPED}
    variants |= {name + HAND_OFF_SUFFIX: (name, {"hand_off": True}) for name in OVERLAPPED}
    if host_threads() >= 2:
        variants["offload-overlap-dpu+half-threads"] = (
            "offload-overlap-dpu", {"cpu_threads": host_threads() // 2})
    return variants


def absent_reason(workload, variant: str) -> str:
    """Why ``variant`` is not among ``workload``'s offload variants (offload_variants: the last
    case left is the half-threads twin on a host of one thread)."""
    if parameter_count(workload) > HEAVY_PARAMETERS:
        return (f"{variant}: {workload.name} has over {HEAVY_PARAMETERS:,} parameters, and each "
                "offload holds 16 bytes a parameter on the host")
    if variant in CAST_VARIANTS and workload.dtype == "fp32":
        return f"{variant}: an fp32 model has nothing to cast"
    if variant == "device-adam-foreach" and workload.dtype == "fp16":
        return (f"{variant}: Adam in fp16 itself, with no loss scale, is no fp16 recipe: most "
                "of a decoder's gradients are subnormal there (impl/hybrid/base.py)")
    if variant in PER_TENSOR_VARIANTS:
        return (f"{variant}: each of {workload.name}'s tensors is a bucket of its own, as it "
                "would be per tensor")
    return f"{variant}: host Adam has {host_threads()} thread here, and half of it is none"


def measurement_key(item):
    """Every row of one offload family member reads the measurement its first row made."""
    if item.originalname in ("test_offload", "test_offload_comparison"):
        return ("offload", item.callspec.params["member"])
    return item.nodeid


SKIPPED_S = 0.1  # what a benchmark skipped at once costs


def coarse(item) -> bool:
    """A benchmark of the coarse-grained hybrid (two processes over gloo)."""
    return (item.originalname in ("test_coarse", "test_coarse_comparison")
            or item.name == "test_digits[coarse-hybrid]")


def expected_seconds(item, mode: str) -> float | None:
    """An offload member's whole measurement (its first row makes it), and a crossover
    ladder's every point (measurement_s). Other rows: the mode's default."""
    if coarse(item) and (selected_backend() != "gloo" or launched_world() < 2):
        return SKIPPED_S  # skipped at once: the coarse-grained hybrid's pass runs it
    if item.originalname == "test_offload_only":
        return ONLY_OFFLOAD_EXPECTED_S if mode == "full" and gpu_here() else SKIPPED_S
    if item.originalname == "test_offload_crossover":
        workload = crossover_family(mode).get(item.callspec.params["member"])
        if workload is None:
            return None  # skipped at once
        return sum(measurement_s(replace(workload, batch=batch), len(CROSSOVER_VARIANTS), mode)
                   for batch in expected_ladder(workload))
    if measurement_key(item) == item.nodeid:
        return None
    family = offload_family()
    member = item.callspec.params["member"]
    if member not in family:
        return None  # skipped at once
    workload = family[member][0]
    return measurement_s(workload, len(offload_variants(workload)), mode)


def measurement_s(workload, variants: int, mode: str) -> float:
    """measure_offload's seconds: every variant's check against its fp32 reference, its warm-up
    and timed rounds at the slower of the GPU's step and host Adam, and its model builds
    (suite/deadline.py)."""
    device = deadline.suite_device()
    rounds = rounds_for(mode, device)
    parameters = parameter_count(workload)
    tokens = check_batch_rows(workload) * getattr(workload, "context", 1)
    reference_flops = (EXPECTED_REFERENCE_FLOPS_GPU if device.type == "cuda"
                       else EXPECTED_REFERENCE_FLOPS_PER_THREAD * host_threads())
    reference_s = 6 * parameters * tokens / reference_flops
    step_s = max(deadline.expected_step_s(workload, device, 1, "nvlink"),
                 parameters * ADAM_BYTES_PER_PARAMETER / EXPECTED_HOST_ADAM_BYTES_PER_S)
    checks = max(3, rounds.check_steps) * (reference_s + step_s)
    timed = (rounds.warmup + rounds.rounds) * rounds.steps_per_round * step_s
    return variants * (checks + timed) + deadline.expected_s(workload, 0, 2 * variants + 1, 1,
                                                             device)


def host_threads() -> int:
    """Host Adam's threads: every core but the one that drives the GPU; on a CPU-only machine
    one (the suite's two gloo ranks share its cores)."""
    return max(1, (os.cpu_count() or 1) - 1) if gpu_here() else 1


def layout(workload, bucket_elements: int) -> list[int]:
    """Values per bucket of the offload's buckets (impl/hybrid/buckets.py), in the order backward
    completes them: the last holds the first parameter registered, whose host work the
    overlapped offload leaves after backward."""
    params = list(reversed(list(build_model(workload, torch.device("meta")).parameters())))
    buckets = bucket_layout([p.numel() for p in params], [p.dtype for p in params],
                            bucket_elements)
    return [sum(params[i].numel() for i in bucket) for bucket in buckets]


def check_batch_rows(workload) -> int:
    """The check's batch rows: its fp32 reference of a whole batch is slow on a CPU (one sequence
    of the GPT is 1024 tokens; a quarter of CHECK_ROWS for MLPs over HEAVY_CHECK_PARAMETERS)."""
    if workload.kind == "gpt":
        return 1
    return CHECK_ROWS // 4 if parameter_count(workload) > HEAVY_CHECK_PARAMETERS else CHECK_ROWS


def check_offload(name: str, initial, workload, options, steps) -> TrainingCheck:
    """``name``'s gradients and updates on the check's steps (impl/hybrid/trainer_check.py),
    against an fp32 reference on the trainer's device, both copies of ``initial``."""
    trainer = build_trainer(name, copy.deepcopy(initial), mlp_loss(workload), options)
    longest = max(check_batch_rows(workload) * getattr(workload, "context", 1), workload.width)
    try:
        check = check_training(name, trainer, copy.deepcopy(initial).float(), mlp_loss(workload),
                               steps, longest)
    finally:
        trainer.close()
    return check.require()


def offload_rates(rounds) -> dict:
    """Host Adam and copy rates for the bounds (impl/hybrid/bounds.py), once per run. Host
    Adam's is the host_adam rows' timing of the trainers' own engine (HOST_ADAM_VARIANT) in
    their interleaved rounds: a second timing of it, 5 calls after the offload's rounds, read
    34 GB/s in a 4-rank launch on 4 H200 where those rows read 106 and the trainers' own host
    Adam 60-110 (results/h200x4, 2026-11-28)."""
    if not _rates:
        measured = host_adam_measured(rounds)
        parameters = measured.parameters
        step = stats.median(measured.measurement.round_ms(HOST_ADAM_VARIANT)).value
        _rates.update({
            ADAM_ROW.adam_gbps: ADAM_BYTES_PER_PARAMETER * parameters / (step * 1e6),
            ADAM_ROW.threads: measured.threads, ADAM_ROW.parameters: parameters,
            **measure_copy_rates(main_device())})
    return _rates


@dataclass(frozen=True)
class OffloadMeasured:
    """One offload family member's measurement (measure_offload), which its variant rows and
    its comparison row read."""

    workload: object
    device: torch.device
    options: dict[str, HybridOptions]  # per variant
    checks: dict[str, TrainingCheck]  # per variant, each passed
    parameters: int
    measurement: object  # measure_interleaved's result
    round_ms: dict[str, list[float]]  # per variant, round_means
    variants: dict[str, tuple[str, dict]]  # offload_variants
    rates: dict  # offload_rates
    bounds: dict[str, float]  # per trainer with a bound (impl/hybrid/bounds.py)
    phases_s: dict[str, float]  # PhaseClock's seconds
    step_calls: dict[str, dict]  # per offload: what its last timed step paid


def measure_offload(workload, rounds, variants: dict | None = None) -> OffloadMeasured:
    """Every variant of ``variants`` (default: offload_variants) checked, then timed in
    interleaved rounds, with the run's rates and the bounds they give."""
    device = main_device()
    loss = mlp_loss(workload)
    variants = variants or offload_variants(workload)
    data = batches(workload, device, rank=0)
    parameters = parameter_count(workload)
    # One build per member, on the device: every trainer and every check's reference starts
    # from a copy of it (a CPU build of a 403M-parameter model took seconds, one per copy).
    phases = PhaseClock(workload.name)
    initial = build_model(workload, device)
    loss_scale = calibrated_loss_scale(initial, loss, data[0])  # 1 but for fp16
    defaults = HybridOptions(cpu_threads=host_threads(), loss_scale=loss_scale,
                             lr=learning_rate(workload.kind, parameters))
    options = {name: replace(defaults, **settings) for name, (_, settings) in variants.items()}
    rows = check_batch_rows(workload)
    check = [Batch(b.inputs[:rows], b.targets[:rows]) for b in data]
    # Three steps at least: the delayed update applies two gradients in them.
    steps = [check[i % len(check)] for i in range(max(3, rounds.check_steps))]
    checks = {name: check_offload(trainer, initial, workload, options[name], steps)
              for name, (trainer, _) in variants.items()}
    phases.done(PHASE.checks)
    trainers = {name: build_trainer(trainer, copy.deepcopy(initial), loss, options[name])
                for name, (trainer, _) in variants.items()}
    del initial
    phases.done(PHASE.builds)

    def variant(name: str) -> Variant:
        trainer, rotation = trainers[name], itertools.cycle(data)

        def after_round() -> dict:
            trainer.drain()  # the delayed update's Adam must not run into the next variant
            timeline = trainer.finish_timeline()
            return {ROUND_EXTRA.timeline: timeline.to_json(),
                    **host_work_split(timeline, parameters, trainer.update_delay)}

        steps = itertools.count(1)

        def step() -> None:
            trainer.step(next(rotation))
            # The delayed update's last Adam of a round ends inside the round's timed steps, as
            # it would before the next step of continuous training; drained after the round
            # instead, a third of its host work went untimed (3 steps a round) and a host-bound
            # delayed update read faster than its own Adam.
            if next(steps) % rounds.steps_per_round == 0:
                trainer.drain()

        return Variant(name, step, after_round)

    try:
        result = measure_interleaved([variant(n) for n in variants], rounds, device, None)
    finally:
        for trainer in trainers.values():
            trainer.close()
    # What each offload paid in its last timed step: buckets, hooks, host Adam calls, copies.
    calls = {name: dict(trainer.step_calls) for name, trainer in trainers.items()
             if hasattr(trainer, "step_calls")}
    phases.done(PHASE.rounds)
    rates = offload_rates(rounds)
    phases.done(PHASE.rates)
    round_ms = {name: round_means(result, name) for name in variants}
    gpu_step = stats.median(round_ms["device-adam"]).value
    bounds = (offload_bounds(gpu_step, parameters,
                             layout(workload, BUCKET_ELEMENTS)[-1],
                             DTYPE_BYTES[workload.dtype], rates)
              if rates["to_host_gbps"] else {})
    return OffloadMeasured(workload=workload, device=device, options=options, checks=checks,
                           parameters=parameters, measurement=result, round_ms=round_ms,
                           variants=variants, rates=rates, bounds=bounds,
                           phases_s=phases.seconds, step_calls=calls)


def round_means(result, name: str) -> list[float]:
    """Per round, the mean of its steps: the round's time per step. Not the median: a delayed
    update's steps differ by design (the first of a round waits for no earlier Adam, the last
    for its own), and only their mean is the rate of continuous training."""
    return [statistics.fmean(steps) for steps in result.step_ms[name]]


class PhaseClock:
    """Seconds each phase of a member's measurement took, each also written at once to the
    process's stderr past pytest's capture: a run cut off by its time limit still says how far
    it got and what took the time. Its seconds are the rows' measure_phases_s, each phase keyed
    as MEASURE_PHASE names it."""

    def __init__(self, member: str):
        self.member, self.seconds, self.last = member, {}, time.perf_counter()

    def done(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase], self.last = now - self.last, now
        print(f"[offload {self.member}] {phase}: {self.seconds[phase]:.1f} s", file=sys.__stderr__,
              flush=True)


def offload_measured(context, rounds, family_member: str) -> OffloadMeasured:
    if context.rank != 0:
        pytest.skip("the fine-grained hybrid is one process: it runs on rank 0")
    workload = offload_family()[family_member][0]  # planned() left out other members
    if family_member in _offload_failed:
        raise MeasurementFailed(_offload_failed[family_member])
    if family_member not in _offload:  # kept for the comparison rows: results, no models
        try:
            _offload[family_member] = measure_offload(workload, rounds)
        except Exception as error:
            # Printed at once past pytest's capture: a run cut off by its time limit never
            # reaches the failures' report.
            why = f"{family_member}: {type(error).__name__}: {error}"
            print(f"[offload {family_member}] failed: {why}", file=sys.__stderr__, flush=True)
            _offload_failed[family_member] = f"measured once, failed: {why}"
            raise
    return _offload[family_member]


class MeasurementFailed(RuntimeError):
    """An offload member's measurement failed in an earlier row of this run."""


def median_of_rounds(extras: list[dict], key: str) -> dict | None:
    values = [e[key] for e in extras if e.get(key) is not None]
    return stats.median(values).to_json() if values else None


def bound_figures(measured: OffloadMeasured, variant: str) -> dict:
    """The variant's bound, its ratio to fused GPU Adam, the goal and whether the step meets
    max(goal, 1.10 × bound ratio) (impl/hybrid/bounds.py); None where no bound applies (the
    bounds count the default buckets: a bucket per tensor is the earlier design, timed beside)."""
    trainer, settings = measured.variants[variant]
    bound = None if "bucket_elements" in settings else measured.bounds.get(trainer)
    if bound is None:
        return dict.fromkeys((STEP_ROW.bound_ms, STEP_ROW.bound_ratio, STEP_ROW.goal_ratio,
                              STEP_ROW.meets_goal))
    round_ms = measured.round_ms
    ratio = stats.ratio(round_ms[variant], round_ms["device-adam"]).value
    gpu_step = stats.median(round_ms["device-adam"]).value
    return {STEP_ROW.bound_ms: bound, STEP_ROW.bound_ratio: bound / gpu_step,
            STEP_ROW.goal_ratio: GOALS[trainer],
            STEP_ROW.meets_goal: meets(ratio, GOALS[trainer], bound / gpu_step)}


@pytest.mark.one_device
@pytest.mark.parametrize("variant", OFFLOAD_VARIANTS + CAST_VARIANTS + PER_TENSOR_VARIANTS
                         + THREAD_VARIANTS + HAND_OFF_VARIANTS)
@pytest.mark.parametrize("member", OFFLOAD_FAMILY)
def test_offload(benchmark, member, variant, dist_context, rounds):
    measured = offload_measured(dist_context, rounds, member)
    if variant not in measured.variants:
        pytest.skip(absent_reason(measured.workload, variant))
    result, workload = measured.measurement, measured.workload
    round_ms, extras = measured.round_ms[variant], result.extras[variant]
    step = stats.median(round_ms)
    check = measured.checks[variant]
    benchmark.group = f"hybrid-offload-{workload.name}"
    record_round_times(benchmark, round_seconds(round_ms))
    write_row(benchmark, HYBRID_STEP.row(
        study="fine-grained", variant=variant,
        workload=workload.name, device=device_name(measured.device),
        step_ms=step.value, step_ms_estimate=step.to_json(), round_ms=round_ms,
        samples_per_s=workload.batch / (step.value / 1e3),
        update_delay=check.update_delay, check=check.to_json(),
        check_rows=check_batch_rows(workload), measure_phases_s=measured.phases_s,
        gradient_error=check.gradient_error, weight_error=check.weight_error,
        parameters=measured.parameters, dtype=workload.dtype,
        host_adam_bytes=ADAM_BYTES_PER_PARAMETER * measured.parameters,
        step_calls=measured.step_calls.get(variant),
        **{key: median_of_rounds(extras, key) for key in HOST_WORK_FIGURES},
        **bound_figures(measured, variant), rates=measured.rates,
        stage_timelines=[extras[-1][ROUND_EXTRA.timeline]],
        config=describe(workload), options=asdict(measured.options[variant]),
        fields=[f.name for f in HYBRID_FIELDS],
    ))


@pytest.mark.one_device
@pytest.mark.parametrize("member", OFFLOAD_FAMILY)
def test_offload_comparison(benchmark, member, dist_context, rounds):
    measured = offload_measured(dist_context, rounds, member)
    result, workload = measured.measurement, measured.workload
    round_ms = measured.round_ms
    pairs = [comparison(a, b, round_ms[a], round_ms[b])
             for a, b in offload_pairs(measured.variants)]
    benchmark.group = f"hybrid-offload-{workload.name}"
    record_round_times(benchmark, [sum(per) for per in zip(*result.wall_s.values())])
    write_row(benchmark, HYBRID_COMPARISON.row(
        study="fine-grained", workload=workload.name,
        device=device_name(measured.device), comparisons=pairs,
        dtype=workload.dtype, parameters=measured.parameters,
        bounds=measured.bounds, rates=measured.rates,
        measurement=result.to_json() | {"extras": {}},  # timelines are in the variant rows
    ))


def offload_pairs(variants: dict) -> list[tuple[str, str]]:
    """Every offload against fused GPU Adam, the foreach baseline too; overlap against after
    backward and DPU against overlap (where the member runs both); each host cast or bucket per
    tensor against the same trainer with the defaults."""
    pairs = [(name, "device-adam") for name in variants if name != "device-adam"]
    pairs += [(a, b) for a, b in (("offload-overlap", "offload-after-backward"),
                                  ("offload-overlap-dpu", "offload-overlap"))
              if a in variants and b in variants]
    pairs += [(name, trainer) for name, (trainer, settings) in variants.items() if settings]
    return pairs


# --- the model only the offload can train (impl/hybrid/largest.py) ---------------------------


ONLY_OFFLOAD_STEPS = 3  # host-bound steps of 2-10 s each; the first after the check is untimed
# Its whole measurement in --full: 206 s on one H200 of a 251 GiB host (29 Nov,
# results/h200x1/logs/20261129T1305-offload-only.log), most of it building the 12 models GPU-only
# Adam tried and pinning the offload's 119 GB of host state.
ONLY_OFFLOAD_EXPECTED_S = 240.0


@pytest.mark.one_device
def test_offload_only(benchmark, dist_context, pytestconfig):
    if dist_context.rank != 0:
        pytest.skip("the fine-grained hybrid is one process: it runs on rank 0")
    if not gpu_here():
        pytest.skip("a model only the offload can train needs a GPU whose memory it exceeds")
    if pytestconfig.option.suite_mode != "full":
        pytest.skip("the largest model runs in --suite-mode full (a few minutes, most of it "
                    "building the models GPU-only Adam tries and pinning host memory)")
    try:
        measured = measure_only_offload(main_device(), host_threads(), ONLY_OFFLOAD_STEPS)
    except NoModelOnlyTheOffloadHolds as reason:  # a host with less memory than its GPU
        pytest.skip(str(reason))
    workload, step = measured.workload, measured.step
    benchmark.group = "hybrid-offload-only"
    record_round_times(benchmark, round_seconds(measured.round_ms))
    write_row(benchmark, OFFLOAD_ONLY.row(
        workload=workload.name, config=describe(workload),
        device=device_name(main_device()), dtype=workload.dtype,
        parameters=measured.parameters, plan=measured.plan,
        gpu_only_attempt=measured.gpu_only_attempt,
        gpu_only_attempts=measured.gpu_only_attempts, check=measured.check,
        step_ms=step.value, step_ms_estimate=step.to_json(),
        round_ms=measured.round_ms, model_tflops=measured.model_tflops,
        peak_tflops=measured.peak_tflops,
        fraction_of_peak=measured.model_tflops / measured.peak_tflops,
    ))

# --- where offload stops costing: the delayed update's crossover in tokens per step -------

CROSSOVER_VARIANTS = ("device-adam", "offload-overlap-dpu")
CROSSOVER_MEMBERS = ("gpt_small_bf16", "mlp_4096x8_b8192", "gpt_medium_fp16", "mlp_tiny")


def crossover_family(mode: str) -> dict[str, object]:
    """name -> the workload whose batch a crossover ladder walks from its own (a CPU-only
    machine walks mlp_tiny's), in every mode: the bf16 decoder, host-bound at its batch, and the
    fp32 MLP, near its bound at its batch (docs/hybrid.md). Not the 403M bf16 MLP: at 4× its
    batch its fused-GPU-Adam training reached a NaN loss at step 75 of --full's rounds on one
    H200 (lr 1e-3 on random targets), and a ladder needs every batch to train. --full adds the
    fp16 decoder."""
    if not gpu_here():
        return {"mlp_tiny": preset("mlp_tiny")}
    full = (gpt_medium_fp16(),) if mode == "full" else ()
    return {w.name: w for w in (gpt_small_bf16(), mlp_4096x8_b8192(), *full)}


def crossover_points() -> int:
    """Batches a ladder measures at most: two on a CPU-only machine, whose rates say nothing of
    a GPU's crossover (the path is what it tests)."""
    return LADDER_POINTS if gpu_here() else 2


def expected_ladder(workload) -> list[int]:
    """The batches a ladder is expected to walk, every point of it: halving from the member's
    batch where its GPU step (suite/deadline.py's rates) is expected within WITHIN of host
    Adam (EXPECTED_HOST_ADAM_BYTES_PER_S), doubling where not. The plan's guess; the run's
    own ratios decide."""
    host_s = parameter_count(workload) * ADAM_BYTES_PER_PARAMETER / EXPECTED_HOST_ADAM_BYTES_PER_S
    step_s = deadline.expected_step_s(workload, deadline.suite_device(), 1, "nvlink")
    if step_s * WITHIN >= host_s:
        return [max(1, workload.batch >> point) for point in range(crossover_points())]
    return [workload.batch << point for point in range(crossover_points())]


def crossover_point(measured: OffloadMeasured, tokens: int, ratio: dict) -> LadderPoint:
    """One measured batch of a ladder."""
    reference, dpu = CROSSOVER_VARIANTS
    checks = measured.checks.values()
    return LadderPoint(
        batch=measured.workload.batch, tokens=tokens,
        device_adam_ms=stats.median(measured.round_ms[reference]).value,
        dpu_ms=stats.median(measured.round_ms[dpu]).value, dpu_ratio=ratio,
        bound_ratio=bound_figures(measured, dpu)[STEP_ROW.bound_ratio],
        gradient_error=max(c.gradient_error for c in checks),
        weight_error=max(c.weight_error for c in checks))


@pytest.mark.one_device
@pytest.mark.parametrize("member", CROSSOVER_MEMBERS)
def test_offload_crossover(benchmark, member, dist_context, rounds, pytestconfig):
    if dist_context.rank != 0:
        pytest.skip("the fine-grained hybrid is one process: it runs on rank 0")
    # planned() left out other members
    workload = crossover_family(pytestconfig.option.suite_mode)[member]
    per_row = getattr(workload, "context", 1)
    ladder, points, last = Ladder(workload.batch, per_row, crossover_points()), [], None
    variants = {name: (name, {}) for name in CROSSOVER_VARIANTS}
    while (batch := ladder.next_batch()) is not None:
        try:
            measured = measure_offload(replace(workload, batch=batch), rounds, variants)
        except torch.OutOfMemoryError as error:  # the batch is past what the GPU holds
            ladder.out_of_memory(batch, str(error).splitlines()[0])
            points.append(LadderPoint(batch, batch * per_row, failed=ladder.failed[batch]))
            torch.cuda.empty_cache()
            continue
        ratio = stats.ratio(measured.round_ms[CROSSOVER_VARIANTS[1]],
                            measured.round_ms[CROSSOVER_VARIANTS[0]]).to_json()
        ladder.measured(batch, ratio)
        points.append(crossover_point(measured, batch * per_row, ratio))
        last = measured
    crossover = ladder.crossover()
    if last is None:
        pytest.fail(f"{workload.name}: {crossover.verdict}")
    rates = last.rates
    host_ms = (host_work_ms(last.parameters, DTYPE_BYTES[workload.dtype], rates)
               if rates["to_host_gbps"] else None)
    fused = {p.tokens: p.device_adam_ms for p in points if p.failed is None}
    benchmark.group = "hybrid-offload-crossover"
    record_round_times(benchmark, [sum(per) for per in zip(*last.measurement.wall_s.values())])
    write_row(benchmark, OFFLOAD_CROSSOVER.row(
        workload=workload.name, config=describe(workload), dtype=workload.dtype, rates=rates,
        device=device_name(last.device), parameters=last.parameters, tokens_per_row=per_row,
        batches=[asdict(point) for point in points], within=WITHIN,
        crossover_tokens=crossover.tokens,
        outside_tokens=crossover.outside_tokens,
        bound_crossover_tokens=bound_crossover_tokens(fused, host_ms) if host_ms else None,
        host_work_ms=host_ms, verdict=crossover.verdict,
    ))


# --- host Adam alone: implementations and thread layouts against memory bandwidth ----------


@dataclass(frozen=True)
class HostAdamMeasured:
    """measure_host_adam's result: its rows and the offload's bounds read it."""

    parameters: int  # updated per step
    threads: int
    measurement: object  # measure_interleaved's result
    absent: dict[str, str]  # variant -> why it did not run (FAILED: prefix: it failed)


_host_adam: dict[str, HostAdamMeasured] = {}


def host_adam_measured(rounds) -> HostAdamMeasured:
    """measure_host_adam's result, measured once per run: its rows and the offload's bounds
    read it."""
    if "host_adam" not in _host_adam:
        _host_adam["host_adam"] = measure_host_adam(rounds)
    return _host_adam["host_adam"]


def full_update(engine: HostAdam, gradients: torch.Tensor) -> None:
    """One host Adam update of ``engine``'s one parameter, every piece at once, waited for."""
    futures = [engine.submit(engine.update, 0, piece, gradients[a:b])
               for piece, (a, b) in enumerate(engine.spans[0])]
    for future in futures:
        future.result()


def measure_host_adam(rounds) -> HostAdamMeasured:
    """Every implementation × layout of HOST_ADAM_VARIANTS updating the offload workload's
    parameter count, and the machine's memory bandwidth measured the same way: an in-place
    a += s·b over as many fp32 values on the same threads (two reads and one write in place,
    as Adam's reads and writes are), interleaved."""
    parameters = parameter_count(mlp_4096x8_b8192() if gpu_here() else preset("mlp_tiny"))
    threads = host_threads()
    weights = [torch.randn(parameters, generator=torch.Generator().manual_seed(0)) * 0.02]
    gradients = torch.randn(parameters, generator=torch.Generator().manual_seed(1)) * 1e-3
    engines = {f"{impl}-{layout}": HostAdam(weights, 1e-3, impl, layout, threads)
               for impl, layout in HOST_ADAM_VARIANTS}

    stream, addend = weights[0].clone(), gradients.clone()
    # One thread with the engines' intra-op threads runs the in-place stream and DeepSpeed's
    # CPU Adam (its OpenMP loops take the calling thread's count, torch.set_num_threads's).
    streamer = ThreadPoolExecutor(1, initializer=torch.set_num_threads, initargs=(threads,))
    variants = [Variant(name, lambda e=engine: full_update(e, gradients))
                for name, engine in engines.items()]
    variants.append(Variant("bandwidth", lambda: streamer.submit(
        stream.add_, addend, alpha=1e-6).result()))
    reference, why_not = deepspeed_reference(weights[0], gradients, streamer)
    if reference is not None:
        variants.append(Variant(DEEPSPEED_VARIANT, lambda: streamer.submit(reference).result()))
    try:
        result = measure_interleaved(variants, rounds, torch.device("cpu"), None)
    finally:
        streamer.shutdown()
        for engine in engines.values():
            engine.close()
    return HostAdamMeasured(parameters=parameters, threads=threads, measurement=result,
                            absent={DEEPSPEED_VARIANT: why_not} if why_not else {})


def deepspeed_reference(weights: torch.Tensor, gradients: torch.Tensor,
                        thread: ThreadPoolExecutor) -> tuple[Callable | None, str | None]:
    """DeepSpeed's CPU Adam over a copy of ``weights`` (impl/hybrid/deepspeed_adam.py), its
    first step checked against torch's fused Adam on ``thread``: ``(its step, None)``, or
    ``(None, why it is absent)``; a step that disagrees fails its row (``FAILED:`` prefix)."""
    param = torch.nn.Parameter(weights.clone())
    param.grad = gradients
    optimizer, why_not = deepspeed_cpu_adam([param], lr=1e-3)
    if optimizer is None:
        return None, why_not
    try:
        thread.submit(check_against_torch, optimizer, param, 1e-3).result()
    except AssertionError as error:
        return None, f"{FAILED}{error}"
    return optimizer.step, None


@pytest.mark.one_device
@pytest.mark.parametrize("variant", [*(f"{i}-{layout}" for i, layout in HOST_ADAM_VARIANTS),
                                     DEEPSPEED_VARIANT])
def test_host_adam(benchmark, variant, dist_context, rounds):
    if dist_context.rank != 0:
        pytest.skip("host Adam is one process: it runs on rank 0")
    measured = host_adam_measured(rounds)
    if why_not := measured.absent.get(variant):
        if why_not.startswith(FAILED):
            pytest.fail(why_not.removeprefix(FAILED))
        pytest.skip(why_not)
    result, parameters = measured.measurement, measured.parameters
    round_ms, bandwidth_ms = result.round_ms(variant), result.round_ms("bandwidth")
    adam_bytes = ADAM_BYTES_PER_PARAMETER * parameters
    stream_bytes = BANDWIDTH_BYTES_PER_VALUE * parameters
    step = stats.median(round_ms)
    benchmark.group = "hybrid-host-adam"
    record_round_times(benchmark, round_seconds(round_ms))
    write_row(benchmark, HOST_ADAM.row(
        variant=variant, parameters=parameters,
        threads=measured.threads, device=device_name(torch.device("cpu")),
        step_ms=step.value, step_ms_estimate=step.to_json(), round_ms=round_ms,
        adam_gbps=adam_bytes / (step.value * 1e6),
        bandwidth_round_ms=bandwidth_ms,
        bandwidth_gbps=stream_bytes / (stats.median(bandwidth_ms).value * 1e6),
        # (bytes_adam / t_adam) / (bytes_stream / t_stream), paired by round
        fraction_of_bandwidth=stats.ratio(
            [b * adam_bytes for b in bandwidth_ms], [a * stream_bytes for a in round_ms]
        ).to_json(),
    ))


# --- host Adam beside the rest of the offloaded step: what costs it its rate -----------------

# condition -> (the gradients' dtype, the work beside host Adam): the decoder's delayed update
# hands host Adam bf16 gradients, cast to fp32 in its workers, while the GPU trains and the
# copies run (impl/hybrid/contention.py).
BESIDE_CONDITIONS = {"alone": ("fp32", ()), "bf16-gradients": ("bf16", ()),
                     "beside-gpu": ("bf16", ("gpu",)), "beside-copies": ("bf16", ("copies",)),
                     "beside-both": ("bf16", ("gpu", "copies"))}
BESIDE_REFERENCE = "alone"


@dataclass(frozen=True)
class BesideMeasured:
    """measure_host_adam_beside's result: every condition's rows read it."""

    workload: object
    parameters: int
    threads: int
    measurement: object  # measure_interleaved's result


_beside: dict[str, BesideMeasured] = {}


def measure_host_adam_beside(rounds) -> BesideMeasured:
    """The trainers' host Adam (HOST_ADAM_VARIANT) over the decoder's parameter count in every
    condition of BESIDE_CONDITIONS, interleaved: the work beside it starts before a round's
    timed updates and stops after them."""
    if "measured" in _beside:
        return _beside["measured"]
    device, workload = main_device(), gpt_small_bf16()
    model = build_model(workload, device)
    batch = next(iter(batches(workload, device, rank=0)))
    works = {"gpu": gpu_steps(model, batch, mlp_loss(workload), device),
             "copies": copies(device)}
    parameters, threads = parameter_count(workload), host_threads()
    weights = [torch.randn(parameters, generator=torch.Generator().manual_seed(0)) * 0.02]
    gradients = {dtype: (torch.randn(parameters, generator=torch.Generator().manual_seed(1))
                         * 1e-3).to(DTYPES[dtype]) for dtype in ("fp32", "bf16")}
    implementation, layout = HOST_ADAM_VARIANT.split("-")
    engine = HostAdam(weights, 1e-3, implementation, layout, threads)

    def variant(name: str) -> Variant:
        dtype, beside = BESIDE_CONDITIONS[name]
        stack = contextlib.ExitStack()

        return Variant(name, lambda: full_update(engine, gradients[dtype]),
                       before_round=lambda: [stack.enter_context(Beside(works[w]))
                                             for w in beside],
                       after_round=stack.close)

    try:
        result = measure_interleaved([variant(n) for n in BESIDE_CONDITIONS], rounds,
                                     torch.device("cpu"), None)
    finally:
        engine.close()
    _beside["measured"] = BesideMeasured(workload, parameters, threads, result)
    return _beside["measured"]


@pytest.mark.one_device
@pytest.mark.parametrize("condition", BESIDE_CONDITIONS)
def test_host_adam_beside(benchmark, condition, dist_context, rounds, pytestconfig):
    if dist_context.rank != 0:
        pytest.skip("host Adam is one process: it runs on rank 0")
    if not gpu_here():
        pytest.skip("host Adam beside a GPU's training needs a GPU")
    if pytestconfig.option.suite_mode != "full":
        pytest.skip("host Adam beside the rest of the step runs in --suite-mode full")
    measured = measure_host_adam_beside(rounds)
    result, parameters = measured.measurement, measured.parameters
    round_ms = result.round_ms(condition)
    step = stats.median(round_ms)
    benchmark.group = "hybrid-host-adam-beside"
    record_round_times(benchmark, round_seconds(round_ms))
    write_row(benchmark, HOST_ADAM.row(
        variant=f"{HOST_ADAM_VARIANT} {condition}", parameters=parameters,
        threads=measured.threads, device=device_name(torch.device("cpu")),
        step_ms=step.value, step_ms_estimate=step.to_json(), round_ms=round_ms,
        adam_gbps=ADAM_BYTES_PER_PARAMETER * parameters / (step.value * 1e6),
        # rate / rate alone = time alone / time, paired by round
        vs_alone=stats.ratio(result.round_ms(BESIDE_REFERENCE), round_ms).to_json(),
    ))


# --- coarse-grained: a GPU worker and a CPU worker sharing each batch ------------------------


COARSE_MEMBERS = ("mlp_1024x8", "mlp_tiny", "mlp_256x8_b1024")


def coarse_family() -> dict:
    """name -> workload: one on each side of the crossover (impl/hybrid/coarse.py,
    split_decision) where the machine has one. Two CPU workers: mlp_tiny (exchange longer than
    the compute: worker 0 alone) and the same MLP at 16 times the batch (compute 4 times the
    exchange: the split). A GPU beside its host: mlp_1024x8; no preset lies on the split side
    there (its decision row gives the batch from which the split would pay)."""
    if gpu_here():
        return {"mlp_1024x8": preset("mlp_1024x8")}
    return {"mlp_tiny": preset("mlp_tiny"), "mlp_256x8_b1024": mlp_256x8_b1024()}


def worker_threads(workload, device, loss, batch) -> tuple[int, dict | None]:
    """A worker's host threads, and the probe they came from: one for the GPU worker; for the
    CPU worker beside a GPU, the count its step alone runs fastest at, up to every core but the
    GPU worker's (impl/threads.py: with every core of a 64-core GPU host the benchmark took
    64 s, against 12 s on a 32-core one)."""
    most = cpu_worker_threads(2)
    if device.type != "cpu":
        return 1, None
    if not gpu_here():
        return most, None
    alone = build_trainer("device-adam", host_initialised_model(workload, device), loss,
                          HybridOptions(cpu_threads=most))
    try:
        return fastest_threads(lambda: alone.step(batch), most)
    finally:
        alone.close()


@dataclass(frozen=True)
class WorkerMeasured:
    """One coarse-grained worker's part of the measurement, gathered from both workers."""

    round_ms: dict[str, list[float]]  # per variant, as this worker timed it
    compute_ms: list[float]  # the hybrid's compute on this worker, per round
    device: str  # device_name, taken with the worker's threads set
    threads: int
    thread_probe: dict[str, float] | None  # worker_threads's probe, where it ran one


def measure_coarse(context, rounds, workload) -> CoarseMeasured:
    group = context.group(2)
    rank = context.rank
    device = worker_device(rank)
    loss = mlp_loss(workload)
    # Made on the CPU and moved: a CUDA generator draws other numbers than a CPU one, and
    # both workers must share the same batch.
    data = [Batch(b.inputs.to(device), b.targets.to(device))
            for b in batches(workload, torch.device("cpu"), rank=0)]
    threads, thread_probe = worker_threads(workload, device, loss, data[0])
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    options = HybridOptions(cpu_threads=threads)
    shares = even_shares(workload.batch, 2)
    probe = CoarseHybrid(host_initialised_model(workload, device), loss, options, group, shares)
    balanced = balance(probe, data[0])
    # Correctness first: the summed, share-weighted gradient against the whole batch's CPU
    # gradient, and both workers' updates against Adam applied to it (impl/hybrid/trainer_check.py).
    checked = CoarseHybrid(host_initialised_model(workload, device), loss, options, group,
                           balanced[BALANCE.shares])
    steps = [data[i % len(data)] for i in range(rounds.check_steps)]
    check = check_training(f"coarse-grained hybrid (worker {rank})", checked,
                           build_model(workload, torch.device("cpu")), loss, steps,
                           max(workload.batch, workload.width))
    checks: list = [None, None]  # each worker's TrainingCheck, once gathered
    dist.all_gather_object(checks, check, group=group)
    if failures := [c.failure for c in checks if c.failure]:
        raise TrainingCheckFailed(failures[0])  # on both workers: neither waits for the other
    hybrid = CoarseHybrid(host_initialised_model(workload, device), loss, options, group,
                          balanced[BALANCE.shares])
    alone = build_trainer("device-adam", host_initialised_model(workload, device), loss, options)
    rotation = itertools.cycle(data)  # one rotation, shared by the hybrid and the worker alone

    def hybrid_round() -> dict:
        hybrid.finish_timeline()
        return {"compute_ms": hybrid.compute_ms[-1]}

    def alone_on(worker: int):
        return lambda: alone.step(next(rotation)) if rank == worker else None

    variants = [Variant("coarse-hybrid", lambda: hybrid.step(next(rotation)), hybrid_round),
                Variant("worker0-alone", alone_on(0)), Variant("worker1-alone", alone_on(1))]
    result = measure_interleaved(variants, rounds, device, group)
    mine = WorkerMeasured(
        round_ms={n: result.round_ms(n) for n in COARSE_VARIANTS},
        compute_ms=[e["compute_ms"] for e in result.extras["coarse-hybrid"]],
        device=device_name(device), threads=threads,
        thread_probe={str(n): ms for n, ms in thread_probe.items()} if thread_probe else None)
    torch.set_num_threads(previous_threads)
    workers: list = [None, None]  # each worker's WorkerMeasured, once gathered
    dist.all_gather_object(workers, mine, group=group)
    # Rank 0's step of the hybrid waits for the exchange, so it is the hybrid's step; each
    # worker's time alone is taken where that worker ran.
    round_ms = {"coarse-hybrid": workers[0].round_ms["coarse-hybrid"],
                "worker0-alone": workers[0].round_ms["worker0-alone"],
                "worker1-alone": workers[1].round_ms["worker1-alone"]}
    imbalance = [residual_imbalance(a, b) for a, b in zip(workers[0].compute_ms,
                                                          workers[1].compute_ms)]
    return CoarseMeasured(workload=workload, balance=balanced, checks=checks, round_ms=round_ms,
                          workers=workers, imbalance=imbalance, orders=result.orders)


@dataclass(frozen=True)
class CoarseMeasured:
    """One coarse-grained member's measurement (measure_coarse), which its variant rows and its
    comparison row read."""

    workload: object
    balance: dict  # impl/hybrid/coarse.py's balance: the shares and how they were found
    checks: list[TrainingCheck]  # per worker
    round_ms: dict[str, list[float]]  # per variant
    workers: list[WorkerMeasured]
    imbalance: list[float]  # the hybrid's residual imbalance per round
    orders: list  # the variants' order in each round


_coarse: dict[str, CoarseMeasured] = {}


def coarse_skip_reason(context) -> str | None:
    """The coarse-grained hybrid needs ranks 0 and 1 of a gloo run: one process per worker.
    ``python -m suite.run`` gives it a pass of its own where the main pass is not one."""
    if reason := capabilities.missing_world(2, context.world_size):
        return (f"{reason}: one process per worker, which python -m suite.run's two-process "
                "gloo pass (torchrun hybrid) provides")
    if context.group(2) is None:
        return f"rank {context.rank} is not one of the two workers"
    if context.backend != "gloo":
        return ("the workers exchange gradients over gloo: python -m suite.run's two-process "
                "gloo pass (torchrun hybrid) runs it")
    return None


def coarse_measured(context, rounds, member: str) -> CoarseMeasured:
    if reason := coarse_skip_reason(context):
        pytest.skip(reason)
    family = coarse_family()
    if member not in family:
        pytest.skip(f"{member} is not in this machine's coarse-grained family "
                    f"({', '.join(family)})")
    if member not in _coarse:
        _coarse[member] = measure_coarse(context, rounds, family[member])
    return _coarse[member]


# The coarse-grained hybrid's two processes share the host's cores: the run's plan times
# them apart from the offload family's one process (suite/budget.py).
COARSE_STUDY = pytest.mark.study("coarse hybrid")


@COARSE_STUDY
@pytest.mark.parametrize("variant", COARSE_VARIANTS)
@pytest.mark.parametrize("member", COARSE_MEMBERS)
def test_coarse(benchmark, member, variant, dist_context, rounds):
    measured = coarse_measured(dist_context, rounds, member)
    workload, round_ms = measured.workload, measured.round_ms[variant]
    step = stats.median(round_ms)
    worker = 1 if variant == "worker1-alone" else 0
    benchmark.group = f"hybrid-coarse-{workload.name}"
    record_round_times(benchmark, round_seconds(round_ms))
    imbalance = stats.median(measured.imbalance) if variant == "coarse-hybrid" else None
    write_row(benchmark, HYBRID_STEP.row(
        study="coarse-grained", variant=variant,
        workload=workload.name, device=" + ".join(w.device for w in measured.workers)
        if variant == "coarse-hybrid" else measured.workers[worker].device,
        step_ms=step.value, step_ms_estimate=step.to_json(), round_ms=round_ms,
        samples_per_s=workload.batch / (step.value / 1e3),
        shares=measured.balance[BALANCE.shares] if variant == "coarse-hybrid" else None,
        balance=measured.balance if variant == "coarse-hybrid" else None,
        residual_imbalance=imbalance.value if imbalance else None,
        residual_imbalance_estimate=imbalance.to_json() if imbalance else None,
        worker_compute_ms=[w.compute_ms for w in measured.workers]
        if variant == "coarse-hybrid" else None,
        checks=[c.to_json() for c in measured.checks] if variant == "coarse-hybrid" else None,
        gradient_error=max(c.gradient_error for c in measured.checks)
        if variant == "coarse-hybrid" else None,
        weight_error=max(c.weight_error for c in measured.checks)
        if variant == "coarse-hybrid" else None,
        config=describe(workload), fields=[f.name for f in HYBRID_FIELDS],
    ))


@COARSE_STUDY
@pytest.mark.parametrize("member", COARSE_MEMBERS)
def test_coarse_comparison(benchmark, member, dist_context, rounds):
    measured = coarse_measured(dist_context, rounds, member)
    round_ms = measured.round_ms
    pairs = [comparison("coarse-hybrid", alone, round_ms["coarse-hybrid"], round_ms[alone])
             for alone in ("worker0-alone", "worker1-alone")]
    benchmark.group = f"hybrid-coarse-{measured.workload.name}"
    record_round_times(benchmark, round_seconds([sum(r) for r in zip(*round_ms.values())]))
    write_row(benchmark, HYBRID_COMPARISON.row(
        study="coarse-grained",
        workload=measured.workload.name, comparisons=pairs, round_ms=round_ms,
        orders=measured.orders, residual_imbalance_per_round=measured.imbalance,
    ))


# --- the study's experiments --------------------------------------------------------------


_curves: dict[str, dict] = {}
# A digits curve (run_digits, digits_curve) and a forward's times (measure_in_fresh_process)
# name their figures as their rows do.
DIGITS_ROW, GPT_ROW = DIGITS_CURVE.names, GPT_FORWARD.names


def digits_epochs(mode: str) -> int:
    return DigitsConfig().epochs if gpu_here() else DIGITS_EPOCHS[mode]


def digits_curve(variant: str, context, data, config: DigitsConfig, epochs: int) -> dict:
    """One digits curve with the threads its variant gets (run_digits), and those threads. The
    CPU row and the coarse hybrid's CPU worker train at the thread count they run fastest at
    on a machine with a GPU (``classifier_threads``), the probe's times kept beside them."""
    probe = None
    if variant == "coarse-hybrid":  # the GPU worker drives its GPU; the CPU worker computes
        on_cpu = worker_device(context.rank).type == "cpu"
        threads = cpu_worker_threads(2) if on_cpu else 1
        if on_cpu and gpu_here():
            threads, probe = classifier_threads(data, config, threads)
    elif variant == "cpu" and gpu_here():
        threads, probe = classifier_threads(data, config, os.cpu_count() or 1)
    else:
        threads = (os.cpu_count() or 1) if gpu_here() else 1
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        result = run_digits(variant, data, config, epochs, threads,
                            group=context.group(2) if variant == "coarse-hybrid" else None)
    finally:
        torch.set_num_threads(previous)
    return {**result, DIGITS_ROW.threads: threads,
            DIGITS_ROW.thread_probe_ms: {str(n): ms for n, ms in probe.items()} if probe else None}


@pytest.mark.parametrize("variant", [
    # The coarse-grained hybrid is the one that needs two ranks (its own pass, suite/run.py).
    pytest.param(v, marks=[COARSE_STUDY] if v == "coarse-hybrid" else [pytest.mark.one_device])
    for v in DIGITS_VARIANTS])
def test_digits(benchmark, variant, dist_context, pytestconfig):
    context = dist_context
    if reason := capabilities.missing_sklearn():
        pytest.skip(reason)
    if variant == "gpu" and (reason := capabilities.missing_gpu()):
        pytest.skip(reason)
    if variant == "coarse-hybrid" and (reason := coarse_skip_reason(context)):
        pytest.skip(reason)
    if variant != "coarse-hybrid" and context.rank != 0:
        pytest.skip(f"{variant} is one process: it runs on rank 0")
    config = DigitsConfig()
    epochs = digits_epochs(pytestconfig.option.suite_mode)
    data = load_data(config=config)
    result = _curves[variant] = digits_curve(variant, context, data, config, epochs)
    curve = result[DIGITS_ROW.curve]
    matched = None
    if variant != "cpu" and context.rank == 0:
        if "cpu" not in _curves:  # a pass without the CPU row (the two-process hybrid pass)
            _curves["cpu"] = digits_curve("cpu", context, data, config, epochs)
        matched = loss_curves_match(curve["train_loss"],
                                    _curves["cpu"][DIGITS_ROW.curve]["train_loss"])
        assert matched <= LOSS_CURVE_TOLERANCE, (
            f"{variant}: digits loss curve differs from the CPU's by {matched:.3g} of the CPU's "
            f"first-epoch loss (tolerance {LOSS_CURVE_TOLERANCE})")
    benchmark.group = f"digits-{config.name}"
    record_round_times(benchmark, curve["epoch_s"])
    write_row(benchmark, DIGITS_CURVE.row(
        # run_digits's fields (variant, device, epochs, curve, the hybrid's balance) and the
        # threads with their probe (digits_curve)
        **result, study_epochs=config.epochs,
        data=data.source, train_rows=len(data.y_train), test_rows=len(data.y_test),
        final_test_accuracy=curve["test_accuracy"][-1],
        loss_curve_max_diff_vs_cpu=matched, loss_curve_tolerance=LOSS_CURVE_TOLERANCE,
        config=asdict(config),
    ))


@pytest.mark.one_device
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_gpt_forward(benchmark, device, dist_context, pytestconfig):
    if dist_context.rank != 0:
        pytest.skip("the forward table is one process: it runs on rank 0")
    if device == "cuda" and (reason := capabilities.missing_gpu()):
        pytest.skip(reason)
    full = gpu_here() or pytestconfig.option.suite_mode == "full"
    iterations = GPT_ITERATIONS if full or device == "cuda" else 2
    threads = os.cpu_count() or 1
    measured = measure_in_fresh_process(device, iterations, threads)
    times = measured[GPT_ROW.iteration_ms]
    config = gpt_study_w384_b2()
    benchmark.group = f"gpt-forward-{config.name}"
    record_round_times(benchmark, round_seconds(times))
    write_row(benchmark, GPT_FORWARD.row(
        device=device, device_name=measured[GPT_ROW.device_name],
        threads=measured[GPT_ROW.threads], iterations=iterations, iteration_ms=times,
        first_ms=times[0],
        steady_ms=statistics.median(times[1:]) if len(times) > 1 else None,
        study=STUDY_TABLE[device], config=describe(config),
    ))
