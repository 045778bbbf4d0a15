"""The tensor-parallel section: analysis (pure functions of result rows), figures, section.

Rows are suite/bench_tp.py's: ``extra_info.kind`` "tensor_parallel" (one per variant: preset,
GEMM backend, scaling, schedule, world size, with ``estimates`` {value, low, high, rounds} for
each field of impl/tensor_parallel/metrics.py's TP_FIELDS) and "tensor_parallel_comparison"
(one per cell, every per-round value; kept in the results, not drawn here).

    section = tensor_parallel.section(view)   # the template's ``tensor_parallel``
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from impl.rows.kinds import TENSOR_PARALLEL
from impl.rows.report_records import BLOCKS, GROUP
from impl.tensor_parallel.metrics import TP_FIELDS
from reports import analysis, figures
from reports.captions import how_text, make_figure
from reports.figures import GEMM_ROW, Image, _figure, _save, _styled, version_color
from reports.format import Placement, Table, fmt, make_table, text_column
from reports.sections.methodology import quoted
from reports.view import View

TP = TENSOR_PARALLEL.names  # the variant rows' fields: row[TP.preset]
SCHEDULE_STYLES = {"sync": "-", "overlapped": "--", "fused": ":"}
EMPTY_LINE = ("No tensor-parallel results in the loaded result files (no benchmark with "
              "extra_info.kind 'tensor_parallel'; suite/bench_tp.py makes them).")


# --- analysis -------------------------------------------------------------------------------------


def variant_rows(rows: Sequence[dict]) -> list[dict]:
    """The variant rows, ordered by machine, preset, backend, scaling, world size, schedule."""
    schedules = list(SCHEDULE_STYLES)
    order = lambda r: (r["machine"], r[TP.preset], r[TP.gemm_backend], r[TP.scaling],
                       r[TP.world_size], schedules.index(r[TP.schedule])
                       if r[TP.schedule] in schedules else len(schedules))
    return sorted((r for r in rows if TENSOR_PARALLEL.holds(r) and r.get(TP.estimates)), key=order)


def value(row: dict | None, field: str) -> float | None:
    return ((row or {}).get(TP.estimates) or {}).get(field, {}).get("value")


def interval_text(row: dict | None, field: str) -> str | None:
    """"0.812 [0.79–0.83]" (the 95% interval), the value alone without one, None when absent."""
    estimate = ((row or {}).get(TP.estimates) or {}).get(field) or {}
    if estimate.get("value") is None:
        return None
    if estimate.get("low") is None or estimate.get("high") is None:
        return fmt(estimate["value"])
    return f"{fmt(estimate['value'])} [{fmt(estimate['low'])}–{fmt(estimate['high'])}]"


def find(rows: Sequence[dict], **match) -> dict | None:
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)


def single(rows: Sequence[dict], row: dict) -> dict | None:
    """The 1-rank row of ``row``'s cell (the reference of every efficiency)."""
    return find(rows, machine=row["machine"], preset=row[TP.preset],
                gemm_backend=row[TP.gemm_backend], scaling="single")


def cells(rows: Sequence[dict]) -> list[tuple[str, str]]:
    """(machine, preset) pairs in order."""
    return list(dict.fromkeys((r["machine"], r[TP.preset]) for r in rows))


def scaling_series(rows: Sequence[dict], machine: str, preset: str, scaling: str) -> list[dict]:
    """Per (backend, schedule): efficiency points against world size, the 1-rank point first;
    each series keyed as its variant rows are (series[TP.gemm_backend])."""
    series = defaultdict(list)
    for row in rows:
        if (row["machine"], row[TP.preset], row[TP.scaling]) == (machine, preset, scaling):
            series[row[TP.gemm_backend], row[TP.schedule]].append(row)
    out = []
    for (backend, schedule), members in series.items():
        base = single(rows, members[0])
        points = ([{"world": 1, "value": 1.0, "low": None, "high": None}] if base else [])
        points += [{"world": r[TP.world_size], **r[TP.estimates][TP.scaling_efficiency]}
                   for r in members if value(r, TP.scaling_efficiency) is not None]
        out.append({TP.gemm_backend: backend, TP.schedule: schedule, "points": points})
    return out


def comm_share_points(rows: Sequence[dict], machine: str, preset: str) -> list[dict]:
    """Sync, strong scaling: communication share of the step against the backend's GEMM speed
    (TFLOP/s per GPU of its 1-rank block), one point per backend and world size (its backend
    keyed as the variant row's)."""
    points = []
    for row in rows:
        if ((row["machine"], row[TP.preset], row[TP.scaling], row[TP.schedule])
                != (machine, preset, "strong", "sync")) or value(row, TP.comm_fraction) is None:
            continue
        base = single(rows, row)
        if value(base, TP.tflops_per_gpu) is None:
            continue
        points.append({TP.gemm_backend: row[TP.gemm_backend], "world": row[TP.world_size],
                       "x": base[TP.estimates][TP.tflops_per_gpu],
                       "y": row[TP.estimates][TP.comm_fraction]})
    return points


