"""The report's analysis: flat benchmark rows in, tables (lists of dicts) out.

Pure functions only: no file access, no plotting, no formatting. A *row* is one benchmark's
``extra_info`` plus ``machine`` (the result file's label), ``run`` (index of the run it came
from) and ``rounds`` (pytest-benchmark's round count); ``benchmark_rows`` makes them.

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

from impl.metrics import hidden_comm_fraction

STRATEGY_ORDER = ("sequential", "threaded", "chunked", "mpi", "ddp")
REFERENCE_WORKLOAD = "mlp_8192x12_bf16"  # docs/ANCHORS.md's data-parallel reference model
REFERENCE_CHUNKS = 10
TP_KINDS = ("tensor_parallel",)
PIPELINE_KINDS = ("pipeline",)
KNOWN_KINDS = ("step", "allreduce", "synthetic", "gemm", "seed_step", "tensor_core_ceiling",
               "sampler_overhead", *TP_KINDS, *PIPELINE_KINDS)
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
        if (anchor.peer == peer and anchor.device == row.get("device")
                and anchor.backend == row.get("backend") and anchor.profile == row.get("profile")
                and anchor.world_size == row.get("world_size")
                and anchor.size_bytes == row.get("size_bytes")):
            return anchor
    return None


# --- rows ---------------------------------------------------------------------------------


def benchmark_rows(machine: str, run: int, benchmarks: Iterable[dict]) -> list[dict]:
    """One flat row per benchmark: its extra_info plus machine, run index and round count."""
    return [{**b["extra_info"], "machine": machine, "run": run, "name": b["name"],
             "rounds": b["stats"].get("rounds")} for b in benchmarks]


def identity(row: dict) -> tuple:
    """What makes two rows the same measurement (a newer run replaces an older one)."""
    kind = row.get("kind")
    keys = {
        "step": ("workload", "strategy", "chunks", "world_size", "profile"),
        "allreduce": ("world_size", "profile", "size_bytes"),
        "synthetic": ("chunks",),
        "gemm": ("version", "preset", "dtype"),
        "seed_step": ("impl",),
        "tensor_core_ceiling": ("instruction", "dtype"),
        "sampler_overhead": ("workload",),
    }.get(kind, ("name",))
    return (row["machine"], kind, *(row.get(key) for key in keys))


def merge_rows(rows: Iterable[dict]) -> list[dict]:
    """Rows with duplicates removed; pass them oldest run first, so the newest one wins."""
    merged: dict[tuple, dict] = {}
    for row in rows:
        merged[identity(row)] = row
    return list(merged.values())


def of_kind(rows: Iterable[dict], *kinds: str) -> list[dict]:
    """Rows of the given kinds; step rows only when real (the simulation never mixes in)."""
    return [r for r in rows if r.get("kind") in kinds
            and (r.get("kind") != "step" or r.get("real", True))]


def unknown_kinds(rows: Iterable[dict]) -> list[str]:
    return sorted({str(r.get("kind")) for r in rows} - set(KNOWN_KINDS))


def strategy_rank(strategy: str) -> tuple[int, str]:
    order = STRATEGY_ORDER.index(strategy) if strategy in STRATEGY_ORDER else len(STRATEGY_ORDER)
    return order, strategy


def _step_sort(row: dict) -> tuple:
    return (row["chunks"], strategy_rank(row["strategy"]))


# --- notes for missing or suspicious values ------------------------------------------------

EFFICIENCY_ABOVE_ONE = ("above 1: the step beat the measured limit. compute-only, comm-only "
                        "and sequential are separate measurements, so this is their noise (or "
                        "a reference measured under other conditions), not super-perfect "
                        "overlap; left out of every 'best' choice")


def note_for(field: str, row: dict) -> str | None:
    """Why a value is n/a (or needs a warning), in words for a table footnote; None if fine."""
    value = row.get(field)
    if field == "overlap_efficiency":
        if value is None and row.get("world_size") == 1:
            return "undefined at world size 1: there is no communication to hide"
        if value is None:
            return ("undefined: sequential is already at or below the limit "
                    "max(compute-only, comm-only), so there is nothing to hide")
        if value > 1 + 1e-9:
            return EFFICIENCY_ABOVE_ONE
    if value is not None:
        return None
    if field == "hidden_comm_fraction":
        if row.get("strategy") == "ddp":
            return ("not observable for DDP: its bucket all-reduces run inside DDP's reducer, "
                    "so its timeline has no communication lane")
        return "undefined: the step communicated nothing (world size 1)"
    if field in ("energy_per_step_j", "samples_per_joule", "mean_power_w", "mean_gpu_util_pct",
                 "mean_sm_clock_mhz"):
        reason = (row.get("nvml") or {}).get("reason")
        return f"no NVML energy counter in this run ({reason})" if reason else (
            "no NVML energy counter in this run")
    if field == "scaling_efficiency":
        return "no 1-rank run of this strategy to scale from"
    if field in ("nccl_tests_gbps", "torch_ref_gbps", "pct_of_nccl_tests"):
        return "no reference measurement for this device, backend, profile, ranks and size"
    if field in ("roofline_tflops", "peak_tflops", "pct_of_roofline", "pct_of_peak"):
        return "no peak table row for this device (impl/kernels/peaks.py)"
    return "not recorded in this result file"


def plausible_efficiency(value: float | None) -> bool:
    return value is not None and value <= 1 + 1e-9


# --- step tables ------------------------------------------------------------------------------


def step_groups(rows: Iterable[dict]) -> list[dict]:
    """Step rows per (machine, workload, world size, profile), each sorted by K then strategy."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in of_kind(rows, "step"):
        groups[(row["machine"], row["workload"], row["world_size"], row["profile"])].append(row)
    return [{"machine": m, "workload": w, "world_size": n, "profile": p,
             "backend": members[0].get("backend"), "rows": sorted(members, key=_step_sort)}
            for (m, w, n, p), members in sorted(groups.items())]


