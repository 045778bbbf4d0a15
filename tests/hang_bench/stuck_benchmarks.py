"""Benchmarks that hang on purpose, for tests/test_deadline.py (not part of the test run: the
file's name matches none of pytest's ``python_files`` patterns, so ``nox -s tests`` never
collects it). On 2 gloo ranks, between two benchmarks that finish:

- a stuck collective: rank 0 all-reduces over the world group, rank 1 over another group of
  the same two ranks, so each waits for a peer that is in a different collective;
- a mismatched point-to-point exchange: both ranks receive before they send (the order
  impl/pipeline/plans.py's replay calls a deadlock).

    torchrun --nproc-per-node 2 -m pytest tests/hang_bench/stuck_benchmarks.py \\
        -o python_files=stuck_benchmarks.py --deadline-floor-s 10 --deadline-multiple 0 \\
        --results-json r.json
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist


@pytest.fixture(scope="module")
def other_group(dist_context):
    """A second group of the same ranks (new_group is collective: every rank makes it)."""
    return dist.new_group(list(range(dist_context.world_size)))


def all_reduce_row(benchmark, dist_context) -> None:
    tensor = torch.ones(1024)
    benchmark.pedantic(lambda: dist.all_reduce(tensor), rounds=3, iterations=1)
    benchmark.extra_info.update(kind="step", world_size=dist_context.world_size)


def test_before(benchmark, dist_context, other_group):
    all_reduce_row(benchmark, dist_context)


def test_stuck_collective(benchmark, dist_context, other_group):
    tensor = torch.ones(4)
    dist.all_reduce(tensor, group=other_group if dist_context.rank else None)


def test_mismatched_point_to_point(benchmark, dist_context):
    peer, tensor = 1 - dist_context.rank, torch.zeros(4)
    dist.recv(tensor, src=peer)
    dist.send(tensor, dst=peer)


def test_after(benchmark, dist_context):
    all_reduce_row(benchmark, dist_context)
