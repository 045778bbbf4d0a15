"""A rank that hangs holding the GIL, for tests/test_deadline.py (collected only when named, as
stuck_benchmarks.py is). On 2 gloo ranks: rank 1 backtracks through a catastrophic regular
expression, in C, without releasing the GIL, while rank 0 waits for it in an all-reduce. No
Python thread of rank 1 can run: only faulthandler's C-level dump can show its stack.

    torchrun --nproc-per-node 2 -m pytest tests/hang_bench/gil_benchmarks.py \\
        -o python_files=gil_benchmarks.py --deadline-floor-s 10 --deadline-multiple 0 \\
        --results-json r.json
"""

from __future__ import annotations

import re

import torch
import torch.distributed as dist


def test_before(benchmark, dist_context):
    tensor = torch.ones(1024)
    benchmark.pedantic(dist.all_reduce, args=(tensor,), rounds=3, iterations=1)
    benchmark.extra_info.update(kind="step", world_size=dist_context.world_size)


def test_gil_held(benchmark, dist_context):
    tensor = torch.ones(4)
    if dist_context.rank == 1:
        re.fullmatch(r"(a+)+$", "a" * 64 + "b")  # 2^64 steps in C, the GIL held throughout
    dist.all_reduce(tensor)
