"""The report's analysis: flat benchmark rows in, tables (lists of dicts) out.

Pure functions only: no file access, no plotting, no formatting. A *row* is one benchmark's
``extra_info`` plus ``machine`` (the result file's label), ``run`` (index of the run it came
from) and ``rounds`` (pytest-benchmark's round count); impl.rows.merge.benchmark_rows makes
them, and merge_rows keeps the newest of each measurement (its kind's declared identity).

    rows = benchmark_rows("h200x4", 0, results.benchmarks)
    for group in step_groups(rows):
        print(group["machine"], group["world_size"], [r["step_ms"] for r in group["rows"]])

Formulas (overlap efficiency, limit, busbw) live in impl/metrics.py and arrive here already
computed in ``extra_info``; this module only selects, groups and compares them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from impl import metrics
from impl.rows.kinds import (
    ALLREDUCE,
    GEMM,
    METERED,
    ROW_KINDS,
    SEED_STEP,
    STEP,
    STEP_TIMELINE,
    SYNTHETIC,
    TENSOR_CORE_CEILING,
    TENSOR_PARALLEL,
)
from impl.rows.report_records import GROUP, NVML_CURVE
from impl.strategy_records import REFERENCE, STRATEGY_RECORDS, overlaps_in_k_chunks, reading_rank

PIPELINE_KINDS = ("pipeline", "pipeline_comparison", "hybrid_step", "hybrid_comparison",
                  "offload_crossover", "host_adam", "digits_curve",
                  "gpt_forward")  # reports/sections/: pipeline, hybrid
# The declared kinds (impl/rows/kinds.py) that a section of the report shows.
REPORTED_KINDS = tuple(kind for kind in ROW_KINDS if kind != "autotune")
# The fields of each kind of row read here: row[STEP_ROW.chunks]. A group (step_groups,
# allreduce_groups, gemm_ladder) carries its rows' shared fields under the same names.
STEP_ROW, ALLREDUCE_ROW, SYNTHETIC_ROW = STEP.names, ALLREDUCE.names, SYNTHETIC.names
GEMM_ROW, CEILING_ROW, SEED_ROW = GEMM.names, TENSOR_CORE_CEILING.names, SEED_STEP.names
TP_ROW = TENSOR_PARALLEL.names
GIB = 2**30
MIB = 2**20


# --- reference numbers --------------------------------------------------------------------


@dataclass(frozen=True)
class BusbwAnchor:
    peer: str  # "nccl-tests" or "torch.distributed"
    device: str  # GPU name as torch reports it, or "cpu"
    backend: str
    profile: str
    world_size: int
    size_bytes: int
    busbw_gbps: float


BUSBW_ANCHOR_SOURCE = (
    "docs/ANCHORS.md (the suite's reference measurements): medians of short runs on 2026-11-21, "
    "4× NVIDIA H200 with all pairs NV18, driver 580.159.04, torch 2.11.0+cu130, NCCL 2.28, "
    "bf16 all-reduce; gloo on the 2-core CPU machine, 2 ranks, torch 2.13.0+cpu.")


def _anchors() -> tuple[BusbwAnchor, ...]:
    # size MiB: (nccl-tests 2 GPU, nccl-tests 4 GPU, torch.distributed 2 GPU, 4 GPU), GB/s
    h200 = {1: (49.6, 56.8, 16.3, 27.1), 16: (213.7, 252.0, 157.4, 191.0),
            64: (270.6, 315.0, 234.2, 265.4), 256: (301.2, 339.6, 286.1, 317.0),
            1024: (332.8, 355.1, 326.9, 348.7)}
    anchors = []
    for size_mib, values in h200.items():
        for (peer, world), busbw in zip((("nccl-tests", 2), ("nccl-tests", 4),
                                         ("torch.distributed", 2), ("torch.distributed", 4)),
                                        values):
            anchors.append(BusbwAnchor(peer, "NVIDIA H200", "nccl", "nvlink", world,
                                       size_mib * MIB, busbw))
    anchors.append(BusbwAnchor("torch.distributed", "cpu", "gloo", "gloo-tcp", 2, 64 * MIB, 1.6))
    return tuple(anchors)


BUSBW_ANCHORS = _anchors()


def anchor_for(row: dict, peer: str) -> BusbwAnchor | None:
    """The reference busbw for an all-reduce row's device, backend, profile, ranks and size."""
    for anchor in BUSBW_ANCHORS:
        if (anchor.peer == peer and anchor.device == row.get(ALLREDUCE_ROW.device)
                and anchor.backend == row.get(ALLREDUCE_ROW.backend)
                and anchor.profile == row.get(ALLREDUCE_ROW.profile)
                and anchor.world_size == row.get(ALLREDUCE_ROW.world_size)
                and anchor.size_bytes == row.get(ALLREDUCE_ROW.size_bytes)):
            return anchor
    return None


