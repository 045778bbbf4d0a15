"""A rank that dies mid-run ends the whole run quickly, by name, leaving results whole.

torchrun's agent watches its workers (--monitor-interval 0.5 s here), and on a failure stops
the others (SIGTERM, then SIGKILL after its grace period) and prints a summary naming the rank.
Collectives the survivors are blocked in are bounded by OVERLAP_PG_TIMEOUT_S as well.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from impl import capabilities

DEADLINE_S = 60


def workers_of(parent: int) -> dict[int, int]:
    """{global rank: pid} of torchrun's worker processes."""
    ranks = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # the process ended while we looked
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) != parent:
            continue
        for item in environ:
            if item.startswith(b"RANK="):
                ranks[int(item[5:])] = int(entry.name)
    return ranks


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_killed_rank_ends_run_with_its_name(backend, tmp_path):
    if backend == "nccl" and (reason := capabilities.missing_gpu(2)):
        pytest.skip(reason)
    results = tmp_path / "results.json"
    workload = "mlp_1024x8" if backend == "gloo" else "mlp_8192x12_bf16"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node=2", "--monitor-interval=0.5", "-m", "pytest",
               "suite/bench_overlap.py", "-p", "no:cacheprovider", "-q", "--workloads", workload,
               "--strategies", "sequential,chunked", "--chunks", "1,5,10,20,50",
               "--world-sizes", "2", "--results-json", str(results)]
    env = {**os.environ, "OVERLAP_BACKEND": backend, "OMP_NUM_THREADS": "1",
           "OVERLAP_PG_TIMEOUT_S": "30"}
    launcher = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        started = time.monotonic()
        while not results.exists():  # the first benchmark finished and was checkpointed
            assert launcher.poll() is None, launcher.communicate()[0][-3000:]
            assert time.monotonic() - started < 300, "no benchmark finished in 300 s"
            time.sleep(0.2)
        workers = workers_of(launcher.pid)
        assert sorted(workers) == [0, 1], workers
        os.kill(workers[1], signal.SIGKILL)
        killed = time.monotonic()
        output, _ = launcher.communicate(timeout=DEADLINE_S + 30)
        elapsed = time.monotonic() - killed
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    print(f"{backend}: run ended {elapsed:.1f} s after rank 1 was killed, exit "
          f"{launcher.returncode}")
    assert launcher.returncode != 0
    assert elapsed < DEADLINE_S, f"the run took {elapsed:.0f} s to end after rank 1 died"
    assert "rank      : 1 (local_rank: 1)" in output, output[-3000:]
    assert "Signal 9 (SIGKILL)" in output
    assert not any(alive(pid) for pid in workers.values()), "a worker outlived the run"
    document = json.loads(results.read_text())  # whole, parseable JSON
    assert document["suite"]["partial"] is True
    assert len(document["benchmarks"]) >= 1
