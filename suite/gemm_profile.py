"""One GEMM through v7, for a profiler to watch (ncu).

    ncu --kernel-name regex:gemm_v7 --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats \\
        python -m suite.gemm_profile small_k_8192x8192x256 bf16 [--block-n 128] \\
        [--to-lines yes|no] [--ctas-per-sm 2]

SHAPE is a sweep shape (impl/kernels/sweep.py) or MxNxK. The options force the plan's
choices as ``ops.v7_launcher`` does (default: the plan's own). Builds the kernels, checks v7
against cuBLAS on the shape, then launches it three times (the profiler skips the first two:
module load and first-call set-up).
"""

from __future__ import annotations

import argparse
import re
import sys

import torch

from impl.kernels import ops, sweep

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
YES_NO = {"yes": True, "no": False}


def dimensions(text: str) -> tuple[int, int, int]:
    """A sweep shape's m, n, k, or those of MxNxK; ArgumentTypeError naming what is allowed."""
    shapes = {shape.name: shape for shape in sweep.sweep_shapes()}
    if text in shapes:
        return shapes[text].m, shapes[text].n, shapes[text].k
    if match := re.fullmatch(r"([1-9]\d*)x([1-9]\d*)x([1-9]\d*)", text):
        m, n, k = map(int, match.groups())
        return m, n, k
    raise argparse.ArgumentTypeError(f"{text!r}: allowed a sweep shape (impl/kernels/sweep.py) "
                                     "or MxNxK with positive whole numbers")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m suite.gemm_profile")
    parser.add_argument("shape", type=dimensions, help="a sweep shape or MxNxK")
    parser.add_argument("element_type", metavar="DTYPE", choices=DTYPES)
    parser.add_argument("--block-n", type=int, choices=ops.V7_WIDTHS)
    parser.add_argument("--to-lines", choices=YES_NO)
    parser.add_argument("--ctas-per-sm", type=int, choices=ops.V7_CTAS_PER_SM)
    args = parser.parse_args(argv)
    (m, n, k), dtype = args.shape, DTYPES[args.element_type]
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(k, n, device="cuda").to(dtype)
    launch = ops.v7_launcher(a, b, block_n=args.block_n, ctas_per_sm=args.ctas_per_sm,
                             to_lines=None if args.to_lines is None else YES_NO[args.to_lines])
    error = float((launch().float() - torch.matmul(a, b).float()).abs().max())
    for _ in range(2):
        launch()
    torch.cuda.synchronize()
    print(f"{m}x{n}x{k} {args.element_type}: {launch.plan}, max |C - C_cuBLAS| {error:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
