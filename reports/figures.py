"""The report's figures: analysis tables in, SVG or PNG bytes out (matplotlib, Agg backend).

Line and bar charts are SVG (sharp at any zoom, small); dense plots such as NVML timelines
are PNG. Every figure is closed after saving, so a long build does not accumulate them.
``data_uri`` turns an image into the ``src`` the self-contained report.html embeds.

    image = figures.chunk_sweep(analysis.chunk_sweep(rows, setting), "mlp, 4 GPUs")
    html_src = figures.data_uri(image)
"""

from __future__ import annotations

import base64
import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display, and no GUI toolkit on build machines

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from reports.analysis import gemm_version_rank  # noqa: E402

WIDTH_IN = 6.8  # the PDF's text width (A4 minus margins), so 1 figure inch = 1 inch on paper
PNG_DPI = 200
STRATEGY_COLORS = {"sequential": "#7f7f7f", "threaded": "#ff7f0e", "chunked": "#1f77b4",
                   "mpi": "#9467bd", "ddp": "#2ca02c", "synthetic": "#8c564b"}
STYLE = {
    "font.size": 8, "axes.titlesize": 8.5, "axes.labelsize": 8, "legend.fontsize": 7,
    "xtick.labelsize": 7, "ytick.labelsize": 7, "axes.spines.top": False,
    "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5,
    "svg.fonttype": "path",  # text as outlines: the SVG renders the same without our fonts
    "svg.hashsalt": "overlap-report",  # stable ids, so rebuilding gives identical files
}


@dataclass(frozen=True)
class Image:
    mime: str  # "image/svg+xml" or "image/png"
    data: bytes


def color(strategy: str) -> str:
    return STRATEGY_COLORS.get(strategy, "#17becf")


# One fixed colour per GEMM kernel version in every figure: v1-v5 keep tab10's first five,
# v1c is a lighter v1 (the same kernel with coalesced loads), v6 tab10's sixth; cuBLAS black.
VERSION_COLORS = {"v1": "#1f77b4", "v1c": "#7fb2de", "v2": "#ff7f0e", "v3": "#2ca02c",
                  "v4": "#d62728", "v5": "#9467bd", "v6": "#8c564b", "cublas": "#222222"}
OTHER_VERSION_COLOR = "#bcbd22"


def version_color(version: str) -> str:
    """The same colour for a GEMM kernel version in every figure; cuBLAS is black."""
    return VERSION_COLORS.get(version, OTHER_VERSION_COLOR)


def data_uri(image: Image) -> str:
    return f"data:{image.mime};base64,{base64.b64encode(image.data).decode('ascii')}"


def _save(fig, kind: str = "svg") -> Image:
    buffer = io.BytesIO()
    try:
        if kind == "png":
            fig.savefig(buffer, format="png", dpi=PNG_DPI, bbox_inches="tight")
        else:
            fig.savefig(buffer, format="svg", bbox_inches="tight",
                        metadata={"Date": None, "Creator": None})
    finally:
        plt.close(fig)
    return Image("image/png" if kind == "png" else "image/svg+xml", buffer.getvalue())


def _figure(rows: int = 1, cols: int = 1, height: float = 2.6, **kwargs):
    return plt.subplots(rows, cols, figsize=(WIDTH_IN, height), squeeze=False,
                        layout="constrained", **kwargs)


