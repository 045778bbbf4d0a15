"""Every benchmark has a deadline: a multiple of its expected time, never below a floor.

    deadline = max(floor, multiple · expected)        (--deadline-floor-s, --deadline-multiple)

``expected`` is what the benchmark should take here, from its mode and workload: its module's
``expected_seconds(item, mode)`` where it has one (the steps its mode runs times
``expected_step_s`` of its workload, plus the models it builds), else ``DEFAULT_EXPECTED_S``
for the mode. The rates below are low (a loaded 2-core machine, a third of a GPU's peak): a
slow or shared machine must not pass for a hung one, and the multiple is the margin on top.
A benchmark past its deadline is stopped with every rank's stack (suite/watchdog.py) and the
run goes on without it (suite/run.py).

    deadline_s(expected_s=12.0, multiple=4.0, floor_s=60.0)   # 60.0: the floor
    deadline_s(expected_s=90.0, multiple=4.0, floor_s=60.0)   # 360.0
"""

from __future__ import annotations

import functools

import torch

from impl.workloads import DTYPES, WorkloadConfig, build_model

DEFAULT_MULTIPLE = 4.0
MPI_STAGED = "mpi-staged"  # the all-reduce rate of the mpi strategy on GPUs
DEFAULT_FLOOR_S = 60.0
# Benchmarks whose module has no estimate of its own: (GPU run?, mode) -> expected seconds.
# Outside the overlap and pipeline cells the slowest default-mode benchmark of the 2-core CPU
# machine took 18 s (bench_hybrid's GPT forward) at a load of 5 to 7 (2026-11-24, --durations).
DEFAULT_EXPECTED_S = {
    (False, "quick"): 10.0, (False, "default"): 20.0, (False, "full"): 60.0,
    (True, "quick"): 30.0, (True, "default"): 60.0, (True, "full"): 180.0,
}
# The rates: a gloo rank of the 2-core machine did 11 GFLOP/s and moved 0.37 GB/s at a load of
# 5 to 7 (the overlap cells of that run); cuBLAS reaches 60-80% of the H200's dense peak.
CPU_FLOPS = 10e9  # per rank
GPU_SHARE_OF_PEAK = 0.3  # of impl/kernels/peaks.py's dense peak for the workload's dtype
UNKNOWN_GPU_FLOPS = 10e12  # a GPU without a peaks row
ALL_REDUCE_BYTES_PER_S = {  # by recorded profile (impl/profiles.py); ANCHORS.md has 3-330 GB/s
    "gloo-tcp": 0.3e9, "nvlink": 50e9, "shm": 10e9, "socket": 2e9,
    # mpi4py on GPUs stages every chunk through host memory: gpt_small_bf16's 0.25 GB of
    # gradients took 0.49 s a step on 2 H200 (2026-11-27, results/h200x2).
    MPI_STAGED: 0.2e9,
}
BUILD_S_PER_BYTE = {"cpu": 1 / 0.2e9, "cuda": 1 / 2e9}  # initialising a model's weights


def deadline_s(expected_s: float, multiple: float, floor_s: float) -> float:
    """max(floor, multiple · expected): the seconds a benchmark may take before it counts as
    hung."""
    return max(floor_s, multiple * expected_s)


def suite_device() -> torch.device:
    """Where benchmarks run: the GPU under NCCL, the CPU under gloo (even on a GPU machine)."""
    from impl.settings import selected_backend

    return torch.device("cuda" if selected_backend() == "nccl" else "cpu")


def default_expected_s(mode: str, device: torch.device) -> float:
    return DEFAULT_EXPECTED_S[device.type == "cuda", mode]


@functools.lru_cache(maxsize=64)  # every row of a cell asks; a model on the meta device
def parameter_count(workload: WorkloadConfig) -> int:
    return sum(p.numel() for p in build_model(workload, torch.device("meta")).parameters())


def step_flops(workload: WorkloadConfig) -> float:
    """Floating-point operations of one training step: 6 per parameter and sample (forward
    2, backward 4), per token for the transformer plus its attention (12 · layers · batch ·
    context² · width)."""
    params = parameter_count(workload)
    if workload.kind == "gpt":
        tokens = workload.batch * workload.context
        attention = 12 * workload.layers * workload.batch * workload.context ** 2 * workload.width
        return 6 * params * tokens + attention
    samples = workload.batch * (1 + getattr(workload, "extra_compute", 0.0))
    return 6 * params * samples


def device_flops(workload: WorkloadConfig, device: torch.device) -> float:
    """The deliberately low rate ``expected_step_s`` assumes for this workload's dtype."""
    if device.type != "cuda":
        return CPU_FLOPS
    from impl.kernels import peaks

    try:
        table = peaks.lookup(torch.cuda.get_device_name(device))
    except peaks.UnknownDeviceError:
        return UNKNOWN_GPU_FLOPS
    return GPU_SHARE_OF_PEAK * table.peak_flops(workload.dtype)


def weight_bytes(workload: WorkloadConfig) -> int:
    return parameter_count(workload) * DTYPES[workload.dtype].itemsize


def expected_step_s(workload: WorkloadConfig, device: torch.device, world_size: int,
                    profile: str) -> float:
    """One step at the rates above: compute, plus the all-reduce of every gradient when there
    is a group to average over."""
    compute = step_flops(workload) / device_flops(workload, device)
    if world_size == 1:
        return compute
    return compute + weight_bytes(workload) / ALL_REDUCE_BYTES_PER_S[profile]


def expected_s(workload: WorkloadConfig, steps: int, builds: int, world_size: int,
               device: torch.device, profile: str | None = None) -> float:
    """``steps`` training steps and ``builds`` model builds of ``workload`` in this run, its
    all-reduces at ``profile``'s rate (default: the run's recorded profile)."""
    from impl.profiles import recorded_profile
    from impl.settings import selected_backend

    profile = profile or recorded_profile(selected_backend())
    step = expected_step_s(workload, device, world_size, profile)
    return steps * step + builds * weight_bytes(workload) * BUILD_S_PER_BYTE[device.type]