def best_overlap(rows: Iterable[dict]) -> list[dict]:
    """Per machine and strategy, the step row with the highest plausible overlap efficiency.

    Sequential is the baseline (its own "efficiency" is only the noise between it and its
    reference), so it is left out; so are values above 1 (see EFFICIENCY_ABOVE_ONE).
    """
    best: dict[tuple, dict] = {}
    for row in of_kind(rows, "step"):
        value = row.get("overlap_efficiency")
        if row["strategy"] == "sequential" or not plausible_efficiency(value):
            continue
        key = (row["machine"], row["strategy"])
        if key not in best or value > best[key]["overlap_efficiency"]:
            best[key] = row
    return sorted(best.values(), key=lambda r: (r["machine"], strategy_rank(r["strategy"])))


def same_setting(rows: Iterable[dict], like: dict, strategy: str) -> dict | None:
    """The step row of ``strategy`` at the machine, workload, K, world size and profile of
    ``like``."""
    for row in of_kind(rows, "step"):
        if row["strategy"] == strategy and all(
                row.get(k) == like.get(k)
                for k in ("machine", "workload", "chunks", "world_size", "profile")):
            return row
    return None


def reference_settings(rows: Iterable[dict]) -> list[dict]:
    """Per machine, the setting the step-anatomy figures show.

    The reference workload when present (else the one with most rows), its first profile,
    the largest world size measured, and K = 10 when measured (else the largest K).
    """
    by_machine: dict[str, list[dict]] = defaultdict(list)
    for row in of_kind(rows, "step"):
        by_machine[row["machine"]].append(row)
    settings = []
    for machine, members in sorted(by_machine.items()):
        workloads = [r["workload"] for r in members]
        workload = (REFERENCE_WORKLOAD if REFERENCE_WORKLOAD in workloads
                    else max(sorted(set(workloads)), key=workloads.count))
        members = [r for r in members if r["workload"] == workload]
        profile = sorted({r["profile"] for r in members})[0]
        members = [r for r in members if r["profile"] == profile]
        # The largest world that most strategies reached (one lone mpi row must not win).
        worlds = [r["world_size"] for r in members]
        world = max(set(worlds), key=lambda w: (worlds.count(w) > 1, w))
        members = [r for r in members if r["world_size"] == world]
        chunk_counts = {r["chunks"] for r in members}
        chunks = REFERENCE_CHUNKS if REFERENCE_CHUNKS in chunk_counts else max(chunk_counts)
        settings.append({"machine": machine, "workload": workload, "profile": profile,
                         "world_size": world, "chunks": chunks,
                         "backend": members[0].get("backend")})
    return settings