def _styled(function):
    """Run a plotting function inside the report's rc style (fonts, grid, SVG options)."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with plt.rc_context(STYLE):
            return function(*args, **kwargs)
    return wrapper


_grouped = FuncFormatter(lambda value, _: f"{value:,.0f}")


# --- step anatomy ------------------------------------------------------------------------


@_styled
def gantt(panels: Sequence[dict]) -> Image:
    """One step per panel: compute and communication lanes, bars coloured by chunk.

    ``panels``: [{"title", "bars": analysis.timeline_bars(...), "notes": [...]}].
    """
    fig, axes = _figure(len(panels), 1, height=0.55 + 0.72 * len(panels), sharex=True)
    chunk_colors = plt.get_cmap("tab10")
    for ax, panel in zip(axes[:, 0], panels):
        for bar in panel["bars"]:
            lane = 1 if bar["lane"] == "comm" else 0
            chunk = bar["chunk"]
            face = "#c7c7c7" if chunk is None else chunk_colors(chunk % 10)
            ax.broken_barh([(bar["start_ms"], max(bar["duration_ms"], 1e-9))],
                           (lane - 0.38, 0.76), facecolors=face, edgecolors="white",
                           linewidth=0.3)
        has_comm = any(b["lane"] == "comm" for b in panel["bars"])
        if not has_comm:
            ax.text(0.99, 0.74, "communication not observable (inside backward)",
                    transform=ax.transAxes, ha="right", va="center", fontsize=6.5,
                    color="#555555")
        ax.set_yticks([0, 1], ["compute", "comm"])
        ax.set_ylim(-0.6, 1.6)
        ax.set_title(panel["title"], loc="left", pad=2)
        ax.grid(axis="y", visible=False)
    axes[-1, 0].set_xlabel("time within the step (ms)")
    return _save(fig)


@_styled
def chunk_consistency(per_chunk: Sequence[dict], spread: Sequence[dict]) -> Image:
    """Left: per-chunk backward and all-reduce durations from one step's timeline, per
    strategy. Right: every timed step's duration per strategy, with the median marked."""
    fig, axes = _figure(1, 2, height=2.5, gridspec_kw={"width_ratios": [3, 2]})
    left, right = axes[0]
    for entry in per_chunk:
        chunks = [d["chunk"] for d in entry["chunks"]]
        for field, style, name in (("compute_ms", "-", "backward"), ("comm_ms", "--",
                                                                      "all-reduce")):
            values = [d[field] for d in entry["chunks"]]
            if any(v is not None for v in values):
                left.plot(chunks, [float("nan") if v is None else v for v in values], style,
                          marker="o", markersize=2.5, linewidth=1, color=color(entry["strategy"]),
                          label=f"{entry['strategy']} {name}")
    left.set_xlabel("chunk (in the order backward produces them)")
    left.set_ylabel("duration (ms)")
    left.set_ylim(bottom=0)
    if per_chunk:
        left.legend(ncols=3, frameon=False, loc="lower left", bbox_to_anchor=(0, 1.0),
                    fontsize=6.5)
    for index, entry in enumerate(spread):
        times = entry["step_ms_all"]
        right.scatter([index] * len(times), times, s=9, color=color(entry["strategy"]),
                      alpha=0.7, linewidths=0)
        right.plot([index - 0.3, index + 0.3], [entry["median_ms"]] * 2, color="black",
                   linewidth=1)
    right.set_xticks(range(len(spread)), [e["strategy"] for e in spread], rotation=30)
    right.set_ylabel("step time of each timed step (ms)")
    return _save(fig)


@_styled
def totals_bars(totals: dict) -> Image:
    """Horizontal bars: the reference measurements, then each strategy's step time."""
    labels = ["compute only", "comm only", "compute + comm", "sequential (reference)"]
    values = [totals["compute_only_ms"], totals["comm_only_ms"], totals["sum_ms"],
              totals["sequential_ms"]]
    colors = ["#bcbd22", "#17becf", "#dddddd", color("sequential")]
    for entry in totals["strategies"]:
        labels.append(f"{entry['strategy']} (step)")
        values.append(entry["step_ms"])
        colors.append(color(entry["strategy"]))
    fig, axes = _figure(1, 1, height=0.45 + 0.2 * len(labels))
    ax = axes[0, 0]
    positions = list(range(len(labels)))[::-1]
    ax.barh(positions, values, color=colors, height=0.7)
    for position, value in zip(positions, values):
        ax.text(value, position, f" {value:.3g}", va="center", fontsize=6.5)
    ax.axvline(totals["limit_ms"], color="black", linestyle="--", linewidth=0.8)
    ax.text(totals["limit_ms"], positions[0] + 0.6, " limit", fontsize=6.5, va="bottom")
    ax.set_yticks(positions, labels)
    ax.set_xlabel("time per step (ms)")
    ax.set_xlim(0, max(values) * 1.12)
    ax.grid(axis="y", visible=False)
    return _save(fig)


