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

from impl.rows.kinds import GEMM, STEP  # noqa: E402
from impl.rows.report_records import GROUP  # noqa: E402
from impl.strategy_records import REFERENCE, STRATEGY_RECORDS, strategy_of  # noqa: E402
from reports.analysis import gemm_version_rank  # noqa: E402

WIDTH_IN = 6.8  # the PDF's text width (A4 minus margins), so 1 figure inch = 1 inch on paper
PNG_DPI = 200
# Okabe and Ito's palette (Color Universal Design, 2008): told apart with any common form of
# colour blindness. References are grey or black; a strategy's variants (chunked+priority)
# keep its colour and differ by marker and line style (series_styles).
OKABE_ITO = {"blue": "#0072B2", "orange": "#E69F00", "green": "#009E73", "purple": "#CC79A7",
             "vermillion": "#D55E00", "sky": "#56B4E9", "yellow": "#F0E442", "black": "#000000"}
REFERENCE_GREY = "#7f7f7f"  # every strategy of the reference role (impl/strategy_records.py)
# The colour of each other recorded strategy; a named variant takes its strategy's.
STRATEGY_COLORS = {"chunked": OKABE_ITO["blue"], "threaded": OKABE_ITO["orange"],
                   "ddp": OKABE_ITO["green"], "mpi": OKABE_ITO["purple"],
                   "copy-engine": OKABE_ITO["vermillion"], "synthetic": OKABE_ITO["yellow"]}
# The reference measurements of every cell (impl/comparisons.py's names).
MEASUREMENT_COLORS = {"compute-only": OKABE_ITO["black"], "comm-only": OKABE_ITO["sky"]}
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINE_STYLES = ("-", "--", ":", "-.")
LOST_TIME_COLORS = {"exposed_comm_ms": OKABE_ITO["vermillion"],
                    "compute_slowdown_ms": OKABE_ITO["orange"], "other_ms": "#c7c7c7"}
LOST_TIME_LABELS = {"exposed_comm_ms": "exposed communication",
                    "compute_slowdown_ms": "compute slowdown", "other_ms": "other"}
STYLE = {
    "font.size": 8, "axes.titlesize": 8.5, "axes.labelsize": 8, "legend.fontsize": 7,
    "xtick.labelsize": 7, "ytick.labelsize": 7, "axes.spines.top": False,
    "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5,
    "svg.fonttype": "path",  # text as outlines: the SVG renders the same without our fonts
    "svg.hashsalt": "overlap-report",  # stable ids, so rebuilding gives identical files
    # Labels come from result files: "$...$" in a strategy name is text, not TeX to parse.
    "text.parse_math": False,
}


@dataclass(frozen=True)
class Image:
    mime: str  # "image/svg+xml" or "image/png"
    data: bytes


def family_color(name: str) -> str | None:
    """The colour of a reference measurement, or of the strategy that ``name`` is or is a
    named variant of (grey for a reference strategy); None for a name the report does not
    know."""
    if name in MEASUREMENT_COLORS:
        return MEASUREMENT_COLORS[name]
    record = STRATEGY_RECORDS.get(strategy_of(name))
    if record is None:
        return None
    return REFERENCE_GREY if record.role == REFERENCE else STRATEGY_COLORS[record.name]


def color(strategy: str) -> str:
    """A strategy's colour in every figure: its family's, or black for one the report does
    not know (a figure of several series takes series_styles instead)."""
    return family_color(strategy) or OKABE_ITO["black"]


@dataclass(frozen=True)
class SeriesStyle:
    color: str
    marker: str
    linestyle: str


def series_styles(strategies: Sequence[str]) -> dict[str, SeriesStyle]:
    """One style per strategy of a figure, no two sharing colour and marker: a strategy takes
    its family's colour and the first marker that colour has free here (the strategy itself
    "o" and a solid line, its variants the next markers, dashed); a strategy of no known
    family, or one whose family has used every marker, takes a colour no family here has."""
    names = sorted(dict.fromkeys(strategies), key=lambda s: (s != strategy_of(s), s))
    families = {family_color(s) for s in names}
    # Colours no family here has, those no strategy ever has first.
    taken = {REFERENCE_GREY, *STRATEGY_COLORS.values(), *MEASUREMENT_COLORS.values()}
    spare = sorted((c for c in OKABE_ITO.values() if c not in families), key=lambda c: c in taken)
    used: dict[str, list[str]] = {}
    styles = {}
    for index, name in enumerate(names):
        wanted = [family_color(name), *spare, *OKABE_ITO.values(), REFERENCE_GREY]
        colour = next(c for c in wanted if c and len(used.get(c, [])) < len(MARKERS))
        marker = MARKERS[len(used.setdefault(colour, []))]
        used[colour].append(marker)
        styles[name] = SeriesStyle(colour, marker, LINE_STYLES[0] if marker == MARKERS[0]
                                   else LINE_STYLES[1 + index % (len(LINE_STYLES) - 1)])
    return {name: styles[name] for name in dict.fromkeys(strategies)}


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