def overlap_rows(rows: Sequence[dict]) -> list[dict]:
    """overlapped (and fused) against sync, per cell, scaling and world size."""
    out = []
    for row in rows:
        if row[TP.schedule] != "overlapped":
            continue
        key = {k: row[k] for k in ("machine", TP.preset, TP.gemm_backend, TP.scaling,
                                              TP.world_size)}
        sync, fused = find(rows, **key, schedule="sync"), find(rows, **key, schedule="fused")
        out.append({**key, "label": f"{row['preset']} · {row['scaling']} · w{row['world_size']} "
                                    f"· {row['gemm_backend']}",
                    "sync_ms": interval_text(sync, TP.step_ms),
                    "overlapped_ms": interval_text(row, TP.step_ms),
                    "speedup": interval_text(row, TP.overlap_speedup),
                    "speedup_estimate": row[TP.estimates][TP.overlap_speedup],
                    "verdict": (row.get(TP.verdicts) or {}).get(TP.overlap_speedup),
                    "fused_ms": interval_text(fused, TP.step_ms),
                    "fused_speedup_estimate": (fused or {}).get(TP.estimates, {}).get(
                        TP.overlap_speedup),
                    "vs_fused": interval_text(row, TP.speedup_vs_fused),
                    "vs_fused_verdict": (row.get(TP.verdicts) or {}).get(TP.speedup_vs_fused)})
    return out


def efficiency_rows(rows: Sequence[dict]) -> list[dict]:
    """Per machine, preset and GEMM backend: its 1-rank GEMM speed and strong-scaling
    efficiency at 2 and 4 ranks, sync and overlapped."""
    out = []
    for base in rows:
        if base[TP.scaling] != "single":
            continue
        entry = {k: base[k] for k in ("machine", TP.preset, TP.gemm_backend)}
        entry[TP.tflops_per_gpu] = interval_text(base, TP.tflops_per_gpu)
        entry["gemm_tflops"] = value(base, TP.tflops_per_gpu)
        for world in (2, 4):
            for schedule in ("sync", "overlapped"):
                row = find(rows, **entry_key(entry), scaling="strong", world_size=world,
                           schedule=schedule)
                entry[f"{schedule}_w{world}"] = interval_text(row, TP.scaling_efficiency)
                entry[f"{schedule}_w{world}_estimate"] = (row or {}).get(
                    TP.estimates, {}).get(TP.scaling_efficiency)
        out.append(entry)
    return out


def entry_key(entry: dict) -> dict:
    return {k: entry[k] for k in ("machine", TP.preset, TP.gemm_backend)}


def _disjoint(a: dict, b: dict) -> bool:
    if None in (a.get("low"), a.get("high"), b.get("low"), b.get("high")):
        return False
    return a["high"] < b["low"] or b["high"] < a["low"]


def question4(efficiency: Sequence[dict]) -> list[str]:
    """One sentence per machine and preset answering "how does a faster GEMM change multi-GPU
    scaling efficiency?" from the strong-scaling efficiency of the sync schedule at the largest
    world size measured with two or more GEMM backends."""
    sentences, one_rank = [], []
    for machine, preset in dict.fromkeys((e["machine"], e[TP.preset]) for e in efficiency):
        mine = [e for e in efficiency if (e["machine"], e[TP.preset]) == (machine, preset)
                and e["gemm_tflops"] is not None]
        world = next((w for w in (4, 2) if sum(e[f"sync_w{w}_estimate"] is not None
                                               and e[f"sync_w{w}_estimate"]["value"] is not None
                                               for e in mine) >= 2), None)
        if world is None:
            measured = sorted({e[TP.gemm_backend] for e in mine})
            why = (f"only the {', '.join(measured)} GEMM backend was measured above one rank"
                   if any(e["sync_w2"] or e["sync_w4"] for e in mine)
                   else "no run with more than one rank")
            (sentences if "above one rank" in why else one_rank).append(
                f"{machine}, {preset}: no data to answer question 4 ({why}).")
            continue
        usable = sorted((e for e in mine if e[f"sync_w{world}"] is not None),
                        key=lambda e: e["gemm_tflops"])
        slow, fast = usable[0], usable[-1]
        low_eff = slow[f"sync_w{world}_estimate"]["value"]
        high_eff = fast[f"sync_w{world}_estimate"]["value"]
        verb = "lowers" if high_eff < low_eff else "raises"
        separated = _disjoint(slow[f"sync_w{world}_estimate"], fast[f"sync_w{world}_estimate"])
        sentences.append(
            f"{machine}, {preset}, strong scaling to {world} ranks with the sync schedule: a "
            f"faster GEMM ({fast['gemm_backend']}, {fmt(fast['gemm_tflops'])} TFLOP/s per GPU "
            f"on one rank, against {slow['gemm_backend']}'s {fmt(slow['gemm_tflops'])}) {verb} "
            f"scaling efficiency from {slow[f'sync_w{world}']} to {fast[f'sync_w{world}']}"
            + ("." if separated else "; the 95% intervals overlap, so these rounds do not "
               "separate the two."))
    # Machines of one rank say nothing here where another machine scaled: left out then.
    return sentences or one_rank


