"""The default run on 1, 2, 4 and 8 GPUs: what it plans and how long it is expected to take.

Collected on the CPU with torch shown H100s (suite/shown_gpus.py), as suite/run.py
collects each pass before launching it: every study keeps the cells that answer its question
(docs/budget.md), and the planned total stays within the default mode's budget. A planning
check, not a timed one: the plan's own error is measured on committed runs
(python -m suite.calibrate --check).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from suite import budget, calibrate, run

GPU_COUNTS = (1, 2, 4, 8)
FULL_OR_CPU_MEMBERS = ("mlp_4096x24_b4096_bf16", "mlp_8192x16_b2048_bf16", "gpt_medium_fp16",
                       "gpt_1b_bf16", "mlp_tiny")
ABOUT = 1.2


def planned(gpus: int, tmp_path: Path) -> dict[str, dict[str, tuple[str, float]]]:
    """Pass name -> {benchmark node id: (study, expected seconds it adds)}."""
    with pytest.MonkeyPatch.context() as patch:  # a GPU node with Open MPI: its mpirun pass too
        patch.setattr(run.capabilities, "missing_mpi", lambda: None)
        patch.setattr(run.capabilities, "mpi_launcher", lambda: "mpirun")
        patch.setattr(run, "is_open_mpi", lambda launcher: True)
        steps = run.plan("default", ["nvlink"], gpus, tmp_path, [], quiet=True)
    return {step.name: calibrate.collected(step.pytest_args, {**step.env, **step.collect_env},
                                        gpus, tmp_path) for step in steps}


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[int, dict]:
    return {gpus: planned(gpus, tmp_path_factory.mktemp(f"gpus{gpus}")) for gpus in GPU_COUNTS}


def names(plan: dict) -> set[str]:
    return {nodeid.split("::")[-1] for benchmarks in plan.values() for nodeid in benchmarks}


@pytest.mark.parametrize("gpus", GPU_COUNTS)
def test_every_study_keeps_the_cells_that_answer_its_question(plans, gpus):
    ran = names(plans[gpus])
    k_of_the_whole_world = 5 if gpus == 1 else 20  # one K without communication
    for workload in ("mlp_8192x12_bf16", "gpt_small_bf16"):
        assert (f"test_overlap[{workload}-sequential-K{k_of_the_whole_world}-w{gpus}-nvlink]"
                in ran)
    for size in (w for w in (1, 2, 4, 8) if w <= gpus):
        middle = 2 < size < gpus  # w = 4 inside 8: K = 20 alone (docs/budget.md)
        for chunks in ((5,) if size == 1 else (20,) if middle else (5, 20)):
            assert f"test_overlap[mlp_8192x12_b1024_bf16-sequential-K{chunks}-w{size}-nvlink]" \
                in ran
        knobs = f"test_overlap[mlp_8192x12_b1024_bf16-chunked+priority-K20-w{size}-nvlink]"
        assert (knobs in ran) == (size == gpus > 1)  # the knobs on the whole launch alone
        if size > 1:
            for scaling in ("strong", "weak"):
                assert f"test_tp[tp_mlp_h8192_t8192_bf16-{scaling}-overlapped-w{size}-torch]" \
                    in ran
    assert "test_gemm[v6-square_8192-bf16]" in ran
    assert "test_gemm_sweep[sweep-held_out_2_8316x648x4216-bf16]" in ran
    assert "test_offload[gpt_small_bf16-offload-overlap-dpu]" in ran
    # The offload family's fp32 member, the crossover ladders and the CPU-against-GPU forward
    # table are studies of one device: the one-GPU run keeps them, a launch of several GPUs
    # leaves them to it.
    one_gpu_only = {"test_offload[mlp_4096x8_b8192-offload-overlap-dpu]",
                    "test_offload_comparison[mlp_4096x8_b8192]", "test_gpt_forward[cpu]",
                    "test_offload_crossover[gpt_small_bf16]",
                    "test_offload_crossover[mlp_4096x8_b8192]"}
    assert (one_gpu_only <= ran) == (gpus == 1) and (one_gpu_only & ran == set()) == (gpus > 1)
    # Members kept for --full, and mlp_tiny (the CPU's member), are left out of the plan: a
    # skip at run time would have added their estimates (632 s and 60 s on one GPU) to it.
    assert not {name for name in ran if name.startswith("test_offload")
                and any(member in name for member in FULL_OR_CPU_MEMBERS)}
    deepest = max([w for w in (2, 4, 8) if w <= gpus] or [2])
    pipelines = {name for name in ran if name.startswith("test_pipeline[")}
    assert {f"test_pipeline[mlp_8192x12_bf16-p{deepest}-m{m}-1f1b]" for m in (2, 8, 32)} \
        <= pipelines
    assert all(f"-p{deepest}-" in name for name in pipelines)


@pytest.mark.parametrize("gpus", GPU_COUNTS)
def test_the_planned_run_fits_the_default_budget(plans, gpus):
    rates = budget.load_rates()
    assert rates.rate["gpu"], "suite/budget_rates.json has no GPU rates"
    total = sum(rates.pass_start_s("gpu", name) + sum(
        rates.benchmark_s("gpu", study, own) for study, own in benchmarks.values())
        for name, benchmarks in plans[gpus].items())
    assert set(plans[gpus]) == {"torchrun nvlink", "torchrun hybrid", "mpirun"}
    # Every benchmark counted under a study the rates know (impl/studies.py), not the pooled "*".
    planned = {study for benchmarks in plans[gpus].values() for study, _ in benchmarks.values()}
    assert planned <= set(rates.rate["gpu"]) - {"*"}
    # "About 10 minutes": the budget, with the 20% the acceptance of a run allows (12 min).
    assert total <= ABOUT * budget.MODE_BUDGET_S["default"], f"{gpus} GPUs: {total:.0f} s"


@pytest.mark.parametrize("gpus", (2, 4, 8))
def test_symmetric_memory_cells_run_on_the_whole_launch_alone(plans, gpus):
    # A copy-engine cell in a subgroup would hang the next one of the whole world
    # (impl/capabilities.py: missing_whole_world); at one rank nothing is exchanged.
    copy_engine = {n for n in names(plans[gpus]) if "-copy-engine" in n}
    assert f"test_overlap[mlp_8192x12_b1024_bf16-copy-engine-K20-w{gpus}-nvlink]" in copy_engine
    assert {n for n in copy_engine if f"-w{gpus}-" not in n and "-w1-" not in n} == set()


def test_the_coarse_hybrid_pass_is_planned_as_its_own_study(plans):
    # Two processes sharing the host's cores: not the offload family's rate (suite/budget.py).
    assert {study for study, _ in plans[2]["torchrun hybrid"].values()} == {"coarse hybrid"}
