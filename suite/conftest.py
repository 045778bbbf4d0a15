"""What the suite runs by default on this machine, and the shared reference measurements.

CPU: gloo and the tiny presets. GPU: nccl and the GPU presets. Narrow any axis with the
options of the root conftest (--strategies, --workloads, --chunks, --world-sizes).
"""

from __future__ import annotations

import os

import pytest

from impl import capabilities
from impl.presets import preset
from impl.profiles import recorded_profile
from impl.rows.study_records import AXES, NARROWED
from impl.settings import selected_backend
from impl.strategies import measured_by_default
from impl.strategy_records import GPU_VARIANTS, VARIANTS

DEFAULT_WORKLOADS = {
    # (gpu?, mode) -> presets
    (False, "quick"): ["mlp_tiny"],
    # mlp_1024x8 at batch 16, 64 and 256 spans compute:communication from about 1:3 to 4:1 on
    # 2 gloo ranks of the CPU machine (the regime figure).
    (False, "default"): ["mlp_tiny", "gpt_tiny", "mlp_1024x8_b16", "mlp_1024x8_b64"],
    (False, "full"): ["mlp_tiny", "gpt_tiny", "mlp_1024x8_b16", "mlp_1024x8_b64", "mlp_1024x8"],
    (True, "quick"): ["mlp_8192x12_bf16"],
    (True, "default"): ["mlp_8192x12_bf16", "mlp_8192x12_b1024_bf16", "gpt_small_bf16"],
    (True, "full"): ["mlp_8192x12_bf16", "mlp_8192x12_b2048_bf16", "mlp_8192x12_b1024_bf16",
                     "gpt_small_bf16"],
}
WORLD_SIZES = (1, 2, 4, 8)
CHUNKS_BY_MODE = {
    # (gpu?, mode) -> chunk counts K. K = 1 cannot overlap anything (a reference point on the
    # CPU); the GPU default keeps two K so that the 805M-parameter cells fit its time budget.
    (False, "quick"): [1, 10],
    (False, "default"): [1, 5, 20],
    (False, "full"): [1, 5, 10, 20, 50],
    (True, "quick"): [20],
    (True, "default"): [5, 20],
    (True, "full"): [1, 5, 10, 20, 50],
}
# The cell at this K also measures the named variants (the knobs, impl/strategies/knobs.py);
# the quick mode measures none.
KNOB_CHUNKS = {"quick": None, "default": (5, 20), "full": (5, 20)}  # (CPU, GPU)
# The GPU default run measures them on the balanced workload alone (compute and communication
# of the same order: where a knob can move the step), within its budget; --full on every one.
KNOB_WORKLOADS = {(True, "default"): ("mlp_8192x12_b1024_bf16",)}
# ... and on the whole launched world alone: a 2-GPU launch measures them at w = 2 (the knob
# groups of a subgroup are checked by tests/test_subgroups.py on GPUs).
KNOBS_ON_THE_WHOLE_WORLD = {(True, "default"): True}
# The GPU default run's budget at world sizes above 1 (docs/budget.md): the reference MLP,
# whose communication is 9% of its step, at K = 20 on the whole launched world alone; the
# transformer (3-5%) likewise; the balanced MLP at every K on every size (its strong and weak
# scaling), and alone at K = 20 between 2 ranks and the launched world (w = 4 inside 8).
# --full keeps every cell.
NARROWED_CELLS = {(True, "default"): {
    "mlp_8192x12_bf16": {NARROWED.chunks: (20,), NARROWED.middle: False, NARROWED.two: False},
    "gpt_small_bf16": {NARROWED.chunks: (20,), NARROWED.middle: False, NARROWED.two: False},
    "mlp_8192x12_b1024_bf16": {NARROWED.middle_chunks: (20,)},
}}


# suite/run.py collects each pass in its own process before launching it; these tell the
# collection the launch that pass will have, so that it generates the same ids.
COLLECT_WORLD_ENV = "OVERLAP_COLLECT_WORLD"
COLLECT_MPI_ENV = "OVERLAP_COLLECT_MPI"


def under_mpirun() -> bool:
    return ("OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ
            or os.environ.get(COLLECT_MPI_ENV) == "1")


def launched_world() -> int:
    """Ranks of this launch (torchrun's WORLD_SIZE, MPI's size; while suite/run.py checks a
    pass, the world it will launch), known before any process group: benchmarks are
    generated only for world sizes this launch can run."""
    for key in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", COLLECT_WORLD_ENV):
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    return 1


def suite_axes(config) -> dict:
    choices, mode = config.suite_choices, config.option.suite_mode
    gpu = capabilities.gpu_count() > 0
    backend = selected_backend()
    knob_chunks = KNOB_CHUNKS[mode][gpu] if KNOB_CHUNKS[mode] else None
    knobs = [name for name in VARIANTS if name != "ddp-25mb"
             and (backend == "nccl" or name not in GPU_VARIANTS)]
    return {
        AXES.knobs: knobs, AXES.knob_chunks: knob_chunks, AXES.backend: backend,
        AXES.knob_workloads: KNOB_WORKLOADS.get((gpu, mode)),  # None: every workload
        AXES.knobs_on_the_whole_world: KNOBS_ON_THE_WHOLE_WORLD.get((gpu, mode), False),
        AXES.narrowed: NARROWED_CELLS.get((gpu, mode), {}),
        AXES.profile: recorded_profile(backend),  # part of every benchmark id: runs merge safely
        AXES.strategies: choices["strategies"] or measured_by_default(),
        # resolved here once: every benchmark's cells hold the config (impl/presets.py)
        AXES.workloads: [preset(name) for name in choices["workloads"]
                         or DEFAULT_WORKLOADS[gpu, mode]],
        AXES.chunks: choices["chunks"] or CHUNKS_BY_MODE[gpu, mode],
        AXES.world_sizes: choices["world_sizes"] or list(WORLD_SIZES),
    }


@pytest.fixture(scope="session")
def rounds(dist_context, pytestconfig):
    from suite.harness import rounds_for

    return rounds_for(pytestconfig.option.suite_mode, dist_context.device)


def pytest_collection_modifyitems(config, items):
    """Benchmarks whose parameters this launch cannot run are generated with none (an empty
    parameter set), and a module's ``planned(item, mode)`` can leave a benchmark out of a
    mode's plan on this launch: deselect them instead of reporting a skip for what was never a
    case (a deselected benchmark is neither planned nor fitted: suite/calibrate.py)."""
    mode = config.option.suite_mode
    left_out = [item for item in items
                if any(mark.name == "skip"
                       and "empty parameter set" in str(mark.kwargs.get("reason"))
                       for mark in item.iter_markers())
                or not getattr(item.module, "planned", lambda item, mode: True)(item, mode)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]
