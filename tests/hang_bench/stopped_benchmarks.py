"""A rank stopped (SIGSTOP) inside a benchmark and one stopped after the last, for
tests/test_pass_watch.py (collected only when named, as stuck_benchmarks.py is). On 2 gloo
ranks:

- test_stopped: rank 1 stops itself in the benchmark; rank 0 waits for it in an all-reduce,
  and no Python thread of rank 1 can answer (nor can faulthandler's C thread: the whole
  process is stopped);
- test_last: rank 1 stops itself at its exit, after every benchmark and every barrier; rank 0
  ends the pass and exits, and torchrun would wait for rank 1 for ever.

    torchrun --nproc-per-node 2 -m pytest tests/hang_bench/stopped_benchmarks.py \\
        -o python_files=stopped_benchmarks.py --deadline-floor-s 10 --deadline-multiple 0 \\
        --results-json r.json
"""

from __future__ import annotations

import atexit
import os
import signal

import torch
import torch.distributed as dist


def all_reduce_row(benchmark, dist_context) -> None:
    tensor = torch.ones(1024)
    benchmark.pedantic(dist.all_reduce, args=(tensor,), rounds=3, iterations=1)
    benchmark.extra_info.update(kind="step", world_size=dist_context.world_size)


def stop_here() -> None:
    os.kill(os.getpid(), signal.SIGSTOP)


def test_before(benchmark, dist_context):
    all_reduce_row(benchmark, dist_context)


def test_stopped(benchmark, dist_context):
    if dist_context.rank == 1:
        stop_here()
    dist.all_reduce(torch.ones(4))


def test_last(benchmark, dist_context):
    all_reduce_row(benchmark, dist_context)
    if dist_context.rank == 1:
        # Registered now, after the watchdog's own: it runs first (last in, first out), while
        # the rank's stacks file is still there.
        atexit.register(stop_here)
