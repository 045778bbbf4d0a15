"""The course study, reproduced (template sections/course-study.html.j2): the synthetic model's
sequential and overlapped steps against the study's reported 30% speedup, beside the real
strategies' measured speedups, and the simulated step's Gantt chart.
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.metrics import ideal_speedup
from impl.rows.kinds import COMPARISON, PAIRED, STEP, SYNTHETIC
from impl.rows.report_records import TRACED
from reports import analysis, cells, figures, traces
from reports.captions import (
    Machines,
    how_text,
    make_figure,
)
from reports.figures import Image, _figure, _save, _styled, color
from reports.format import NA, Column, fmt, fmt_estimate, fmt_pct, make_table, text_column
from reports.sections.methodology import IDEAL_DOC
from reports.sections.overlap import cell_text, saved_pct
from reports.view import View

# The simulation's rows (row[SIM.chunks]); a cell is a comparison row; the ratios measured
# before interleaving (cells.old_format_ratios) are keyed as the step rows they come from.
SIM, CELL, STEP_ROW = SYNTHETIC.names, COMPARISON.names, STEP.names
STUDY_SPEEDUP_PCT = 30.0  # the course study's reported speedup (docs/ANCHORS.md)


def study_text(rows: Sequence[dict]) -> str | None:
    """The abstract's sentence on the course study: its simulated speedup beside the real
    one at its own ratio."""
    simulated = analysis.synthetic(rows)
    nearest = cells.nearest_to_study(rows)
    if not simulated and not nearest:
        return None
    text = (f"The course study reported up to ~{STUDY_SPEEDUP_PCT:g}% from a simulation with "
            f"sleeps at compute:communication {cells.STUDY_COMPUTE_TO_COMM:g}")
    if simulated:
        low = min(simulated, key=lambda r: r[SIM.speedup_pct])
        high = max(simulated, key=lambda r: r[SIM.speedup_pct])
        text += (f" (rerun here: {fmt_pct(low['speedup_pct'])} at K = {low['chunks']} to "
                 f"{fmt_pct(high['speedup_pct'])} at K = {high['chunks']}, "
                 f"{len(simulated)} runs of the simulation)" if len(simulated) > 1 else
                 f" (rerun here: {fmt_pct(low['speedup_pct'])} at K = {low['chunks']})")
    if nearest:
        entry = nearest[0]
        cell = entry["cell"]
        chunked = cell[CELL.strategies].get("chunked")
        best = entry["best"]
        text += (f"; the measured cell nearest that ratio ({cell['machine']}, {cell_text(cell)}, "
                 f"compute:communication {fmt_estimate(entry['ratio'])})")
        if chunked:
            text += (f" saves {fmt_estimate(saved_pct(chunked['vs_sequential']['speedup']))}% "
                     f"of sequential's time with chunked")
        if best != "chunked":
            saved = saved_pct(cells.figures(cell, best)["vs_sequential"]["speedup"])
            text += f" and {fmt_estimate(saved)}% with {best}, the fastest there"
    return text + "."


# The side-by-side table's columns in order, each key with its header; study_rows gives each
# row's cells in the same order.
STUDY_HEADERS = {"what": "the study's figure or claim", "study": "course study (sleeps)",
                 "simulated": "simulation, reproduced here",
                 "nearest": "real, at the study's ratio", "reference": "real, reference workload"}
STUDY_COLUMNS = tuple(text_column(key, header) for key, header in STUDY_HEADERS.items())


def _saved_text(cell: dict, strategy: str) -> str:
    found = cell[CELL.strategies].get(strategy)
    if not found:
        return f"{strategy} not measured in that cell"
    versus = found["vs_sequential"]
    return (f"{strategy}: {fmt_estimate(saved_pct(versus[PAIRED.speedup]))}% "
            f"({cells.verdict_text(versus[PAIRED.verdict], 'sequential')})")


def study_rows(rows: Sequence[dict], machines: Machines) -> list[dict]:
    """The side-by-side table: each claim of the study, the simulation reproduced here, the
    real cell nearest the study's ratio and the real reference workload."""
    simulated = analysis.synthetic(rows)
    nearest = cells.nearest_to_study(rows)
    reference = cells.reference_ratios(rows)
    old = cells.old_format_ratios(rows)
    near = nearest[0] if nearest else None
    where = (f"{near['cell']['machine']}, {cell_text(near['cell'])}" if near else None)
    shown = [f"{fmt_estimate(r['ratio'])} ({r['cell']['machine']}, {cell_text(r['cell'])})"
             for r in reference]
    if old and not any(r["cell"]["machine"] in machines.gpu for r in reference):
        first = max(old, key=lambda o: (o[STEP_ROW.profile] == "nvlink", o[STEP_ROW.world_size]))
        shown.append(f"≈ {fmt(first['ratio'])} ({first['machine']}, {first['profile']}, "
                     f"{first['world_size']} GPUs, {REFERENCE_NAME}: compute "
                     f"{fmt(first['compute_only_ms'])} ms, all-reduce "
                     f"{fmt(first['comm_only_ms'])} ms; measured before interleaving, "
                     f"no interval)")
    ref_ratio = "; ".join(shown) or NA
    sims = "; ".join(f"{fmt_pct(r['speedup_pct'])} at K = {r['chunks']} ({r['machine']}, "
                     f"× {fmt(r['scale'])} time scale)" for r in simulated) or NA
    ideal = float(ideal_speedup(cells.STUDY_COMPUTE_TO_COMM))
    claims = [
        ("compute : communication", "1.5 (300 ms compute, 200 ms communication per chunk)",
         "1.5 (the same sleeps, scaled)",
         f"{fmt_estimate(near['ratio'])} ({where})" if near else NA, ref_ratio),
        ("time saved by overlap (chunked, phase 4)", f"up to ~{STUDY_SPEEDUP_PCT:g}%", sims,
         _saved_text(near["cell"], "chunked") if near else NA,
         _saved_text(reference[0]["cell"], "chunked") if reference else
         "no interleaved measurement"),
        ("time saved by a communication thread (threaded, phase 2)",
         "overlap by a second thread (OpenMP sections)",
         "the same model: the overlapped run is a second thread",
         _saved_text(near["cell"], "threaded") if near else NA,
         _saved_text(reference[0]["cell"], "threaded") if reference else
         "no interleaved measurement"),
        ("fastest strategy at that ratio", "not compared (no DDP)", NA,
         _saved_text(near["cell"], near["best"]) if near else NA,
         _saved_text(reference[0]["cell"], cells.best_strategy(reference[0]["cell"]))
         if reference else "no interleaved measurement"),
        ("perfect overlap at that ratio (ideal)",
         f"{fmt_pct(100 * (1 - 1 / ideal))} at 1.5 (impl.metrics.ideal_speedup)", NA,
         (f"{fmt_pct(100 * (1 - 1 / float(ideal_speedup(near['ratio']['value']))))}"
          f" at the measured ratio") if near else NA,
         NA),
    ]
    return [dict(zip(STUDY_HEADERS, claim, strict=True)) for claim in claims]


