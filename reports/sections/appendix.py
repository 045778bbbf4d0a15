"""The appendices: every run loaded and how the report uses it, the step rows measured before
interleaving (shown nowhere else), and the dense tables of every interleaved cell.

Nothing loaded is dropped silently: a run's rows are either in a chapter, in an appendix
table, replaced by a newer run's measurement of the same thing (counted), or of a kind the
report has no section for (named).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from impl.rows.kinds import (
    ALLREDUCE,
    GEMM,
    SAMPLER_OVERHEAD,
    SEED_STEP,
    STEP,
    TENSOR_CORE_CEILING,
)
from impl.rows.report_records import GROUP
from reports import analysis, cells
from reports.captions import Run, how_text
from reports.format import Column, fmt, fmt_bytes, make_table, text_column
from reports.sections.hangs import hang_text
from reports.sections.overlap import fabric_heading, fabric_rank, references_table, results_table
from reports.view import View

STEP_ROW, ALLREDUCE_ROW, SAMPLER_ROW = STEP.names, ALLREDUCE.names, SAMPLER_OVERHEAD.names
# The single-GPU studies, shown per GPU model from its newest run (analysis.newest_run_per_gpu).
GPU_STUDY_KINDS = (GEMM.name, SEED_STEP.name, TENSOR_CORE_CEILING.name)
BEFORE_INTERLEAVING = ("Measured before interleaving: references measured at other moments, "
                       "no intervals.")
# Where each kind of row is shown (old-format step rows: appendix only).
USES = {"comparison": "in the overlap chapters and the appendix of every cell",
        "step": "interleaved: each variant's own rounds, for throughput and the gate; the "
                "figures are read from their cells' comparison rows",
        "interference": "in the interference section", "allreduce": "in the all-reduce chapter",
        "synthetic": "in the course study chapter (the simulation)",
        GEMM.name: "in the GEMM chapter", "tensor_core_ceiling": "in the GEMM chapter",
        "seed_step": "in the GEMM chapter", "sampler_overhead": "in the power section",
        "tensor_parallel": "in the tensor-parallel section",
        "pipeline": "in the pipeline section"}


def run_format(kinds: Counter) -> str:
    if kinds.get("comparison"):
        return "interleaved"
    if kinds.get("step"):
        return "before interleaving"
    return "no overlap cells"


def run_uses(run: Run, rows: Sequence[dict]) -> list[str]:
    """How the report uses one run's rows, kind by kind, with what it left out and why."""
    kept = Counter(r.get("kind") for r in rows if r["run"] == run.index)
    old = sum(1 for r in cells.old_format_steps(rows) if r["run"] == run.index)
    gpu_study = {id(r) for kind in GPU_STUDY_KINDS
                 for r in analysis.newest_run_per_gpu(rows, kind)}
    superseded = Counter(r["kind"] for r in rows if r["run"] == run.index
                         and r.get("kind") in GPU_STUDY_KINDS and id(r) not in gpu_study)
    uses = []
    for kind, count in sorted(dict(run.kinds).items()):
        shown = kept.get(kind, 0)
        text = f"{kind}: {count} row(s)"
        if kind in ("step", "sampler_overhead"):
            before = old if kind == "step" else sum(
                1 for r in analysis.sampler_overhead(rows)
                if r["run"] == run.index and SAMPLER_ROW.overhead_ratio not in r)
            if before:
                text += (f"; {before} measured before interleaving, shown only in the appendix "
                         f"'{BEFORE_INTERLEAVING_TITLE}'")
            if shown - before:
                text += f"; {shown - before} {USES[kind]}"
        elif kind in analysis.REPORTED_KINDS:
            if superseded.get(kind):
                text += (f"; {superseded[kind]} left out: a newer run measured the same GPU "
                         f"model (GEMM chapter's rule)")
                shown -= superseded[kind]
            if shown:
                text += f"; {shown} {USES.get(kind, 'in the report')}"
        else:
            text += "; not shown: the report has no section for this kind"
            shown = count
        if count > kept.get(kind, 0):
            text += (f"; {count - kept.get(kind, 0)} replaced by a newer run's measurement of "
                     f"the same thing")
        uses.append(text)
    return uses


