"""What each section of the report shows: tables, figures and captions from the analysis.

``report_context`` is the whole template context; each ``section_*`` function fills one
section's partial (reports/templates/sections/<id>.html.j2). Captions say what was
measured, on which machine (label and GPUs) and how (command, mode, rounds).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from impl.metrics import ALLREDUCE_FIELDS, STEP_FIELDS
from impl.profiles import PROFILES
from reports import analysis, figures
from reports.format import Cell, Column, Table, fmt, fmt_bytes, fmt_pct, make_table, text_column

TITLE = "Hiding gradient all-reduce behind backward: measurements"
SECTIONS = (
    ("abstract", "Abstract"),
    ("methodology", "Methodology"),
    ("environment", "Environment"),
    ("step-anatomy", "Anatomy of a step"),
    ("scaling", "Scaling over GPU counts"),
    ("interconnect", "Interconnect profiles"),
    ("allreduce", "All-reduce bandwidth"),
    ("energy", "Power, utilisation and energy"),
    ("synthetic", "The original simulation (sleep-based), not a measurement"),
    ("gemm", "GEMM ladder and the seed step"),
    ("tensor-parallel", "Tensor parallelism"),
    ("pipeline", "Pipeline and CPU-GPU hybrid training"),
    ("regression", "Regression against a baseline"),
)
GPU_PROFILES = tuple(PROFILES)  # the NCCL fabrics emulated on one host
STUDY_SPEEDUP_PCT = 30.0  # the course study's reported speedup (docs/ANCHORS.md)


@dataclass(frozen=True)
class Run:
    """One result file as the report describes it."""

    index: int
    label: str
    path: str
    command: str  # as recorded (suite.command), wrappers such as timeout included
    launcher: str  # the suite's own command line (suite.launcher_command), for captions
    mode: str | None
    partial: bool
    created: str | None
    fingerprint: dict
    failed_passes: tuple[str, ...] = ()
    note: str | None = None


@dataclass(frozen=True)
class Figure:
    id: str
    src: str  # data URI
    caption: str
    alt: str


@dataclass
class Baseline:
    """A baseline file's benchmarks and the candidate benchmarks of the same machine."""

    path: str
    label: str
    benchmarks: dict[str, dict]
    candidate: dict[str, dict]
    notes: list[str] = field(default_factory=list)  # candidate files left out, and why


# --- captions -------------------------------------------------------------------------------


def _runs_of(label: str, runs: Sequence[Run]) -> list[Run]:
    return [r for r in runs if r.label == label]


def machine_text(label: str, runs: Sequence[Run]) -> str:
    """"h200x4 (4× NVIDIA H200)" or "cpu-2core (AMD EPYC, 2 cores, no GPU)"."""
    fingerprint = _runs_of(label, runs)[-1].fingerprint
    gpus = Counter(fingerprint.get("gpu_names") or [])
    if gpus:
        return f"{label} ({', '.join(f'{n}× {name}' for name, n in gpus.items())})"
    cpu = fingerprint.get("cpu_model") or "CPU"
    cores = fingerprint.get("cpu_cores")
    return f"{label} ({cpu}{f', {cores} cores' if cores else ''}, no GPU)"


def how_text(rows: Sequence[dict], runs: Sequence[Run]) -> str:
    """The command(s), mode(s) and round counts the rows were measured with."""
    used = [runs[i] for i in sorted({r["run"] for r in rows})]
    commands = "; ".join(dict.fromkeys(f"{run.launcher} ({run.mode or 'unknown'} mode)"
                                       for run in used))
    rounds = sorted({r["rounds"] for r in rows if r.get("rounds") is not None})
    counted = (f"{rounds[0]}" if len(rounds) == 1 else f"{rounds[0]}–{rounds[-1]}"
               ) if rounds else "an unknown number of"
    return f"Run by {commands}; {counted} timed rounds per benchmark."


def clock_text(rows: Sequence[dict]) -> str:
    return ("CUDA events" if any(r.get("backend") == "nccl" for r in rows)
            else "perf_counter")


def setting_text(setting: dict) -> str:
    return (f"{setting['workload']}, K = {setting['chunks']}, {setting['world_size']} ranks, "
            f"{setting['profile']} profile")


def _ordered(items, runs: Sequence[Run]) -> list:
    """Items with a "machine" key in the report's machine order (stable within a machine)."""
    order = {label: index for index, label in enumerate(_labels(runs))}
    return sorted(items, key=lambda item: order.get(item["machine"], len(order)))


def _figure(figure_id: str, image: figures.Image, caption: str, alt: str) -> Figure:
    return Figure(figure_id, figures.data_uri(image), caption, alt)


# --- columns ----------------------------------------------------------------------------------

STEP_COLUMNS = (
    text_column("strategy", "strategy"), Column("chunks", "K"),
    Column("step_ms", "step", "ms"), Column("compute_only_ms", "compute-only", "ms"),
    Column("comm_only_ms", "comm-only", "ms"), Column("sequential_ms", "sequential", "ms"),
    Column("limit_ms", "limit", "ms"), Column("overlap_efficiency", "overlap eff."),
    Column("hidden_comm_fraction", "hidden comm."), Column("samples_per_s", "samples/s"),
    Column("max_abs_err_vs_sequential", "max\u00a0|Δw|"),
)


