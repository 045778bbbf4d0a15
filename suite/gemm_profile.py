"""One shape of the GEMM sweep through v7, for a profiler to watch (ncu).

    ncu --kernel-name regex:gemm_v7 --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats \\
        python -m suite.gemm_profile small_k_8192x8192x256 bf16

Builds the kernels, checks v7 against cuBLAS on the shape, then launches it three times
(the profiler skips the first two: module load and first-call set-up).
"""

from __future__ import annotations

import sys

import torch

from impl.kernels import ops, sweep

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def main(argv: list[str]) -> int:
    shapes = {shape.name: shape for shape in sweep.sweep_shapes()}
    if len(argv) != 2 or argv[0] not in shapes or argv[1] not in DTYPES:
        print(f"usage: python -m suite.gemm_profile SHAPE DTYPE; got {' '.join(argv)!r}: "
              f"SHAPE is a sweep shape (impl/kernels/sweep.py), DTYPE one of "
              f"{', '.join(DTYPES)}", file=sys.stderr)
        return 2
    shape, dtype = shapes[argv[0]], DTYPES[argv[1]]
    a = torch.randn(shape.m, shape.k, device="cuda").to(dtype)
    b = torch.randn(shape.k, shape.n, device="cuda").to(dtype)
    launch = ops.v7_launcher(a, b)
    error = float((launch().float() - torch.matmul(a, b).float()).abs().max())
    for _ in range(2):
        launch()
    torch.cuda.synchronize()
    print(f"{shape.name} {argv[1]}: {launch.plan}, max |C - C_cuBLAS| {error:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