def setting_rows(rows: Iterable[dict], setting: dict, chunks: bool = True) -> list[dict]:
    """Step rows of one setting, in strategy order (every K when ``chunks`` is False)."""
    keys = ("machine", "workload", "profile", "world_size", *(("chunks",) if chunks else ()))
    found = [r for r in of_kind(rows, "step") if all(r.get(k) == setting[k] for k in keys)]
    return sorted(found, key=_step_sort)


# --- step anatomy: timelines ------------------------------------------------------------------


def timeline_bars(timeline: dict) -> list[dict]:
    """A step's intervals as bars from t = 0 (the first interval's start), in ms."""
    intervals = timeline.get("intervals") or []
    if not intervals:
        return []
    origin = min(i["start_ms"] for i in intervals)
    return [{"lane": i["lane"], "label": i["label"], "chunk": i["chunk"],
             "start_ms": i["start_ms"] - origin, "duration_ms": i["end_ms"] - i["start_ms"]}
            for i in intervals]


def timeline_hidden_fraction(timeline: dict) -> float | None:
    """The hidden-communication fraction recomputed from stored intervals (for captions)."""
    intervals = timeline.get("intervals") or []
    lane = lambda name: [(i["start_ms"], i["end_ms"]) for i in intervals if i["lane"] == name]
    return hidden_comm_fraction(lane("compute"), lane("comm"))


def chunk_durations(row: dict) -> list[dict]:
    """Per chunk: backward compute ms and all-reduce ms from the step's timeline."""
    per_chunk: dict[int, dict] = {}
    for interval in (row.get("timeline") or {}).get("intervals") or []:
        chunk = interval.get("chunk")
        if chunk is None:
            continue
        entry = per_chunk.setdefault(chunk, {"chunk": chunk, "compute_ms": None,
                                             "comm_ms": None})
        field = "compute_ms" if interval["lane"] == "compute" else "comm_ms"
        entry[field] = (entry[field] or 0.0) + interval["end_ms"] - interval["start_ms"]
    return [per_chunk[c] for c in sorted(per_chunk)]


def step_spread(rows: Sequence[dict]) -> list[dict]:
    """Per strategy: the per-step times of the timed rounds and their min / median / max."""
    spread = []
    for row in rows:
        times = sorted(row.get("step_ms_all") or [])
        if not times:
            continue
        spread.append({"strategy": row["strategy"], "step_ms_all": times,
                       "min_ms": times[0], "median_ms": row["step_ms"], "max_ms": times[-1],
                       "spread_pct": (times[-1] - times[0]) / row["step_ms"] * 100})
    return spread


def totals(rows: Sequence[dict]) -> dict | None:
    """Sequential vs overlapped: the references of one setting and each strategy's step.

    The reference bars are the torch.distributed ones (mpi measures its own references over
    MPI; they stay on its row only).
    """
    if not rows:
        return None
    first = next((r for r in rows if r["strategy"] != "mpi"), rows[0])
    return {"compute_only_ms": first["compute_only_ms"], "comm_only_ms": first["comm_only_ms"],
            "sum_ms": first["compute_only_ms"] + first["comm_only_ms"],
            "sequential_ms": first["sequential_ms"], "limit_ms": first["limit_ms"],
            "strategies": [{"strategy": r["strategy"], "step_ms": r["step_ms"],
                            "sequential_ms": r["sequential_ms"], "limit_ms": r["limit_ms"]}
                           for r in rows]}


def chunk_sweep(rows: Iterable[dict], setting: dict) -> dict:
    """Step time against K per strategy, with the limit and sequential reference per K."""
    lines: dict[str, list[tuple[int, float]]] = defaultdict(list)
    limit: dict[int, float] = {}
    sequential: dict[int, float] = {}
    for row in setting_rows(rows, setting, chunks=False):
        lines[row["strategy"]].append((row["chunks"], row["step_ms"]))
        limit[row["chunks"]] = row["limit_ms"]
        sequential[row["chunks"]] = row["sequential_ms"]
    return {"lines": {s: sorted(points) for s, points in sorted(lines.items(),
                                                               key=lambda i: strategy_rank(i[0]))},
            "limit": sorted(limit.items()), "sequential": sorted(sequential.items())}


# --- scaling and interconnects ----------------------------------------------------------------