def pass_lines(run: Run) -> list[str]:
    lines = []
    for index, one in enumerate(run.passes):
        env = " ".join(f"{k}={v}" for k, v in sorted((one.get("env") or {}).items()))
        lines.append(f"[{one.get('name') or f'pass {index + 1}'}, exit {one.get('exit')}] "
                     f"{env + ' ' if env else ''}{one.get('command')}")
    return lines


def commit_text(fingerprint: dict) -> str:
    commit = fingerprint.get("git_commit")
    if not commit:
        return "not recorded (the run's copy had no git history)"
    dirty = fingerprint.get("git_dirty")
    state = {True: "dirty: tracked files differed from it", False: "clean",
             None: "dirty flag unknown"}[dirty]
    return f"{commit[:12]} ({state})"


BEFORE_INTERLEAVING_TITLE = "Step rows measured before interleaving"


def section_runs(view: View, dropped: Sequence[str]) -> dict:
    """Appendix: every loaded run, its provenance and how the report uses it; ``dropped``: the
    titles of the body sections left out for want of data."""
    rows, runs = view.rows, view.runs
    entries = []
    for run in runs:
        kinds = Counter(dict(run.kinds))
        entries.append({"path": run.path, "label": run.label, "created": run.created or "n/a",
                        "mode": run.mode or "unknown", "partial": run.partial,
                        "format": run_format(kinds), "commit": commit_text(run.fingerprint),
                        "command": run.command, "passes": pass_lines(run),
                        "failed": ", ".join(run.failed_passes), "note": run.note,
                        "hangs": [hang_text(hang) for hang in run.hangs],
                        "uses": run_uses(run, rows)})
    return {"empty": not entries, "runs": entries, "dropped": list(dropped),
            "anchors": "docs/ANCHORS.md"}


STEP_COLUMNS = (
    text_column(STEP_ROW.strategy), Column(STEP_ROW.chunks, "K"),
    *map(Column.of, (STEP.field.step_ms, STEP.field.compute_only_ms, STEP.field.comm_only_ms,
                     STEP.field.sequential_ms, STEP.field.limit_ms,
                     STEP.field.overlap_efficiency, STEP.field.hidden_comm_fraction)),
    # the header says the unit; no "(1/s)" after it
    Column.of(STEP.field.samples_per_s, "samples/s", unit=""),
    Column.of(STEP.field.max_abs_err_vs_sequential),
)
ENERGY_COLUMNS = (text_column(STEP_ROW.workload), Column(STEP_ROW.world_size, "ranks"),
                  Column(STEP_ROW.chunks, "K"), text_column(STEP_ROW.strategy),
                  Column.of(STEP.field.step_ms, "step"),
                  Column.of(STEP.field.energy_per_step_j, "energy/step"),
                  Column("power_w", "mean power, all GPUs", "W"),
                  Column("power_times_step_j", "power × step", "J"),
                  Column("disagreement_pct", "energy vs power × step", "%"))
ENERGY_NOTE = ("Energy per step comes from NVML's total-energy counter over the timed rounds; "
               "power × step uses NVML's mean sampled power. They disagree because the counter's "
               "difference also covers the rounds' synchronisation and warm tails, the counter "
               "advances in steps (about 64 J every 100 ms on one H100; a variant where some "
               "segment read no energy is left out) and the power samples are instantaneous or "
               "averaged over about a second, and GPUs near their power limit change clocks "
               "within a round.")


def section_before_interleaving(view: View) -> dict:
    """Appendix: step rows of runs made before interleaving, labelled, never headlined."""
    rows, runs = view.rows, view.runs
    old = cells.old_format_steps(rows)
    tables = []
    for group in view.machines.in_order(analysis.step_groups(old)):
        members = group[GROUP.rows]
        used = sorted({runs[r["run"]].path for r in members})
        tables.append(make_table(
            f"tab-before-{group['machine']}-{group['workload']}-w{group['world_size']}-"
            f"{group['profile']}",
            f"{BEFORE_INTERLEAVING} {group['workload']}, {group['world_size']} ranks, "
            f"{group['profile']} profile on {view.machines.words[group['machine']]} "
            f"({', '.join(used)}); medians of per-step times. {how_text(members, runs)}",
            STEP_COLUMNS, members))
    energy = analysis.energy_before_interleaving(rows)
    energy_table = None
    if energy:
        energy_table = make_table(
            "tab-before-energy", f"{BEFORE_INTERLEAVING} Energy per step against mean power "
            f"× step time, per step row with NVML readings. {ENERGY_NOTE} "
            f"{how_text(energy, runs)}", ENERGY_COLUMNS, energy)
    # rows without the ratio were measured before interleaving
    overhead = [r for r in analysis.sampler_overhead(rows)
                if SAMPLER_ROW.overhead_ratio not in r]
    return {"empty": not tables and not overhead, "tables": tables, "energy": energy_table,
            "overhead": [{"machine": r["machine"], "pct": fmt(r[SAMPLER_ROW.overhead_pct]),
                          "path": runs[r["run"]].path} for r in overhead],
            "title": BEFORE_INTERLEAVING_TITLE}


