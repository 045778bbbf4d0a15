"""The report's pipeline and CPU–GPU hybrid section: analysis, figures, and the section.

Analysis functions are pure (rows in, lists of dicts out); figures take their output and
return images (matplotlib, Agg); ``section`` assembles the template's context. Rows are
``analysis.benchmark_rows`` of the kinds in PIPELINE_KINDS (suite/bench_pipeline.py and
suite/bench_hybrid.py write them); definitions are quoted from impl/pipeline/measure.py and
impl/hybrid/__init__.py.

    context = section(rows, runs)   # {"empty": bool, "pipeline_table": Table | None, ...}
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from impl.hybrid import HYBRID_FIELDS
from impl.hybrid.gpt_forward import STUDY_TABLE
from impl.pipeline.measure import PIPELINE_FIELDS, bubble_theory
from reports import figures
from reports.analysis import PIPELINE_KINDS
from reports.captions import how_text, make_figure
from reports.format import Column, fmt, make_table, text_column

VARIANT_ORDER = ("gpipe", "gpipe+recompute", "1f1b", "torch-gpipe", "torch-1f1b")
VARIANT_COLORS = {"gpipe": "#1f77b4", "gpipe+recompute": "#7fb2de", "1f1b": "#ff7f0e",
                  "torch-gpipe": "#2ca02c", "torch-1f1b": "#d62728", "cpu": "#7f7f7f",
                  "gpu": "#1f77b4", "coarse-hybrid": "#ff7f0e", "offload-overlap": "#2ca02c"}


# --- analysis --------------------------------------------------------------------------------


def of_kind(rows: Sequence[dict], kind: str) -> list[dict]:
    return [r for r in rows if r.get("kind") == kind]


def interval_text(estimate: dict | None, unit: str = "") -> str:
    """"−3.96 ms [−8.03, 0.665]": the value and its 95% interval (n/a where undefined)."""
    if not estimate or estimate.get("value") is None:
        return "n/a"
    low, high = estimate.get("low"), estimate.get("high")
    bounds = f" [{fmt(low)}, {fmt(high)}]" if low is not None and high is not None else ""
    return f"{fmt(estimate['value'])}{f' {unit}' if unit else ''}{bounds}"


def _variant_rank(variant: str) -> int:
    return VARIANT_ORDER.index(variant) if variant in VARIANT_ORDER else len(VARIANT_ORDER)


def pipeline_rows(rows: Sequence[dict]) -> list[dict]:
    """One row per (machine, workload, p, m, variant): times, bubble against theory, memory."""
    table = []
    for row in of_kind(rows, "pipeline"):
        bubble = row.get("bubble_fraction")
        theory = row.get("bubble_theory")
        peaks = row.get("peak_memory_mib") or []
        table.append({
            **row, "setting": f"p={row['stages']}, m={row['microbatches']}",
            "step_text": interval_text(row.get("step_ms_estimate")),
            "bubble_text": interval_text(row.get("bubble_estimate")) if bubble is not None
            else "not measured (one opaque library call)",
            "bubble_minus_theory": "—" if bubble is None or theory is None
            else fmt((bubble - theory) * 100),
            "memory_text": ", ".join(fmt(p) for p in peaks) if any(p is not None for p in peaks)
            else "n/a (CPU)",
        })
    return sorted(table, key=lambda r: (r["machine"], r["workload"], r["stages"],
                                        r["microbatches"], _variant_rank(r["variant"])))


def bubble_series(rows: Sequence[dict]) -> list[dict]:
    """Per (machine, workload, p, variant) with a measured bubble: points sorted by m."""
    series: dict[tuple, list] = defaultdict(list)
    for row in of_kind(rows, "pipeline"):
        if row.get("bubble_fraction") is None:
            continue
        estimate = row.get("bubble_estimate") or {}
        series[row["machine"], row["workload"], row["stages"], row["variant"]].append(
            (row["microbatches"], row["bubble_fraction"], estimate.get("low"),
             estimate.get("high")))
    return [{"machine": machine, "workload": workload, "stages": stages, "variant": variant,
             "points": sorted(points)}
            for (machine, workload, stages, variant), points in sorted(
                series.items(), key=lambda item: (*item[0][:3], _variant_rank(item[0][3])))]


def comparison_rows(rows: Sequence[dict], kind: str) -> list[dict]:
    """Every candidate-vs-reference pair of the comparison rows of ``kind``, flattened."""
    table = []
    for row in of_kind(rows, kind):
        setting = (f"{row['workload']}, p={row['stages']}, m={row['microbatches']}"
                   if kind == "pipeline_comparison"
                   else f"{row.get('study', '')}, {row['workload']}")
        for pair in row.get("comparisons") or []:
            table.append({"machine": row["machine"], "setting": setting,
                          "pair": f"{pair['candidate']} vs {pair['reference']}",
                          "difference": interval_text(pair.get("difference_ms"), "ms"),
                          "speedup": interval_text(pair.get("speedup"), "×"),
                          "verdict": pair.get("verdict"),
                          "rounds": (pair.get("difference_ms") or {}).get("rounds")})
    return table


def hybrid_rows(rows: Sequence[dict]) -> list[dict]:
    return [{**row, "step_text": interval_text(row.get("step_ms_estimate")),
             "error_text": "—" if row.get("max_abs_err_vs_reference") is None
             else fmt(row["max_abs_err_vs_reference"]),
             "imbalance_text": interval_text(row.get("residual_imbalance_estimate"))
             if row.get("residual_imbalance") is not None else "—",
             "shares_text": " / ".join(map(str, row["shares"])) if row.get("shares") else "—"}
            for row in of_kind(rows, "hybrid_step")]


def digits_rows(rows: Sequence[dict]) -> list[dict]:
    order = ("cpu", "gpu", "coarse-hybrid", "offload-overlap")
    table = []
    for row in of_kind(rows, "digits_curve"):
        curve = row.get("curve") or {}
        losses = curve.get("train_loss") or [None]
        table.append({**row, "final_train_loss": losses[-1],
                      "accuracy_pct": None if row.get("final_test_accuracy") is None
                      else row["final_test_accuracy"] * 100,
                      "criterion_text": "reference" if row["variant"] == "cpu"
                      else "n/a (no cpu curve in this run)"
                      if row.get("loss_curve_max_diff_vs_cpu") is None
                      else f"{fmt(row['loss_curve_max_diff_vs_cpu'])} "
                           f"(≤ {fmt(row.get('loss_curve_tolerance'))})"})
    return sorted(table, key=lambda r: (r["machine"], order.index(r["variant"])
                                        if r["variant"] in order else len(order)))


def gpt_rows(rows: Sequence[dict]) -> list[dict]:
    """This suite's forward times per machine and device, then the study's, as it printed."""
    table = [{"source": row["machine"], "device": row.get("device_name") or row["device"],
              "threads": row.get("threads"), "first": fmt(row.get("first_ms")),
              "steady": fmt(row.get("steady_ms")),
              "iterations": ", ".join(fmt(t) for t in row.get("iteration_ms") or [])}
             for row in of_kind(rows, "gpt_forward")]
    for study in STUDY_TABLE.values():
        low, high = study["steady_ms"]
        table.append({"source": "the study", "device": study["hardware"], "threads": "—",
                      "first": fmt(study["first_ms"]) if study["first_ms"] else "—",
                      "steady": fmt(low) if low == high else f"{fmt(low)}–{fmt(high)}",
                      "iterations": study["text"]})
    return table


# --- figures ---------------------------------------------------------------------------------


@figures._styled
def bubble_figure(series: Sequence[dict]) -> figures.Image:
    """Measured bubble against m per variant, the theory (p − 1)/(m + p − 1) dashed."""
    panels = sorted({(s["machine"], s["workload"], s["stages"]) for s in series})
    fig, axes = figures._figure(1, len(panels), height=2.6, sharey=True)
    for ax, (machine, workload, stages) in zip(axes[0], panels):
        ms = sorted({m for s in series if (s["machine"], s["workload"], s["stages"]) ==
                     (machine, workload, stages) for m, *_ in s["points"]})
        grid = [ms[0] + (ms[-1] - ms[0]) * i / 100 for i in range(101)]
        ax.plot(grid, [bubble_theory(stages, m) for m in grid], "--", color="#333333",
                linewidth=1, label="(p−1)/(m+p−1)")
        for s in series:
            if (s["machine"], s["workload"], s["stages"]) != (machine, workload, stages):
                continue
            m, value, low, high = zip(*s["points"])
            errors = [[v - lo if lo is not None else 0 for v, lo in zip(value, low)],
                      [hi - v if hi is not None else 0 for v, hi in zip(value, high)]]
            ax.errorbar(m, value, yerr=errors, marker="o", markersize=3, capsize=2,
                        linewidth=1, color=VARIANT_COLORS.get(s["variant"]), label=s["variant"])
        ax.set_xscale("log", base=2)
        ax.set_xticks(ms, [str(m) for m in ms])
        ax.set_ylim(0, 1)
        ax.set_xlabel("micro-batches m")
        ax.set_title(f"{machine}: {workload}, p = {stages}", loc="left")
    axes[0][0].set_ylabel("bubble fraction")
    axes[0][-1].legend(loc="upper right")
    return figures._save(fig)


@figures._styled
def curves_figure(curves: Sequence[dict]) -> figures.Image:
    """Training loss (log scale) and test accuracy per epoch, one line per variant."""
    fig, axes = figures._figure(1, 2, height=2.5)
    loss_ax, accuracy_ax = axes[0]
    for row in curves:
        curve = row["curve"]
        epochs = range(1, len(curve["train_loss"]) + 1)
        style = {"color": VARIANT_COLORS.get(row["variant"]), "linewidth": 1,
                 "label": f"{row['variant']} ({row['device']})"}
        loss_ax.plot(epochs, curve["train_loss"], **style)
        accuracy_ax.plot(epochs, [a * 100 for a in curve["test_accuracy"]], **style)
    loss_ax.set_yscale("log")
    loss_ax.set_xlabel("epoch")
    loss_ax.set_ylabel("training loss (cross-entropy)")
    accuracy_ax.set_xlabel("epoch")
    accuracy_ax.set_ylabel("test accuracy (%)")
    accuracy_ax.axhline(95, color="#999999", linewidth=0.6, linestyle=":")
    accuracy_ax.legend(loc="lower right")
    return figures._save(fig)


# --- the section -----------------------------------------------------------------------------

PIPELINE_COLUMNS = (
    text_column("machine", "machine"), text_column("workload", "workload"),
    text_column("setting", "stages, m", nowrap=True), text_column("variant", "variant"),
    text_column("step_text", "step ms [95% CI]"), Column("samples_per_s", "throughput", "1/s"),
    text_column("bubble_text", "bubble [95% CI]"), Column("bubble_theory", "theory"),
    text_column("bubble_minus_theory", "bubble − theory (points)"),
    text_column("memory_text", "step memory per stage (MiB)"),
    Column("max_abs_err_vs_single", "max |w − w_single|"),
)
COMPARISON_COLUMNS = (
    text_column("machine", "machine"), text_column("setting", "setting"),
    text_column("pair", "candidate vs reference"),
    text_column("difference", "difference [95% CI]"), text_column("speedup", "speedup [95% CI]"),
    text_column("verdict", "verdict"), Column("rounds", "rounds"),
)
HYBRID_COLUMNS = (
    text_column("machine", "machine"), text_column("study", "strategy"),
    text_column("workload", "workload"), text_column("variant", "variant"),
    text_column("device", "device"), text_column("step_text", "step ms [95% CI]"),
    Column("samples_per_s", "throughput", "1/s"), text_column("shares_text", "rows per worker"),
    text_column("imbalance_text", "residual imbalance [95% CI]"),
    text_column("error_text", "max |w − w_ref|"), Column("tolerance", "tolerance"),
)
DIGITS_COLUMNS = (
    text_column("machine", "machine"), text_column("variant", "variant"),
    text_column("device", "device"), Column("epochs", "epochs"),
    Column("final_train_loss", "final training loss"),
    Column("accuracy_pct", "test accuracy", "%"),
    text_column("criterion_text", "max loss difference to cpu"),
)
GPT_COLUMNS = (
    text_column("source", "measured by"), text_column("device", "device"),
    text_column("threads", "threads"), text_column("first", "first iteration (ms)"),
    text_column("steady", "then, median (ms)"), text_column("iterations", "every iteration (ms)"),
)


def _definitions() -> list[dict]:
    return [{"name": f.name, "unit": f.unit, "definition": f.definition}
            for f in (*PIPELINE_FIELDS, *HYBRID_FIELDS)]


def comparison_table(rows: Sequence[dict], kind: str, table_id: str, what: str):
    """The comparisons of ``kind`` as one table, or None when there are none."""
    compared = comparison_rows(rows, kind)
    if not compared:
        return None
    return make_table(table_id, f"{what}, measured in the same rounds: median paired "
                      "difference of step times and speedup (reference / candidate) with 95% "
                      "bootstrap intervals; a verdict only where the difference's interval "
                      "excludes zero.", COMPARISON_COLUMNS, compared)


def section(rows: Sequence[dict], runs: Sequence) -> dict:
    """The pipeline section's context; ``empty`` when no row of PIPELINE_KINDS was loaded."""
    found = [r for r in rows if r.get("kind") in PIPELINE_KINDS]
    out: dict = {"empty": not found, "definitions": _definitions(), "pipeline_table": None,
                 "bubble_figure": None, "pipeline_comparisons": None, "hybrid_table": None,
                 "hybrid_comparisons": None, "digits_table": None, "digits_figures": [],
                 "gpt_table": None}
    if pipelined := pipeline_rows(rows):
        out["pipeline_table"] = make_table(
            "tab-pipeline", "Pipeline schedules, one stage per rank: step time (per round the "
            "slowest stage's median step; median over rounds with its 95% interval), bubble "
            "measured from every stage's timeline beside the theory, and the memory one step "
            "adds per stage; every variant was checked against single-device training first. "
            + how_text(pipelined, runs), PIPELINE_COLUMNS, pipelined)
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
    if hybrid := hybrid_rows(rows):
        out["hybrid_table"] = make_table(
            "tab-hybrid", "CPU–GPU hybrid steps: fine-grained (offload-overlap, against the same "
            "copies and host Adam after backward, and against Adam on the device) and "
            "coarse-grained (two workers sharing each batch, against each alone); weights "
            "checked against Adam on the CPU in fp32 before timing. "
            + how_text(hybrid, runs), HYBRID_COLUMNS, hybrid)
    out["hybrid_comparisons"] = comparison_table(
        rows, "hybrid_comparison", "tab-hybrid-compare", "The hybrids against their references")
    if digits := digits_rows(rows):
        out["digits_table"] = make_table(
            "tab-digits", f"The study's MLP on handwritten digits ({digits[0].get('data')}; "
            "Adam, lr 1e-3, batch 100): final training loss and test accuracy; the hybrids' "
            "curves against the CPU curve (largest per-epoch loss difference in units of the "
            "CPU's first-epoch loss). " + how_text(digits, runs), DIGITS_COLUMNS, digits)
        for machine in dict.fromkeys(r["machine"] for r in digits):
            mine = [r for r in digits if r["machine"] == machine]
            out["digits_figures"].append(make_figure(
                f"fig-digits-{machine}", curves_figure(mine), f"Training loss and test accuracy "
                f"per epoch on {machine}, {mine[0]['epochs']} epochs (the study ran "
                f"{mine[0].get('study_epochs')}). " + how_text(mine, runs),
                f"Digits MLP loss and accuracy curves, {machine}"))
    if gpt := of_kind(rows, "gpt_forward"):
        out["gpt_table"] = make_table(
            "tab-gpt-forward", "The study's decoder (vocabulary 10000, context 1000, 10 layers, "
            "1 head, dropout 0.2; width 384 and batch 2 chosen here): time of each training "
            "forward (logits and loss, then a device sync) in a fresh process, the first "
            "iteration apart, beside the study's table. " + how_text(gpt, runs),
            GPT_COLUMNS, gpt_rows(rows))
    return out