# --- rows ---------------------------------------------------------------------------------


def of_kind(rows: Iterable[dict], *kinds: str) -> list[dict]:
    """Rows of the given kinds; step rows only when real (the simulation never mixes in)."""
    return [r for r in rows if r.get("kind") in kinds
            and (r.get("kind") != "step" or r.get(STEP_ROW.real, True))]


def unknown_kinds(rows: Iterable[dict]) -> list[str]:
    """Kinds of row that impl/rows/kinds.py does not declare (rows of a newer suite)."""
    return sorted({str(r.get("kind")) for r in rows} - set(ROW_KINDS))


def strategy_rank(strategy: str) -> tuple[int, str]:
    """The strategies' reading order (impl/strategy_records.py), then any other name."""
    return reading_rank(strategy)


def _step_sort(row: dict) -> tuple:
    return (row[STEP_ROW.chunks], strategy_rank(row[STEP_ROW.strategy]))


# --- notes for missing or suspicious values ------------------------------------------------

EFFICIENCY_ABOVE_ONE = ("above 1: the step beat the measured limit. compute-only, comm-only "
                        "and sequential are separate measurements, so this is their noise (or "
                        "a reference measured under other conditions), not super-perfect "
                        "overlap")


def efficiency_note_before_interleaving(row: dict) -> str | None:
    """Why an overlap efficiency of a step row measured before interleaving is missing or
    cannot be read as one (the interleaved cells have reports.cells.efficiency_note)."""
    value, strategy = row.get(STEP_ROW.overlap_efficiency), row.get(STEP_ROW.strategy)
    buckets, chunks = row.get(STEP_ROW.ddp_bucket_count), row.get(STEP_ROW.chunks)
    if row.get(STEP_ROW.world_size) == 1:
        return "undefined at world size 1: there is no communication to hide"
    if strategy in STRATEGY_RECORDS and STRATEGY_RECORDS[strategy].role == REFERENCE:
        return ("sequential against its own reference measured at another moment: only the "
                "noise between the two, not an overlap")
    if strategy == "ddp" and buckets is not None and buckets != chunks:
        return (f"DDP made {buckets} bucket(s), not K = {chunks}: the K-chunk limit "
                f"does not describe it")
    if overlaps_in_k_chunks(strategy) and chunks == 1:
        return "K = 1: nothing can overlap"
    if strategy == "mpi" and row.get(STEP_ROW.sequential_reference) != "mpi-sequential":
        return "MPI against the torch.distributed references, not MPI's own"
    if value is None:
        return ("undefined: sequential is already at or below the limit "
                "max(compute-only, comm-only), so there is nothing to hide")
    if value < 0:
        return "negative: slower than sequential measured at another moment"
    if value > 1 + 1e-9:
        return EFFICIENCY_ABOVE_ONE
    return None


