"""The report's chapter "Beyond this machine": predictions at 8 to 1024 GPUs, and the model's
errors on every measured cell beside them.

Everything predicted comes from impl/costmodel/ (the cost model); this module only selects rows,
lays out tables and draws. Per GPU model with compute-only timelines in the loaded results,
the fabric file of its nodes over 400 Gb/s InfiniBand (FABRICS) gives the all-reduce at each
world size; the validation (impl/costmodel/accuracy.py) runs on the same rows.

    context = section(view)   # {"empty": bool, "devices": [...], "summaries": [...]}
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from impl.costmodel import accuracy, heldout, scale
from impl.costmodel.fabric_file import load_fabric
from impl.rows.kinds import COMPARISON, STEP, is_older_step
from impl.rows.predictions import PREDICTION, SUMMARY
from reports import figures
from reports.captions import make_figure
from reports.format import Column, Placement, fmt, make_table, text_column
from reports.view import View

# A measured cell's row: a comparison row or (before interleaving) a step row, which declare
# device alike; a check (accuracy.Check) names its cell's workload, K and world size as the
# row does. A prediction's and a strategy summary's keys: impl/rows/predictions.py.
CELL = COMPARISON.names
# The fabric each GPU model's compute is predicted on: its HGX nodes over InfiniBand.
FABRICS = {"NVIDIA H200": "ib400-h200x8", "NVIDIA H100 80GB HBM3": "ib400-h100x8"}
# The same nodes with in-network reduction (CollNet, cited, not measured): one line each.
COLLNET_FABRICS = {"NVIDIA H200": "ib400-sharp-h200x8"}
# Colours of this figure's own, before each strategy's (figures.family_color): its lines all
# take one marker, so chunked+update needs a colour other than chunked's; copy-engine keeps the
# red this figure drew it in before figures.py had a colour for it.
COLORS = {"copy-engine": "#d62728", "chunked+update": "#e377c2"}
PANELS = ((lambda p: p.step_ms, "step (ms)"),
          (lambda p: p.exposed_comm_ms, "exposed communication (ms)"),
          (lambda p: p.overlap_efficiency, "overlap efficiency"))


@figures._styled
def curves(groups: Sequence[tuple[str, Sequence[scale.Prediction]]],
           title: str) -> figures.Image:
    """Per workload (a row of panels): step, exposed communication and overlap efficiency
    against the GPU count, one line per strategy (predicted values only)."""
    fig, axes = figures._figure(len(groups), len(PANELS), height=0.6 + 1.15 * len(groups))
    for row, (workload, predictions) in zip(axes, groups):
        strategies = list(dict.fromkeys(p.strategy for p in predictions))
        worlds = sorted({p.world_size for p in predictions})
        for ax, (figure, label) in zip(row, PANELS):
            for strategy in strategies:
                points = [(p.world_size, figure(p)) for p in predictions
                          if p.strategy == strategy and figure(p) is not None]
                if points:
                    ax.plot(*zip(*points), marker="o", markersize=2.5, linewidth=1.1,
                            color=COLORS.get(strategy) or figures.family_color(strategy)
                            or "#17becf", label=strategy)
            ax.set_xscale("log", base=2)
            ax.set_xticks(worlds, [str(w) for w in worlds], fontsize=6)
            ax.minorticks_off()
            ax.set_title(f"{workload}: {label}", loc="left", fontsize=7)
        row[0].set_ylabel("predicted")
    for ax in axes[-1]:
        ax.set_xlabel("GPUs (predicted)")
    handles = {label: handle for ax in axes.flat
               for handle, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(list(handles.values()), list(handles), loc="outside upper center",
               ncols=min(len(handles), 7), frameon=False, title=title, title_fontsize=8)
    return figures._save(fig)


def _by_device(rows: Sequence[dict]) -> dict[str, list[dict]]:
    """The GPU rows of each GPU model that has a fabric file; the interference rows beside.
    The chapter predicts from cells measured interleaved with their references only, as the
    report's other figures come from them (``python -m impl.costmodel.predict`` takes any run)."""
    devices: dict[str, list[dict]] = {}
    for row in rows:
        if is_older_step(row):
            continue
        if row.get(CELL.device) in FABRICS:  # any kind: each that records a device names it so
            devices.setdefault(row[CELL.device], []).append(row)
    return devices


