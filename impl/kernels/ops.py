"""Python API of the hand-written kernels: the GEMM ladder and the seed training step.

Reference first (``"cublas"`` is ``torch.matmul``), then the ladder of gemm.cu:

    from impl.kernels import ops
    c = ops.gemm(a, b, "v3")                     # fp32, register-blocked
    c = ops.gemm(a.bfloat16(), b.bfloat16(), "v5")

Names and dtypes are checked here, before anything is compiled, so a typo fails at once
(also on a CPU-only machine); devices, layouts and shapes are checked by bindings.cpp.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType, ModuleType

import torch

from impl.kernels import load

GEMM_VERSIONS: tuple[str, ...] = ("v1", "v2", "v3", "v4", "v5", "cublas")

#: Input dtypes each version accepts. The output has the input dtype; v4/v5 accumulate
#: in fp32 and round once at the end, as cuBLAS does for torch.matmul on bf16/fp16.
GEMM_DTYPES: Mapping[str, tuple[torch.dtype, ...]] = MappingProxyType({
    "v1": (torch.float32,),
    "v2": (torch.float32,),
    "v3": (torch.float32,),
    "v4": (torch.bfloat16, torch.float16),
    "v5": (torch.bfloat16, torch.float16),
    "cublas": (torch.float32, torch.bfloat16, torch.float16),
})


def _extension() -> ModuleType:
    return load()


def check_version(version: str, dtype: torch.dtype | None = None) -> None:
    """ValueError for an unknown version, TypeError for a dtype the version lacks."""
    if version not in GEMM_VERSIONS:
        raise ValueError(f"unknown GEMM version {version!r}; valid: {', '.join(GEMM_VERSIONS)}")
    if dtype is not None and dtype not in GEMM_DTYPES[version]:
        allowed = ", ".join(str(d) for d in GEMM_DTYPES[version])
        raise TypeError(f"GEMM {version} does not take {dtype}; allowed: {allowed}")


def gemm(a: torch.Tensor, b: torch.Tensor, version: str) -> torch.Tensor:
    """C = a @ b for 2-D row-major ``a`` (m×k) and ``b`` (k×n) with the chosen kernel."""
    check_version(version, a.dtype)
    if version == "cublas":
        return torch.matmul(a, b)
    return getattr(_extension(), f"gemm_{version}")(a, b)


def seed_forward(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """y = x @ w (fp32), the seed's naive kernel: one thread per row of y."""
    return _extension().seed_forward(x, w)


def seed_weight_grad(x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    """grad_w = x.T @ grad_out (fp32), one thread per element of grad_w."""
    return _extension().seed_weight_grad(x, grad_out)


def seed_sgd_(w: torch.Tensor, grad: torch.Tensor, lr: float) -> torch.Tensor:
    """w -= lr * grad in place (fp32), one thread per element; returns ``w``."""
    _extension().seed_sgd_(w, grad, float(lr))
    return w


def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOP of one GEMM: 2·m·n·k (one multiply and one add per term)."""
    return 2 * m * n * k


def gemm_bytes(m: int, n: int, k: int, element_bytes: int) -> int:
    """Bytes of A, B and C each moved once: element_bytes · (m·k + k·n + m·n)."""
    return element_bytes * (m * k + k * n + m * n)


def arithmetic_intensity(m: int, n: int, k: int, element_bytes: int) -> float:
    """FLOP per byte: 2mnk / (element_bytes · (mk + kn + mn)), the roofline's x axis."""
    return gemm_flops(m, n, k) / gemm_bytes(m, n, k, element_bytes)