def energy_note_before_left_out(row: dict) -> str:
    """Why a row has no NVML figure, inferred from what the row holds: where its NVML summary
    has energy and the row has intervals (an interleaved cell), the counter did not advance in
    every segment; else the run had no counter."""
    nvml = row.get(STEP_ROW.nvml) or {}
    if nvml.get(METERED.energy_j) and STEP_ROW.intervals in row and not nvml.get(METERED.reason):
        return metrics.COUNTER_DID_NOT_ADVANCE
    return metrics.energy_left_out(None, nvml.get(METERED.reason))


def note_for(field: str, row: dict) -> str | None:
    """Why a value is n/a (or needs a warning), in words for a table footnote; None if fine."""
    value = row.get(field)
    if field == STEP_ROW.overlap_efficiency:
        return efficiency_note_before_interleaving(row)
    if value is not None:
        return None
    if field == STEP_ROW.hidden_comm_fraction:
        if row.get(STEP_ROW.strategy) == "ddp":
            return ("not observable for DDP: its bucket all-reduces run inside DDP's reducer, "
                    "so its timeline has no communication lane")
        return "undefined: the step communicated nothing (world size 1)"
    if field in (STEP_ROW.energy_per_step_j, STEP_ROW.samples_per_joule) and \
            (left_out := row.get(STEP_ROW.energy_left_out)):
        return left_out  # the benchmark's words (metrics.energy_left_out)
    if field in (STEP_ROW.energy_per_step_j, STEP_ROW.samples_per_joule, "mean_power_w",
                 "mean_gpu_util_pct", "mean_sm_clock_mhz"):
        # result files written before energy_left_out, and the NVML means it does not explain
        return energy_note_before_left_out(row)
    if field == TP_ROW.scaling_efficiency:
        return "no 1-rank run of this strategy to scale from"
    if field in ("nccl_tests_gbps", "torch_ref_gbps", "pct_of_nccl_tests"):
        return "no reference measurement for this device, backend, profile, ranks and size"
    if field in (GEMM_ROW.roofline_tflops, GEMM_ROW.peak_tflops, "pct_of_roofline",
                 CEILING_ROW.pct_of_peak):
        return "no peak table row for this device (impl/kernels/peaks.py)"
    return "not recorded in this result file"


# --- step tables ------------------------------------------------------------------------------


def step_groups(rows: Iterable[dict]) -> list[dict]:
    """Step rows per (machine, workload, world size, profile), each sorted by K then strategy."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in of_kind(rows, "step"):
        groups[(row["machine"], row[STEP_ROW.workload], row[STEP_ROW.world_size],
                row[STEP_ROW.profile])].append(row)
    return [{"machine": m, STEP_ROW.workload: w, STEP_ROW.world_size: n, STEP_ROW.profile: p,
             STEP_ROW.backend: members[0].get(STEP_ROW.backend),
             GROUP.rows: sorted(members, key=_step_sort)}
            for (m, w, n, p), members in sorted(groups.items())]


# --- step anatomy: timelines ------------------------------------------------------------------


def timeline_bars(timeline: dict) -> list[dict]:
    """A step's intervals as bars from t = 0 (the first interval's start), in ms."""
    intervals = timeline.get(STEP_TIMELINE.intervals) or []
    if not intervals:
        return []
    origin = min(i["start_ms"] for i in intervals)
    return [{"lane": i["lane"], "label": i["label"], "chunk": i["chunk"],
             "start_ms": i["start_ms"] - origin, "duration_ms": i["end_ms"] - i["start_ms"]}
            for i in intervals]


# --- fabrics ----------------------------------------------------------------------------------


def profiles(rows: Iterable[dict]) -> dict[str, list[str]]:
    """The interconnect profiles measured per machine (step and all-reduce rows)."""
    found: dict[str, set[str]] = defaultdict(set)
    for row in of_kind(rows, "step", "allreduce"):
        found[row["machine"]].add(row[STEP_ROW.profile])  # all-reduce rows declare it too
    return {machine: sorted(names) for machine, names in sorted(found.items())}


# --- all-reduce ---------------------------------------------------------------------------------


def allreduce_groups(rows: Iterable[dict]) -> list[dict]:
    """All-reduce rows per (machine, profile, world size), by size, with the reference busbw."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in of_kind(rows, "allreduce"):
        nccl_tests, torch_ref = anchor_for(row, "nccl-tests"), anchor_for(row, "torch.distributed")
        groups[(row["machine"], row[ALLREDUCE_ROW.profile],
                row[ALLREDUCE_ROW.world_size])].append({
            **row,
            "nccl_tests_gbps": nccl_tests.busbw_gbps if nccl_tests else None,
            "torch_ref_gbps": torch_ref.busbw_gbps if torch_ref else None,
            "pct_of_nccl_tests": row[ALLREDUCE_ROW.busbw_gbps] / nccl_tests.busbw_gbps * 100
            if nccl_tests else None,
        })
    return [{"machine": m, ALLREDUCE_ROW.profile: p, ALLREDUCE_ROW.world_size: w,
             **{key: members[0].get(key) for key in (ALLREDUCE_ROW.backend,
                                                     ALLREDUCE_ROW.device)},
             GROUP.rows: sorted(members, key=lambda r: r[ALLREDUCE_ROW.size_bytes])}
            for (m, p, w), members in sorted(groups.items())]