def scaling(rows: Iterable[dict]) -> list[dict]:
    """Throughput over world size at a fixed per-rank batch, per strategy and K.

    ``scaling_efficiency`` = samples_per_s(w) / (w · samples_per_s(1)) of the same strategy,
    workload, K and profile; None without a 1-rank run.
    """
    series: dict[tuple, dict[int, dict]] = defaultdict(dict)
    for row in of_kind(rows, "step"):
        key = (row["machine"], row["workload"], row["profile"], row["chunks"], row["strategy"])
        series[key][row["world_size"]] = row
    table = []
    for (machine, workload, profile, chunks, strategy), by_world in series.items():
        one = by_world.get(1)
        for world, row in sorted(by_world.items()):
            efficiency = (row["samples_per_s"] / (world * one["samples_per_s"])
                          if one is not None else None)
            table.append({"machine": machine, "workload": workload, "profile": profile,
                          "chunks": chunks, "strategy": strategy, "world_size": world,
                          "samples_per_s": row["samples_per_s"], "step_ms": row["step_ms"],
                          "scaling_efficiency": efficiency})
    return sorted(table, key=lambda r: (r["machine"], r["workload"], r["profile"], r["chunks"],
                                        strategy_rank(r["strategy"]), r["world_size"]))


def world_sizes(rows: Iterable[dict]) -> dict[str, list[int]]:
    """The world sizes of step rows per machine."""
    found: dict[str, set[int]] = defaultdict(set)
    for row in of_kind(rows, "step"):
        found[row["machine"]].add(row["world_size"])
    return {machine: sorted(sizes) for machine, sizes in sorted(found.items())}


def profiles(rows: Iterable[dict]) -> dict[str, list[str]]:
    """The interconnect profiles measured per machine (step and all-reduce rows)."""
    found: dict[str, set[str]] = defaultdict(set)
    for row in of_kind(rows, "step", "allreduce"):
        found[row["machine"]].add(row["profile"])
    return {machine: sorted(names) for machine, names in sorted(found.items())}


def interconnect(rows: Iterable[dict], settings: Sequence[dict]) -> list[dict]:
    """Per machine, profile and strategy at the reference K and largest multi-rank world:
    step time, overlap efficiency, and the all-reduce busbw at the largest size measured."""
    rows = list(rows)
    busbw: dict[tuple, dict] = {}
    for row in of_kind(rows, "allreduce"):
        key = (row["machine"], row["profile"], row["world_size"])
        if key not in busbw or row["size_bytes"] > busbw[key]["size_bytes"]:
            busbw[key] = row
    table = []
    for setting in settings:
        for row in of_kind(rows, "step"):
            if (row["machine"] != setting["machine"] or row["workload"] != setting["workload"]
                    or row["world_size"] != setting["world_size"]
                    or row["chunks"] != setting["chunks"]):
                continue
            largest = busbw.get((row["machine"], row["profile"], row["world_size"]))
            table.append({**{k: row[k] for k in ("machine", "profile", "strategy", "workload",
                                                 "chunks", "world_size", "step_ms",
                                                 "overlap_efficiency")},
                          "backend": row.get("backend"),
                          "busbw_gbps": largest["busbw_gbps"] if largest else None,
                          "busbw_size_bytes": largest["size_bytes"] if largest else None})
    return sorted(table, key=lambda r: (r["machine"], strategy_rank(r["strategy"]),
                                        r["profile"]))


# --- all-reduce ---------------------------------------------------------------------------------


