"""Benchmarks that raise on purpose, for tests/test_rank_error.py (not part of the test run,
like stuck_benchmarks.py). On 2 ranks (gloo, or NCCL with one GPU each):

- one rank raises before a collective the other makes (the other waits in it);
- every rank raises alike (nothing waits: the pass goes on);

each between two benchmarks that finish.

    torchrun --nproc-per-node 2 -m pytest tests/hang_bench/failing_benchmarks.py \\
        -o python_files=failing_benchmarks.py --deadline-floor-s 120 --deadline-multiple 0 \\
        --results-json r.json
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def all_reduced(dist_context) -> None:
    tensor = torch.ones(4, device=dist_context.device)
    dist.all_reduce(tensor)
    if tensor.is_cuda:
        torch.cuda.synchronize(tensor.device)


def test_before(benchmark, dist_context):
    benchmark.pedantic(all_reduced, args=(dist_context,), rounds=3, iterations=1)


def test_one_rank_raises(benchmark, dist_context):
    if dist_context.rank == 1:
        raise ValueError("rank 1 refused its input")
    all_reduced(dist_context)


def test_every_rank_raises(benchmark, dist_context):
    raise ValueError(f"rank {dist_context.rank} refused its input")


def test_after(benchmark, dist_context):
    benchmark.pedantic(all_reduced, args=(dist_context,), rounds=3, iterations=1)