PREDICTION_COLUMNS = (
    text_column(PREDICTION.strategy, nowrap=True), text_column("figure", "predicted"),
    *(Column(f"w{w}", f"{w} GPUs", render=lambda v: v or "—") for w in scale.WORLDS),
)
# A prediction table's rows per strategy, the first named by it: the figure, its label and
# digits; the step's band is a (low, high) pair.
FIGURES = ((lambda p: p.step_ms, "step (ms)", 4), (lambda p: p.step_range, "step band (ms)", 4),
           (lambda p: p.exposed_comm_ms, "exposed comm. (ms)", 3),
           (lambda p: p.overlap_efficiency, "efficiency", 2),
           (lambda p: p.weak_scaling, "weak scaling", 2))


def _figure(value: float | tuple[float, float] | None, digits: int) -> str | None:
    if value is None:
        return None
    if isinstance(value, tuple):
        return f"{fmt(value[0], digits)}–{fmt(value[1], digits)}"
    return fmt(value, digits)


def prediction_table(table_id: str, source: scale.Source,
                     predictions: Sequence[scale.Prediction], fabric_name: str) -> dict:
    workload = source.workload
    rows = []
    for strategy in dict.fromkeys(p.strategy for p in predictions):
        by_world = {p.world_size: p for p in predictions if p.strategy == strategy}
        for n, (figure, label, digits) in enumerate(FIGURES):
            rows.append({PREDICTION.strategy: "" if n else strategy, "figure": label,
                         **{f"w{w}": _figure(figure(by_world[w]), digits) if w in by_world
                            else None for w in scale.WORLDS}})
    return make_table(table_id, f"PREDICTED for {workload} on {fabric_name}, K = "
                      f"{scale.PREDICTION_CHUNKS}, per GPU count: predictions of the cost model, "
                      f"not measurements; from {source.about}, interference "
                      f"{source.interference.source}; stragglers from the per-step spread "
                      f"σ {source.spread_ms:.3g} ms. Band: the strategy's held-out error with "
                      "the compute-only step's interval (— where the loaded results hold no "
                      "held-out cell of it).", PREDICTION_COLUMNS, rows,
                      note=lambda *_: None,
                      placement=Placement("predicted figures per GPU count"))


# The detail appendix's tables of the model on more cells; the interleaved and earlier ones
# whatever their length: the body's held-out table already answers them for the GPUs.
MORE_CELLS = Placement("the cost model's error on more cells")
ALWAYS_MORE_CELLS = Placement(MORE_CELLS.name, always=True)

VALIDATION_COLUMNS = (
    text_column("machine", "machine"), text_column("strategy", "strategy", nowrap=True),
    Column(SUMMARY.cells, "cells", render=str),
    Column(SUMMARY.median_abs_error, "median |error|", render=lambda v: f"{v:.1%}"),
    Column(SUMMARY.max_abs_error, "max |error|", render=lambda v: f"{v:.1%}"),
    Column(SUMMARY.median_calm_error, "without interference", render=lambda v: f"{v:+.1%}"),
    Column(SUMMARY.max_hidden_gap, "max hidden gap",
           render=lambda v: "—" if v is None else f"{v:.2f}"),
    text_column("goal", "goal"),
)
CHECK_COLUMNS = (
    text_column("machine", "machine"), text_column(CELL.workload),
    Column(CELL.chunks, "K", render=str), Column(CELL.world_size, "GPUs", render=str),
    text_column("variant", "variant", nowrap=True),
    Column("measured_ms", "measured", "ms"), Column("predicted_ms", "model", "ms"),
    Column("error", "error", render=lambda v: "—" if v is None else f"{v:+.1%}"),
    Column("calm_error", "no interference",
           render=lambda v: "—" if v is None else f"{v:+.1%}"),
    text_column("hidden", "hidden measured / model"), text_column("reason", "why it misses"),
)


def validation_tables(checks: Sequence[accuracy.Check], gpu_labels: set[str]) -> list:
    """Summaries per machine and strategy: the interleaved cells of GPU machines' strategies
    (the body's); of CPU machines and of the GPU machines' knob variants (strategy+knob); and
    the cells measured before interleaving (the last two in the detail appendix)."""
    tables = []
    for interleaved, shown, suffix, what, placement in (
            (True, lambda m, n: m in gpu_labels and "+" not in n, "interleaved",
             "interleaved cells of GPU machines", None),
            (True, lambda m, n: m not in gpu_labels or "+" in n, "interleaved-more",
             "interleaved cells of CPU machines and the knob variants of GPU machines",
             ALWAYS_MORE_CELLS),
            (False, lambda m, n: True, "earlier", "cells measured before interleaving",
             ALWAYS_MORE_CELLS)):
        summary = accuracy.by_strategy(checks, interleaved)
        rows = [{"machine": machine, "strategy": name, **s,
                 "goal": "met" if s[SUMMARY.meets_goal] else "missed"}
                for (machine, name), s in summary.items() if shown(machine, name)]
        if rows:
            tables.append(make_table(
                f"tab-model-{suffix}",
                f"The same model on the {what} (each variant from its cell's compute-only "
                f"step, comm-only times and interference row; no overlapped step is an input): "
                f"error = predicted / measured − 1, goal median |error| ≤ "
                f"{accuracy.STEP_GOAL_MEDIAN:.0%}, max ≤ {accuracy.STEP_GOAL_MAX:.0%} and "
                f"hidden fraction within {accuracy.HIDDEN_GOAL}; without interference: "
                "compute unslowed.", VALIDATION_COLUMNS, rows, note=lambda *_: None,
                placement=placement))
    return tables


