"""The report's pipeline and CPU–GPU hybrid section: the pipeline's analysis and figures, the
section (the hybrid study's parts come from reports/sections/hybrid.py).

Analysis functions are pure (rows in, lists of dicts out); figures take their output and
return images (matplotlib, Agg); ``section`` assembles the template's context. Rows are
``impl.rows.merge.benchmark_rows`` of the kinds in PIPELINE_KINDS (suite/bench_pipeline.py and
suite/bench_hybrid.py write them); definitions are quoted from impl/pipeline/measure.py and
impl/rows/kinds.py (the pipeline and hybrid_step rows).

    context = section(view)   # {"empty": bool, "pipeline_table": Table | None, ...}
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from impl.hybrid import HYBRID_FIELDS
from impl.pipeline.measure import PIPELINE_FIELDS, bubble_theory
from impl.rows.kinds import PIPELINE
from reports import figures
from reports.analysis import PIPELINE_KINDS
from reports.captions import how_text, make_figure
from reports.format import Column, Placement, fmt, make_table, text_column
from reports.sections import hybrid
from reports.study_tables import comparison_table, interval_text, of_kind
from reports.view import View

# The schedule rows' fields: row[PIPE.stages]. A bubble series (bubble_series) carries its
# rows' workload, stages and variant under the same names.
PIPE = PIPELINE.names
VARIANT_ORDER = ("gpipe", "gpipe+recompute", "1f1b", "torch-gpipe", "torch-1f1b")
VARIANT_COLORS = {"gpipe": "#1f77b4", "gpipe+recompute": "#7fb2de", "1f1b": "#ff7f0e",
                  "torch-gpipe": "#2ca02c", "torch-1f1b": "#d62728"}


# --- analysis --------------------------------------------------------------------------------


def _variant_rank(variant: str) -> int:
    return VARIANT_ORDER.index(variant) if variant in VARIANT_ORDER else len(VARIANT_ORDER)


def pipeline_rows(rows: Sequence[dict]) -> list[dict]:
    """One row per (machine, workload, p, m, variant): times, bubble against theory, memory."""
    table = []
    for row in of_kind(rows, PIPELINE.name):
        bubble = row.get(PIPE.bubble_fraction)
        theory = row.get(PIPE.bubble_theory)
        peaks = row.get(PIPE.peak_memory_mib) or []
        table.append({
            **row, "setting": f"p={row['stages']}, m={row['microbatches']}",
            "step_text": interval_text(row.get(PIPE.step_ms_estimate)),
            "bubble_text": interval_text(row.get(PIPE.bubble_estimate)) if bubble is not None
            else "not measured (one opaque library call)",
            "bubble_minus_theory": "—" if bubble is None or theory is None
            else fmt((bubble - theory) * 100),
            "memory_text": ", ".join(fmt(p) for p in peaks) if any(p is not None for p in peaks)
            else "n/a (CPU)",
        })
    return sorted(table, key=lambda r: (r["machine"], r[PIPE.workload], r[PIPE.stages],
                                        r[PIPE.microbatches], _variant_rank(r[PIPE.variant])))


def bubble_series(rows: Sequence[dict]) -> list[dict]:
    """Per (machine, workload, p, variant) with a measured bubble: points sorted by m."""
    series: dict[tuple, list] = defaultdict(list)
    for row in of_kind(rows, PIPELINE.name):
        if row.get(PIPE.bubble_fraction) is None:
            continue
        estimate = row.get(PIPE.bubble_estimate) or {}
        series[row["machine"], row[PIPE.workload], row[PIPE.stages], row[PIPE.variant]].append(
            (row[PIPE.microbatches], row[PIPE.bubble_fraction], estimate.get("low"),
             estimate.get("high")))
    return [{"machine": machine, PIPE.workload: workload, PIPE.stages: stages,
             PIPE.variant: variant, "points": sorted(points)}
            for (machine, workload, stages, variant), points in sorted(
                series.items(), key=lambda item: (*item[0][:3], _variant_rank(item[0][3])))]


# --- figures ---------------------------------------------------------------------------------


@figures._styled
def bubble_figure(series: Sequence[dict]) -> figures.Image:
    """Measured bubble against m per variant, the theory (p − 1)/(m + p − 1) dashed."""
    panel_of = lambda s: (s["machine"], s[PIPE.workload], s[PIPE.stages])
    panels = sorted({panel_of(s) for s in series})
    fig, axes = figures._figure(1, len(panels), height=2.6, sharey=True)
    for ax, (machine, workload, stages) in zip(axes[0], panels):
        ms = sorted({m for s in series if panel_of(s) == (machine, workload, stages)
                     for m, *_ in s["points"]})
        grid = range(int(ms[0]), int(ms[-1]) + 1)  # micro-batch counts are whole numbers
        ax.plot(grid, [bubble_theory(stages, m) for m in grid], "--", color="#333333",
                linewidth=1, label="(p−1)/(m+p−1)")
        for s in series:
            if panel_of(s) != (machine, workload, stages):
                continue
            m, value, low, high = zip(*s["points"])
            errors = [[v - lo if lo is not None else 0 for v, lo in zip(value, low)],
                      [hi - v if hi is not None else 0 for v, hi in zip(value, high)]]
            ax.errorbar(m, value, yerr=errors, marker="o", markersize=3, capsize=2,
                        linewidth=1, color=VARIANT_COLORS.get(s[PIPE.variant]),
                        label=s[PIPE.variant])
        ax.set_xscale("log", base=2)
        ax.set_xticks(ms, [str(m) for m in ms])
        ax.set_ylim(0, 1)
        ax.set_xlabel("micro-batches m")
        ax.set_title(f"{machine}: {workload}, p = {stages}", loc="left")
    axes[0][0].set_ylabel("bubble fraction")
    axes[0][-1].legend(loc="upper right")
    return figures._save(fig)


# --- the section -----------------------------------------------------------------------------

PIPELINE_COLUMNS = (
    text_column("machine"), text_column(PIPE.workload),
    text_column("setting", "stages, m", nowrap=True), text_column(PIPE.variant),
    text_column("step_text", "step ms [95% CI]"),
    Column.of(PIPELINE.field.samples_per_s, "throughput"),
    text_column("bubble_text", "bubble [95% CI]"),
    Column.of(PIPELINE.field.bubble_theory, "theory"),
    text_column("bubble_minus_theory", "bubble − theory (points)"),
    text_column("memory_text", "step memory per stage (MiB)"),
    Column.of(PIPELINE.field.max_abs_err_vs_single, "max |w − w_single|"),
)
def _definitions() -> list[dict]:
    return [{"name": f.name, "unit": f.unit, "definition": f.definition}
            for f in (*PIPELINE_FIELDS, *HYBRID_FIELDS)]


def section(view: View) -> dict:
    """The pipeline section's context; ``empty`` when no row of PIPELINE_KINDS was loaded."""
    rows, runs = view.rows, view.runs
    found = [r for r in rows if r.get("kind") in PIPELINE_KINDS]
    out: dict = {"empty": not found, "definitions": _definitions(), "pipeline_table": None,
                 "bubble_figure": None, "pipeline_comparisons": None}
    if pipelined := pipeline_rows(rows):
        out["pipeline_table"] = make_table(
            "tab-pipeline", "Pipeline schedules, one stage per rank: step time (per round the "
            "slowest stage's median step; median over rounds with its 95% interval), bubble "
            "measured from every stage's timeline beside the theory, and the memory one step "
            "adds per stage; every variant was checked against single-device training first. "
            + how_text(pipelined, runs), PIPELINE_COLUMNS, pipelined,
            placement=Placement("every pipeline schedule and setting"))
    if series := bubble_series(rows):
        out["bubble_figure"] = make_figure(
            "fig-pipeline-bubble", bubble_figure(series), "Measured bubble fraction against the "
            "number of micro-batches m (median over rounds, 95% interval as bars) and the "
            "theory (p − 1)/(m + p − 1), dashed. " + how_text(of_kind(rows, "pipeline"), runs),
            "Bubble fraction against micro-batches with the theory curve")
    out["pipeline_comparisons"] = comparison_table(
        rows, "pipeline_comparison", "tab-pipeline-compare", "This suite's schedules against "
        "torch.distributed.pipelining on the same split, and GPipe with recompute against "
        "without")
    out.update(hybrid.section_parts(view))
    return out
