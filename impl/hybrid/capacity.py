"""The largest model each trainer can hold: GPU-only Adam against the offload, from the memory
plan (a plan, not a measurement: the bytes each trainer keeps per parameter and per layer).

Bytes per parameter, with b the weights' size (4 fp32, 2 bf16/fp16):

- GPU-only (``device-adam``): weights b, gradients b, Adam's m and v 8; for low precision also
  the fp32 master 4 and its fp32 gradient 4: 16 fp32, 20 bf16;
- the offload on the GPU: weights b and gradients b (each gradient is freed once its bucket is
  packed and copied, so this is the most it holds; the largest model's layers are buckets of
  their own, impl/hybrid/buckets.py);
- the offload on the host: fp32 master, m and v 12, the gradients' landing buffer b and, for
  low precision, the staging of the cast weights b (``HybridOptions.cast`` "host"): 16 either way.

An MLP of width w, batch B and depth L keeps w² parameters a layer and, for backward, its
Linear's input and GELU's input, 2·B·w values of b bytes a layer. The GPU's usable memory is
its total less impl/memory.py's reserve (RESERVE_BYTES and RESERVE_SHARE); the host's, a share
``HOST_SHARE`` of its total (the OS, the process and the pinned-memory limit keep the rest).

    python -m impl.hybrid.capacity --gpu-gib 79.2 --host-gib 125.6 --width 8192 --batch 2048
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass

from impl.memory import GIB, RESERVE_BYTES, RESERVE_SHARE

HOST_SHARE = 0.75
VALUE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def gpu_only_bytes_per_parameter(dtype: str) -> int:
    b = VALUE_BYTES[dtype]
    return 2 * b + 8 + (8 if b < 4 else 0)


def offload_bytes_per_parameter(dtype: str) -> tuple[int, int]:
    """(on the GPU, on the host)."""
    b = VALUE_BYTES[dtype]
    return 2 * b, 12 + b + (b if b < 4 else 0)


@dataclass(frozen=True)
class Capacity:
    width: int
    batch: int
    dtype: str
    gpu_only_layers: int
    offload_layers: int
    offload_bound_by: str  # "GPU" or "host"

    @property
    def gpu_only_parameters(self) -> int:
        return self.gpu_only_layers * self.width ** 2

    @property
    def offload_parameters(self) -> int:
        return self.offload_layers * self.width ** 2

    def to_json(self) -> dict:
        return asdict(self) | {"gpu_only_parameters": self.gpu_only_parameters,
                               "offload_parameters": self.offload_parameters}


def usable_gpu_bytes(total: int) -> int:
    return int(total * (1 - RESERVE_SHARE)) - RESERVE_BYTES


def mlp_capacity(gpu_bytes: int, host_bytes: int, width: int, batch: int,
                 dtype: str = "bf16") -> Capacity:
    """The deepest MLP of ``width`` and ``batch`` each trainer holds on a GPU of ``gpu_bytes``
    beside a host of ``host_bytes`` (totals; the usable shares are taken here)."""
    if dtype not in VALUE_BYTES:
        raise ValueError(f"dtype {dtype!r}: choose one of {', '.join(VALUE_BYTES)}")
    for name, value in (("gpu_bytes", gpu_bytes), ("host_bytes", host_bytes), ("width", width),
                        ("batch", batch)):
        if value < 1:
            raise ValueError(f"{name}={value}: choose a positive integer")
    gpu, host = usable_gpu_bytes(gpu_bytes), int(host_bytes * HOST_SHARE)
    activations = 2 * batch * width * VALUE_BYTES[dtype]
    layer = width ** 2
    on_gpu, on_host = offload_bytes_per_parameter(dtype)
    gpu_only = max(0, gpu // (layer * gpu_only_bytes_per_parameter(dtype) + activations))
    by_gpu = max(0, gpu // (layer * on_gpu + activations))
    by_host = host // (layer * on_host)
    return Capacity(width, batch, dtype, gpu_only, min(by_gpu, by_host),
                    "host" if by_host < by_gpu else "GPU")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-gib", type=float, required=True, help="the GPU's total memory")
    parser.add_argument("--host-gib", type=float, required=True, help="the host's total memory")
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--dtype", default="bf16")
    args = parser.parse_args(argv)
    try:
        plan = mlp_capacity(int(args.gpu_gib * GIB), int(args.host_gib * GIB), args.width,
                            args.batch, args.dtype)
    except ValueError as error:
        print(f"capacity: {error}", file=sys.stderr)
        return 2
    print(f"MLP width {plan.width}, batch {plan.batch}, {plan.dtype}: GPU-only Adam holds "
          f"{plan.gpu_only_layers} layers ({plan.gpu_only_parameters / 1e9:.2f}B parameters); "
          f"the offload {plan.offload_layers} layers ({plan.offload_parameters / 1e9:.2f}B), "
          f"bound by the {plan.offload_bound_by}'s memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