def roofline_groups(rows: Sequence[dict], machine: str) -> list[dict]:
    """The block's whole GEMMs (sync schedule and 1 rank: not split into pieces), per rank's
    shape, as figures.roofline groups; the backend is the point's version colour."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        if row["machine"] != machine or row[TP.schedule] != "sync":
            continue
        version = "cublas" if row[TP.gemm_backend] == "torch" and row.get(TP.device_name) else (
            row[TP.gemm_backend])
        for gemm in row.get(TP.gemms) or []:
            if gemm.get(GEMM_ROW.tflops):  # keyed as a GEMM row (suite/bench_tp.py)
                groups[row[TP.dtype]].append({  # a point keyed as a GEMM row
                    GEMM_ROW.version: version,
                    GEMM_ROW.arithmetic_intensity: gemm[GEMM_ROW.arithmetic_intensity],
                    GEMM_ROW.tflops: gemm[GEMM_ROW.tflops],
                    GEMM_ROW.peak_tflops: row.get(TP.peak_tflops),
                    GEMM_ROW.peak_gbps: row.get(TP.peak_gbps)})
    return [{GEMM_ROW.dtype: dtype, GROUP.rows: members} for dtype, members in groups.items()]


def gantt_panels(rows: Sequence[dict], machine: str, preset: str) -> list[dict]:
    """One step of sync and of overlapped at the largest world size (strong, first backend)."""
    multi = [r for r in rows if (r["machine"], r[TP.preset], r[TP.scaling]) == (machine, preset,
                                                                             "strong")
             and r[TP.schedule] in ("sync", "overlapped") and r.get(TP.timeline)]
    if not multi:
        return []
    world = max(r[TP.world_size] for r in multi)
    backend = multi[0][TP.gemm_backend]
    return [{"title": f"{r['schedule']}, {world} ranks, {backend}: one step "
                      f"({fmt(value(r, 'step_ms'))} ms median)",
             "bars": analysis.timeline_bars(r[TP.timeline]), "notes": []}
            for r in multi if (r[TP.world_size], r[TP.gemm_backend]) == (world, backend)]


# --- figures --------------------------------------------------------------------------------------


def backend_color(backend: str) -> str:
    return version_color("cublas" if backend == "torch" else backend)


def _error(estimate: dict) -> tuple[float, float]:
    if estimate.get("low") is None or estimate.get("high") is None:
        return 0.0, 0.0
    return estimate["value"] - estimate["low"], estimate["high"] - estimate["value"]


@_styled
def scaling_figure(strong: Sequence[dict], weak: Sequence[dict]) -> Image:
    """Scaling efficiency against ranks with 95% intervals: strong left, weak right."""
    fig, axes = _figure(1, 2, height=2.4, sharey=True)
    for ax, series, title in ((axes[0, 0], strong, "strong (the same block)"),
                              (axes[0, 1], weak, "weak (the 1-rank shape per rank)")):
        worlds = sorted({p["world"] for s in series for p in s["points"]})
        for entry in series:
            points = entry["points"]
            errors = list(zip(*(_error(p) for p in points))) or [[], []]
            ax.errorbar([p["world"] for p in points], [p["value"] for p in points],
                        yerr=errors, marker="o", markersize=3, capsize=2, linewidth=1,
                        linestyle=SCHEDULE_STYLES.get(entry[TP.schedule], "-"),
                        color=backend_color(entry[TP.gemm_backend]),
                        label=f"{entry[TP.gemm_backend]} {entry[TP.schedule]}")
        ax.axhline(1.0, color="black", linestyle=":", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(worlds, [str(w) for w in worlds])
        ax.minorticks_off()
        ax.set_xlabel("ranks")
        ax.set_title(title, loc="left")
    axes[0, 0].set_ylabel("scaling efficiency")
    axes[0, 1].legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _save(fig)


@_styled
def comm_share_figure(points: Sequence[dict]) -> Image:
    """Exposed communication share (sync) against the backend's 1-rank GEMM speed."""
    fig, axes = _figure(1, 1, height=2.4)
    ax = axes[0, 0]
    markers = {2: "o", 4: "s", 8: "D"}
    for point in points:
        ax.errorbar(point["x"]["value"], point["y"]["value"], xerr=[[e] for e in
                    _error(point["x"])], yerr=[[e] for e in _error(point["y"])],
                    marker=markers.get(point["world"], "^"), markersize=4, capsize=2,
                    color=backend_color(point[TP.gemm_backend]), linewidth=0.8)
    for backend in dict.fromkeys(p[TP.gemm_backend] for p in points):
        ax.plot([], [], "o", color=backend_color(backend), label=backend)
    for world in sorted({p["world"] for p in points}):
        ax.plot([], [], markers.get(world, "^"), color="#777777", label=f"{world} ranks")
    ax.set_xlabel("GEMM speed of the backend (TFLOP/s per GPU, 1 rank)")
    ax.set_ylabel("exposed comm / step (sync)")
    ax.set_ylim(0, 1)
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _save(fig)