@_styled
def chunk_sweep(sweep: dict) -> Image:
    """Step time against chunk count K per strategy, with the limit and sequential per K.

    A strategy measured at one K only (e.g. mpi) is a lone marker; one far above the lines
    (host-staged MPI at seconds per step) is drawn at the top edge with its value, so that it
    does not flatten every line into the floor.
    """
    fig, axes = _figure(1, 1, height=2.4)
    ax = axes[0, 0]
    in_lines = [v for points in sweep["lines"].values() if len(points) > 1 for _, v in points]
    in_lines += [v for _, v in sweep["limit"]] + [v for _, v in sweep["sequential"]]
    ceiling = max(in_lines) * 1.12 if in_lines else None
    for strategy, points in sweep["lines"].items():
        shown = [(k, min(v, ceiling) if ceiling else v) for k, v in points]
        ax.plot([k for k, _ in shown], [v for _, v in shown], marker="o", markersize=3,
                linewidth=1.2, color=color(strategy), label=strategy)
        for k, v in points:
            if ceiling and v > ceiling:
                ax.annotate(f"{strategy}: {v:,.0f} ms (off scale)", (k, ceiling),
                            xytext=(4, -3), textcoords="offset points", fontsize=6.5,
                            va="top", color=color(strategy))
    if sweep["limit"]:
        ax.plot([k for k, _ in sweep["limit"]], [v for _, v in sweep["limit"]], "k--",
                linewidth=0.9, label="limit max(compute, comm)")
    if sweep["sequential"]:
        ax.plot([k for k, _ in sweep["sequential"]], [v for _, v in sweep["sequential"]],
                ":", color="#555555", linewidth=0.9, label="sequential (reference)")
    chunk_counts = sorted({k for points in sweep["lines"].values() for k, _ in points})
    if chunk_counts and chunk_counts[-1] / chunk_counts[0] > 8:
        ax.set_xscale("log")
    ax.set_xticks(chunk_counts, [str(k) for k in chunk_counts])
    ax.minorticks_off()
    if ceiling:
        # Not from 0: the differences between strategies are a few percent of the step.
        ax.set_ylim(min(in_lines) * 0.9, ceiling * 1.02)
    ax.set_xlabel("chunks K")
    ax.set_ylabel("step time (ms)")
    ax.legend(ncols=4, frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return _save(fig)


# --- scaling and interconnects -------------------------------------------------------------


@_styled
def scaling(rows: Sequence[dict]) -> Image:
    """Samples/s and scaling efficiency against world size, one line per strategy."""
    fig, axes = _figure(1, 2, height=2.3)
    left, right = axes[0]
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    worlds = sorted({r["world_size"] for r in rows})
    for strategy in strategies:
        points = [r for r in rows if r["strategy"] == strategy]
        left.plot([r["world_size"] for r in points], [r["samples_per_s"] for r in points],
                  marker="o", markersize=3, color=color(strategy), label=strategy)
        efficient = [r for r in points if r["scaling_efficiency"] is not None]
        right.plot([r["world_size"] for r in efficient],
                   [r["scaling_efficiency"] for r in efficient], marker="o", markersize=3,
                   color=color(strategy), label=strategy)
    single = [r for r in rows if r["world_size"] == 1]
    if single:
        base = max(r["samples_per_s"] for r in single)
        left.plot(worlds, [base * w for w in worlds], ":", color="black", linewidth=0.8,
                  label="ideal (w × best 1-rank)")
    right.axhline(1.0, color="black", linestyle=":", linewidth=0.8)
    for ax in (left, right):
        ax.set_xticks(worlds, [str(w) for w in worlds])
        ax.minorticks_off()
        ax.set_xlabel("world size (ranks)")
    left.set_ylabel("samples/s (all ranks)")
    left.yaxis.set_major_formatter(_grouped)
    right.set_ylabel("scaling efficiency")
    left.legend(frameon=False)
    return _save(fig)


@_styled
def interconnect(rows: Sequence[dict]) -> Image:
    """Grouped bars: step time per strategy, one bar per interconnect profile."""
    profiles = sorted({r["profile"] for r in rows})
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    fig, axes = _figure(1, 2, height=2.3)
    width = 0.8 / len(profiles)
    hatches = ["", "//", "..", "xx"]
    for axis, field, label in ((axes[0, 0], "step_ms", "step time (ms)"),
                               (axes[0, 1], "overlap_efficiency", "overlap efficiency")):
        for p_index, profile in enumerate(profiles):
            for s_index, strategy in enumerate(strategies):
                value = next((r[field] for r in rows if r["profile"] == profile
                              and r["strategy"] == strategy), None)
                if value is None:
                    continue
                axis.bar(s_index + (p_index - (len(profiles) - 1) / 2) * width, value, width,
                         color=color(strategy), hatch=hatches[p_index % len(hatches)],
                         edgecolor="white", label=profile if s_index == 0 else None)
        axis.set_xticks(range(len(strategies)), strategies, rotation=30)
        axis.set_ylabel(label)
    axes[0, 0].legend(frameon=False, ncols=len(profiles), loc="lower left",
                      bbox_to_anchor=(0, 1.0))
    return _save(fig)


@_styled
def allreduce(groups: Sequence[dict]) -> Image:
    """busbw against message size per (machine, ranks, profile), with reference lines."""
    fig, axes = _figure(1, 1, height=3.4)
    ax = axes[0, 0]
    palette = plt.get_cmap("tab10")
    for index, group in enumerate(groups):
        rows = group["rows"]
        tint = palette(index % 10)
        sizes = [r["size_bytes"] / 2**20 for r in rows]
        ax.plot(sizes, [r["busbw_gbps"] for r in rows], marker="o", markersize=3, color=tint,
                label=f"{group['machine']} {group['world_size']} ranks, {group['profile']}")
        for field, style, peer in (("nccl_tests_gbps", "--", "nccl-tests"),
                                   ("torch_ref_gbps", ":", "torch.distributed ref.")):
            referenced = [r for r in rows if r[field] is not None]
            if referenced:
                ax.plot([r["size_bytes"] / 2**20 for r in referenced],
                        [r[field] for r in referenced], style, marker="x", markersize=3,
                        linewidth=0.9, color=tint,
                        label=f"{peer}, {group['world_size']} ranks (docs/ANCHORS.md)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{v / 1024:g} GiB" if v >= 1024 else f"{v:g} MiB"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    sizes = sorted({r["size_bytes"] / 2**20 for g in groups for r in g["rows"]})
    ax.set_xticks(sizes)
    ax.minorticks_off()
    ax.set_xlabel("message size per rank")
    ax.set_ylabel("busbw (GB/s)")
    ax.legend(frameon=False, fontsize=6.5, ncols=3, loc="upper center",
              bbox_to_anchor=(0.5, -0.2))
    return _save(fig)


# --- NVML ----------------------------------------------------------------------------------

NVML_PANELS = (("power_w", "power per GPU (W)"), ("gpu_util_pct", "GPU utilisation (%)"),
               ("sm_clock_mhz", "SM clock (MHz)"))


@_styled
def nvml_timelines(series: Sequence[dict]) -> Image:
    """Power, utilisation and SM clock over the timed rounds, mean over the run's GPUs."""
    fig, axes = _figure(len(NVML_PANELS), 1, height=4.2, sharex=True)
    for ax, (field, label) in zip(axes[:, 0], NVML_PANELS):
        for entry in series:
            values = entry["mean"].get(field)
            if values:
                ax.plot(entry["t_s"], values, marker=".", markersize=3, linewidth=1,
                        color=color(entry["strategy"]), label=entry["strategy"])
        ax.set_ylabel(label)
    axes[0, 0].legend(ncols=len(series) or 1, frameon=False)
    axes[-1, 0].set_xlabel("time since the sampler started (s)")
    return _save(fig, "png")


@_styled
def energy_bars(rows: Sequence[dict]) -> Image:
    """Energy per step and samples per joule, per strategy and world size."""
    measured = [r for r in rows if r["energy_per_step_j"] is not None]
    worlds = sorted({r["world_size"] for r in measured})
    strategies = list(dict.fromkeys(r["strategy"] for r in measured))
    fig, axes = _figure(1, 2, height=2.2)
    width = 0.8 / max(len(strategies), 1)
    for axis, field, label in ((axes[0, 0], "energy_per_step_j", "energy per step (J)"),
                               (axes[0, 1], "samples_per_joule", "samples per joule")):
        for s_index, strategy in enumerate(strategies):
            for w_index, world in enumerate(worlds):
                value = next((r[field] for r in measured if r["strategy"] == strategy
                              and r["world_size"] == world), None)
                if value is not None:
                    axis.bar(w_index + (s_index - (len(strategies) - 1) / 2) * width, value,
                             width, color=color(strategy),
                             label=strategy if w_index == 0 else None)
        axis.set_xticks(range(len(worlds)), [f"{w} GPU" for w in worlds])
        axis.set_ylabel(label)
    axes[0, 0].legend(frameon=False)
    return _save(fig)


@_styled
def sampler_overhead(row: dict) -> Image:
    """The sampler-off and sampler-on blocks' median step times, in the order they ran."""
    blocks = row.get("blocks") or {}
    off, on = blocks.get("off", []), blocks.get("on", [])
    order = []
    for index in range(max(len(off), len(on))):
        if index < len(off):
            order.append(("off", off[index]))
        if index < len(on):
            order.append(("on", on[index]))
    fig, axes = _figure(1, 1, height=1.9)
    ax = axes[0, 0]
    ax.bar(range(len(order)), [v for _, v in order],
           color=["#aaaaaa" if s == "off" else "#d62728" for s, _ in order])
    ax.set_xticks(range(len(order)), [f"{s}\nblock {i + 1}" for i, (s, _) in enumerate(order)])
    low = min(v for _, v in order) if order else 0
    ax.set_ylim(low * 0.97, None)
    ax.set_ylabel("median step (ms)")
    return _save(fig)


# --- simulation, GEMM ----------------------------------------------------------------------


@_styled
def synthetic(rows: Sequence[dict], study_pct: float = 30.0) -> Image:
    """Simulated sequential vs overlapped time per K, with the speedup and the study's ~30%."""
    fig, axes = _figure(1, 2, height=2.1)
    left, right = axes[0]
    labels = [f"{r['machine']}\nK={r['chunks']}" for r in rows]
    positions = range(len(rows))
    left.bar([p - 0.2 for p in positions], [r["sequential_ms"] for r in rows], 0.4,
             color="#aaaaaa", label="one after the other")
    left.bar([p + 0.2 for p in positions], [r["step_ms"] for r in rows], 0.4,
             color=color("synthetic"), label="overlapped (2 threads)")
    left.set_xticks(list(positions), labels)
    left.set_ylabel("simulated step (ms, sleeps)")
    left.legend(frameon=False, ncols=2, loc="lower left", bbox_to_anchor=(0, 1.0))
    right.bar(list(positions), [r["speedup_pct"] for r in rows], 0.5, color=color("synthetic"))
    right.axhline(study_pct, color="black", linestyle="--", linewidth=0.8)
    right.set_ylim(0, max([study_pct, *(r["speedup_pct"] for r in rows)]) * 1.25)
    right.text(-0.4, study_pct * 1.03, f"course study: ~{study_pct:g}%", ha="left",
               va="bottom", fontsize=6.5)
    right.set_xticks(list(positions), labels)
    right.set_ylabel("speedup (%)")
    return _save(fig)


@_styled
def gemm_bars(groups: Sequence[dict]) -> Image:
    """TFLOP/s per kernel version, grouped by shape, one panel per dtype."""
    dtypes = list(dict.fromkeys(g["dtype"] for g in groups))
    fig, axes = _figure(1, len(dtypes), height=2.5)
    for ax, dtype in zip(axes[0], dtypes):
        shapes = [g for g in groups if g["dtype"] == dtype]
        versions = sorted({r["version"] for g in shapes for r in g["rows"]},
                          key=gemm_version_rank)
        width = 0.8 / len(versions)
        for v_index, version in enumerate(versions):
            labelled = False  # one legend entry per version, at its first shape with a bar
            for s_index, group in enumerate(shapes):
                value = next((r["tflops"] for r in group["rows"] if r["version"] == version),
                             None)
                if value is not None:
                    ax.bar(s_index + (v_index - (len(versions) - 1) / 2) * width, value, width,
                           color=version_color(version), label=None if labelled else version)
                    labelled = True
        ax.set_xticks(range(len(shapes)),
                      [f"{g['m']}×{g['n']}×{g['k']}" for g in shapes], rotation=20)
        ax.set_ylabel(f"{dtype} TFLOP/s")
        ax.legend(frameon=False, ncols=2)
    return _save(fig)


@_styled
def roofline(groups: Sequence[dict]) -> Image:
    """Achieved TFLOP/s against arithmetic intensity, under each dtype's roofline."""
    fig, axes = _figure(1, 1, height=2.9)
    ax = axes[0, 0]
    markers = {"fp32": "o", "bf16": "s", "tf32": "^", "fp16": "D"}
    versions = sorted({r["version"] for g in groups for r in g["rows"]}, key=gemm_version_rank)
    intensities = [r["arithmetic_intensity"] for g in groups for r in g["rows"]]
    if not intensities:
        return _save(fig)
    span = (min(intensities) / 4, max(intensities) * 4)
    drawn_peaks = set()
    for group in groups:
        for row in group["rows"]:
            ax.scatter(row["arithmetic_intensity"], row["tflops"], s=14,
                       color=version_color(row["version"]),
                       marker=markers.get(group["dtype"], "o"), zorder=3)
            peak, bandwidth = row.get("peak_tflops"), row.get("peak_gbps")
            if peak and bandwidth and (group["dtype"], peak) not in drawn_peaks:
                drawn_peaks.add((group["dtype"], peak))
                ridge = peak * 1e3 / bandwidth  # FLOP/B where memory and compute bounds meet
                xs = [span[0], ridge, span[1]]
                ax.plot(xs, [min(peak, bandwidth * x / 1e3) for x in xs], "--", color="#777777",
                        linewidth=0.8)
                ax.text(span[1], peak, f"{group['dtype']} peak {peak:g}", ha="right",
                        va="bottom", fontsize=6.5)
    for version in versions:
        ax.scatter([], [], color=version_color(version), s=14, label=version)
    for dtype in dict.fromkeys(g["dtype"] for g in groups):
        ax.scatter([], [], color="white", edgecolors="black", marker=markers.get(dtype, "o"),
                   s=14, label=dtype)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*span)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, compulsory traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _save(fig)
