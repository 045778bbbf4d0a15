"""Anatomy of a step (template sections/step-anatomy.html.j2; the CPU's blocks move to
step-anatomy-cpu.html.j2, reports/layout.py): per interleaved cell, each variant's median
round as a timeline, the step's lost time by part, and the findings they show.

A timeline drawn here is also collected in ``timelines`` for the Perfetto export
(reports/traces.py), under the file name its caption gives.
"""

from __future__ import annotations

from impl.rows.kinds import COMPARISON, REFERENCE, STEP
from impl.rows.report_records import BLOCKS, FINDING, TRACED
from reports import analysis, cells, figures, traces
from reports.captions import how_text, make_figure
from reports.format import (
    Column,
    Placement,
    estimate_column,
    fmt,
    fmt_estimate,
    fmt_pct,
    make_table,
    text_column,
)
from reports.sections.overlap import cell_text, fabric_rank
from reports.view import View

# A cell is a comparison row (cell[CELL.workload]); a strategy's figures in it are named as a
# step row's. Its references (compute-only, comm-only, sequential, the limit and the bound) are
# read through their declared names (REFERENCE.limit_ms).
CELL, STEP_ROW = COMPARISON.names, STEP.names
VARIANT_NOTES = {cells.COMPUTE_ONLY: "no communication: the reference computation",
                 cells.COMM_ONLY: "no compute: the K all-reduces back to back"}


def variant_step(cell: dict, variant: str) -> dict | None:
    """A variant's step time (Estimate as JSON): its own figures, or the reference's."""
    if variant in cell[CELL.strategies]:
        return cells.figures(cell, variant)[STEP_ROW.step_ms]
    key = {cells.COMPUTE_ONLY: REFERENCE.compute_only_ms,
           cells.COMM_ONLY: REFERENCE.comm_only_ms}.get(variant, REFERENCE.sequential_ms)
    return cell[CELL.references].get(key)


def trace_name(cell: dict, variant: str) -> str:
    return "traces/" + traces.file_name(cell["machine"], cell[CELL.workload],
                                        f"K{cell['chunks']}", f"w{cell['world_size']}",
                                        cell[CELL.profile], variant)


def cell_timelines(cell: dict) -> list[dict]:
    """Every representative step of a cell, for the Gantt chart and the trace export."""
    found = []
    timelines = cell.get(CELL.timelines) or {}
    for variant in sorted(timelines, key=cells.variant_rank):
        about = {"machine": cell["machine"],
                 **{key: cell[key] for key in (CELL.workload, CELL.chunks, CELL.world_size,
                                               CELL.profile)},
                 TRACED.variant: variant, "step": "last step of the median round"}
        found.append({TRACED.variant: variant, TRACED.timeline: timelines[variant],
                      TRACED.file: trace_name(cell, variant), TRACED.about: about,
                      TRACED.process: f"rank 0 · {variant} · {cell_text(cell)}"})
    return found


def step_entries(cell: dict) -> list[dict]:
    """The bars of the step-times figure: references, then every compared strategy."""
    references = cell[CELL.references]
    entries = [{"label": "compute-only", "estimate": references[REFERENCE.compute_only_ms],
                "color": figures.color(cells.COMPUTE_ONLY)}]
    if references.get(REFERENCE.comm_only_ms):
        entries += [{"label": "comm-only", "estimate": references[REFERENCE.comm_only_ms],
                     "color": figures.color(cells.COMM_ONLY)},
                    {"label": "limit max(compute, comm)",
                     "estimate": references[REFERENCE.limit_ms], "color": "#dddddd"},
                    {"label": "schedule bound", "estimate": references.get(REFERENCE.bound_ms),
                     "color": "#aaaaaa"}]
    if references.get(REFERENCE.bound_update_in_overlap_ms):  # the bound of the "+update" variants
        entries.append({"label": "schedule bound, update inside the overlap",
                        "estimate": references[REFERENCE.bound_update_in_overlap_ms],
                        "color": "#bbbbbb"})
    entries.append({"label": cell.get(CELL.sequential_reference) or "sequential",
                    "estimate": references[REFERENCE.sequential_ms],
                    "color": figures.color("sequential")})
    entries += [{"label": strategy, "estimate": cells.figures(cell, strategy)[STEP_ROW.step_ms],
                 "color": figures.color(strategy)} for strategy in cells.compared(cell)]
    return entries


LOST_COLUMNS = (text_column(STEP_ROW.strategy),  # cells.lost_time's rows
                estimate_column("exposed_comm_ms", "exposed comm.", "ms"),
                estimate_column("compute_slowdown_ms", "compute slowdown", "ms"),
                estimate_column("other_ms", "other", "ms"),
                estimate_column("parts_sum_ms", "sum of parts", "ms"),
                estimate_column("gap_ms", "step − compute-only", "ms"),
                Column("sum_vs_gap_pct", "sum vs gap", "%"))