@_styled
def overlap_figure(entries: Sequence[dict]) -> Image:
    """Speedup over sync (sync step / step) of overlapped and fused, with 95% intervals."""
    fig, axes = _figure(1, 1, height=0.5 + 0.28 * len(entries))
    ax = axes[0, 0]
    for index, entry in enumerate(entries):
        for estimate, color, offset in ((entry["speedup_estimate"], "#1f77b4", 0.0),
                                        (entry["fused_speedup_estimate"], "#d62728", 0.25)):
            if estimate and estimate.get("value") is not None:
                ax.errorbar(estimate["value"], index + offset, xerr=[[e] for e in
                            _error(estimate)], fmt="o", markersize=3, capsize=2, color=color)
    ax.plot([], [], "o", color="#1f77b4", label="overlapped")
    ax.plot([], [], "o", color="#d62728", label="fused (PyTorch)")
    ax.axvline(1.0, color="black", linestyle=":", linewidth=0.8)
    ax.set_yticks(range(len(entries)), [e["label"] for e in entries])
    ax.invert_yaxis()
    ax.set_xlabel("speedup over sync (sync step / step)")
    ax.legend(frameon=False, loc="lower right")
    return _save(fig)


# --- the section ------------------------------------------------------------------------------

VARIANT_COLUMNS = (
    text_column(TP.preset), text_column(TP.gemm_backend, "GEMM"), text_column(TP.scaling),
    text_column(TP.schedule), text_column(TP.world_size, "ranks"),
    text_column("step", "step (ms) [95% CI]"), text_column(TP.tflops, "TFLOP/s [95% CI]"),
    text_column("comm", "exposed comm share"),
    text_column("efficiency", "scaling eff. [95% CI]"), text_column(TP.max_rel_err, "max rel. err"),
)
OVERLAP_COLUMNS = (
    text_column("label", "cell"), text_column("sync_ms", "sync (ms)"),
    text_column("overlapped_ms", "overlapped (ms)"), text_column("speedup", "speedup [95% CI]"),
    text_column("verdict", "verdict"), text_column("fused_ms", "fused (ms)"),
    text_column("vs_fused", "vs fused [95% CI]"), text_column("vs_fused_verdict", "verdict"),
)
EFFICIENCY_COLUMNS = (
    text_column("machine"), text_column(TP.preset), text_column(TP.gemm_backend, "GEMM"),
    text_column(TP.tflops_per_gpu, "TFLOP/s per GPU, 1 rank"),
    text_column("sync_w2", "2 ranks, sync"), text_column("overlapped_w2", "2 ranks, overlapped"),
    text_column("sync_w4", "4 ranks, sync"), text_column("overlapped_w4", "4 ranks, overlapped"),
)


def variant_table(table_id: str, caption: str, rows: Sequence[dict],
                  placement: Placement | None = None) -> Table:
    shown = [{**r, TP.world_size: str(r[TP.world_size]), "step": interval_text(r, TP.step_ms),
              TP.tflops: interval_text(r, TP.tflops), "comm": interval_text(r, TP.comm_fraction),
              "efficiency": interval_text(r, TP.scaling_efficiency),
              TP.max_rel_err: f"{fmt(r.get('max_rel_err'))} (≤ {fmt(r.get('tolerance'))})"}
             for r in rows]
    return make_table(table_id, caption, VARIANT_COLUMNS, shown, placement=placement)


