"""What each section of the report shows: tables, figures and captions from the analysis.

``report_context`` is the whole template context; each ``section_*`` function fills one
section's partial (reports/templates/sections/<id>.html.j2). The overlap chapters are in
reports/overlap.py, the appendices in reports/appendix.py. Captions say what was measured,
on which machine (label and GPUs) and how (command, mode, rounds). A section whose context
says ``empty`` is left out of the report and its table of contents.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from impl.metrics import ALLREDUCE_FIELDS, STEP_FIELDS
from reports import (
    abstract,
    analysis,
    appendix,
    cells,
    figures,
    layout,
    overlap,
    pipeline,
    prediction,
    reproducibility,
    tensor_parallel,
)
from reports.archive import Archive
from reports.captions import (
    Run,
    and_list,
    how_text,
    in_machine_order,
    is_gpu_machine,
    machine_labels,
    machine_text,
    make_figure,
    runs_of,
)
from reports.format import (
    Cell,
    Column,
    Table,
    estimate_column,
    fmt,
    fmt_estimate,
    fmt_pct,
    make_table,
    missing_value_note,
    text_column,
)

TITLE = "Hiding gradient all-reduce behind backward: measurements"
# (id, title, context key, role): "front" sections follow the title page, a "chapter" starts
# on a new page, a "section" flows on, an "appendix" is a chapter lettered A, B, ...
SECTIONS = (
    ("abstract", "Abstract", "abstract", "front"),
    ("methodology", "Methodology", "methodology", "front"),
    ("overlap", "Overlap, measured interleaved", "overlap", "chapter"),
    ("reproducibility", "Run-to-run agreement", "reproducibility", "section"),
    ("step-anatomy", "Anatomy of a step", "anatomy", "chapter"),
    ("interference", "Interference: compute beside communication", "interference", "section"),
    ("course-study", "The course study, reproduced", "study", "section"),
    ("allreduce", "All-reduce bandwidth", "allreduce", "chapter"),
    ("energy", "Power and energy", "energy", "section"),
    ("gemm", "GEMM ladder and the seed step", "gemm", "chapter"),
    ("tensor-parallel", "Tensor parallelism", "tensor_parallel", "chapter"),
    ("pipeline", "Pipeline and CPU-GPU hybrid training", "pipeline", "chapter"),
    ("prediction", "Beyond this machine", "prediction", "chapter"),
    ("regression", "Regression against a baseline", "regression", "chapter"),
    ("environment", "Environment", "environment", "chapter"),
    ("runs", "Runs loaded and how this report uses them", "runs", "appendix"),
    ("before-interleaving", appendix.BEFORE_INTERLEAVING_TITLE, "before_interleaving",
     "appendix"),
    ("cells", "Every interleaved cell", "cells", "appendix"),
    ("step-anatomy-cpu", "Anatomy of a step on the CPU", "anatomy_cpu", "appendix"),
    ("interference-cpu", "Interference on the CPU and on one GPU", "interference_cpu",
     "appendix"),
    ("tensor-parallel-cpu", "Tensor parallelism on the CPU and on one rank", "tensor_parallel_cpu",
     "appendix"),
    ("agreement", "Run-to-run agreement, every figure", "agreement", "appendix"),
    ("detail", "Detail tables", "detail", "appendix"),
    ("tables", "Dense tables", "tables", "appendix"),
    ("topology", "GPU topology (nvidia-smi topo -m)", "topology", "appendix"),
    ("definitions", "Definitions, quoted from the code", "methodology", "appendix"),
)


@dataclass
class Baseline:
    """A baseline file's benchmarks and the candidate benchmarks of the same machine."""

    path: str
    label: str
    benchmarks: dict[str, dict]
    candidate: dict[str, dict]
    notes: list[str] = field(default_factory=list)  # candidate files left out, and why


# --- sections -----------------------------------------------------------------------------------


