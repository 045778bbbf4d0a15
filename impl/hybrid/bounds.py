"""The offload's physical bounds, from measured rates: what no offloaded step can beat.

With P parameters of b bytes on the device (4 for fp32, 2 for bf16/fp16), host Adam at
``adam_gbps`` (counted at ADAM_BYTES_PER_PARAMETER, fp32 master and state) and pinned copies at
``to_host_gbps`` and ``to_device_gbps``:

- host work = P · 28 / adam_gbps + P · b / to_host_gbps + P · b / to_device_gbps;
- delayed update (offload-overlap-dpu): bound = max(GPU step, host work), the GPU step being
  fused GPU Adam's (device-adam): the host's work for step t runs during step t + 1, so at
  best the step is whichever side is longer;
- overlapped (offload-overlap): bound = max(GPU step + tail, host work), the tail being the
  host work of the bucket backward completes last (impl/hybrid/buckets.py: the one holding the
  first layer's weights, which the next forward reads first), which ordering leaves after
  backward; and the whole step's host work, which the overlapped update finishes inside its
  own step (without it, the 403M bf16 member's bound read 1.34× fused GPU Adam while its host
  work at the measured rates came to 8.22×, docs/hybrid.md).

The offload pays its fixed costs (a copy each way, a host Adam call) per piece of a bucket,
and the rates are measured over pieces of that size, so the bound counts them as the trainer
pays them. The rates are measured on the machine the bound is quoted for, in the same run.
"""

from __future__ import annotations

import statistics
import time

import torch

from impl.hybrid.host_adam import ADAM_BYTES_PER_PARAMETER
from impl.rows.kinds import HOST_ADAM

COPY_BYTES = 256 << 20  # pinned copies of 256 MiB reach PCIe's plateau
# The rates name host Adam's as its row does (suite/bench_hybrid.py writes them so).
ADAM = HOST_ADAM.names


def host_work_ms(parameters: int, value_bytes: int, rates: dict) -> float:
    """Host Adam plus both copies of ``parameters`` values of ``value_bytes`` bytes, in ms."""
    return parameters * (ADAM_BYTES_PER_PARAMETER / rates[ADAM.adam_gbps]
                         + value_bytes / rates["to_host_gbps"]
                         + value_bytes / rates["to_device_gbps"]) / 1e6


def offload_bounds(gpu_step_ms: float, parameters: int, last_bucket_parameters: int,
                   value_bytes: int, rates: dict) -> dict[str, float]:
    """The module's two bounds in ms, per variant name."""
    host_ms = host_work_ms(parameters, value_bytes, rates)
    tail_ms = host_work_ms(last_bucket_parameters, value_bytes, rates)
    return {"offload-overlap-dpu": max(gpu_step_ms, host_ms),
            "offload-overlap": max(gpu_step_ms + tail_ms, host_ms)}


def median_ms(task, repeats: int, warm: bool = False) -> float:
    """The median wall time of ``task`` over ``repeats`` calls, in ms (after one untimed call
    with ``warm``: first touch of fresh memory)."""
    if warm:
        task()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        task()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def measure_copy_rates(device: torch.device, repeats: int = 5) -> dict:
    """Pinned copy rates each way over COPY_BYTES, medians of ``repeats`` (CUDA only; None on
    the CPU). Host Adam's rate is not measured here: the bounds read the run's one timing of
    the trainers' host Adam (suite/bench_hybrid.py: offload_rates)."""
    if device.type != "cuda":
        return {"to_host_gbps": None, "to_device_gbps": None}
    host = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    gpu = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device)

    def timed(copy) -> float:
        copy()
        torch.cuda.synchronize(device)
        return median_ms(lambda: (copy(), torch.cuda.synchronize(device)), repeats)

    return {"to_host_gbps": COPY_BYTES / (timed(lambda: host.copy_(gpu, non_blocking=True)) * 1e6),
            "to_device_gbps": COPY_BYTES / (timed(lambda: gpu.copy_(host, non_blocking=True))
                                            * 1e6)}
