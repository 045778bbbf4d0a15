"""A rank stopped after its last benchmark while MPI is initialised, for
tests/test_pass_watch.py (collected only when named, as stuck_benchmarks.py is). Under mpirun
on 2 ranks, with ``-p tests.plugins.stop_at_session_end``:

- test_last: every rank initialises MPI (mpi4py), so each waits at its exit, in MPI's finalize,
  for the others; rank 1 stops itself when its session finishes (the plugin), before it is
  over. Rank 0 finishes its session, writes the results and waits in MPI's finalize for rank
  1, for ever: its process never ends, and it is not the rank to blame.

    mpirun -n 2 python -m pytest tests/hang_bench/finalize_benchmarks.py \\
        -o python_files=finalize_benchmarks.py -p tests.plugins.stop_at_session_end \\
        --results-json r.json
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def test_last(benchmark, dist_context):
    from mpi4py import MPI  # MPI_Init here; MPI_Finalize at the rank's exit

    tensor = torch.ones(1024)
    benchmark.pedantic(dist.all_reduce, args=(tensor,), rounds=3, iterations=1)
    benchmark.extra_info.update(kind="step", world_size=dist_context.world_size)
    MPI.COMM_WORLD.Barrier()