def allreduce_groups(rows: Iterable[dict]) -> list[dict]:
    """All-reduce rows per (machine, profile, world size), by size, with the reference busbw."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in of_kind(rows, "allreduce"):
        nccl_tests, torch_ref = anchor_for(row, "nccl-tests"), anchor_for(row, "torch.distributed")
        groups[(row["machine"], row["profile"], row["world_size"])].append({
            **row,
            "nccl_tests_gbps": nccl_tests.busbw_gbps if nccl_tests else None,
            "torch_ref_gbps": torch_ref.busbw_gbps if torch_ref else None,
            "pct_of_nccl_tests": row["busbw_gbps"] / nccl_tests.busbw_gbps * 100
            if nccl_tests else None,
        })
    return [{"machine": m, "profile": p, "world_size": w, "backend": members[0].get("backend"),
             "device": members[0].get("device"),
             "rows": sorted(members, key=lambda r: r["size_bytes"])}
            for (m, p, w), members in sorted(groups.items())]


# --- energy and the sampler ---------------------------------------------------------------------


def _mean_over_gpus(row: dict, field: str) -> float | None:
    """Mean of the per-GPU means; a GPU without samples (null) or a non-number is skipped."""
    values = ((row.get("nvml") or {}).get("mean") or {}).get(field)
    if not isinstance(values, list):
        return None
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
               and math.isfinite(v)]
    return sum(numbers) / len(numbers) if numbers else None


def energy(rows: Iterable[dict], settings: Sequence[dict]) -> list[dict]:
    """Energy per step, samples per joule and mean NVML readings per strategy and world size,
    at each machine's reference workload, profile and K."""
    table = []
    for setting in settings:
        for row in of_kind(rows, "step"):
            if not all(row.get(k) == setting[k]
                       for k in ("machine", "workload", "profile", "chunks")):
                continue
            table.append({**{k: row.get(k) for k in ("machine", "run", "rounds", "strategy",
                                                     "world_size", "chunks", "step_ms",
                                                     "energy_per_step_j", "samples_per_joule",
                                                     "nvml")},
                          "mean_power_w": _mean_over_gpus(row, "power_w"),
                          "mean_gpu_util_pct": _mean_over_gpus(row, "gpu_util_pct"),
                          "mean_sm_clock_mhz": _mean_over_gpus(row, "sm_clock_mhz")})
    return sorted(table, key=lambda r: (r["machine"], r["world_size"],
                                        strategy_rank(r["strategy"])))


def has_energy(rows: Iterable[dict]) -> bool:
    return any(r.get("energy_per_step_j") is not None for r in of_kind(rows, "step"))


def nvml_series(rows: Sequence[dict]) -> list[dict]:
    """Per strategy of one setting: time (s) and the mean over GPUs of each NVML series."""
    out = []
    for row in rows:
        series = row.get("nvml_series")
        if not series or not series.get("t_s"):
            continue
        means = {}
        for name, per_gpu in series["series"].items():
            columns = list(zip(*per_gpu))
            means[name] = [sum(values) / len(values) for values in columns]
        out.append({"strategy": row["strategy"], "t_s": list(series["t_s"]), "mean": means,
                    "gpus": len(series.get("gpus") or [])})
    return out


def sampler_overhead(rows: Iterable[dict]) -> list[dict]:
    return sorted(of_kind(rows, "sampler_overhead"), key=lambda r: r["machine"])


# --- simulation, GEMM, seed step ----------------------------------------------------------------


def synthetic(rows: Iterable[dict]) -> list[dict]:
    """The sleep-based simulation's rows (never mixed with real measurements)."""
    return sorted(of_kind(rows, "synthetic"), key=lambda r: (r["machine"], r["chunks"]))


GEMM_VERSION_ORDER = ("v1", "v1c", "v2", "v3", "v4", "v5", "v6", "cublas")
TENSOR_CORE_INSTRUCTIONS = ("mma.sync", "wgmma")  # impl/kernels/ops.py, the ceiling probes


def gemm_version_rank(version: str) -> tuple[int, str]:
    """Sort key: the ladder's order (GEMM_VERSION_ORDER), unknown versions last."""
    order = GEMM_VERSION_ORDER
    return (order.index(version) if version in order else len(order), version)


def gpu_model(row: dict) -> str:
    """The GPU a single-GPU row ran on: its device_name, else (older files) its machine."""
    return row.get("device_name") or f"machine {row['machine']}"


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
    if "kernel_path" in row:
        return row["version"]
    return RENAMED_BEFORE_KERNEL_PATH.get(row["version"], row["version"])


def ran_other_kernel(row: dict) -> str | None:
    """The ladder version whose kernel a GEMM row actually ran, when not its own.

    v6 falls back to v5's kernel where TMA cannot address the operands (kernel_path "v5"
    instead of "tma"); every other version records its own name. Rows from before
    kernel_path was recorded give None.
    """
    path = row.get("kernel_path")
    return path if path in GEMM_VERSION_ORDER and path != row.get("version") else None