def section_methodology(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    quote = lambda fields: [{"name": f.name, "unit": f.unit or "–", "definition": f.definition}
                            for f in fields]
    return {"empty": False, "step_fields": quote(STEP_FIELDS),
            "allreduce_fields": quote(ALLREDUCE_FIELDS),
            "modes": sorted({r.mode or "unknown" for r in runs}),
            "answer_chunks": cells.ANSWER_CHUNKS, "lost_time_doc": overlap.LOST_TIME_DOC,
            "ideal_doc": overlap.IDEAL_DOC}


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Per-GPU limits of the fingerprint (``gpu_limits``, impl/fingerprint.py), shown where a run
# recorded them.
GPU_FIELDS = (("power limit (W)", "power_limit_w"), ("max SM clock (MHz)", "max_sm_clock_mhz"),
              ("max memory clock (MHz)", "max_mem_clock_mhz"), ("SM clock (MHz)", "sm_clock_mhz"),
              ("memory clock (MHz)", "mem_clock_mhz"))


def per_gpu(limits: list[dict] | None, key: str) -> str | None:
    """One field of every GPU as "700 (×4)" when all agree, else each value; None when no GPU
    recorded it."""
    values = [gpu.get(key) for gpu in limits or []]
    if all(v is None for v in values):
        return None
    shown = [fmt(v) if v is not None else "n/a" for v in values]
    return f"{shown[0]} (×{len(shown)})" if len(set(shown)) == 1 else ", ".join(shown)


def section_environment(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    labels = machine_labels(runs)
    newest = {label: runs_of(label, runs)[-1] for label in labels}

    def value(label: str, key: str) -> str:
        fp = newest[label].fingerprint
        if key == "gpus":
            gpus = Counter(fp.get("gpu_names") or [])
            return ", ".join(f"{n}× {name}" for name, n in gpus.items()) or "none"
        if key == "cpu":
            return f"{fp.get('cpu_model') or 'n/a'}, {fp.get('cpu_cores') or '?'} cores"
        if key == "git":
            return "; ".join(f"{appendix.commit_text(r.fingerprint)}"
                             for r in runs_of(label, runs))
        if key == "profiles":
            return ", ".join(analysis.profiles(rows).get(label, [])) or "n/a"
        if key == "files":
            return "; ".join(f"{r.path}{' (partial)' if r.partial else ''}"
                             for r in runs_of(label, runs))
        if key in dict(GPU_FIELDS).values():
            return per_gpu(fp.get("gpu_limits"), key) or "n/a"
        found = fp.get(key)
        return "n/a" if found in (None, "", []) else str(found)

    fields = [("GPUs", "gpus"), ("driver", "driver"), ("CUDA", "cuda"), ("NCCL", "nccl"),
              ("torch", "torch"), ("MPI", "mpi"), ("CPU", "cpu"), ("Python", "python"),
              ("backend", "backend"), ("profiles measured", "profiles")]
    fields += [(name, key) for name, key in GPU_FIELDS
               if any(per_gpu(newest[label].fingerprint.get("gpu_limits"), key)
                      for label in labels)]
    fields += [("git commit", "git"), ("result files", "files")]
    table = Table("tab-environment", "Environment of each machine, from the newest result "
                  "file's fingerprint (machine_info.overlap); git commit per file. Each run's "
                  "command lines per pass are in the appendix.", ["", *labels],
                  [[Cell(name), *(Cell(value(label, key)) for label in labels)]
                   for name, key in fields], [], [False] * (len(labels) + 1))
    partial = [{"label": r.label, "path": r.path, "failed": ", ".join(r.failed_passes),
                "note": r.note} for r in runs if r.partial]
    topology = [{"label": label,
                 "text": _ANSI.sub("", newest[label].fingerprint.get("gpu_topology") or "")}
                for label in labels if newest[label].fingerprint.get("gpu_topology")]
    return {"empty": not runs, "table": table, "partial": partial, "topology": topology,
            "unknown_kinds": analysis.unknown_kinds(rows)}


def section_allreduce(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    groups = in_machine_order(analysis.allreduce_groups(rows), runs)
    if not groups:
        return {"empty": True, "figure": None}
    measured = [r for g in groups for r in g["rows"]]
    machines = ", ".join(machine_text(label, runs)
                         for label in dict.fromkeys(g["machine"] for g in groups))
    figure = make_figure(
        "fig-allreduce", figures.allreduce(groups),
        f"All-reduce bus bandwidth against message size on {machines}, with the reference "
        f"measurements of docs/ANCHORS.md (nccl-tests dashed, torch.distributed dotted) where "
        f"they exist for the device, backend, profile and rank count; vertical bars span the "
        f"busbw of the slowest and fastest round (the median's busbw scaled by median round "
        f"time / round time; round wall times include the sync). The tables are in the "
        f"appendix. {how_text(measured, runs)}", "All-reduce bus bandwidth against message size")
    top = analysis.busbw_at_gib(rows)
    busbw = None if not top else {
        "busbw": fmt(top["busbw_gbps"]), "world_size": top["world_size"],
        "machine": top["machine"], "anchor": fmt(top["nccl_tests_gbps"]),
        "pct": fmt_pct(top["pct_of_nccl_tests"]), "wrong": top["wrong_elements"]}
    return {"empty": False, "figure": figure, "source": analysis.BUSBW_ANCHOR_SOURCE,
            "busbw": busbw}


def section_energy(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    """Energy per step against mean power × step time in the interleaved cells drawn in the
    anatomy chapter, the NVML timelines of those cells, and the sampler's overhead."""
    columns = (text_column("variant", "variant"), Column("power_w", "mean power, all GPUs", "W"),
               estimate_column("energy_per_step_j", "energy/step", "J"),
               estimate_column("power_times_step_j", "power × step", "J"),
               estimate_column("ratio", "energy / (power × step)"))
    machines = []
    for index, cell in enumerate(cells.anatomy_cells(rows)):
        checked = cells.energy_check(cell)
        if not checked:
            continue
        where = f"{overlap.cell_text(cell)} on {machine_text(cell['machine'], runs)}"
        how = how_text([cell], runs)
        entry = {"heading": where, "figures": [], "table": make_table(
            f"tab-energy-{index}", f"Energy per step against mean power × step time per "
            f"variant ({where}), paired by round, with 95% intervals. "
            f"{appendix.ENERGY_NOTE} In an interleaved cell the sampled power is one mean over "
            f"every variant's segments (the samples are not split by variant), so every row "
            f"shows the same power and a variant that draws less or more than the cell's mean "
            f"moves its ratio too. {how}", columns, checked, note=lambda *_: None)}
        series = analysis.nvml_series((cell.get("nvml") or {}).get("series"), "whole cell")
        if series:
            entry["figures"].append(make_figure(
                f"fig-nvml-{index}", figures.nvml_timelines([series]),
                f"Power, GPU utilisation and SM clock during the cell's timed rounds, mean over "
                f"its GPUs ({where}), sampled by NVML every "
                f"{fmt((cell.get('nvml') or {}).get('period_ms'))} ms; every variant's "
                f"segments are in this one series, in their shuffled order. {how}",
                f"NVML timelines, {where}"))
        machines.append(entry)
    overhead = [{"machine": r["machine"], "ratio": fmt_estimate(r["overhead_ratio"]),
                 "verdict": r.get("verdict"), "period": fmt(r.get("period_ms")),
                 "how": how_text([r], runs)}
                for r in in_machine_order(analysis.sampler_overhead(rows), runs)
                if "overhead_ratio" in r]
    return {"empty": not machines and not overhead, "machines": machines, "overhead": overhead}


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
    listed = "; ".join(f"the {and_list(list(kinds[i]))} rows of {runs[i].path} ({runs[i].label}, "
                       f"{', '.join(sorted(models[i]))})" for i in sorted(kinds))
    return (f"Left out here: {listed}. A newer run measured the same GPU model, and per GPU "
            f"model only the newest run counts, whichever machine made it: a version's name "
            f"means something only within one version of the ladder (before v1c existed, v1 "
            f"was the coalesced kernel).")


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


def cublas_note(rows: Sequence[dict]) -> str | None:
    """Why a cuBLAS row's "% of cuBLAS" is not 100: the footnote of that cell, or None."""
    found = [r for r in rows if r["version"] == "cublas" and r.get("pct_of_cublas")]
    if not found:
        return None
    widest = max(found, key=lambda r: abs(r["pct_of_cublas"] - 100))
    return (f"cuBLAS against its own baseline: the same kernel timed twice in one process, "
            f"once before the shape's rows (the baseline every '% of cuBLAS' of that shape "
            f"divides by) and once as this row. The gap, up to {fmt(widest['pct_of_cublas'])}% "
            f"at {widest['shape']} {widest['dtype']} here, is timing noise between two moments "
            f"(largest at small shapes, whose launches take microseconds), not a faster cuBLAS; "
            f"every '% of cuBLAS' of that shape carries the same margin.")


def gemm_note(rows: Sequence[dict]):
    """Footnotes of a GEMM table: cublas_note on the cuBLAS rows, n/a reasons elsewhere."""
    text = cublas_note(rows)

    def note(key: str, row: dict) -> str | None:
        if key == "pct_of_cublas" and row["version"] == "cublas":
            return text
        return missing_value_note(key, row)

    return note


def seed_layer_text(rows: Sequence[dict], runs: Sequence[Run]) -> str | None:
    """Where the course study's layer under the data-parallel strategies is shown (runs of
    seed_layer workloads measured before interleaving: the appendix)."""
    found = [r for r in cells.old_format_steps(rows) if r["workload"].startswith("seed_layer")]
    if not found:
        return None
    where = and_list(sorted({f"{runs[r['run']].path} ({r['machine']})" for r in found}))
    return (f"The course study's layer was also trained under the data-parallel strategies "
            f"({', '.join(sorted({r['workload'] for r in found}))}) in {where}; those step "
            f"rows were measured before interleaving and are in the appendix "
            f"'{appendix.BEFORE_INTERLEAVING_TITLE}'.")


def section_gemm(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    groups = in_machine_order(analysis.gemm_ladder(rows), runs)
    out: dict = {"tables": [], "figures": [], "seed": None, "ceilings": [],
                 "v1c": V1C_TEXT, "superseded": superseded_text(rows, runs),
                 "seed_layer": seed_layer_text(rows, runs)}
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
            f"each row's correctness check. {marks}{how}", GEMM_COLUMNS, flat,
            note=gemm_note(flat)))
        out["figures"].append(make_figure(
            f"fig-gemm-{label}", figures.gemm_bars(mine),
            f"GEMM throughput per kernel version and shape on {where} (fp32 versions "
            f"{_versions_of(flat, 'fp32')} on CUDA cores, bf16 versions "
            f"{_versions_of(flat, 'bf16')} on "
            f"tensor cores; cuBLAS in black). "
            f"{_marks_text(flat, figure=True)}{how}", f"GEMM TFLOP/s per version, {label}"))
        out["figures"].append(make_figure(
            f"fig-roofline-{label}", figures.roofline(mine),
            f"Roofline on {where}: achieved TFLOP/s against arithmetic intensity (compulsory "
            f"traffic: A and B read once, C written once), under the dtype's peak and the HBM "
            f"bandwidth from the result rows (peak_tflops, peak_gbps). {how}",
            f"Roofline plot, {label}"))
    out["ceilings"] = [ceiling_table(group, runs)
                       for group in in_machine_order(analysis.tensor_core_ceilings(rows), runs)]
    seeds = in_machine_order(analysis.seed_steps(rows), runs)
    if seeds:
        where = ", ".join(machine_text(m, runs) for m in dict.fromkeys(r["machine"] for r in seeds))
        out["seed"] = make_table(
            "tab-seed", f"The course study's training step (y = xW, grad_w = xᵀ·grad_out, SGD; "
            f"1024×512 by 512×512, fp32), own kernels against torch ops, on "
            f"{where}. {how_text(seeds, runs)}", SEED_COLUMNS, seeds)
    out["empty"] = not (out["tables"] or out["ceilings"] or out["seed"])
    return out


REGRESSION_COLUMNS = (text_column("benchmark", "benchmark"),
                      Column("baseline_ms", "baseline", "ms"),
                      Column("candidate_ms", "candidate", "ms"), Column("ratio", "throughput ×"),
                      text_column("ci", "95% CI", nowrap=True),
                      text_column("threshold", "threshold", nowrap=True),
                      text_column("verdict", "verdict"), text_column("reason", "why"))
TRIAL_COLUMNS = (text_column("machine", "machine"), text_column("target", "benchmarks"),
                 text_column("slowdown", "injected slowdown (measured)"),
                 text_column("false_alarms", "false alarms, gate"),
                 text_column("files_false_alarms", "false alarms, files only"),
                 text_column("detections", "detections, gate"),
                 text_column("files_detections", "detections, files only"),
                 Column("blocks", "re-run blocks per side"),
                 text_column("block_value", "re-run block value"),
                 text_column("load", "1-min load, median (range)"))


def section_regression(baseline: Baseline | None) -> dict:
    # The gate's rules and statistics, not a second copy: imported here so that a report
    # without a baseline or trials does not need SciPy.
    from reports.gate import confirm, rules, spread, trial_rates
    from reports.gate.comparison import compare
    from reports.gate.loading import baseline_spreads
    from reports.gate.render import rule_text
    from reports.results import load_results

    documents, trial_notes = trial_rates.load_trials(trial_rates.find_trials())
    trials = trial_rates.trial_rates(documents)
    context = {
        "given": baseline is not None, "threshold_rule": spread.RULE,
        "confirm_rule": confirm.RULE, "trial_notes": trial_notes,
        "trials": make_table("tab-gate-trials", "The gate's error rates as measured by "
                             "reports/gate/trials.py (results/<machine>/gate-trials*.json): "
                             "pairs of unchanged runs and pairs with real extra compute, each "
                             "judged files only and with the interleaved re-run. Rates with "
                             "their 95% Clopper-Pearson intervals.", TRIAL_COLUMNS, trials)
        if trials else None}
    if baseline is None:
        return context
    spreads, spread_source = baseline_spreads([load_results(baseline.path)])
    rule = rules.Rule()
    comparison = compare(baseline.benchmarks, baseline.candidate, rule, spreads=spreads)
    table_rows = [{**row, "ci": f"{fmt(row['ci'][0])}–{fmt(row['ci'][1])}" if row["ci"] else None}
                  for row in analysis.regression_rows(comparison)]
    return {**context, "path": baseline.path, "label": baseline.label,
            "counts": {v: comparison.count(v) for v in ("regressed", "improved", "unchanged")},
            "only_baseline": len(comparison.only_baseline),
            "only_candidate": len(comparison.only_candidate),
            "notes": baseline.notes,
            "rule": rule_text(rule, (), spread_source),
            "table": make_table("tab-regression", f"Per-benchmark comparison of the candidate "
                                f"results of {baseline.label} against {baseline.path} "
                                f"(reports/gate/rules.py's files-only rule; the report re-runs "
                                f"nothing, so a regression here is unconfirmed). Throughput × "
                                f"is baseline median round time / candidate median round "
                                f"time.", REGRESSION_COLUMNS, table_rows)}


# --- the whole context --------------------------------------------------------------------------


def section_tables(rows: Sequence[dict], runs: Sequence[Run], gemm: Sequence[Table]) -> dict:
    """Appendix: the dense tables of the chapters (GEMM ladder rows, all-reduce sweeps)."""
    tables = appendix.allreduce_tables(rows, runs)
    return {"empty": not tables and not gemm, "allreduce": tables, "gemm": list(gemm)}


def is_empty(key: str, section: dict) -> bool:
    """Whether a section has nothing to show (it is then left out, contents included)."""
    if key == "regression":
        return not section["given"]
    if "empty" in section:
        return section["empty"]
    return not section.get("table")  # a section_kinds table of a study without results


def report_context(rows: Sequence[dict], runs: Sequence[Run],
                   baseline: Baseline | None = None, archive: Archive | None = None) -> dict:
    """Everything the templates need; rows are analysis.benchmark_rows of every run, merged;
    ``archive`` holds every result file, log and trials file of their folders (the front
    page's study lines and run-to-run agreement)."""
    archive = archive or Archive()
    labels = machine_labels(runs)
    agreement = reproducibility.section(archive.files)
    context = {
        "abstract": abstract.section(rows, runs, archive, agreement["line"]),
        "methodology": section_methodology(rows, runs),
        "overlap": overlap.section_results(rows, runs),
        "reproducibility": agreement,
        "anatomy": overlap.section_anatomy(rows, runs),
        "interference": overlap.section_interference(rows, runs),
        "study": overlap.section_study(rows, runs),
        "allreduce": section_allreduce(rows, runs),
        "energy": section_energy(rows, runs),
        "gemm": section_gemm(rows, runs),
        "tensor_parallel": tensor_parallel.section(rows, runs),
        "pipeline": pipeline.section(rows, runs),
        "prediction": prediction.section(rows, runs),
        "regression": section_regression(baseline),
        "environment": section_environment(rows, runs),
        "before_interleaving": appendix.section_before_interleaving(rows, runs),
        "cells": appendix.section_cells(rows, runs),
        "agreement": {"empty": agreement["table"] is None, "table": agreement["table"]},
    }
    context["tables"] = section_tables(rows, runs, context["gemm"]["tables"])
    timelines = overlap.timelines(context)  # every block's, before the CPU's move
    gpu_labels = {label for label in labels if is_gpu_machine(label, runs)}
    def scaled(kind: str) -> set[str]:  # GPU machines whose rows of ``kind`` span ranks
        return {r["machine"] for r in rows if r.get("kind") == kind
                and r.get("world_size", 1) > 1} & gpu_labels

    layout.split_cpu_blocks(context, gpu_labels, {"tensor_parallel": scaled("tensor_parallel"),
                                                  "interference": scaled("interference")})
    moved = layout.move_detail_tables(context, SECTIONS)
    context["topology"] = {"empty": not context["environment"]["topology"]}
    context["detail"] = {"empty": not moved, "groups": moved}
    dropped = [title for _, title, key, role in SECTIONS if key in context
               and role in layout.BODY_ROLES and is_empty(key, context[key])]
    context["runs"] = appendix.section_runs(rows, runs, dropped)
    shown, letters = [], iter("ABCDEFGHIJ")
    for section_id, title, key, role in SECTIONS:
        if is_empty(key, context[key]):
            continue
        shown.append({"id": section_id, "title": title, "key": key, "role": role,
                      "letter": next(letters) if role == "appendix" else None})
    letter = {s["id"]: s["letter"] for s in shown}
    if moved:
        layout.point_to(moved, letter["detail"])
    return {**context, "title": TITLE,
            "labels_line": ", ".join(labels), "sections": shown, "letters": letter,
            "timelines": timelines,
            "partial": any(r.partial for r in runs)}
