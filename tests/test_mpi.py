"""The mpi strategy under a real MPI launcher equals sequential on every rank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from impl import capabilities
from suite.run import free_port, is_open_mpi

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(capabilities.missing_mpi() is not None,
                                 reason=capabilities.missing_mpi() or "")]

SCRIPT = Path(__file__).with_name("mpi_ranks.py")


@pytest.fixture(scope="module")
def mpi_results():
    launcher = capabilities.mpi_launcher()
    extra = ["--allow-run-as-root", "--oversubscribe"] if is_open_mpi(launcher) else []
    env = {**os.environ, "MASTER_PORT": str(free_port()), "OVERLAP_BACKEND": "gloo",
           "OMP_NUM_THREADS": "1"}
    result = subprocess.run([launcher, *extra, "-n", "2", sys.executable, str(SCRIPT)],
                            env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def test_mpi_equals_sequential_on_every_rank(mpi_results):
    assert mpi_results["world"] == 2
    rows = mpi_results["rows"]
    assert {(r["strategy"], r["chunks"]) for r in rows} >= {("mpi", 1), ("mpi", 5), ("mpi", 256)}
    for row in rows:
        # fp32, 2 ranks: a + b is exact whatever the order, so MPI and gloo agree bit for bit
        assert row["error"] <= 1e-6, row