def gemm_ladder(rows: Iterable[dict]) -> list[dict]:
    """GEMM rows per (machine, shape, dtype), own versions first then cuBLAS, with the share
    of the roofline each reaches. Only the newest run per GPU model counts
    (newest_run_per_gpu); ``version`` is today's name (ladder_version, the recorded one in
    ``recorded_version``) and ``ran_kernel_of`` says whose kernel ran (ran_other_kernel)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in newest_run_per_gpu(rows, "gemm"):
        roofline = row.get("roofline_tflops")
        groups[(row["machine"], row["m"], row["n"], row["k"], row["dtype"])].append({
            **row, "pct_of_roofline": row["tflops"] / roofline * 100 if roofline else None,
            "version": ladder_version(row), "recorded_version": row["version"],
            "ran_kernel_of": ran_other_kernel(row)})
    order = lambda r: gemm_version_rank(r["version"])
    return [{"machine": machine, "preset": members[0]["preset"], "m": m, "n": n, "k": k,
             "dtype": dtype, "device_name": members[0].get("device_name"),
             "rows": sorted(members, key=order)}
            for (machine, m, n, k, dtype), members in sorted(groups.items())]


def tensor_core_ceilings(rows: Iterable[dict]) -> list[dict]:
    """Per GPU model (newest run only, newest_run_per_gpu): the bf16 FLOP/s each tensor-core
    instruction family reaches at most, mma.sync first, then wgmma, with the mean SM clock
    and power NVML saw over the sustained launches (None where not sampled)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in newest_run_per_gpu(rows, "tensor_core_ceiling"):
        groups[(row["machine"], gpu_model(row))].append({
            **row, "sustained_sm_clock_mhz": _mean_over_gpus(row, "sm_clock_mhz"),
            "sustained_power_w": _mean_over_gpus(row, "power_w")})
    order = lambda r: (TENSOR_CORE_INSTRUCTIONS.index(r["instruction"])
                       if r["instruction"] in TENSOR_CORE_INSTRUCTIONS else 99, r["instruction"])
    return [{"machine": machine, "device_name": members[0].get("device_name"),
             "rows": sorted(members, key=order)}
            for (machine, _), members in sorted(groups.items())]


def seed_steps(rows: Iterable[dict]) -> list[dict]:
    """The seed training step per implementation, with its time relative to torch's in the
    same run (the newest run per GPU model, newest_run_per_gpu)."""
    found = newest_run_per_gpu(rows, "seed_step")
    torch_ms = {gpu_model(r): r["step_ms"] for r in found if r["impl"] == "torch"}
    return sorted(({**r, "vs_torch": r["step_ms"] / torch_ms[gpu_model(r)]
                    if gpu_model(r) in torch_ms else None} for r in found),
                  key=lambda r: (r["machine"], r["impl"]))


# --- headline numbers -------------------------------------------------------------------------


def headline(rows: Sequence[dict]) -> dict:
    """The abstract's numbers: best overlap and DDP beside it, busbw at 1 GiB vs nccl-tests,
    the simulation's speedup and the best own GEMM kernel (None where there is no data)."""
    candidates = best_overlap(rows)
    best = max(candidates, key=lambda r: r["overlap_efficiency"], default=None)
    ddp = same_setting(rows, best, "ddp") if best else None
    busbw = None
    for group in allreduce_groups(rows):
        for row in group["rows"]:
            if row["size_bytes"] == GIB and row["nccl_tests_gbps"] is not None and (
                    busbw is None or row["world_size"] > busbw["world_size"]):
                busbw = row
    simulated = max(synthetic(rows), key=lambda r: r["chunks"], default=None)
    own_gemm = [r for g in gemm_ladder(rows) for r in g["rows"]
                if r["version"] != "cublas" and r.get("pct_of_cublas") is not None]
    best_gemm = max(own_gemm, key=lambda r: (r["m"] * r["n"] * r["k"], r["pct_of_cublas"]),
                    default=None)
    return {"best": best, "ddp": ddp, "busbw": busbw, "synthetic": simulated,
            "gemm": best_gemm}


# --- regression against a baseline ------------------------------------------------------------


def regression_rows(comparison) -> list[dict]:
    """reports.gate's Comparison as table rows (the decision itself is the gate's)."""
    table = []
    for row in comparison.rows:
        decision = row.decision
        table.append({"benchmark": row.name, "group": row.group,
                      "baseline_ms": row.baseline_median_s * 1e3,
                      "candidate_ms": row.candidate_median_s * 1e3,
                      "ratio": decision.ratio, "ci": decision.ci,
                      "p_value": decision.p_value, "verdict": decision.verdict,
                      "reason": decision.reason})
    order = {"regressed": 0, "improved": 1, "unchanged": 2}
    return sorted(table, key=lambda r: (order.get(r["verdict"], 3), r["benchmark"]))