def step_table(group: dict, runs: Sequence[Run]) -> Table:
    caption = (f"Step times on {machine_text(group['machine'], runs)}: {group['workload']}, "
               f"{group['world_size']} ranks, {group['profile']} profile ({group['backend']}); "
               f"medians of per-step {clock_text(group['rows'])} times. "
               f"{how_text(group['rows'], runs)}")
    table_id = (f"tab-steps-{group['machine']}-{group['workload']}-w{group['world_size']}-"
                f"{group['profile']}")
    return make_table(table_id, caption, STEP_COLUMNS, group["rows"])


# --- sections -----------------------------------------------------------------------------------


def section_abstract(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    top = analysis.headline(rows)
    best, ddp, busbw = top["best"], top["ddp"], top["busbw"]
    out: dict = {"machines": [machine_text(label, runs) for label in _labels(runs)],
                 "best": None, "busbw": None, "synthetic": None, "gemm": None}
    if best:
        out["best"] = {"efficiency": fmt(best["overlap_efficiency"]),
                       "strategy": best["strategy"], "chunks": best["chunks"],
                       "world_size": best["world_size"], "machine": best["machine"],
                       "profile": best["profile"], "workload": best["workload"],
                       "step_ms": fmt(best["step_ms"]), "sequential_ms": fmt(best["sequential_ms"]),
                       "limit_ms": fmt(best["limit_ms"]),
                       "ddp": fmt(ddp["overlap_efficiency"]) if ddp else None,
                       "ddp_step_ms": fmt(ddp["step_ms"]) if ddp else None}
    if busbw:
        out["busbw"] = {"busbw": fmt(busbw["busbw_gbps"]), "world_size": busbw["world_size"],
                        "machine": busbw["machine"], "anchor": fmt(busbw["nccl_tests_gbps"]),
                        "pct": fmt_pct(busbw["pct_of_nccl_tests"]),
                        "wrong": busbw["wrong_elements"]}
    if top["synthetic"]:
        out["synthetic"] = {"speedup": fmt_pct(top["synthetic"]["speedup_pct"]),
                            "chunks": top["synthetic"]["chunks"]}
    if top["gemm"]:
        gemm = top["gemm"]
        out["gemm"] = {"version": version_label(gemm), "dtype": gemm["dtype"],
                       "shape": f"{gemm['m']}×{gemm['n']}×{gemm['k']}",
                       "tflops": fmt(gemm["tflops"]), "pct": fmt_pct(gemm["pct_of_cublas"])}
    return out


def section_methodology(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    quote = lambda fields: [{"name": f.name, "unit": f.unit or "–", "definition": f.definition}
                            for f in fields]
    return {"step_fields": quote(STEP_FIELDS), "allreduce_fields": quote(ALLREDUCE_FIELDS),
            "modes": sorted({r.mode or "unknown" for r in runs})}


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def section_environment(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    labels = _labels(runs)
    newest = {label: _runs_of(label, runs)[-1] for label in labels}

    def value(label: str, key: str) -> str:
        fp = newest[label].fingerprint
        if key == "gpus":
            gpus = Counter(fp.get("gpu_names") or [])
            return ", ".join(f"{n}× {name}" for name, n in gpus.items()) or "none"
        if key == "cpu":
            return f"{fp.get('cpu_model') or 'n/a'}, {fp.get('cpu_cores') or '?'} cores"
        if key == "git":
            commit = fp.get("git_commit")
            if not commit:
                return "n/a (not recorded: the run's copy had no git history)"
            return f"{commit[:12]}{' (dirty)' if fp.get('git_dirty') else ' (clean)'}"
        if key == "profiles":
            return ", ".join(analysis.profiles(rows).get(label, [])) or "n/a"
        if key == "files":
            return "; ".join(f"{r.path}{' (partial)' if r.partial else ''}"
                             for r in _runs_of(label, runs))
        if key == "commands":
            return "; ".join(r.command for r in _runs_of(label, runs))
        if key == "created":
            return "; ".join(r.created or "n/a" for r in _runs_of(label, runs))
        found = fp.get(key)
        return "n/a" if found in (None, "", []) else str(found)

    fields = (("GPUs", "gpus"), ("driver", "driver"), ("CUDA", "cuda"), ("NCCL", "nccl"),
              ("torch", "torch"), ("MPI", "mpi"), ("CPU", "cpu"), ("Python", "python"),
              ("backend", "backend"), ("profiles measured", "profiles"),
              ("git commit", "git"), ("command", "commands"), ("created", "created"),
              ("result files", "files"))
    table = Table("tab-environment", "Environment of each machine, from the result files' "
                  "fingerprint (machine_info.overlap).", ["", *labels],
                  [[Cell(name), *(Cell(value(label, key)) for label in labels)]
                   for name, key in fields], [], [False] * (len(labels) + 1))
    partial = [{"label": r.label, "path": r.path, "failed": ", ".join(r.failed_passes),
                "note": r.note} for r in runs if r.partial]
    topology = [{"label": label,
                 "text": _ANSI.sub("", newest[label].fingerprint.get("gpu_topology") or "")}
                for label in labels if newest[label].fingerprint.get("gpu_topology")]
    return {"table": table, "partial": partial, "topology": topology,
            "unknown_kinds": analysis.unknown_kinds(rows)}


def section_step_anatomy(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    machines = []
    for setting in _ordered(analysis.reference_settings(rows), runs):
        label = setting["machine"]
        members = analysis.setting_rows(rows, setting)
        where = f"{setting_text(setting)} on {machine_text(label, runs)}"
        how = how_text(members, runs)
        clock = clock_text(members)
        panels = []
        for row in members:
            hidden = row.get("hidden_comm_fraction")
            panels.append({"title": f"{row['strategy']}: step {fmt(row['step_ms'])} ms, hidden "
                           f"comm. {fmt(hidden)}", "bars": analysis.timeline_bars(
                               row.get("timeline") or {})})
        entry = {"machine": label, "setting": setting_text(setting), "figures": []}
        entry["figures"].append(_figure(
            f"fig-gantt-{label}", figures.gantt(panels),
            f"One training step per strategy ({where}): compute lane (forward, backward of "
            f"each gradient chunk, SGD update) and communication lane (the all-reduce of each "
            f"chunk), from the strategy's own timeline of its last timed step ({clock}). A "
            f"chunk's backward and all-reduce share a colour; grey is forward and update. DDP's "
            f"bucket all-reduces run inside its reducer and are not observable, so its backward "
            f"bar includes them. {how}",
            f"Gantt chart of one step per strategy, {label}"))
        per_chunk = [{"strategy": r["strategy"], "chunks": analysis.chunk_durations(r)}
                     for r in members if analysis.chunk_durations(r)]
        spread = analysis.step_spread(members)
        entry["figures"].append(_figure(
            f"fig-chunks-{label}", figures.chunk_consistency(per_chunk, spread),
            f"Chunk-wise consistency ({where}). Left: duration of each chunk's backward (solid) "
            f"and all-reduce (dashed) in the timeline of the last timed step. Right: every timed "
            f"step's time per strategy (dots) and their median (bar). {how}",
            f"Per-chunk compute and communication durations, {label}"))
        total = analysis.totals(members)
        entry["figures"].append(_figure(
            f"fig-totals-{label}", figures.totals_bars(total),
            f"Sequential against overlapped ({where}): compute-only, comm-only (same chunking, "
            f"no compute), their sum, the sequential strategy's reference step, and each "
            f"strategy's median step; the dashed line is the limit max(compute-only, "
            f"comm-only). {how}", f"Bars of sequential and overlapped step times, {label}"))
        sweep = analysis.chunk_sweep(rows, setting)
        chunk_counts = sorted({k for points in sweep["lines"].values() for k, _ in points})
        entry["sweep_note"] = None
        if len(chunk_counts) > 1:
            entry["figures"].append(_figure(
                f"fig-sweep-{label}", figures.chunk_sweep(sweep),
                f"Step time against chunk count K ({setting['workload']}, "
                f"{setting['world_size']} ranks, {setting['profile']} profile on "
                f"{machine_text(label, runs)}), with the limit and the sequential reference "
                f"measured at each K. Chunk counts measured: "
                f"{', '.join(map(str, chunk_counts))} (the full sweep is 1, 5, 10, 20, 50). "
                f"{how}", f"Step time against chunk count, {label}"))
        else:
            entry["sweep_note"] = (f"Only K = {chunk_counts[0] if chunk_counts else 'n/a'} was "
                                   f"measured on {label}: no sweep over chunk counts to plot.")
        machines.append(entry)
    best = make_table("tab-best-overlap", "Best overlap efficiency per strategy and machine "
                      "over every workload, K, world size and profile measured (sequential, the "
                      "baseline, and values above 1 left out).",
                      (text_column("machine", "machine"), text_column("strategy", "strategy"),
                       Column("overlap_efficiency", "overlap eff."),
                       Column("hidden_comm_fraction", "hidden comm."),
                       text_column("workload", "workload"), Column("chunks", "K"),
                       Column("world_size", "ranks"), text_column("profile", "profile")),
                      _ordered(analysis.best_overlap(rows), runs))
    return {"machines": machines,
            "step_tables": [step_table(g, runs)
                            for g in _ordered(analysis.step_groups(rows), runs)],
            "best": best}


SCALING_COLUMNS = (text_column("strategy", "strategy"), Column("chunks", "K"),
                   Column("world_size", "ranks"), Column("step_ms", "step", "ms"),
                   Column("samples_per_s", "samples/s"),
                   Column("scaling_efficiency", "scaling eff."))


def section_scaling(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    table = analysis.scaling(rows)
    entries = []
    for setting in _ordered(analysis.reference_settings(rows), runs):
        members = [r for r in table if r["machine"] == setting["machine"]
                   and r["workload"] == setting["workload"] and r["profile"] == setting["profile"]]
        label = setting["machine"]
        worlds = sorted({r["world_size"] for r in members})
        step_rows = [r for r in analysis.of_kind(rows, "step") if r["machine"] == label]
        entry = {"machine": label, "worlds": worlds, "figure": None,
                 "table": make_table(
                     f"tab-scaling-{label}",
                     f"Throughput over world size at a fixed per-rank batch on "
                     f"{machine_text(label, runs)}: {setting['workload']}, "
                     f"{setting['profile']} profile. Scaling efficiency = samples/s(w) / "
                     f"(w · samples/s(1)) of the same strategy and K. {how_text(step_rows, runs)}",
                     SCALING_COLUMNS, members)}
        at_k = [r for r in members if r["chunks"] == setting["chunks"]]
        if len(worlds) > 1:
            entry["figure"] = _figure(
                f"fig-scaling-{label}", figures.scaling(at_k),
                f"Weak scaling (fixed per-rank batch) on {machine_text(label, runs)}: "
                f"{setting['workload']}, K = {setting['chunks']}, {setting['profile']} profile. "
                f"Left: samples/s over all ranks, with the ideal line w × the best 1-rank "
                f"throughput. Right: scaling efficiency against the same strategy's 1-rank run. "
                f"{how_text(step_rows, runs)}", f"Scaling over world size, {label}")
        entries.append(entry)
    return {"machines": entries}


INTERCONNECT_COLUMNS = (text_column("machine", "machine"), text_column("strategy", "strategy"),
                        text_column("profile", "profile"), text_column("backend", "backend"),
                        Column("world_size", "ranks"), Column("chunks", "K"),
                        Column("step_ms", "step", "ms"),
                        Column("overlap_efficiency", "overlap eff."),
                        Column("busbw_gbps", "busbw at largest size", "GB/s"))


def section_interconnect(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    measured = analysis.profiles(rows)
    settings = _ordered(analysis.reference_settings(rows), runs)
    table_rows = _ordered(analysis.interconnect(rows, settings), runs)
    lines = []
    for label, names in sorted(measured.items(), key=lambda i: _labels(runs).index(i[0])):
        missing = [p for p in GPU_PROFILES if p not in names]
        if not any(r["machine"] == label and r.get("backend") == "nccl"
                   for r in analysis.of_kind(rows, "step", "allreduce")):
            lines.append(f"{label}: {', '.join(names)} only (CPU runs use gloo over TCP; the "
                         f"NCCL profiles do not apply).")
        elif missing:
            lines.append(f"{label}: measured {', '.join(names)}; no results for "
                         f"{', '.join(missing)} in the loaded files yet.")
        else:
            lines.append(f"{label}: measured {', '.join(names)}.")
    figure_list = []
    for setting in settings:
        members = [r for r in table_rows if r["machine"] == setting["machine"]]
        if len({r["profile"] for r in members}) > 1:
            label = setting["machine"]
            measured_steps = [r for r in analysis.of_kind(rows, "step") if r["machine"] == label]
            figure_list.append(_figure(
                f"fig-interconnect-{label}", figures.interconnect(members),
                f"Interconnect profiles on {machine_text(label, runs)}: step time and overlap "
                f"efficiency per strategy ({setting['workload']}, K = {setting['chunks']}, "
                f"{setting['world_size']} ranks); profiles are NCCL settings on the same host "
                f"(shm: NCCL_P2P_DISABLE=1; socket: also NCCL_SHM_DISABLE=1). "
                f"{how_text(measured_steps, runs)}",
                f"Step time per interconnect profile, {label}"))
    table = make_table("tab-interconnect", "Step time and overlap efficiency per interconnect "
                       "profile at each machine's reference K and largest world size, with the "
                       "all-reduce busbw at the largest message size measured for that profile.",
                       INTERCONNECT_COLUMNS, table_rows)
    return {"lines": lines, "figures": figure_list, "table": table}


ALLREDUCE_COLUMNS = (Column("size_bytes", "size", render=fmt_bytes),
                     Column("time_ms", "time", "ms"), Column("algbw_gbps", "algbw", "GB/s"),
                     Column("busbw_gbps", "busbw", "GB/s"),
                     Column("nccl_tests_gbps", "nccl-tests", "GB/s"),
                     Column("pct_of_nccl_tests", "of nccl-tests", "%"),
                     Column("torch_ref_gbps", "torch ref.", "GB/s"),
                     Column("wrong_elements", "#wrong"))


def section_allreduce(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    groups = _ordered(analysis.allreduce_groups(rows), runs)
    if not groups:
        return {"figure": None, "tables": []}
    measured = [r for g in groups for r in g["rows"]]
    machines = ", ".join(machine_text(label, runs)
                         for label in dict.fromkeys(g["machine"] for g in groups))
    figure = _figure("fig-allreduce", figures.allreduce(groups),
                     f"All-reduce bus bandwidth against message size on {machines}, with the "
                     f"reference measurements of docs/ANCHORS.md (nccl-tests dashed, "
                     f"torch.distributed dotted) where they exist for the device, backend, "
                     f"profile and rank count. {how_text(measured, runs)}",
                     "All-reduce bus bandwidth against message size")
    tables = []
    for group in groups:
        tables.append(make_table(
            f"tab-allreduce-{group['machine']}-{group['profile']}-w{group['world_size']}",
            f"All-reduce on {machine_text(group['machine'], runs)}, {group['world_size']} ranks, "
            f"{group['profile']} profile ({group['backend']}, "
            f"{group['rows'][0].get('dtype', 'n/a')}): median time per all-reduce, algbw, busbw "
            f"and the wrong-element count after the timed rounds. {how_text(group['rows'], runs)}",
            ALLREDUCE_COLUMNS, group["rows"]))
    return {"figure": figure, "tables": tables, "source": analysis.BUSBW_ANCHOR_SOURCE}


ENERGY_COLUMNS = (text_column("strategy", "strategy"), Column("world_size", "ranks"),
                  Column("step_ms", "step", "ms"), Column("energy_per_step_j", "energy/step", "J"),
                  Column("samples_per_joule", "samples/J"),
                  Column("mean_power_w", "power/GPU", "W"),
                  Column("mean_gpu_util_pct", "GPU util.", "%"),
                  Column("mean_sm_clock_mhz", "SM clock", "MHz"))


def section_energy(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    out: dict = {"available": analysis.has_energy(rows), "machines": [], "overhead": []}
    if out["available"]:
        for setting in _ordered(analysis.reference_settings(rows), runs):
            label = setting["machine"]
            table_rows = analysis.energy(rows, [setting])
            if not any(r["energy_per_step_j"] is not None for r in table_rows):
                out["machines"].append({"machine": label, "line": (
                    f"{label}: no NVML readings (no GPU in this run)."), "figures": [],
                    "table": None})
                continue
            members = analysis.setting_rows(rows, setting)
            how = how_text(members, runs)
            entry = {"machine": label, "line": None, "figures": [], "table": make_table(
                f"tab-energy-{label}",
                f"Energy per step (NVML total-energy counter over the timed rounds, summed over "
                f"the run's GPUs, per step), samples per joule and mean NVML readings per GPU, on "
                f"{machine_text(label, runs)}: {setting['workload']}, K = {setting['chunks']}, "
                f"{setting['profile']} profile. {how_text(table_rows, runs)}",
                ENERGY_COLUMNS, table_rows)}
            series = analysis.nvml_series(members)
            if series:
                period = (members[0].get("nvml") or {}).get("period_ms")
                entry["figures"].append(_figure(
                    f"fig-nvml-{label}", figures.nvml_timelines(series),
                    f"Power, GPU utilisation and SM clock during the timed rounds, mean over the "
                    f"{setting['world_size']} GPUs of each run ({setting_text(setting)} on "
                    f"{machine_text(label, runs)}), sampled by NVML every "
                    f"{fmt(period)} ms. {how}", f"NVML timelines, {label}"))
            entry["figures"].append(_figure(
                f"fig-energy-{label}", figures.energy_bars(table_rows),
                f"Energy per step and samples per joule per strategy and world size "
                f"({setting['workload']}, K = {setting['chunks']} on "
                f"{machine_text(label, runs)}). {how_text(table_rows, runs)}",
                f"Energy per step, {label}"))
            out["machines"].append(entry)
    for index, row in enumerate(_ordered(analysis.sampler_overhead(rows), runs)):
        label = row["machine"]
        blocks = [v for values in (row.get("blocks") or {}).values() for v in values]
        out["overhead"].append({
            "machine": label, "pct": fmt_pct(row["overhead_pct"]),
            "off": fmt(row["step_ms_sampler_off"]), "on": fmt(row["step_ms_sampler_on"]),
            "low": fmt(min(blocks)) if blocks else "n/a",
            "high": fmt(max(blocks)) if blocks else "n/a",
            "figure": _figure(
                f"fig-sampler-{label}-{index}", figures.sampler_overhead(row),
                f"NVML sampler overhead on {machine_text(label, runs)}: median step of "
                f"{row['workload']} (sequential, one rank) in alternating blocks with the "
                f"sampler off and on ({fmt(row.get('period_ms'))} ms period); overhead = "
                f"{fmt_pct(row['overhead_pct'])} (median of the on blocks against the off "
                f"blocks). {how_text([row], runs)}", f"Sampler overhead, {label}")})
    return out


SYNTHETIC_COLUMNS = (text_column("machine", "machine"), Column("chunks", "K"),
                     Column("scale", "time scale"),
                     Column("sequential_ms", "one after the other", "ms"),
                     Column("step_ms", "overlapped", "ms"), Column("speedup_pct", "speedup", "%"))


def section_synthetic(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    found = _ordered(analysis.synthetic(rows), runs)
    if not found:
        return {"table": None, "figures": []}
    machines = ", ".join(machine_text(label, runs)
                         for label in dict.fromkeys(r["machine"] for r in found))
    table = make_table("tab-synthetic", f"Simulation (sleep-based), not a measurement: the "
                       f"course study's model, per chunk 300 ± 50 ms of 'compute' and 200 ± 30 "
                       f"ms of 'communication' scaled by the time scale, on {machines}. "
                       f"{how_text(found, runs)}", SYNTHETIC_COLUMNS, found)
    figure_list = [_figure(
        "fig-synthetic", figures.synthetic(found, STUDY_SPEEDUP_PCT),
        f"Simulation (sleep-based), not a measurement: simulated step one after the other and "
        f"overlapped by a second thread, and the speedup against the course study's ~"
        f"{STUDY_SPEEDUP_PCT:g}% (on {machines}). {how_text(found, runs)}",
        "Simulated speedup of the sleep-based model")]
    largest = max(found, key=lambda r: (r["chunks"], r["machine"]))
    if largest.get("timeline"):
        figure_list.append(_figure(
            "fig-synthetic-gantt", figures.gantt([{
                "title": f"simulation, K = {largest['chunks']} ({largest['machine']}): "
                         f"sleeps, no compute and no communication",
                "bars": analysis.timeline_bars(largest["timeline"])}]),
            f"Simulation (sleep-based), not a measurement: the overlapped timeline of the "
            f"simulated step with K = {largest['chunks']} on "
            f"{machine_text(largest['machine'], runs)}. {how_text([largest], runs)}",
            "Gantt chart of the simulated step"))
    return {"table": table, "figures": figure_list}


GEMM_COLUMNS = (text_column("shape", "m×n×k", nowrap=True), text_column("dtype", "dtype"),
                text_column("version_label", "version"), Column("tflops", "TFLOP/s"),
                Column("pct_of_cublas", "of cuBLAS", "%"),
                Column("arithmetic_intensity", "intensity", "FLOP/B"),
                Column("achieved_gbps", "traffic", "GB/s"),
                Column("roofline_tflops", "roofline", "TFLOP/s"),
                Column("pct_of_roofline", "of roofline", "%"),
                Column("max_abs_err", "max |C − C_cuBLAS|"))
CEILING_COLUMNS = (text_column("instruction", "instruction"), Column("tflops", "TFLOP/s"),
                   Column("pct_of_peak", "of datasheet peak", "%"),
                   Column("pct_of_cublas_8192", "of cuBLAS 8192³", "%"),
                   Column("sustained_tflops", "sustained", "TFLOP/s"),
                   Column("sustained_sm_clock_mhz", "SM clock, sustained", "MHz"),
                   Column("sustained_power_w", "power, sustained", "W"))
SEED_COLUMNS = (text_column("machine", "machine"), text_column("impl", "implementation"),
                Column("step_ms", "step", "ms"), Column("vs_torch", "× torch's time"),
                Column("max_abs_err_vs_torch", "max |Δw| vs torch"))
V1C_TEXT = ("v1c is v1 with a coalesced thread mapping: not a rung of its own, it separates "
            "what coalescing buys from what v2's tiling buys.")
GPU_STUDY_KINDS = {"gemm": "GEMM", "tensor_core_ceiling": "tensor-core-ceiling",
                   "seed_step": "seed-step"}  # suite/bench_gemm.py's rows, as captions name them


def superseded_text(rows: Sequence[dict], runs: Sequence[Run]) -> str | None:
    """Which runs' GEMM-module rows a newer run of the same GPU model replaced, or None."""
    kinds: dict[int, dict[str, None]] = {}
    models: dict[int, set[str]] = {}
    for kind, name in GPU_STUDY_KINDS.items():
        kept = {id(r) for r in analysis.newest_run_per_gpu(rows, kind)}
        for row in analysis.of_kind(rows, kind):
            if id(row) not in kept:
                kinds.setdefault(row["run"], {})[name] = None
                models.setdefault(row["run"], set()).add(analysis.gpu_model(row))
    if not kinds:
        return None
    listed = "; ".join(f"the {_and(list(kinds[i]))} rows of {runs[i].path} ({runs[i].label}, "
                       f"{', '.join(sorted(models[i]))})" for i in sorted(kinds))
    return (f"Left out here: {listed}. A newer run measured the same GPU model, and per GPU "
            f"model only the newest run counts, whichever machine made it: a version's name "
            f"means something only within one version of the ladder (before v1c existed, v1 "
            f"was the coalesced kernel).")


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def version_label(row: dict) -> str:
    """A GEMM row's version, marked when the row ran another version's kernel (v6 -> v5)
    or was recorded under the old ladder's name (v1 before v1c existed)."""
    label = row["version"]
    recorded = row.get("recorded_version", label)
    if recorded != label:
        label += f" (recorded as {recorded})"
    if other := row.get("ran_kernel_of"):
        label += f" (ran {other}'s kernel)"
    return label


def _marks_text(rows: Sequence[dict], figure: bool = False) -> str:
    """Caption sentences explaining the marks version_label puts on rows (or, for a figure,
    which bars they concern), or ""."""
    text = ""
    if any(r.get("recorded_version", r["version"]) != r["version"] for r in rows):
        text += ("v1c was recorded as v1 by a run made before v1c existed, when v1 named the "
                 "coalesced kernel. " if figure else
                 "Rows marked \"recorded as v1\" come from a run made before v1c existed, "
                 "when v1 named the coalesced kernel (today's v1c). ")
    fell_back = [r for r in rows if r.get("ran_kernel_of")]
    if fell_back:
        shapes = ", ".join(dict.fromkeys(f"{r['m']}×{r['n']}×{r['k']} {r['dtype']}"
                                         for r in fell_back))
        why = "where TMA cannot address the operands (rows not 16-byte aligned)"
        text += (f"The v6 bars at {shapes} are v5's kernel: v6 falls back to it {why}. "
                 if figure else
                 f"Rows marked \"ran …'s kernel\" time that version's kernel, not their own: "
                 f"v6 runs v5's kernel {why}, here at {shapes}. ")
    return text


def ceiling_table(group: dict, runs: Sequence[Run]) -> Table:
    """The tensor-core ceilings of one GPU model, with what bounds what in the caption."""
    found = group["rows"]
    first = found[0]
    peak = (f"The datasheet's dense bf16 peak is {fmt(first['peak_tflops'])} TFLOP/s"
            if first.get("peak_tflops") is not None else
            "No datasheet peak is on record for this device (impl/kernels/peaks.py)")
    sustained = next((r["sustained_s"] for r in found
                      if r.get("sustained_tflops") is not None and r.get("sustained_s")), None)
    columns = CEILING_COLUMNS if sustained else CEILING_COLUMNS[:4]  # runs before it was taken
    sustained_text = (f"TFLOP/s is the median of short timed rounds; sustained is the rate over "
                      f"{sustained:g} s of back-to-back launches, with NVML's mean SM clock "
                      f"and power over that time (a GPU may lower its clock under a full "
                      f"tensor-core load to stay within its power limit). " if sustained else "")
    return make_table(
        f"tab-tc-ceilings-{group['machine']}",
        f"Tensor-core ceilings on {machine_text(group['machine'], runs)}: the bf16 FLOP/s each "
        f"MMA instruction family reaches at most, back-to-back MMAs on operands already in "
        f"registers or shared memory, with no global-memory traffic. They bound the "
        f"tensor-core rungs of the ladder: v4 (WMMA compiles to mma.sync) and v5 by the "
        f"mma.sync ceiling, v6 by the wgmma ceiling. {peak}; cuBLAS reached "
        f"{fmt(first['cublas_8192_tflops'])} TFLOP/s at 8192³ bf16 in the same process. "
        f"{sustained_text}{how_text(found, runs)}", columns, found)


def _versions_of(rows: Sequence[dict], dtype: str) -> str:
    """The own (non-cuBLAS) versions measured in ``dtype``, in ladder order, for captions."""
    found = {r["version"] for r in rows if r["dtype"] == dtype and r["version"] != "cublas"}
    return ", ".join(sorted(found, key=analysis.gemm_version_rank)) or "none"


def section_gemm(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    groups = _ordered(analysis.gemm_ladder(rows), runs)
    out: dict = {"tables": [], "figures": [], "seed": None, "ceilings": [],
                 "v1c": V1C_TEXT, "superseded": superseded_text(rows, runs)}
    for label in dict.fromkeys(g["machine"] for g in groups):
        mine = [g for g in groups if g["machine"] == label]
        flat = [{**r, "shape": f"{g['m']}×{g['n']}×{g['k']}", "version_label": version_label(r)}
                for g in mine for r in g["rows"]]
        how = how_text(flat, runs)
        where = machine_text(label, runs)
        marks = _marks_text(flat)
        own = sorted({r["version"] for r in flat if r["version"] != "cublas"},
                     key=analysis.gemm_version_rank)
        out["tables"].append(make_table(
            f"tab-gemm-{label}", f"GEMM ladder on {where}: own kernels {', '.join(own)} and "
            f"cuBLAS (through torch) per shape and dtype, median CUDA-event time per launch; "
            f"roofline from the device's peaks (impl/kernels/peaks.py); max |C − C_cuBLAS| is "
            f"each row's correctness check. {marks}{how}", GEMM_COLUMNS, flat))
        out["figures"].append(_figure(
            f"fig-gemm-{label}", figures.gemm_bars(mine),
            f"GEMM throughput per kernel version and shape on {where} (fp32 versions "
            f"{_versions_of(flat, 'fp32')} on CUDA cores, bf16 versions "
            f"{_versions_of(flat, 'bf16')} on "
            f"tensor cores; cuBLAS in black). "
            f"{_marks_text(flat, figure=True)}{how}", f"GEMM TFLOP/s per version, {label}"))
        out["figures"].append(_figure(
            f"fig-roofline-{label}", figures.roofline(mine),
            f"Roofline on {where}: achieved TFLOP/s against arithmetic intensity (compulsory "
            f"traffic: A and B read once, C written once), under the dtype's peak and the HBM "
            f"bandwidth from the result rows (peak_tflops, peak_gbps). {how}",
            f"Roofline plot, {label}"))
    out["ceilings"] = [ceiling_table(group, runs)
                       for group in _ordered(analysis.tensor_core_ceilings(rows), runs)]
    seeds = _ordered(analysis.seed_steps(rows), runs)
    if seeds:
        where = ", ".join(machine_text(m, runs) for m in dict.fromkeys(r["machine"] for r in seeds))
        out["seed"] = make_table(
            "tab-seed", f"The course study's training step (y = xW, grad_w = xᵀ·grad_out, SGD; "
            f"1024×512 by 512×512, fp32), own kernels against torch ops, on "
            f"{where}. {how_text(seeds, runs)}", SEED_COLUMNS, seeds)
    return out


def _generic_table(table_id: str, caption: str, found: Sequence[dict]) -> Table:
    """Rows of a kind this report has no dedicated layout for: their scalar fields."""
    skip = {"kind", "run", "rounds", "name", "real"}
    keys = [k for k in dict.fromkeys(k for r in found for k in r)
            if k not in skip and all(isinstance(r.get(k), (str, int, float, type(None)))
                                     for r in found)]
    columns = [Column(k, k) if any(isinstance(r.get(k), (int, float)) for r in found)
               else text_column(k, k) for k in keys]
    return make_table(table_id, caption, columns, found)


def section_kinds(rows: Sequence[dict], runs: Sequence[Run], kinds: Sequence[str],
                  what: str, table_id: str) -> dict:
    found = analysis.of_kind(rows, *kinds)
    if not found:
        return {"table": None, "line": f"No {what} results in the loaded result files (no "
                f"benchmark with extra_info.kind {' or '.join(repr(k) for k in kinds)})."}
    return {"line": None, "table": _generic_table(
        table_id, f"{what.capitalize()} results as recorded. {how_text(found, runs)}", found)}


REGRESSION_COLUMNS = (text_column("benchmark", "benchmark"),
                      Column("baseline_ms", "baseline", "ms"),
                      Column("candidate_ms", "candidate", "ms"), Column("ratio", "throughput ×"),
                      text_column("ci", "95% CI", nowrap=True),
                      text_column("verdict", "verdict", nowrap=True), text_column("reason", "why"))


def section_regression(baseline: Baseline | None) -> dict:
    if baseline is None:
        return {"given": False}
    # The gate's statistics (Mann-Whitney U, threshold, bootstrap CI), not a second copy:
    # imported here so that a report without --baseline does not need SciPy.
    from reports.gate import Rule, compare

    comparison = compare(baseline.benchmarks, baseline.candidate, Rule())
    table_rows = [{**row, "ci": f"{fmt(row['ci'][0])}–{fmt(row['ci'][1])}" if row["ci"] else None}
                  for row in analysis.regression_rows(comparison)]
    rule = Rule()
    return {"given": True, "path": baseline.path, "label": baseline.label,
            "counts": {v: comparison.count(v) for v in ("regressed", "improved", "unchanged")},
            "only_baseline": len(comparison.only_baseline),
            "only_candidate": len(comparison.only_candidate),
            "notes": baseline.notes,
            "rule": f"threshold {rule.threshold:.0%}, one-sided Mann-Whitney U at alpha "
                    f"{rule.alpha}, at least {rule.min_rounds} rounds per side",
            "table": make_table("tab-regression", f"Per-benchmark comparison of the candidate "
                                f"results of {baseline.label} against {baseline.path} "
                                f"(reports/gate.py's decision rule). Throughput × is baseline "
                                f"median round time / candidate median round time.",
                                REGRESSION_COLUMNS, table_rows)}


# --- the whole context --------------------------------------------------------------------------


def _labels(runs: Sequence[Run]) -> list[str]:
    """Machine labels, GPU machines first (most GPUs first), then CPU machines."""
    gpus = {r.label: len(r.fingerprint.get("gpu_names") or []) for r in runs}
    return sorted(gpus, key=lambda label: (-gpus[label], label))


def report_context(rows: Sequence[dict], runs: Sequence[Run],
                   baseline: Baseline | None = None) -> dict:
    """Everything the templates need; rows are analysis.benchmark_rows of every run, merged."""
    labels = _labels(runs)
    return {
        "title": TITLE,
        "machines_line": " · ".join(machine_text(label, runs) for label in labels),
        "labels_line": ", ".join(labels),
        "sections": [{"id": sid, "title": title} for sid, title in SECTIONS],
        "abstract": section_abstract(rows, runs),
        "methodology": section_methodology(rows, runs),
        "environment": section_environment(rows, runs),
        "anatomy": section_step_anatomy(rows, runs),
        "scaling": section_scaling(rows, runs),
        "interconnect": section_interconnect(rows, runs),
        "allreduce": section_allreduce(rows, runs),
        "energy": section_energy(rows, runs),
        "synthetic": section_synthetic(rows, runs),
        "gemm": section_gemm(rows, runs),
        "tensor_parallel": section_kinds(rows, runs, analysis.TP_KINDS, "tensor-parallel",
                                         "tab-tensor-parallel"),
        "pipeline": section_kinds(rows, runs, analysis.PIPELINE_KINDS, "pipeline or hybrid",
                                  "tab-pipeline"),
        "regression": section_regression(baseline),
        "partial": any(r.partial for r in runs),
    }