# --- step anatomy ------------------------------------------------------------------------


@_styled
def gantt(panels: Sequence[dict]) -> Image:
    """One step per panel: compute and communication lanes, bars coloured by chunk.

    ``panels``: [{"title", "bars": analysis.timeline_bars(...), "note": text or None}];
    the note is written on a panel whose communication lane is empty (a reference step).
    """
    fig, axes = _figure(len(panels), 1, height=0.5 + 0.6 * len(panels), sharex=True)
    chunk_colors = plt.get_cmap("tab10")
    for ax, panel in zip(axes[:, 0], panels):
        for bar in panel["bars"]:
            lane = 1 if bar["lane"] == "comm" else 0
            chunk = bar["chunk"]
            face = "#c7c7c7" if chunk is None else chunk_colors(chunk % 10)
            ax.broken_barh([(bar["start_ms"], max(bar["duration_ms"], 1e-9))],
                           (lane - 0.38, 0.76), facecolors=face, edgecolors="white",
                           linewidth=0.3)
        if panel.get("note"):
            ax.text(0.99, 0.74, panel["note"], transform=ax.transAxes, ha="right",
                    va="center", fontsize=6.5, color="#555555")
        ax.set_yticks([0, 1], ["compute", "comm"])
        ax.set_ylim(-0.6, 1.6)
        ax.set_title(panel["title"], loc="left", pad=2)
        ax.grid(axis="y", visible=False)
    axes[-1, 0].set_xlabel("time within the step (ms)")
    return _save(fig)


# --- interleaved comparisons: every value drawn with its 95% interval ----------------------


def _errors(estimates: Sequence[dict | None]) -> tuple[list[float], list[list[float]]]:
    """Values and matplotlib's asymmetric error bars for Estimates (as JSON); an estimate
    without an interval gets a zero-length bar (its caption says so), an undefined one NaN."""
    values, below, above = [], [], []
    for estimate in estimates:
        value = (estimate or {}).get("value")
        values.append(float("nan") if value is None else value)
        low, high = (estimate or {}).get("low"), (estimate or {}).get("high")
        ok = value is not None and low is not None and high is not None
        below.append(max(value - low, 0.0) if ok else 0.0)
        above.append(max(high - value, 0.0) if ok else 0.0)
    return values, [below, above]


@_styled
def step_bars(entries: Sequence[dict]) -> Image:
    """Horizontal bars with 95% intervals: a cell's references (compute-only, comm-only,
    limit, schedule bound, sequential), then each strategy's step.

    ``entries``: [{"label", "estimate", "color"}], top to bottom.
    """
    fig, axes = _figure(1, 1, height=0.45 + 0.2 * len(entries))
    ax = axes[0, 0]
    positions = list(range(len(entries)))[::-1]
    values, errors = _errors([e["estimate"] for e in entries])
    ax.barh(positions, values, xerr=errors, color=[e["color"] for e in entries], height=0.7,
            error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "black"})
    for position, value, high in zip(positions, values, errors[1]):
        ax.text(value + high, position, f" {value:.3g}", va="center", fontsize=6.5)
    ax.set_yticks(positions, [e["label"] for e in entries])
    ax.set_xlabel("time per step (ms), median over rounds with its 95% interval")
    finite = [v + h for v, h in zip(values, errors[1]) if v == v]
    ax.set_xlim(0, max(finite, default=1) * 1.15)
    ax.grid(axis="y", visible=False)
    return _save(fig)


