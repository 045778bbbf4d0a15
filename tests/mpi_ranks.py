"""Run under mpirun by tests/test_mpi.py: the mpi strategies against sequential, every rank.

    mpirun -n 2 python tests/mpi_ranks.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from impl.dist import init_distributed  # noqa: E402
from impl.gradients import max_chunks  # noqa: E402
from impl.presets import preset  # noqa: E402
from impl.strategies import StrategyOptions  # noqa: E402
from impl.strategy_check import max_abs_err_vs_sequential  # noqa: E402
from impl.workloads import build_model  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    context = init_distributed()
    group = context.group(context.world_size)
    rows = []
    for name in ("mlp_tiny", "gpt_tiny"):
        workload = preset(name)
        limit = max_chunks(build_model(workload, context.device))
        for chunks in (1, 5, limit):
            for strategy in ("mpi", "mpi-sequential"):
                error = max_abs_err_vs_sequential(strategy, workload, group, context.device,
                                                  StrategyOptions(chunks=chunks, lr=0.02), steps=5)
                rows.append({"workload": name, "strategy": strategy, "chunks": chunks,
                             "error": error})
    if context.rank == 0:
        print("RESULT " + json.dumps({"world": context.world_size, "rows": rows}), flush=True)
    # Tear gloo down before the interpreter does: its threads must not outlive Python.
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
