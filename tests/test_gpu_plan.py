"""The one-GPU run still plans every benchmark the committed one-H100 default run ran.

Collected on the CPU with torch shown one H100 (tests/plugins/one_h100.py): a change to the
workload or section registries that drops a GPU cell fails here, before any GPU run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from impl import capabilities
from suite import run
from tests.committed import RESULTS

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = RESULTS / "h100x1" / "20261125T185111Z-e7j9h2iw.json"  # a78c277, default mode


def planned(tmp_path: Path) -> set[str]:
    names = set()
    for step in run.plan("default", ["nvlink"], 1, tmp_path, [], quiet=True):
        env = {**os.environ, **step.env, **step.collect_env, "OVERLAP_BACKEND": "nccl",
               "PYTHONPATH": os.pathsep.join([str(ROOT / "tests/plugins"), str(ROOT)])}
        if "OVERLAP_BACKEND" in step.env:  # the pass's own backend (the hybrid's gloo)
            env["OVERLAP_BACKEND"] = step.env["OVERLAP_BACKEND"]
        quiet = [arg for arg in step.pytest_args if arg != "-v"]
        out = subprocess.run([sys.executable, "-m", "pytest", "-p", "one_h100", "--collect-only",
                              "-q", *quiet], env=env, cwd=ROOT, capture_output=True, text=True,
                             check=False)
        assert out.returncode == 0, f"{step.name}: {out.stdout[-2000:]}{out.stderr[-2000:]}"
        names |= {line.split("::")[-1] for line in out.stdout.splitlines() if "::" in line}
    return names


def test_every_benchmark_of_the_committed_gpu_run_is_still_planned(tmp_path):
    if reason := capabilities.missing_mpi():
        pytest.skip(f"the committed run had an mpirun pass: {reason}")
    ran = {row["name"] for row in json.loads(COMMITTED.read_text())["benchmarks"]}
    assert len(ran) == 251
    names = planned(tmp_path)
    assert ran - names == set()
    # The GPU-only studies are planned too: the Hopper GEMM sweep and the offload family.
    assert "test_gemm_sweep[sweep-held_out_2_8316x648x4216-bf16]" in names
    assert "test_offload[gpt_small_bf16-offload-overlap-dpu]" in names
