"""All-reduce bandwidth (template sections/allreduce.html.j2): bus bandwidth against message size
per machine beside the reference measurements of docs/ANCHORS.md, and the busbw at 1 GiB against
nccl-tests'. The dense tables are in the appendix (reports/sections/appendix.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import matplotlib
from matplotlib.ticker import FuncFormatter

from impl.rows.kinds import ALLREDUCE
from impl.rows.report_records import GROUP
from reports import analysis
from reports.captions import how_text, make_figure
from reports.figures import Image, _figure, _save, _styled
from reports.format import fmt, fmt_pct
from reports.view import View

AR = ALLREDUCE.names  # the all-reduce rows' fields: row[AR.busbw_gbps]


def section_allreduce(view: View) -> dict:
    rows, runs = view.rows, view.runs
    groups = view.machines.in_order(analysis.allreduce_groups(rows))
    if not groups:
        return {"empty": True, "figure": None}
    measured = [r for g in groups for r in g[GROUP.rows]]
    machines = ", ".join(view.machines.words[label]
                         for label in dict.fromkeys(g["machine"] for g in groups))
    figure = make_figure(
        "fig-allreduce", busbw_figure(groups),
        f"All-reduce bus bandwidth against message size on {machines}, with the reference "
        f"measurements of docs/ANCHORS.md (nccl-tests dashed, torch.distributed dotted) where "
        f"they exist for the device, backend, profile and rank count; vertical bars span the "
        f"busbw of the slowest and fastest round (the median's busbw scaled by median round "
        f"time / round time; round wall times include the sync). The tables are in the "
        f"appendix. {how_text(measured, runs)}", "All-reduce bus bandwidth against message size")
    top = analysis.busbw_at_gib(rows)
    busbw = None if not top else {
        "busbw": fmt(top[AR.busbw_gbps]), AR.world_size: top[AR.world_size],
        "machine": top["machine"], "anchor": fmt(top["nccl_tests_gbps"]),
        "pct": fmt_pct(top["pct_of_nccl_tests"]), "wrong": top[AR.wrong_elements]}
    return {"empty": False, "figure": figure, "source": analysis.BUSBW_ANCHOR_SOURCE,
            "busbw": busbw}


def round_range(row: dict) -> tuple[float, float]:
    """busbw below and above the median's for the slowest and fastest round: the median busbw
    scaled by median round time / round time (round wall times include the sync)."""
    times = sorted(row.get("round_s") or [])
    if len(times) < 2:
        return 0.0, 0.0
    middle, busbw = statistics.median(times), row[AR.busbw_gbps]
    return busbw - busbw * middle / times[-1], busbw * middle / times[0] - busbw


@_styled
def busbw_figure(groups: Sequence[dict]) -> Image:
    """busbw against message size per (machine, ranks, profile), with the spread of the rounds
    (round_range) and reference lines."""
    fig, axes = _figure(1, 1, height=3.4)
    ax = axes[0, 0]
    palette = matplotlib.colormaps["tab10"]
    for index, group in enumerate(groups):
        rows = group[GROUP.rows]
        tint = palette(index % 10)
        sizes = [r[AR.size_bytes] / 2**20 for r in rows]
        spread = list(zip(*(round_range(r) for r in rows)))
        ax.errorbar(sizes, [r[AR.busbw_gbps] for r in rows], yerr=spread, marker="o",
                    markersize=3, color=tint, capsize=1.5, elinewidth=0.7,
                    label=f"{group['machine']} {group['world_size']} ranks, {group['profile']}")
        for field, style, peer in (("nccl_tests_gbps", "--", "nccl-tests"),
                                   ("torch_ref_gbps", ":", "torch.distributed ref.")):
            referenced = [r for r in rows if r[field] is not None]
            if referenced:
                ax.plot([r[AR.size_bytes] / 2**20 for r in referenced],
                        [r[field] for r in referenced], style, marker="x", markersize=3,
                        linewidth=0.9, color=tint,
                        label=f"{peer}, {group['world_size']} ranks (docs/ANCHORS.md)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{v / 1024:g} GiB" if v >= 1024 else f"{v:g} MiB"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    sizes = sorted({r[AR.size_bytes] / 2**20 for g in groups for r in g[GROUP.rows]})
    ax.set_xticks(sizes)
    ax.minorticks_off()
    ax.set_xlabel("message size per rank")
    ax.set_ylabel("busbw (GB/s)")
    ax.legend(frameon=False, fontsize=6.5, ncols=3, loc="upper center",
              bbox_to_anchor=(0.5, -0.2))
    return _save(fig)