# --- energy and the sampler ---------------------------------------------------------------------


def _mean_over_gpus(row: dict, field: str) -> float | None:
    """Mean of a ceiling row's per-GPU NVML means; a GPU without samples (null) or a
    non-number is skipped."""
    values = ((row.get(CEILING_ROW.nvml) or {}).get(METERED.mean) or {}).get(field)
    if not isinstance(values, list):
        return None
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
               and math.isfinite(v)]
    return sum(numbers) / len(numbers) if numbers else None


def nvml_series(series: dict | None, label: str) -> dict | None:
    """An NVML series (impl.sampler.Samples.to_json) as time (s) and the mean over GPUs of
    each quantity, labelled for a legend; None without samples."""
    if not series or not series.get("t_s"):
        return None
    means = {}
    for name, per_gpu in series["series"].items():
        columns = list(zip(*per_gpu))
        means[name] = [sum(values) / len(values) for values in columns]
    curve = NVML_CURVE
    return {curve.strategy: label, curve.t_s: list(series["t_s"]), curve.mean: means,
            curve.gpus: len(series.get("gpus") or [])}


def energy_before_interleaving(rows: Iterable[dict]) -> list[dict]:
    """Step rows measured before interleaving that have NVML energy: energy per step against
    mean power (summed over the run's GPUs) × step time, and their disagreement in %. Such a
    row has no segments and no cell: its energy is one counter difference per GPU over its
    timed rounds, and a row where one of them read nothing is left out, as a variant is where a
    segment read nothing (metrics.energy_counter_resolved; one H100 read 0 J over 6 ms)."""
    table = []
    for row in of_kind(rows, "step"):
        nvml = row.get(STEP_ROW.nvml) or {}
        if row.get(STEP_ROW.energy_per_step_j) is None or STEP_ROW.intervals in row or \
                not metrics.energy_counter_resolved(nvml.get(METERED.energy_j) or []):
            continue
        powers = [p for p in (nvml.get(METERED.mean) or {}).get("power_w")
                  or [] if isinstance(p, (int, float)) and not isinstance(p, bool)]
        predicted = sum(powers) * row[STEP_ROW.step_ms] / 1e3 if powers else None
        table.append({**row, "power_w": sum(powers) if powers else None,
                      "power_times_step_j": predicted,
                      "disagreement_pct": 100 * (row[STEP_ROW.energy_per_step_j] / predicted - 1)
                      if predicted else None})
    return sorted(table, key=lambda r: (r["machine"], r[STEP_ROW.workload],
                                        r[STEP_ROW.world_size], *_step_sort(r)))


