"""Benchmarks that hang on purpose, for tests/test_deadline.py (not part of the test run: the
file's name matches none of pytest's ``python_files`` patterns, so ``nox -s tests`` never
collects it). On 2 ranks (gloo, or NCCL with one GPU each), between two benchmarks that finish:

- a stuck collective: rank 0 all-reduces, rank 1 waits for a message rank 0 never sends;
- a mismatched point-to-point exchange: both ranks receive before they send (the order
  impl/pipeline/plans.py's replay calls a deadlock).

    torchrun --nproc-per-node 2 -m pytest tests/hang_bench/stuck_benchmarks.py \\
        -o python_files=stuck_benchmarks.py --deadline-floor-s 10 --deadline-multiple 0 \\
        --results-json r.json
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def finished(tensor: torch.Tensor) -> None:
    """NCCL returns before the GPU has done the work: wait for it here, inside the test."""
    if tensor.is_cuda:
        torch.cuda.synchronize(tensor.device)


def all_reduce_row(benchmark, dist_context) -> None:
    tensor = torch.ones(1024, device=dist_context.device)

    def all_reduce() -> None:
        dist.all_reduce(tensor)
        finished(tensor)

    benchmark.pedantic(all_reduce, rounds=3, iterations=1)
    benchmark.extra_info.update(kind="step", world_size=dist_context.world_size)


def test_before(benchmark, dist_context):
    all_reduce_row(benchmark, dist_context)


def test_stuck_collective(benchmark, dist_context):
    tensor = torch.ones(4, device=dist_context.device)
    if dist_context.rank == 0:
        dist.all_reduce(tensor)
    else:
        dist.recv(tensor, src=0)
    finished(tensor)


def test_mismatched_point_to_point(benchmark, dist_context):
    peer, tensor = 1 - dist_context.rank, torch.zeros(4, device=dist_context.device)
    dist.recv(tensor, src=peer)
    dist.send(tensor, dst=peer)
    finished(tensor)


def test_after(benchmark, dist_context):
    all_reduce_row(benchmark, dist_context)