@_styled
def lost_time(entries: Sequence[dict]) -> Image:
    """Per strategy: step − compute-only split into exposed communication, compute slowdown
    and other (stacked, each part's interval at its segment's end), and below it the gap
    measured by the clocks with its interval.

    ``entries``: [{"strategy", "exposed_comm_ms", "compute_slowdown_ms", "other_ms",
    "gap_ms"}] with Estimates as JSON.
    """
    parts = tuple(LOST_TIME_COLORS)
    fig, axes = _figure(1, 1, height=0.55 + 0.42 * len(entries))
    ax = axes[0, 0]
    labels, ticks = [], []
    for index, entry in enumerate(entries):
        top = 2 * (len(entries) - 1 - index) + 1
        positive = negative = 0.0
        for offset, part in zip((-0.14, 0.0, 0.14), parts):
            value, error = _errors([entry[part]])
            value = 0.0 if value[0] != value[0] else value[0]
            start = positive if value >= 0 else negative
            ax.barh(top, value, left=start, height=0.7, color=LOST_TIME_COLORS[part],
                    edgecolor="white", linewidth=0.3,
                    label=LOST_TIME_LABELS[part] if index == 0 else None)
            end = start + value
            ax.errorbar(end, top + offset, xerr=[[error[0][0]], [error[1][0]]], fmt="none",
                        ecolor="black", elinewidth=0.7, capsize=1.5)
            if value >= 0:
                positive = end
            else:
                negative = end
        gap, error = _errors([entry["gap_ms"]])
        ax.barh(top - 1, gap, xerr=error, height=0.45, color="#444444",
                error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "black"},
                label="step − compute-only (clocks)" if index == 0 else None)
        labels += [f"{entry['strategy']}: parts", f"{entry['strategy']}: measured gap"]
        ticks += [top, top - 1]
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_yticks(ticks, labels)
    ax.set_xlabel("time lost against compute-only (ms per step), 95% intervals")
    ax.grid(axis="y", visible=False)
    ax.legend(ncols=4, frameon=False, loc="lower left", bbox_to_anchor=(0, 1.0), fontsize=6.5)
    return _save(fig)


@_styled
def speedup_by_chunks(panels: Sequence[dict]) -> Image:
    """Speedup over sequential against K, one line per strategy, one panel per workload.

    ``panels``: [{"title", "lines": {strategy: [(K, Estimate), ...]}}].
    """
    fig, axes = _figure(1, len(panels), height=2.3)
    styles = series_styles([s for panel in panels for s in panel["lines"]])
    for ax, panel in zip(axes[0], panels):
        count = max(len(panel["lines"]), 1)
        for index, (strategy, points) in enumerate(panel["lines"].items()):
            # Strategies side by side around each K, so their bars do not hide each other.
            shift = 1 + 0.05 * (index - (count - 1) / 2)
            values, errors = _errors([estimate for _, estimate in points])
            style = styles[strategy]
            ax.errorbar([k * shift for k, _ in points], values, yerr=errors,
                        marker=style.marker, linestyle=style.linestyle, markersize=3,
                        linewidth=1, capsize=1.5, elinewidth=0.7, color=style.color,
                        label=strategy)
        chunk_counts = sorted({k for points in panel["lines"].values() for k, _ in points})
        ax.axhline(1.0, color="black", linestyle=":", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xticks(chunk_counts, [str(k) for k in chunk_counts])
        ax.minorticks_off()
        ax.set_xlabel("chunks K")
        ax.set_title(panel["title"], loc="left", pad=2)
    axes[0, 0].set_ylabel("speedup over sequential (×)")
    _legend_above(fig, axes[0, 0])
    return _save(fig)


def _legend_above(fig, ax) -> None:
    """One legend for every panel, above them (a legend on one panel would widen it)."""
    fig.legend(*ax.get_legend_handles_labels(), ncols=6, frameon=False, loc="outside upper left",
               fontsize=6.5)


STEP_ROW = STEP.names  # a regime point's strategy: point[STEP_ROW.strategy]


@_styled
def regime(panels: Sequence[dict], study_ratio: float) -> Image:
    """Speedup over sequential against the measured compute:communication ratio, both with
    their intervals, under the ideal curve of a perfect overlap (impl.metrics.ideal_speedup).

    ``panels``: [{"title", "points": [{"strategy", "ratio", "speedup"}]}], a point's strategy
    keyed as a step row's (reports.cells.regime_points).
    """
    from impl.metrics import ideal_speedup

    fig, axes = _figure(1, len(panels), height=2.6, sharey=True)
    styles = series_styles([p[STEP_ROW.strategy] for panel in panels for p in panel["points"]])
    for ax, panel in zip(axes[0], panels):
        ratios = [p["ratio"] for p in panel["points"]]
        # Log axis: an interval end at or below 0 (not a ratio of two times) is not drawn.
        lows = [r["low"] if (r.get("low") or 0) > 0 else r["value"] for r in ratios]
        highs = [r["high"] if (r.get("high") or 0) > 0 else r["value"] for r in ratios]
        span = (min([*lows, study_ratio]) / 1.5, max([*highs, study_ratio]) * 1.5)
        xs = [span[0] * (span[1] / span[0]) ** (i / 200) for i in range(201)]
        ax.plot(xs, ideal_speedup(xs), color="black", linewidth=0.9,
                label="ideal: (r + 1) / max(r, 1)")
        for strategy in dict.fromkeys(p[STEP_ROW.strategy] for p in panel["points"]):
            mine = [p for p in panel["points"] if p[STEP_ROW.strategy] == strategy]
            x, xerr = _errors([p["ratio"] for p in mine])
            y, yerr = _errors([p["speedup"] for p in mine])
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt=styles[strategy].marker, markersize=3,
                        elinewidth=0.6, capsize=1, alpha=0.85, color=styles[strategy].color,
                        label=strategy)
        ax.axvline(study_ratio, color="#8c564b", linestyle="--", linewidth=0.8)
        ax.text(study_ratio, 0.99, " course study", transform=ax.get_xaxis_transform(),
                fontsize=6.5, va="top", color="#8c564b")
        ax.axhline(1.0, color="black", linestyle=":", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlim(*span)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("compute : communication (compute-only / comm-only)")
        ax.set_title(panel["title"], loc="left", pad=2)
    axes[0, 0].set_ylabel("speedup over sequential (×)")
    _legend_above(fig, axes[0, 0])
    return _save(fig)


@_styled
def interference(entries: Sequence[dict]) -> Image:
    """GEMM time beside traffic / GEMM time alone, with 95% intervals, per workload.

    ``entries``: [{"label", "interferer", "ratio"}], one bar each.
    """
    fig, axes = _figure(1, 1, height=0.5 + 0.22 * len(entries))
    ax = axes[0, 0]
    positions = list(range(len(entries)))[::-1]
    values, errors = _errors([e["ratio"] for e in entries])
    colors = {"all-reduce": OKABE_ITO["vermillion"], "copy": OKABE_ITO["blue"],
              "add": OKABE_ITO["orange"]}
    ax.barh(positions, [v - 1 for v in values], left=1, xerr=errors,
            color=[colors.get(e["interferer"], "#7f7f7f") for e in entries], height=0.65,
            error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "black"})
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(positions, [e["label"] for e in entries])
    ax.set_xlabel("GEMM time beside the traffic / alone (×), 95% interval")
    ax.grid(axis="y", visible=False)
    return _save(fig)


