"""The default run on 1, 2, 4 and 8 GPUs: what it plans and how long it is expected to take.

Collected on the CPU with torch shown H100s (tests/plugins/shown_h100s.py), as suite/run.py
collects each pass before launching it: every study keeps the cells that answer its question
(docs/budget.md), and the planned total stays within the default mode's budget. A planning
check, not a timed one: the plan's own error is measured on committed runs
(python -m suite.budget --check).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from suite import budget, run

ROOT = Path(__file__).resolve().parents[1]
GPU_COUNTS = (1, 2, 4, 8)
DUMP = """
import json, os
def pytest_collection_finish(session):
    planned = getattr(session.config, "suite_deadlines", {})
    with open(os.environ["OVERLAP_DUMP_PLAN"], "w") as out:
        json.dump({k: [d.study, d.own_s] for k, d in planned.items()}, out)
"""


def planned(gpus: int, tmp_path: Path) -> dict[str, dict[str, tuple[str, float]]]:
    """Pass name -> {benchmark node id: (study, expected seconds it adds)}."""
    (tmp_path / "dump_plan.py").write_text(DUMP)
    passes = {}
    for step in run.plan("default", ["nvlink"], gpus, tmp_path, [], quiet=True, skip_mpi=True):
        dump = tmp_path / f"{gpus}-{step.name.replace(' ', '_')}.json"
        env = {**os.environ, **step.env, **step.collect_env, "OVERLAP_BACKEND": "nccl",
               "OVERLAP_SHOWN_GPUS": str(gpus), "OVERLAP_DUMP_PLAN": str(dump),
               "PYTHONPATH": os.pathsep.join([str(ROOT / "tests/plugins"), str(tmp_path),
                                              str(ROOT)])}
        if "OVERLAP_BACKEND" in step.env:  # the pass's own backend (the hybrid's gloo)
            env["OVERLAP_BACKEND"] = step.env["OVERLAP_BACKEND"]
        quiet = [arg for arg in step.pytest_args if arg != "-v"]
        out = subprocess.run([sys.executable, "-m", "pytest", "-p", "shown_h100s", "-p",
                              "dump_plan", "--collect-only", "-q", *quiet], env=env, cwd=ROOT,
                             capture_output=True, text=True, check=False)
        assert out.returncode == 0, f"{step.name}: {out.stdout[-2000:]}{out.stderr[-2000:]}"
        passes[step.name] = {k: tuple(v) for k, v in json.loads(dump.read_text()).items()}
    return passes


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[int, dict]:
    return {gpus: planned(gpus, tmp_path_factory.mktemp(f"gpus{gpus}")) for gpus in GPU_COUNTS}


def names(plan: dict) -> set[str]:
    return {nodeid.split("::")[-1] for benchmarks in plan.values() for nodeid in benchmarks}


@pytest.mark.parametrize("gpus", GPU_COUNTS)
def test_every_study_keeps_the_cells_that_answer_its_question(plans, gpus):
    ran = names(plans[gpus])
    for size in (w for w in (1, 2, 4, 8) if w <= gpus):
        for chunks in ((5,) if size == 1 else (5, 20)):
            assert f"test_overlap[mlp_8192x12_b1024_bf16-sequential-K{chunks}-w{size}-nvlink]" \
                in ran
        if size > 1:
            assert f"test_overlap[mlp_8192x12_b1024_bf16-chunked+priority-K20-w{size}-nvlink]" \
                in ran
            for scaling in ("strong", "weak"):
                assert f"test_tp[tp_mlp_h8192_t8192_bf16-{scaling}-overlapped-w{size}-torch]" \
                    in ran
    assert "test_gemm[v6-square_8192-bf16]" in ran
    assert "test_gemm_sweep[sweep-held_out_2_8316x648x4216-bf16]" in ran
    assert "test_offload[gpt_small_bf16-offload-overlap-dpu]" in ran
    deepest = max([w for w in (2, 4, 8) if w <= gpus] or [2])
    pipelines = {name for name in ran if name.startswith("test_pipeline[")}
    assert {f"test_pipeline[mlp_8192x12_bf16-p{deepest}-m{m}-1f1b]" for m in (2, 8, 32)} \
        <= pipelines
    assert all(f"-p{deepest}-" in name for name in pipelines)


@pytest.mark.parametrize("gpus", GPU_COUNTS)
def test_the_planned_run_fits_the_default_budget(plans, gpus):
    rates = budget.load_rates()
    if not rates.rate.get("gpu"):
        pytest.skip("no committed GPU run has recorded durations yet (suite/budget_rates.json)")
    total = sum(rates.pass_start_s("gpu", name) + sum(
        rates.benchmark_s("gpu", study, own) for study, own in benchmarks.values())
        for name, benchmarks in plans[gpus].items())
    assert total <= budget.MODE_BUDGET_S["default"], f"{gpus} GPUs: {total:.0f} s planned"