def check_rows(checks: Sequence[accuracy.Check]) -> list[dict]:
    return [{**vars(c), "error": c.error, "calm_error": c.calm_error,
             "hidden": "—" if c.measured_hidden is None or c.predicted_hidden is None
             else f"{c.measured_hidden:.2f} / {c.predicted_hidden:.2f}",
             "reason": accuracy.reason(c) if c.missed else "within the goal"}
            for c in checks if c.interleaved]


BUCKETS = re.compile(r"(\d+) buckets?, (not K = .*)")


def prediction_notes(predictions: Sequence[scale.Prediction],
                     workloads: Sequence[str]) -> list[str]:
    """Each strategy's notes once: with the workloads they concern unless they concern all;
    DDP's "n buckets, not K chunks" notes as one, with the range of n."""
    concerns: dict[tuple[str, str], list[str]] = {}
    buckets: dict[tuple[str, str], set[int]] = {}
    for p in predictions:
        if not p.note:
            continue
        if found := BUCKETS.fullmatch(p.note):
            buckets.setdefault((p.strategy, found.group(2)), set()).add(int(found.group(1)))
            continue
        where = concerns.setdefault((p.strategy, p.note), [])
        if p.workload not in where:
            where.append(p.workload)
    notes = [f"{strategy}: {note}" + ("" if len(where) == len(workloads)
                                      else f" ({', '.join(where)})")
             for (strategy, note), where in concerns.items()]
    notes += [f"{strategy}: {min(n)}{f'–{max(n)}' if len(n) > 1 else ''} buckets, {rest}"
              for (strategy, rest), n in buckets.items()]
    return sorted(notes)


FABRIC_COLUMNS = (text_column("field", "value", nowrap=True), text_column("source", "source"))


def fabric_table(fabric) -> object:
    return make_table(f"tab-fabric-{fabric.name}", f"Fabric file fabrics/{fabric.name}.toml: "
                      f"{fabric.description}. Every number with its source.", FABRIC_COLUMNS,
                      [{"field": field, "source": source} for field, source in fabric.sources],
                      note=lambda *_: None,
                      placement=Placement("a fabric file's numbers and their sources"))


HELD_OUT_COLUMNS = (text_column("machine", "machine"),
                    text_column("variant", "variant", nowrap=True),
                    *(text_column(split, split) for split in (*heldout.SPLITS, heldout.TRIVIAL)))


def held_out(rows: Sequence[dict]) -> tuple[object | None, list[str], dict[str, float],
                                            tuple[dict, dict]]:
    """The held-out validation of the loaded GPU cells (impl/costmodel/heldout.py): the
    table of |error| per variant and split, the ranking, best-pick and efficiency lines and
    the cells that do not reproduce (left out of the table),
    each strategy's held-out error (the predictions' bands) and, for predictions at other
    GPU counts, the overheads beyond the schedule per GPU model and strategy and the lanes
    beside backward per GPU model, workload and variant (heldout.HeldOut)."""
    found = heldout.validate_held_out(rows, rows)
    table = found.table
    if not table:
        return None, [], {}, ({}, {})
    shown = [{"machine": machine, "variant": name,
              **{split: None if s is None else
                 f"{s.median_abs_error:.1%} / {s.max_abs_error:.1%} ({s.cells})"
                 for split, s in by.items()}} for (machine, name), by in table.items()]
    return make_table(
        "tab-model-held-out", "The cost model on cells it was not built from: median / max "
        "|error| of the step (cells), error = predicted / measured − 1. \"other runs\": "
        "compute-only step, all-reduce sweep and interference all from other runs than the "
        "cell's; leave-one-K-out and leave-one-workload-out: the cell's run without its K or "
        "its workload's comm-only times; in-cell: the cell's own inputs (a consistency check); "
        "under each, an overlapped variant's overhead beyond the schedule is fitted on the "
        "other cells only, of its GPU model and world size; step = sequential: the trivial "
        "predictor, the cell's measured sequential step.",
        HELD_OUT_COLUMNS, shown, note=lambda *_: None), \
        [*heldout.decision_lines(found.decisions), *found.unreproduced], \
        found.bands, (found.overheads, found.lanes)