# --- simulation, GEMM ----------------------------------------------------------------------

GEMM_ROW = GEMM.names  # a roofline point's keys: row[GEMM_ROW.tflops]


@_styled
def roofline(groups: Sequence[dict]) -> Image:
    """Achieved TFLOP/s against arithmetic intensity, under each dtype's roofline.

    ``groups``: [{"dtype", "rows"}], the dtype and each row keyed as a GEMM row's (the
    tensor-parallel section builds its groups and points under the same declared names).
    """
    fig, axes = _figure(1, 1, height=2.9)
    ax = axes[0, 0]
    markers = {"fp32": "o", "bf16": "s", "tf32": "^", "fp16": "D"}
    versions = sorted({r[GEMM_ROW.version] for g in groups for r in g[GROUP.rows]},
                      key=gemm_version_rank)
    intensities = [r[GEMM_ROW.arithmetic_intensity] for g in groups for r in g[GROUP.rows]]
    if not intensities:
        return _save(fig)
    span = (min(intensities) / 4, max(intensities) * 4)
    drawn_peaks = set()
    for group in groups:
        for row in group[GROUP.rows]:
            ax.scatter(row[GEMM_ROW.arithmetic_intensity], row[GEMM_ROW.tflops], s=14,
                       color=version_color(row[GEMM_ROW.version]),
                       marker=markers.get(group[GEMM_ROW.dtype], "o"), zorder=3)
            peak, bandwidth = row.get(GEMM_ROW.peak_tflops), row.get(GEMM_ROW.peak_gbps)
            if peak and bandwidth and (group[GEMM_ROW.dtype], peak) not in drawn_peaks:
                drawn_peaks.add((group[GEMM_ROW.dtype], peak))
                ridge = peak * 1e3 / bandwidth  # FLOP/B where memory and compute bounds meet
                xs = [span[0], ridge, span[1]]
                ax.plot(xs, [min(peak, bandwidth * x / 1e3) for x in xs], "--", color="#777777",
                        linewidth=0.8)
                ax.text(span[1], peak, f"{group[GEMM_ROW.dtype]} peak {peak:g}", ha="right",
                        va="bottom", fontsize=6.5)
    for version in versions:
        ax.scatter([], [], color=version_color(version), s=14, label=version)
    for dtype in dict.fromkeys(g[GEMM_ROW.dtype] for g in groups):
        ax.scatter([], [], color="white", edgecolors="black", marker=markers.get(dtype, "o"),
                   s=14, label=dtype)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*span)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, compulsory traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _save(fig)
