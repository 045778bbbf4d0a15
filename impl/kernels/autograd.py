"""The seed layer's matmul through the hand-written kernels, as an autograd function.

Every strategy runs unchanged on top of it: backward produces grad_w with the chosen kernel,
autograd accumulates it into the flat gradient buffer, and the post-accumulate hooks fire as
for torch's own matmul. Kernels: ``"seed"`` is the course study's pair (naive forward, one
thread per row of y; naive weight gradient), ``"v1"``…``"v6"`` the GEMM ladder (grad_w = xᵀ ·
grad_out with the same version), ``"cublas"`` plain torch.
"""

from __future__ import annotations

import torch

from impl.kernels import ops

SEED = "seed"  # the course study's naive pair, named once: checked, run forward and backward
SEED_KERNELS: tuple[str, ...] = (SEED, *ops.GEMM_VERSIONS)


def check_kernel(kernel: str, dtype: torch.dtype) -> str:
    if kernel not in SEED_KERNELS:
        raise ValueError(f"unknown seed-layer kernel {kernel!r}; choose one of "
                         f"{', '.join(SEED_KERNELS)}")
    ops.check_version("v1" if kernel == SEED else kernel, dtype)
    return kernel


def forward(x: torch.Tensor, w: torch.Tensor, kernel: str) -> torch.Tensor:
    return ops.seed_forward(x, w) if kernel == SEED else ops.gemm(x, w, kernel)


def weight_grad(x: torch.Tensor, grad_out: torch.Tensor, kernel: str) -> torch.Tensor:
    if kernel == SEED:
        return ops.seed_weight_grad(x, grad_out)
    return ops.gemm(x.t().contiguous(), grad_out.contiguous(), kernel)


class KernelMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, kernel: str) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.kernel = kernel
        return forward(x.contiguous(), w.contiguous(), kernel)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        x, w = ctx.saved_tensors
        grad_x = grad_out @ w.t() if ctx.needs_input_grad[0] else None  # the seed never needs it
        grad_w = weight_grad(x, grad_out, ctx.kernel) if ctx.needs_input_grad[1] else None
        return grad_x, grad_w, None


def kernel_matmul(x: torch.Tensor, w: torch.Tensor, kernel: str) -> torch.Tensor:
    """y = x · w with ``kernel``; its weight gradient uses the same kernel."""
    return KernelMatmul.apply(x, w, check_kernel(kernel, x.dtype))