def sampler_overhead(rows: Iterable[dict]) -> list[dict]:
    return sorted(of_kind(rows, "sampler_overhead"), key=lambda r: r["machine"])


# --- simulation, GEMM, seed step ----------------------------------------------------------------


def synthetic(rows: Iterable[dict]) -> list[dict]:
    """The sleep-based simulation's rows (never mixed with real measurements)."""
    return sorted(of_kind(rows, "synthetic"),
                  key=lambda r: (r["machine"], r[SYNTHETIC_ROW.chunks]))


GEMM_VERSION_ORDER = ("v1", "v1c", "v2", "v3", "v4", "v5", "v6", "cublas")
TENSOR_CORE_INSTRUCTIONS = ("mma.sync", "wgmma")  # impl/kernels/ops.py, the ceiling probes


def gemm_version_rank(version: str) -> tuple[int, str]:
    """Sort key: the ladder's order (GEMM_VERSION_ORDER), unknown versions last."""
    order = GEMM_VERSION_ORDER
    return (order.index(version) if version in order else len(order), version)


def gpu_model(row: dict) -> str:
    """The GPU a single-GPU row ran on: its device_name, else (older files) its machine."""
    # device_name as GEMM declares it: each single-GPU kind declares it the same way
    return row.get(GEMM_ROW.device_name) or f"machine {row['machine']}"


def newest_run_per_gpu(rows: Iterable[dict], kind: str) -> list[dict]:
    """The rows of ``kind`` that the newest run measuring it on each GPU model made.

    The one selection rule of the single-GPU studies (suite/bench_gemm.py: GEMM ladder,
    tensor-core ceilings, seed step). Why: their numbers depend on the GPU model, not on
    the machine label (an H200 of a 1-GPU machine measures what an H200 of a 4-GPU one
    does), and a kernel's name means something only within one version of the ladder (in
    runs made before v1c existed, "v1" was the coalesced kernel). So per GPU model
    (``gpu_model``) the newest run with rows of ``kind`` supersedes every older run of any
    machine label, whole: rows of two runs are never mixed, even where the newer one left a
    shape out. Newest is the highest ``run`` index: runs are numbered oldest first
    (reports.build.load_inputs, as merge_rows expects).
    """
    found = of_kind(rows, kind)
    newest: dict[str, int] = {}
    for row in found:
        newest[gpu_model(row)] = max(newest.get(gpu_model(row), row["run"]), row["run"])
    return [r for r in found if r["run"] == newest[gpu_model(r)]]


# Runs made before v1c and v6 existed recorded no kernel_path; their "v1" was the kernel
# now called v1c (the coalesced naive one). Applied only to rows without kernel_path.
RENAMED_BEFORE_KERNEL_PATH = {"v1": "v1c"}


def ladder_version(row: dict) -> str:
    """A GEMM row's version in today's ladder (see RENAMED_BEFORE_KERNEL_PATH)."""
    version = row[GEMM_ROW.version]
    if GEMM_ROW.kernel_path in row:
        return version
    return RENAMED_BEFORE_KERNEL_PATH.get(version, version)


def ran_other_kernel(row: dict) -> str | None:
    """The ladder version whose kernel a GEMM row actually ran, when not its own.

    v6 falls back to v5's kernel where TMA cannot address the operands (kernel_path "v5"
    instead of "tma"); every other version records its own name. Rows from before
    kernel_path was recorded give None.
    """
    path = row.get(GEMM_ROW.kernel_path)
    return path if path in GEMM_VERSION_ORDER and path != row.get(GEMM_ROW.version) else None