REFERENCE_NAME = cells.REFERENCE_WORKLOADS[0]


SYNTHETIC_COLUMNS = (text_column("machine"), Column(SIM.chunks, "K"),
                     Column.of(SYNTHETIC.field.scale, "time scale"),
                     Column.of(SYNTHETIC.field.sequential_ms, "one after the other"),
                     Column.of(SYNTHETIC.field.step_ms, "overlapped"),
                     text_column("spread", "overlapped, round range", nowrap=True),
                     Column.of(SYNTHETIC.field.speedup_pct, "time saved"))


def section_study(view: View) -> dict:
    """The chapter "The course study, reproduced": the claims beside real measurements, the
    regime figure and the sleep-based simulation."""
    rows, runs = view.rows, view.runs
    simulated = view.machines.in_order(analysis.synthetic(rows))
    points = cells.regime_points(rows)
    out: dict = {"empty": not simulated and not points, "summary": study_text(rows),
                 "table": None, "figures": [],
                 "synthetic": None, "synthetic_figures": [], TRACED.timelines: [],
                 "ideal_doc": IDEAL_DOC, "ratio": cells.STUDY_COMPUTE_TO_COMM}
    if out["empty"]:
        return out
    out["table"] = make_table(
        "tab-study", "The course study's claims beside this suite. The study's numbers come "
        "from sleeps (docs/ANCHORS.md); the simulation column reruns that model "
        "(suite/bench_synthetic.py); the real columns are interleaved measurements with 95% "
        "intervals: the cell whose measured compute:communication is nearest the study's 1.5, "
        "and the reference workload. Time saved = 100·(1 − step/sequential).", STUDY_COLUMNS,
        study_rows(rows, view.machines), note=lambda *_: None)
    by_fabric: dict[tuple, list[dict]] = {}
    for point in points:
        by_fabric.setdefault(cells.fabric_key(point["cell"]), []).append(point)
    if by_fabric:
        panels = [{"title": f"{machine} · {profile}", "points": found}
                  for (machine, profile), found in sorted(by_fabric.items())]
        used = [p["cell"] for p in points]
        out["figures"].append(make_figure(
            "fig-regime", figures.regime(panels, cells.STUDY_COMPUTE_TO_COMM),
            f"Speedup over sequential against the measured compute:communication ratio "
            f"(compute-only / comm-only of the same cell), per machine and fabric: every "
            f"strategy of every cell with K > 1 and more than one rank, both axes with their "
            f"95% intervals, under the ideal curve of a perfect overlap with sequential = "
            f"compute + comm. The dashed line is the course study's simulated ratio 1.5. "
            f"{how_text(used, runs)}", "Speedup against compute:communication"))
    if simulated:
        for row in simulated:
            times = sorted(row.get("round_s") or [])
            row["spread"] = (f"{fmt(times[0] * 1e3)}–{fmt(times[-1] * 1e3)} ms" if times
                             else NA)
        machines = ", ".join(view.machines.words[label]
                             for label in dict.fromkeys(r["machine"] for r in simulated))
        how = how_text(simulated, runs)
        out["synthetic"] = make_table(
            "tab-synthetic", f"Simulation (sleep-based), not a measurement: the course study's "
            f"model, per chunk 300 ± 50 ms of 'compute' and 200 ± 30 ms of 'communication' "
            f"scaled by the time scale, on {machines}; round range: the fastest and slowest "
            f"overlapped round. {how}", SYNTHETIC_COLUMNS, simulated)
        out["synthetic_figures"].append(make_figure(
            "fig-synthetic", synthetic_figure(simulated, STUDY_SPEEDUP_PCT),
            f"Simulation (sleep-based), not a measurement: simulated step one after the other "
            f"and overlapped by a second thread, and the time saved against the course "
            f"study's ~{STUDY_SPEEDUP_PCT:g}% (on {machines}). {how}",
            "Simulated speedup of the sleep-based model"))
        largest = max(simulated, key=lambda r: (r[SIM.chunks], r["machine"]))
        if timeline := largest.get(SIM.timeline):
            name = "traces/" + traces.file_name(largest["machine"], "synthetic",
                                                f"K{largest['chunks']}")
            out[TRACED.timelines].append({
                TRACED.variant: "synthetic", TRACED.timeline: timeline, TRACED.file: name,
                TRACED.process: "simulation (sleeps)",
                TRACED.about: {"machine": largest["machine"], SIM.chunks: largest[SIM.chunks],
                               TRACED.variant: "synthetic (sleep-based)"}})
            out["synthetic_figures"].append(make_figure(
                "fig-synthetic-gantt", figures.gantt([{
                    "title": f"simulation, K = {largest['chunks']} ({largest['machine']}): "
                             f"sleeps, no compute and no communication",
                    "bars": analysis.timeline_bars(timeline), "note": None}]),
                f"Simulation (sleep-based), not a measurement: the overlapped timeline of the "
                f"simulated step with K = {largest['chunks']} on "
                f"{view.machines.words[largest['machine']]} (Perfetto trace: {name}). "
                f"{how_text([largest], runs)}", "Gantt chart of the simulated step"))
    return out


