"""The studies' own records whose keys share a row field's name, declared once: the code that
writes one and every reader name a key as an attribute here (``axes[AXES.chunks]``,
``balance[BALANCE.shares]``), as a row's readers go through its kind (impl/rows/kinds.py).
Torch-free.
"""

from __future__ import annotations

from impl.rows.declare import Declared

# suite.conftest.suite_axes: what this launch runs (the options of the root conftest, or the
# mode's defaults), which the benchmarks generate their cells and settings from.
AXES = Declared.keys("suite axes", (
    "knobs", "knob_chunks", "backend", "knob_workloads", "knobs_on_the_whole_world",
    "narrowed", "profile", "strategies", "workloads", "chunks", "world_sizes"))
# suite.conftest.NARROWED_CELLS: the default run's budget for one workload (an axes'
# ``narrowed``): its K, its K at sizes between 2 ranks and the launched world, and whether
# it runs at those sizes ("middle") and at 2 ranks below a larger world ("two").
NARROWED = Declared.keys("narrowed cells", ("chunks", "middle_chunks", "middle", "two"))

# A cell's ``memory`` on a GPU (suite/bench_overlap.py, a step or comparison row's): the peak
# its rounds allocated and the memory plan (impl.memory.MemoryPlan as JSON).
CELL_MEMORY = Declared.keys("cell memory", ("peak_bytes", "plan"))

# What a variant's after_round returns for each round (suite.harness.Variant): the round's
# last step's timeline (impl.timeline.Timeline as JSON) and, for a pipeline stage, its busy time.
ROUND_EXTRA = Declared.keys("round extras", ("timeline", "busy_ms"))

# impl.hybrid.coarse.balance, a coarse hybrid_step row's ``balance``: the shares and compute
# times before the first pass, the final shares, each pass's and the split decision.
BALANCE = Declared.keys("balance", ("shares_before", "compute_ms_before", "shares", "passes",
                           "decision"))
BALANCE_PASS = Declared.keys("balance pass", ("shares", "compute_ms"))

# impl.hybrid.largest: each model size fused GPU Adam tried (an offload_only row's
# ``gpu_only_attempts``): its layers, parameters and what its step did.
GPU_ONLY_ATTEMPT = Declared.keys("GPU-only attempt", ("layers", "parameters", "gpu_only"))

# suite/bench_hybrid.py: the phases of an offload member's measurement, the keys of its rows'
# ``measure_phases_s``.
MEASURE_PHASE = Declared.keys("measure phase", ("checks", "builds", "rounds", "rates"))

# python -m impl.hybrid.host_casts --json: the run (its flags) and each operation timed.
HOST_CASTS_RUN = Declared.keys("host casts run", ("values", "threads", "rows"))
HOST_CAST = Declared.keys("host cast", ("operation", "threads", "ms", "gbps"))

# suite.offload_switch's results file: the member, device and host threads, the rounds, each
# variant's per-round step times and its step over fused GPU Adam's.
SWITCH_TIMING = Declared.keys("switch timing", (
    "member", "device", "host_threads", "rounds", "steps_per_round", "round_ms",
    "vs_device_adam"))
