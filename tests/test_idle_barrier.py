"""Ranks that wait while rank 0 measures a study of one device wait asleep (impl/dist.py)."""

import time

from impl.dist import idle_barrier
from tests.multirank import run_ranks

RANK0_BUSY_S = 1.0


def meet_twice(context) -> dict:
    started_wall, started_cpu = time.monotonic(), time.process_time()
    if context.rank == 0:
        time.sleep(RANK0_BUSY_S)  # rank 0 elsewhere; the waiting ranks are what is measured
    idle_barrier(context)
    waited = {"wall_s": time.monotonic() - started_wall,
              "cpu_s": time.process_time() - started_cpu}
    idle_barrier(context)  # the second meeting takes the second key: nobody waits long
    return {**waited, "meetings": context._idle_meetings}


def test_waiting_ranks_sleep_until_every_rank_arrives():
    ranks = run_ranks(meet_twice, 3)
    for rank in (1, 2):
        assert ranks[rank]["wall_s"] >= RANK0_BUSY_S * 0.9  # they did wait for rank 0
        # Asleep: a spinning wait would use about as much CPU as wall time.
        assert ranks[rank]["cpu_s"] < 0.25 * RANK0_BUSY_S
    assert [r["meetings"] for r in ranks] == [2, 2, 2]