@_styled
def synthetic_figure(rows: Sequence[dict], study_pct: float = 30.0) -> Image:
    """Simulated sequential vs overlapped time per K, with the speedup and the study's ~30%."""
    fig, axes = _figure(1, 2, height=2.1)
    left, right = axes[0]
    labels = [f"{r['machine']}\nK={r['chunks']}" for r in rows]
    positions = range(len(rows))
    left.bar([p - 0.2 for p in positions], [r[SIM.sequential_ms] for r in rows], 0.4,
             color="#aaaaaa", label="one after the other")
    left.bar([p + 0.2 for p in positions], [r[SIM.step_ms] for r in rows], 0.4,
             color=color("synthetic"), label="overlapped (2 threads)")
    left.set_xticks(list(positions), labels)
    left.set_ylabel("simulated step (ms, sleeps)")
    left.legend(frameon=False, ncols=2, loc="lower left", bbox_to_anchor=(0, 1.0))
    right.bar(list(positions), [r[SIM.speedup_pct] for r in rows], 0.5,
              color=color("synthetic"))
    right.axhline(study_pct, color="black", linestyle="--", linewidth=0.8)
    right.set_ylim(0, max([study_pct, *(r[SIM.speedup_pct] for r in rows)]) * 1.25)
    right.text(-0.4, study_pct * 1.03, f"course study: ~{study_pct:g}%", ha="left",
               va="bottom", fontsize=6.5)
    right.set_xticks(list(positions), labels)
    right.set_ylabel("speedup (%)")
    return _save(fig)