def finding_text(cell: dict) -> str:
    """The main finding of a cell, generated from its data: what its fastest strategy hides
    and where the rest of its lost time goes."""
    strategy = cells.best_strategy(cell)
    found = cells.finding(cell, strategy)
    hidden, part, parts = found[FINDING.hidden], found[FINDING.largest], found[FINDING.parts]
    backward, reference = found[FINDING.backward_ms], found[FINDING.backward_reference_ms]
    text = f"The fastest here, {strategy}, "
    text += (f"hides {fmt_pct(100 * hidden['value'])} of its communication "
             f"[{fmt_pct(100 * hidden['low'])}, {fmt_pct(100 * hidden['high'])}]"
             if hidden and None not in (hidden.get("value"), hidden.get("low"), hidden.get("high"))
             else "has no observed communication to hide"
             if not hidden or hidden.get("value") is None else
             f"hides {fmt_pct(100 * hidden['value'])} of its communication")
    if part == "compute_slowdown_ms" and backward is not None:
        text += (f", but its backward slows from {fmt(reference)} to "
                 f"{fmt(backward)} ms (representative steps of compute-only and "
                 f"{strategy}); compute slowdown is the largest part of its lost time, "
                 f"{fmt_estimate(parts[part])} ms per step.")
    elif part == "exposed_comm_ms":
        text += (f"; the largest part of its lost time is communication left exposed, "
                 f"{fmt_estimate(parts[part])} ms per step.")
    else:
        text += (f"; the largest part of its lost time is neither communication nor backward "
                 f"compute (launches, waits, forward and update), {fmt_estimate(parts[part])} "
                 f"ms per step.")
    return text


def lost_rows(cell: dict) -> list[dict]:
    table = []
    for entry in cells.lost_time(cell):
        total, gap = cells.value(entry["parts_sum_ms"]), cells.value(entry["gap_ms"])
        table.append({**entry, "sum_vs_gap_pct": None if not gap or total is None
                      else 100 * (total - gap) / abs(gap)})
    return table


def section_anatomy(view: View) -> dict:
    rows, runs = view.rows, view.runs
    machines = []
    for index, cell in enumerate(sorted(cells.anatomy_cells(rows),
                                        key=lambda c: fabric_rank(c, view.machines))):
        where = f"{cell_text(cell)} on {view.machines.words[cell['machine']]}"
        how = how_text([cell], runs)
        steps = cell_timelines(cell)
        panels = []
        for entry in steps:
            variant = entry[TRACED.variant]
            hidden = (cell[CELL.strategies].get(variant) or {}).get(
                STEP_ROW.hidden_comm_fraction)
            panels.append({"title": f"{variant}: step {fmt_estimate(variant_step(cell, variant))}"
                                    f" ms" + (f", hidden comm. {fmt_estimate(hidden)}"
                                              if hidden else ""),
                           "bars": analysis.timeline_bars(entry[TRACED.timeline]),
                           "note": VARIANT_NOTES.get(variant)})
        files = ", ".join(e[TRACED.file] for e in steps)
        entry = {"heading": where, "machine": cell["machine"], "figures": [], "table": None,
                 "finding": None, TRACED.timelines: steps}
        entry["figures"].append(make_figure(
            f"fig-gantt-{index}", figures.gantt(panels),
            f"The representative step of every variant ({where}): for each, the last step of "
            f"its median round (the round whose median step time is the median over rounds), "
            f"from its own timeline: compute lane (forward, the backward of each gradient "
            f"chunk, SGD update) and communication lane (each chunk's all-reduce; for DDP each "
            f"bucket, observed through a communication hook). A chunk's backward and "
            f"all-reduce share a colour; grey is forward and update. Panel titles give the "
            f"median step over rounds with its 95% interval. Perfetto traces of these steps: "
            f"{files}. {how}", f"Gantt chart of the representative steps, {where}"))
        entry["figures"].append(make_figure(
            f"fig-steps-{index}", figures.step_bars(step_entries(cell)),
            f"Step times with their 95% intervals ({where}): the references measured in the "
            f"same rounds, the limit max(compute-only, comm-only), the schedule bound (a "
            f"perfect overlap of this chunking with zero interference) and every strategy. "
            f"{how}", f"Step times and bounds, {where}"))
        if cells.compared(cell):
            entry["figures"].append(make_figure(
                f"fig-lost-{index}", figures.lost_time(cells.lost_time(cell)),
                f"Where the lost time goes ({where}): per strategy, step − compute-only split "
                f"into exposed communication, compute slowdown beside communication and the "
                f"rest (stacked, medians over rounds; each part's 95% interval is drawn at the "
                f"end of its segment), and below it the same gap measured by the step clocks, "
                f"with its interval. The parts come from the timelines, the gap from the clocks: "
                f"their agreement checks the timelines (table below). {how}",
                f"Lost time per strategy, {where}"))
            entry["table"] = make_table(
                f"tab-lost-{index}", f"Lost time per strategy ({where}), ms per step, medians "
                f"over rounds with 95% intervals. Sum vs gap: (sum of parts − gap) / gap. "
                f"{how}", LOST_COLUMNS, lost_rows(cell), note=lambda *_: None,
                placement=Placement("lost time per strategy"))
            entry["finding"] = finding_text(cell)
        machines.append(entry)
    return {"empty": not machines, BLOCKS.machines: machines}


def timelines(context: dict) -> list[dict]:
    """Every step timeline the report draws (anatomy and simulation), for the trace export."""
    return ([t for m in context["step_anatomy"][BLOCKS.machines] for t in m[TRACED.timelines]]
            + context["course_study"][TRACED.timelines])
