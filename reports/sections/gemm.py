"""The GEMM ladder and the seed step (template sections/gemm.html.j2): each kernel version's
TFLOP/s against cuBLAS and the roofline per GPU model, the tensor-core ceilings, and the seed
layer's step against torch's; rows superseded by a newer run of the same GPU model are named.
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.rows.kinds import GEMM, SEED_STEP, STEP, TENSOR_CORE_CEILING
from impl.rows.report_records import GROUP
from reports import analysis, cells, figures
from reports.analysis import gemm_version_rank
from reports.captions import Run, and_list, how_text, make_figure
from reports.figures import Image, _figure, _save, _styled, version_color
from reports.format import (
    Column,
    Placement,
    Table,
    fmt,
    make_table,
    missing_value_note,
    text_column,
)
from reports.sections import appendix
from reports.sections.gemm_sweep import NOT_COVERED, sweep_headline, sweep_tables
from reports.view import View

# The fields of each kind of row read here: row[GEMM_ROW.version]. A ladder group
# (analysis.gemm_ladder) carries its rows' shape and dtype under the same names.
GEMM_ROW, CEILING_ROW, SEED_ROW = GEMM.names, TENSOR_CORE_CEILING.names, SEED_STEP.names
STEP_ROW = STEP.names  # the seed layer's runs under the data-parallel strategies

GEMM_COLUMNS = (text_column("shape", "m×n×k", nowrap=True), text_column(GEMM_ROW.dtype),
                text_column("version_label", "version"),
                Column.of(GEMM.field.tflops, "TFLOP/s", unit=""),
                Column.of(GEMM.field.pct_of_cublas, "of cuBLAS"),
                Column.of(GEMM.field.arithmetic_intensity, "intensity"),
                Column.of(GEMM.field.achieved_gbps, "traffic"),
                Column.of(GEMM.field.roofline_tflops, "roofline"),
                Column("pct_of_roofline", "of roofline", "%"),
                Column.of(GEMM.field.max_abs_err, "max |C − C_cuBLAS|"))


CEILING_COLUMNS = (text_column(CEILING_ROW.instruction),
                   Column.of(TENSOR_CORE_CEILING.field.tflops, "TFLOP/s", unit=""),
                   Column.of(TENSOR_CORE_CEILING.field.pct_of_peak, "of datasheet peak"),
                   Column.of(TENSOR_CORE_CEILING.field.pct_of_cublas_8192, "of cuBLAS 8192³"),
                   Column.of(TENSOR_CORE_CEILING.field.sustained_tflops, "sustained"),
                   Column("sustained_sm_clock_mhz", "SM clock, sustained", "MHz"),
                   Column("sustained_power_w", "power, sustained", "W"))


SEED_COLUMNS = (text_column("machine"), text_column(SEED_ROW.impl, "implementation"),
                Column.of(SEED_STEP.field.step_ms, "step"), Column("vs_torch", "× torch's time"),
                Column.of(SEED_STEP.field.max_abs_err_vs_torch, "max |Δw| vs torch"))


V1C_TEXT = ("v1c is v1 with a coalesced thread mapping: not a rung of its own, it separates "
            "what coalescing buys from what v2's tiling buys.")


GPU_STUDY_KINDS = {GEMM.name: "GEMM", TENSOR_CORE_CEILING.name: "tensor-core-ceiling",
                   SEED_STEP.name: "seed-step"}  # suite/bench_gemm.py's rows, as captions name them


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
    label = row[GEMM_ROW.version]
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
    if any(r.get("recorded_version", r[GEMM_ROW.version]) != r[GEMM_ROW.version] for r in rows):
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


def ceiling_table(group: dict, view: View) -> Table:
    """The tensor-core ceilings of one GPU model, with what bounds what in the caption."""
    found = group[GROUP.rows]
    first = found[0]
    peak = (f"The datasheet's dense bf16 peak is {fmt(first['peak_tflops'])} TFLOP/s"
            if first.get(CEILING_ROW.peak_tflops) is not None else
            "No datasheet peak is on record for this device (impl/kernels/peaks.py)")
    sustained = next((r[CEILING_ROW.sustained_s] for r in found
                      if r.get(CEILING_ROW.sustained_tflops) is not None
                      and r.get(CEILING_ROW.sustained_s)), None)
    columns = CEILING_COLUMNS if sustained else CEILING_COLUMNS[:4]  # runs before it was taken
    sustained_text = (f"TFLOP/s is the median of short timed rounds; sustained is the rate over "
                      f"{sustained:g} s of back-to-back launches, with NVML's mean SM clock "
                      f"and power over that time (a GPU may lower its clock under a full "
                      f"tensor-core load to stay within its power limit). " if sustained else "")
    return make_table(
        f"tab-tc-ceilings-{group['machine']}",
        f"Tensor-core ceilings on {view.machines.words[group['machine']]}: the bf16 FLOP/s each "
        f"MMA instruction family reaches at most, back-to-back MMAs on operands already in "
        f"registers or shared memory, with no global-memory traffic. They bound the "
        f"tensor-core rungs of the ladder: v4 (WMMA compiles to mma.sync) and v5 by the "
        f"mma.sync ceiling, v6 by the wgmma ceiling. {peak}; cuBLAS reached "
        f"{fmt(first['cublas_8192_tflops'])} TFLOP/s at 8192³ bf16 in the same process. "
        f"{sustained_text}{how_text(found, view.runs)}", columns, found,
        placement=Placement("tensor-core ceilings per MMA family", always=True))


def _versions_of(rows: Sequence[dict], dtype: str) -> str:
    """The own (non-cuBLAS) versions measured in ``dtype``, in ladder order, for captions."""
    found = {r[GEMM_ROW.version] for r in rows
             if r[GEMM_ROW.dtype] == dtype and r[GEMM_ROW.version] != "cublas"}
    return ", ".join(sorted(found, key=analysis.gemm_version_rank)) or "none"


def cublas_note(rows: Sequence[dict]) -> str | None:
    """Why a cuBLAS row's "% of cuBLAS" is not 100: the footnote of that cell, or None."""
    found = [r for r in rows if r[GEMM_ROW.version] == "cublas" and r.get(GEMM_ROW.pct_of_cublas)]
    if not found:
        return None
    widest = max(found, key=lambda r: abs(r[GEMM_ROW.pct_of_cublas] - 100))
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
        if key == GEMM_ROW.pct_of_cublas and row[GEMM_ROW.version] == "cublas":
            return text
        return missing_value_note(key, row)

    return note