def assumed_fields(fabric, kind: str = "assumed") -> list[str]:
    """The fabric file's numbers whose source says they are ``kind`` (assumed, cited)."""
    return [field for field, source in fabric.sources if source.lower().startswith(kind)]


def weak_scaling_line(predictions: Sequence[scale.Prediction], fabric_name: str) -> str | None:
    """The chunked strategy's predicted weak-scaling efficiency at the largest world."""
    largest = [p for p in predictions if p.strategy == "chunked" and p.weak_scaling
               and p.world_size == max(scale.WORLDS)]
    if not largest:
        return None
    return (f"PREDICTED weak-scaling efficiency of chunked at {max(scale.WORLDS)} GPUs on "
            f"{fabric_name} (one GPU's compute-only step / the step, stragglers included): "
            + ", ".join(f"{p.workload} {p.weak_scaling:.0%}" for p in largest))


def section(view: View) -> dict:
    """The chapter's context; ``empty`` when no GPU model has compute-only timelines and no
    cell was measured. One figure per GPU model (a row of panels per workload); the tables of
    predicted figures, the fabric files' sources and every cell's check go to the detail
    appendix (reports/layout.py)."""
    rows = view.rows
    devices, tables, notes, scaling = [], [], [], []
    held_out_table, decisions, bands, (overheads, lanes) = held_out(rows)
    for device, device_rows in _by_device(rows).items():
        fabric = load_fabric(FABRICS[device])
        sources, predictions = scale.predict(device_rows, fabric, held_out=bands,
                                             overheads=overheads, lanes=lanes)
        if not sources:
            continue
        groups = [(source.workload, [p for p in predictions if p.workload == source.workload])
                  for source in sources]
        measured = ", ".join(dict.fromkeys(source.about.split("(", 1)[1].split(",")[0]
                                           for source in sources))
        devices.append({"device": device, "fabric": fabric, "figure": make_figure(
            f"fig-predicted-{fabric.name}", curves(groups, f"{device}: PREDICTED"),
            f"PREDICTED, not measured: {fabric.description} ({fabric.name}), K = "
            f"{scale.PREDICTION_CHUNKS}, from the compute-only steps and interference measured "
            f"on {measured} (each workload's in its table's caption).",
            f"predicted step, exposed communication and overlap efficiency from 8 to 1024 "
            f"GPUs on {fabric.name}")})
        tables += [prediction_table(f"tab-predicted-{fabric.name}-{n}", source, mine,
                                    fabric.name)
                   for n, (source, (_, mine)) in enumerate(zip(sources, groups))]
        tables.append(fabric_table(fabric))
        notes += prediction_notes(predictions, [source.workload for source in sources])
        if assumed := assumed_fields(fabric):
            notes.append(f"{fabric.name}: assumed, not measured or cited: {', '.join(assumed)}")
        if line := weak_scaling_line(predictions, fabric.name):
            scaling.append(line)
        if device in COLLNET_FABRICS:
            sharp = load_fabric(COLLNET_FABRICS[device])
            line = weak_scaling_line(scale.predict(device_rows, sharp, held_out=bands,
                                                   overheads=overheads, lanes=lanes)[1],
                                     sharp.name)
            if line:
                scaling.append(f"{line} (in-network reduction; cited, not measured: "
                               f"{', '.join(assumed_fields(sharp, 'cited'))})")
    checks = accuracy.validate(rows)
    interleaved = [c for c in checks if c.interleaved]
    if interleaved:
        tables.append(make_table("tab-model-cells", "Every interleaved cell: the measured "
                                 "step (median of the rounds), the model's, and why a miss "
                                 "misses.", CHECK_COLUMNS, check_rows(checks),
                                 note=lambda *_: None, placement=MORE_CELLS))
    return {"empty": not devices and not checks, "devices": devices, "scaling": scaling,
            "held_out": held_out_table, "decisions": decisions,
            "notes": list(dict.fromkeys(notes)),
            "summaries": validation_tables(checks, {
                r["machine"] for r in rows if (STEP.holds(r) or COMPARISON.holds(r))
                and r.get(CELL.device) not in (None, "cpu")}),
            "tables": tables}