def section(view: View) -> dict:
    """The template context of the tensor-parallel section (``empty`` when there is no data)."""
    all_rows, runs = view.rows, view.runs
    rows = variant_rows(all_rows)
    fields = [quoted(f) for f in TP_FIELDS]
    if not rows:
        return {"empty": True, "line": EMPTY_LINE, "fields": fields, "question4": [],
                "efficiency": None, BLOCKS.machines: []}
    efficiency = efficiency_rows(rows)
    out = {"empty": False, "line": None, "fields": fields, "question4": question4(efficiency),
           "efficiency": make_table(
               "tab-tp-efficiency", "Strong-scaling efficiency T(1) / (p·T(p)) per GEMM backend "
               "[95% bootstrap interval over rounds, paired with the 1-rank block measured in "
               "the same rounds], beside the backend's GEMM speed on one rank. "
               f"{how_text(rows, runs)}", EFFICIENCY_COLUMNS, efficiency),
           BLOCKS.machines: []}
    for machine in dict.fromkeys(r["machine"] for r in rows):
        mine = [r for r in rows if r["machine"] == machine]
        where, how = view.machines.words[machine], how_text(mine, runs)
        entry = {"title": f"On {where}", "machine": machine, "figures": [], "tables": []}
        for _, preset in (c for c in cells(mine)):
            strong = scaling_series(mine, machine, preset, "strong")
            weak = scaling_series(mine, machine, preset, "weak")
            if any(len(s["points"]) > 1 for s in strong + weak):
                entry["figures"].append(make_figure(
                    f"fig-tp-scaling-{machine}-{preset}", scaling_figure(strong, weak),
                    f"{preset} on {where}: scaling efficiency against ranks, strong (T(1) / "
                    f"(p·T(p))) and weak (T(1) / T(p)), per GEMM backend (colour) and schedule "
                    f"(line style), with 95% intervals paired by round. {how}",
                    f"Scaling efficiency of {preset}, {machine}"))
            points = comm_share_points(mine, machine, preset)
            if points:
                entry["figures"].append(make_figure(
                    f"fig-tp-comm-{machine}-{preset}", comm_share_figure(points),
                    f"{preset} on {where}: exposed communication share of the step (sync "
                    f"schedule, strong scaling) against the GEMM backend's speed on one rank, "
                    f"with 95% intervals. {how}", f"Communication share, {preset}, {machine}"))
            panels = gantt_panels(mine, machine, preset)
            if panels:
                entry["figures"].append(make_figure(
                    f"fig-tp-gantt-{machine}-{preset}", figures.gantt(panels),
                    f"{preset} on {where}: compute (GEMM pieces) and communication lanes of "
                    f"one step, sync against overlapped (bars coloured by piece). {how}",
                    f"Timeline of one step, {preset}, {machine}"))
        overlaps = overlap_rows(mine)
        if overlaps:
            entry["figures"].append(make_figure(
                f"fig-tp-overlap-{machine}", overlap_figure(overlaps),
                f"Speedup over the sync schedule on {where}: overlapped (blue) and PyTorch's "
                f"fused ops (red), sync step / step with 95% intervals paired by round; right "
                f"of the dotted line is faster. {how}", f"Overlap speedup, {machine}"))
            entry["tables"].append(make_table(
                f"tab-tp-overlap-{machine}", f"Overlapped against sync and against PyTorch's "
                f"fused ops on {where}, measured in the same rounds; a verdict only where the "
                f"95% interval of the paired difference excludes zero. {how}",
                OVERLAP_COLUMNS, overlaps))
        groups = roofline_groups(mine, machine)
        if groups:
            entry["figures"].append(make_figure(
                f"fig-tp-roofline-{machine}", figures.roofline(groups),
                f"The block's GEMMs on the roofline on {where}: each rank's six GEMMs (forward, "
                f"dgrad, wgrad of W1 and W2) at every world size, whole (sync schedule), their "
                f"time from the step's timeline; the rank's share shrinks as ranks are added "
                f"(strong scaling), lowering arithmetic intensity. {how}",
                f"Roofline of the tensor-parallel GEMMs, {machine}"))
        entry["tables"].append(variant_table(
            f"tab-tp-{machine}", f"Every tensor-parallel variant on {where}: medians over rounds "
            f"with 95% bootstrap intervals; max rel. err is the check against the single-device "
            f"block before timing, beside its tolerance. {how}", mine,
            Placement("every tensor-parallel variant")))
        out[BLOCKS.machines].append(entry)
    return out