def seed_layer_text(rows: Sequence[dict]) -> str | None:
    """Where the course study's layer under the data-parallel strategies is shown (runs of
    seed_layer workloads measured before interleaving: the appendix)."""
    found = [r for r in cells.old_format_steps(rows)
             if r[STEP_ROW.workload].startswith("seed_layer")]
    if not found:
        return None
    machines = and_list(sorted({r["machine"] for r in found}))
    return (f"The course study's layer also ran under the data-parallel strategies on {machines}, "
            f"measured before interleaving: appendix '{appendix.BEFORE_INTERLEAVING_TITLE}'.")


def section_gemm(view: View) -> dict:
    rows, runs, machines = view.rows, view.runs, view.machines
    groups = machines.in_order(analysis.gemm_ladder(rows))
    out: dict = {"tables": [], "figures": [], "seed": None, "ceilings": [],
                 "v1c": V1C_TEXT, "superseded": superseded_text(rows, runs),
                 "seed_layer": seed_layer_text(rows),
                 "sweep": sweep_tables(view), "not_covered": NOT_COVERED,
                 "sweep_headline": sweep_headline(rows), "figures_left": None}
    labels = list(dict.fromkeys(g["machine"] for g in groups))
    if labels[1:]:
        out["figures_left"] = (f"The ladder's figures are drawn for {machines.words[labels[0]]}"
                               f" only; those of {and_list(labels[1:])} are left out, and their "
                               f"rows are in the appendix 'Dense tables'.")
    for label in labels:
        mine = [g for g in groups if g["machine"] == label]
        flat = [{**r, "shape": f"{g['m']}×{g['n']}×{g['k']}", "version_label": version_label(r)}
                for g in mine for r in g[GROUP.rows]]
        how = how_text(flat, runs)
        where = machines.words[label]
        marks = _marks_text(flat)
        own = sorted({r[GEMM_ROW.version] for r in flat if r[GEMM_ROW.version] != "cublas"},
                     key=analysis.gemm_version_rank)
        out["tables"].append(make_table(
            f"tab-gemm-{label}", f"GEMM ladder on {where}: own kernels {', '.join(own)} and "
            f"cuBLAS (through torch) per shape and dtype, median CUDA-event time per launch; "
            f"roofline from the device's peaks (impl/kernels/peaks.py); max |C − C_cuBLAS| is "
            f"each row's correctness check. {marks}{how}", GEMM_COLUMNS, flat,
            note=gemm_note(flat)))
        if label != labels[0]:
            continue  # the page budget: one machine's figures; the rest in 'Dense tables'
        out["figures"].append(make_figure(
            f"fig-gemm-{label}", gemm_bars(mine),
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
    out["ceilings"] = [ceiling_table(group, view)
                       for group in machines.in_order(analysis.tensor_core_ceilings(rows))]
    seeds = machines.in_order(analysis.seed_steps(rows))
    if seeds:
        where = ", ".join(machines.words[m] for m in dict.fromkeys(r["machine"] for r in seeds))
        out["seed"] = make_table(
            "tab-seed", f"The course study's training step (y = xW, grad_w = xᵀ·grad_out, SGD; "
            f"1024×512 by 512×512, fp32), own kernels against torch ops, on "
            f"{where}. {how_text(seeds, runs)}", SEED_COLUMNS, seeds,
            placement=Placement("the course study's training step, own kernels against torch",
                                always=True))
    out["empty"] = not (out["tables"] or out["ceilings"] or out["seed"] or out["sweep"])
    return out


@_styled
def gemm_bars(groups: Sequence[dict]) -> Image:
    """TFLOP/s per kernel version, grouped by shape, one panel per dtype."""
    dtypes = list(dict.fromkeys(g[GEMM_ROW.dtype] for g in groups))
    fig, axes = _figure(1, len(dtypes), height=2.5)
    for ax, dtype in zip(axes[0], dtypes):
        shapes = [g for g in groups if g[GEMM_ROW.dtype] == dtype]
        versions = sorted({r[GEMM_ROW.version] for g in shapes for r in g[GROUP.rows]},
                          key=gemm_version_rank)
        width = 0.8 / len(versions)
        for v_index, version in enumerate(versions):
            labelled = False  # one legend entry per version, at its first shape with a bar
            for s_index, group in enumerate(shapes):
                value = next((r[GEMM_ROW.tflops] for r in group[GROUP.rows]
                              if r[GEMM_ROW.version] == version), None)
                if value is not None:
                    ax.bar(s_index + (v_index - (len(versions) - 1) / 2) * width, value, width,
                           color=version_color(version), label=None if labelled else version)
                    labelled = True
        ax.set_xticks(range(len(shapes)),
                      [f"{g['m']}×{g['n']}×{g['k']}" for g in shapes], rotation=20)
        ax.set_ylabel(f"{dtype} TFLOP/s")
        ax.legend(frameon=False, ncols=2)
    return _save(fig)