def section_cells(view: View) -> dict:
    """Appendix: every interleaved cell (every K), per machine, fabric and world size."""
    rows, runs = view.rows, view.runs
    blocks: dict[tuple, list[dict]] = {}
    for cell in cells.cells(rows):
        blocks.setdefault(fabric_rank(cell, view.machines), []).append(cell)
    out = []
    for index, key in enumerate(sorted(blocks)):
        found = blocks[key]
        where = fabric_heading(found[0], view.machines)
        how = how_text(found, runs)
        out.append({"heading": where, "tables": [
            results_table(f"tab-cells-{index}", f"Every cell on {where}: each strategy's "
                          f"median step and figures, with 95% intervals below. {how}", found),
            references_table(f"tab-cell-references-{index}", f"References of every cell on "
                             f"{where}, measured in the same rounds, with 95% intervals. {how}",
                             found)]})
    return {"empty": not out, "blocks": out}


ALLREDUCE_COLUMNS = (Column("size_mib", "size", "MiB"),
                     *map(Column.of, (ALLREDUCE.field.time_ms, ALLREDUCE.field.algbw_gbps,
                                      ALLREDUCE.field.busbw_gbps)),
                     text_column("spread", "round spread", nowrap=True),
                     Column("nccl_tests_gbps", "nccl-tests", "GB/s"),
                     Column("pct_of_nccl_tests", "of nccl-tests", "%"),
                     Column("torch_ref_gbps", "torch ref.", "GB/s"),
                     Column.of(ALLREDUCE.field.wrong_elements))


def round_spread(row: dict) -> str:
    """The rounds' wall-clock times as min–max around the median, in % of the median (the
    rounds include their sync and barrier, so this is the spread, not an interval)."""
    times = sorted(row.get("round_s") or [])
    if len(times) < 2:
        return "n/a"
    middle = statistics.median(times)
    below, above = 100 * (middle - times[0]) / middle, 100 * (times[-1] - middle) / middle
    return f"−{fmt(below)}% / +{fmt(above)}%"


def allreduce_tables(view: View) -> list:
    """The all-reduce sweep per machine, fabric and world size, sizes in MiB throughout."""
    tables = []
    for group in view.machines.in_order(analysis.allreduce_groups(view.rows)):
        members = group[GROUP.rows]
        table_rows = [{**r, "size_mib": r[ALLREDUCE_ROW.size_bytes] / 2**20,
                       "spread": round_spread(r)}
                      for r in members]
        tables.append(make_table(
            f"tab-allreduce-{group['machine']}-{group['profile']}-w{group['world_size']}",
            f"All-reduce on {view.machines.words[group['machine']]}, {group['world_size']} ranks, "
            f"{group['profile']} profile ({group['backend']}, "
            f"{members[0].get('dtype', 'n/a')}): median time per all-reduce, algbw, busbw, "
            f"the spread of the rounds (wall clock, fastest and slowest against the median) "
            f"and the wrong-element count after the timed rounds; sizes from "
            f"{fmt_bytes(members[0]['size_bytes'])} to "
            f"{fmt_bytes(members[-1]['size_bytes'])}. "
            f"{how_text(members, view.runs)}",
            ALLREDUCE_COLUMNS, table_rows))
    return tables


def section_tables(view: View) -> dict:
    """Appendix: the dense tables of the chapters (GEMM ladder rows, all-reduce sweeps); the
    GEMM chapter's are the same tables, built before it."""
    tables = allreduce_tables(view)
    gemm = view.built["gemm"]["tables"]
    return {"empty": not tables and not gemm, "allreduce": tables, "gemm": list(gemm)}
