"""Run a function on N local ranks (gloo, CPU) and collect what each returns.

Each rank is a fresh process (spawn), so collectives really cross process boundaries.
"""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch.multiprocessing as mp

from suite.run import free_port


def _entry(rank: int, world: int, port: int, out_dir: str, fn: Callable, args: tuple,
           env: dict[str, str]) -> None:
    os.environ.update(env)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    os.environ.setdefault("OVERLAP_BACKEND", "gloo")
    import torch

    torch.set_num_threads(1)
    from impl.dist import init_distributed

    context = init_distributed()
    try:
        result = fn(context, *args)
    finally:
        import torch.distributed as dist

        dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.pkl").write_bytes(pickle.dumps(result))
    # The result is written: leave without the interpreter's finalisation. Gloo's worker threads
    # can still hold finished async work whose tensors have Python references; freeing those
    # while the interpreter is torn down aborts the process (SIGABRT, "terminate called without
    # an active exception"; pytorch/pytorch#179291), now and then, after a correct run.
    sys.stdout.flush(), sys.stderr.flush()
    os._exit(0)


def run_ranks(fn: Callable, world: int, *args, env: dict[str, str] | None = None) -> list:
    """fn(context, *args) on ``world`` ranks; returns the per-rank results in rank order."""
    with tempfile.TemporaryDirectory() as out_dir:
        mp.start_processes(_entry, args=(world, free_port(), out_dir, fn, args, env or {}),
                           nprocs=world, start_method="spawn")
        return [pickle.loads(Path(out_dir, f"rank{r}.pkl").read_bytes()) for r in range(world)]
