"""The model only the offload can train: the smallest MLP of the capacity plan's width and batch
that GPU-only Adam cannot hold on this GPU, trained by the overlapped offload, one checked step
and then timed steps, reported as model TFLOP/s against the GPU's measured bf16 peak (the
figure ZeRO-Offload reports).

The plan (impl/hybrid/capacity.py) says where GPU-only Adam stops; the measurement tries it
from there one layer at a time until the GPU refuses, and records each attempt, so the claim
"GPU-only cannot" is observed, not only planned (on one H100 the plan's 55 layers ran, and so
did 56: the plan keeps a reserve). The check is ``check_first_step``
(impl/hybrid/trainer_check.py): an fp32 reference with Adam's whole state would need as much
GPU memory as the GPU-only trainer that does not fit.
"""

from __future__ import annotations

import copy
import gc
import os
from dataclasses import dataclass

import torch

from impl import stats
from impl.hybrid.base import HybridOptions
from impl.hybrid.capacity import mlp_capacity
from impl.hybrid.trainer_check import check_first_step
from impl.rows.study_records import GPU_ONLY_ATTEMPT as ATTEMPT
from impl.workloads import MLPConfig, build_model, loss_fn, make_batch

WIDTH, BATCH, DTYPE = 8192, 2048, "bf16"
PEAK_SHAPE = 8192  # the bf16 peak: cuBLAS on an 8192³ matmul, the shape it runs fastest


def host_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def mlp(layers: int) -> MLPConfig:
    return MLPConfig(f"mlp_{WIDTH}x{layers}_b{BATCH}_{DTYPE}", width=WIDTH, depth=layers,
                     batch=BATCH, dtype=DTYPE)


class NoModelOnlyTheOffloadHolds(ValueError):
    """This GPU and host have no model that only the offload can train: the host holds no more
    of the offload's 16 bytes a parameter than the GPU holds of GPU-only Adam's."""


def only_offload_workload(device: torch.device, loss_of, options: HybridOptions
                          ) -> tuple[MLPConfig, dict, list[dict]]:
    """The smallest model GPU-only Adam cannot hold, found by trying it one layer at a time
    from the plan's limit up (the plan keeps a reserve, so GPU-only Adam may hold more than
    it says), with the plan and every attempt."""
    plan = mlp_capacity(torch.cuda.get_device_properties(device).total_memory, host_bytes(),
                        WIDTH, BATCH, DTYPE)
    if plan.offload_layers <= plan.gpu_only_layers:
        raise NoModelOnlyTheOffloadHolds(
            f"no model only the offload can train here: the plan holds {plan.gpu_only_layers} "
            f"layers of width {WIDTH} with GPU-only Adam and {plan.offload_layers} with the "
            f"offload, bound by the {plan.offload_bound_by}'s memory ({host_bytes() / 2**30:.0f} "
            f"GiB of host memory)")
    attempts = []
    for layers in range(plan.gpu_only_layers + 1, plan.offload_layers + 1):
        workload = mlp(layers)
        outcome = try_gpu_only(workload, device, loss_of(workload), make_batch(workload, device),
                               options)
        free_gpu_memory()  # what the attempt allocated
        attempts.append({ATTEMPT.layers: layers, ATTEMPT.parameters: layers * WIDTH ** 2,
                         ATTEMPT.gpu_only: outcome})
        if outcome != "ran":
            return workload, plan.to_json(), attempts
    raise NoModelOnlyTheOffloadHolds(f"no model only the offload can train here: GPU-only Adam "
                                     f"held {plan.offload_layers} layers, as many as the "
                                     "offload's plan")


def try_gpu_only(workload: MLPConfig, device: torch.device, loss, batch,
                 options: HybridOptions) -> str:
    """One fused-GPU-Adam step of a fresh ``workload`` model: "ran", or what the GPU said."""
    from impl.hybrid import build_trainer  # impl.hybrid's registry imports the trainers

    try:
        build_trainer("device-adam", build_model(workload, device), loss, options).step(batch)
        torch.cuda.synchronize(device)
        return "ran"
    except torch.OutOfMemoryError as error:
        return "out of memory: " + str(error).split(". ")[0]


def loss_for(workload: MLPConfig):
    return lambda outputs, targets: loss_fn(workload, outputs, targets)


def free_gpu_memory() -> None:
    gc.collect()
    torch.cuda.empty_cache()


def bf16_peak_tflops(device: torch.device, repeats: int = 20) -> float:
    """cuBLAS's bf16 rate on an 8192³ matmul, median of ``repeats`` (after a warm-up)."""
    a, b = (torch.randn(PEAK_SHAPE, PEAK_SHAPE, device=device, dtype=torch.bfloat16)
            for _ in range(2))
    times = []
    for index in range(repeats + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        if index:
            times.append(start.elapsed_time(end))
    return 2 * PEAK_SHAPE ** 3 / (stats.median(times).value / 1e3) / 1e12


@dataclass(frozen=True)
class OnlyOffload:
    """measure_only_offload's result: the model, its plan and GPU-only attempts, the first
    step's check and the timed steps with their rate against the GPU's bf16 peak."""

    workload: MLPConfig
    plan: dict
    gpu_only_attempts: list[dict]
    gpu_only_attempt: str  # the last attempt's outcome: what the model itself did on the GPU
    check: dict
    parameters: int
    round_ms: list[float]
    step: stats.Estimate
    model_tflops: float
    peak_tflops: float


def measure_only_offload(device: torch.device, threads: int, steps: int) -> OnlyOffload:
    """The plan, GPU-only Adam's attempt, the offload's checked first step and ``steps`` timed
    steps after it (CUDA events around each; the first of them untimed)."""
    from impl.hybrid import build_trainer

    options = HybridOptions(cpu_threads=threads)
    workload, plan, attempts = only_offload_workload(device, loss_for, options)
    loss = loss_for(workload)
    batch = make_batch(workload, device)
    model = build_model(workload, device)
    reference = copy.deepcopy(model).float()
    trainer = build_trainer("offload-overlap", model, loss, options)
    try:
        check = check_first_step("offload-overlap", trainer, reference, loss, batch,
                                 max(workload.batch, workload.width)).require().to_json()
        del reference
        free_gpu_memory()
        step_ms = []
        for index in range(steps + 1):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            trainer.step(batch)
            end.record()
            end.synchronize()
            if index:
                step_ms.append(start.elapsed_time(end))
    finally:
        trainer.close()
    parameters = sum(p.numel() for p in model.parameters())
    step = stats.median(step_ms)
    peak = bf16_peak_tflops(device)
    flops = 6 * parameters * workload.batch
    return OnlyOffload(workload=workload, plan=plan, gpu_only_attempts=attempts,
                       gpu_only_attempt=attempts[-1][ATTEMPT.gpu_only], check=check,
                       parameters=parameters, round_ms=step_ms, step=step,
                       model_tflops=flops / (step.value / 1e3) / 1e12, peak_tflops=peak)
