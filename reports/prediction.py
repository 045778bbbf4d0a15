"""The report's chapter "Beyond this machine": predictions at 8 to 1024 GPUs, and the model's
errors on every measured cell beside them.

Everything predicted comes from impl/model/ (the cost model); this module only selects rows,
lays out tables and draws. Per GPU model with compute-only timelines in the loaded results,
the fabric file of its nodes over 400 Gb/s InfiniBand (FABRICS) gives the all-reduce at each
world size; the validation (impl/model/validation.py) runs on the same rows.

    context = section(rows, runs)   # {"empty": bool, "groups": [...], "validation": Table...}
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.model import scale, validation
from impl.model.fabric_file import load_fabric
from reports import figures
from reports.captions import make_figure
from reports.format import Column, fmt, make_table, text_column

# The fabric each GPU model's compute is predicted on: its HGX nodes over InfiniBand.
FABRICS = {"NVIDIA H200": "ib400-h200x8", "NVIDIA H100 80GB HBM3": "ib400-h100x8"}
# Strategies figures.py has no colour for get their own here, so no two lines share one.
COLORS = {**figures.STRATEGY_COLORS, "copy-engine": "#d62728", "chunked+update": "#e377c2"}
PANELS = (("step_ms", "step (ms)"), ("exposed_comm_ms", "exposed communication (ms)"),
          ("overlap_efficiency", "overlap efficiency"))


@figures._styled
def curves(predictions: Sequence[scale.Prediction], title: str) -> figures.Image:
    """Step, exposed communication and overlap efficiency against the GPU count, one line
    per strategy (predicted values only)."""
    fig, axes = figures._figure(1, len(PANELS), height=2.5)
    strategies = list(dict.fromkeys(p.strategy for p in predictions))
    for ax, (field, label) in zip(axes[0], PANELS):
        for strategy in strategies:
            points = [(p.world_size, getattr(p, field)) for p in predictions
                      if p.strategy == strategy and getattr(p, field) is not None]
            if points:
                ax.plot(*zip(*points), marker="o", markersize=2.5, linewidth=1.1,
                        color=COLORS.get(strategy, "#17becf"), label=strategy)
        ax.set_xscale("log", base=2)
        worlds = sorted({p.world_size for p in predictions})
        ax.set_xticks(worlds, [str(w) for w in worlds], fontsize=6)
        ax.minorticks_off()
        ax.set_xlabel("GPUs (predicted)")
        ax.set_title(label)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 7),
               frameon=False, title=title, title_fontsize=8)
    return figures._save(fig)


def _by_device(rows: Sequence[dict]) -> dict[str, list[dict]]:
    """The GPU rows of each GPU model that has a fabric file; the interference rows beside."""
    devices: dict[str, list[dict]] = {}
    for row in rows:
        if row.get("device") in FABRICS:
            devices.setdefault(row["device"], []).append(row)
    return devices


PREDICTION_COLUMNS = (
    text_column("strategy", "strategy", nowrap=True), text_column("figure", "predicted"),
    *(Column(f"w{w}", f"{w} GPUs", render=lambda v: v or "—") for w in scale.WORLDS),
)
FIGURES = (("step_ms", "step (ms)", 4), ("exposed_comm_ms", "exposed comm. (ms)", 3),
           ("overlap_efficiency", "efficiency", 2))


def prediction_table(table_id: str, workload: str, predictions: Sequence[scale.Prediction],
                     fabric_name: str) -> dict:
    rows = []
    for strategy in dict.fromkeys(p.strategy for p in predictions):
        by_world = {p.world_size: p for p in predictions if p.strategy == strategy}
        for field, label, digits in FIGURES:
            rows.append({"strategy": strategy if field == "step_ms" else "", "figure": label,
                         **{f"w{w}": None if w not in by_world
                            or getattr(by_world[w], field) is None
                            else fmt(getattr(by_world[w], field), digits)
                            for w in scale.WORLDS}})
    return make_table(table_id, f"PREDICTED for {workload} on {fabric_name}, K = "
                      f"{scale.DEFAULT_CHUNKS}, per GPU count: predictions of the cost model, "
                      "not measurements.", PREDICTION_COLUMNS, rows, note=lambda *_: None)


VALIDATION_COLUMNS = (
    text_column("machine", "machine"), text_column("strategy", "strategy", nowrap=True),
    Column("cells", "cells", render=str),
    Column("median", "median |error|", render=lambda v: f"{v:.1%}"),
    Column("max", "max |error|", render=lambda v: f"{v:.1%}"),
    Column("calm", "without interference", render=lambda v: f"{v:+.1%}"),
    Column("hidden", "max hidden gap", render=lambda v: "—" if v is None else f"{v:.2f}"),
    text_column("goal", "goal"),
)
CHECK_COLUMNS = (
    text_column("machine", "machine"), text_column("workload", "workload"),
    Column("chunks", "K", render=str), Column("world_size", "GPUs", render=str),
    text_column("variant", "variant", nowrap=True),
    Column("measured_ms", "measured", "ms"), Column("predicted_ms", "model", "ms"),
    Column("error", "error", render=lambda v: "—" if v is None else f"{v:+.1%}"),
    Column("calm_error", "no interference",
           render=lambda v: "—" if v is None else f"{v:+.1%}"),
    text_column("hidden", "hidden measured / model"), text_column("reason", "why it misses"),
)


def validation_tables(checks: Sequence[validation.Check]) -> list:
    tables = []
    for interleaved, what in ((True, "interleaved cells"),
                              (False, "cells measured before interleaving")):
        summary = validation.by_strategy(checks, interleaved)
        if summary:
            rows = [{"machine": machine, "strategy": name, "cells": s["cells"],
                     "median": s["median_abs_error"], "max": s["max_abs_error"],
                     "calm": s["median_calm_error"], "hidden": s["max_hidden_gap"],
                     "goal": "met" if s["meets_goal"] else "missed"}
                    for (machine, name), s in summary.items()]
            tables.append(make_table(
                f"tab-model-{'interleaved' if interleaved else 'earlier'}",
                f"The cost model on the {what} of the loaded results: error = predicted / "
                f"measured − 1 of the step; the goal is a median |error| ≤ "
                f"{validation.STEP_GOAL_MEDIAN:.0%} and a max ≤ "
                f"{validation.STEP_GOAL_MAX:.0%}, and the hidden-communication fraction "
                f"within {validation.HIDDEN_GOAL}. \"Without interference\" is the median "
                "error of the same model with compute unslowed.", VALIDATION_COLUMNS, rows,
                note=lambda *_: None))
    return tables


def check_rows(checks: Sequence[validation.Check]) -> list[dict]:
    return [{**vars(c), "error": c.error, "calm_error": c.calm_error,
             "hidden": "—" if c.measured_hidden is None or c.predicted_hidden is None
             else f"{c.measured_hidden:.2f} / {c.predicted_hidden:.2f}",
             "reason": validation.reason(c) if c.missed else "within the goal"}
            for c in checks if c.interleaved]


def section(rows: Sequence[dict], runs: Sequence) -> dict:
    """The chapter's context; ``empty`` when no GPU model has compute-only timelines."""
    groups = []
    for device, device_rows in _by_device(rows).items():
        fabric = load_fabric(FABRICS[device])
        sources, predictions = scale.predict(device_rows, fabric)
        for index, source in enumerate(sources):
            mine = [p for p in predictions if p.workload == source.workload]
            figure_id = f"fig-predicted-{fabric.name}-{index}"
            groups.append({
                "device": device, "fabric": fabric, "source": source,
                "figure": make_figure(figure_id, curves(mine, f"{source.workload}: PREDICTED"),
                                      f"PREDICTED, not measured: {source.workload} on "
                                      f"{fabric.description} ({fabric.name}), K = "
                                      f"{scale.DEFAULT_CHUNKS}; {source.about}; interference "
                                      f"{source.interference.source}.",
                                      f"predicted step, exposed communication and overlap "
                                      f"efficiency of {source.workload} from 8 to 1024 GPUs"),
                "table": prediction_table(f"tab-predicted-{fabric.name}-{index}",
                                          source.workload, mine, fabric.name),
                "notes": sorted({f"{p.strategy}: {p.note}" for p in mine if p.note})})
    checks = validation.validate(rows)
    interleaved = [c for c in checks if c.interleaved]
    return {"empty": not groups and not checks, "groups": groups,
            "fabrics": sorted({g["fabric"].name: g["fabric"] for g in groups}.items()),
            "summaries": validation_tables(checks),
            "checks": make_table("tab-model-cells", "Every interleaved cell: the measured "
                                 "step (median of the rounds), the model's, and why a miss "
                                 "misses.", CHECK_COLUMNS, check_rows(checks),
                                 note=lambda *_: None) if interleaved else None}