def gemm_ladder(rows: Iterable[dict]) -> list[dict]:
    """GEMM rows per (machine, shape, dtype), own versions first then cuBLAS, with the share
    of the roofline each reaches. Only the newest run per GPU model counts
    (newest_run_per_gpu); ``version`` is today's name (ladder_version, the recorded one in
    ``recorded_version``) and ``ran_kernel_of`` says whose kernel ran (ran_other_kernel)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in newest_run_per_gpu(rows, GEMM.name):
        roofline = row.get(GEMM_ROW.roofline_tflops)
        shape = tuple(row[key] for key in (GEMM_ROW.m, GEMM_ROW.n, GEMM_ROW.k, GEMM_ROW.dtype))
        groups[(row["machine"], *shape)].append({
            **row, "pct_of_roofline": row[GEMM_ROW.tflops] / roofline * 100 if roofline else None,
            GEMM_ROW.version: ladder_version(row), "recorded_version": row[GEMM_ROW.version],
            "ran_kernel_of": ran_other_kernel(row)})
    order = lambda r: gemm_version_rank(r[GEMM_ROW.version])
    return [{"machine": machine, GEMM_ROW.preset: members[0][GEMM_ROW.preset],
             GEMM_ROW.m: m, GEMM_ROW.n: n, GEMM_ROW.k: k, GEMM_ROW.dtype: dtype,
             GEMM_ROW.device_name: members[0].get(GEMM_ROW.device_name),
             GROUP.rows: sorted(members, key=order)}
            for (machine, m, n, k, dtype), members in sorted(groups.items())]


def tensor_core_ceilings(rows: Iterable[dict]) -> list[dict]:
    """Per GPU model (newest run only, newest_run_per_gpu): the bf16 FLOP/s each tensor-core
    instruction family reaches at most, mma.sync first, then wgmma, with the mean SM clock
    and power NVML saw over the sustained launches (None where not sampled)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in newest_run_per_gpu(rows, TENSOR_CORE_CEILING.name):
        groups[(row["machine"], gpu_model(row))].append({
            **row, "sustained_sm_clock_mhz": _mean_over_gpus(row, "sm_clock_mhz"),
            "sustained_power_w": _mean_over_gpus(row, "power_w")})
    instruction = CEILING_ROW.instruction
    order = lambda r: (TENSOR_CORE_INSTRUCTIONS.index(r[instruction])
                       if r[instruction] in TENSOR_CORE_INSTRUCTIONS else 99, r[instruction])
    return [{"machine": machine,
             CEILING_ROW.device_name: members[0].get(CEILING_ROW.device_name),
             GROUP.rows: sorted(members, key=order)}
            for (machine, _), members in sorted(groups.items())]


def seed_steps(rows: Iterable[dict]) -> list[dict]:
    """The seed training step per implementation, with its time relative to torch's in the
    same run (the newest run per GPU model, newest_run_per_gpu)."""
    found = newest_run_per_gpu(rows, SEED_STEP.name)
    torch_ms = {gpu_model(r): r[SEED_ROW.step_ms] for r in found if r[SEED_ROW.impl] == "torch"}
    return sorted(({**r, "vs_torch": r[SEED_ROW.step_ms] / torch_ms[gpu_model(r)]
                    if gpu_model(r) in torch_ms else None} for r in found),
                  key=lambda r: (r["machine"], r[SEED_ROW.impl]))


# --- headline numbers -------------------------------------------------------------------------


def busbw_at_gib(rows: Sequence[dict]) -> dict | None:
    """The all-reduce row of 1 GiB with an nccl-tests reference, at the largest world size
    measured (the all-reduce chapter quotes it), or None."""
    busbw = None
    for group in allreduce_groups(rows):
        for row in group[GROUP.rows]:
            if row[ALLREDUCE_ROW.size_bytes] == GIB and row["nccl_tests_gbps"] is not None and (
                    busbw is None or row[ALLREDUCE_ROW.world_size]
                    > busbw[ALLREDUCE_ROW.world_size]):
                busbw = row
    return busbw
