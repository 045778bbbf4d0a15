"""Power and energy (template sections/energy.html.j2): energy per step against mean power × step
time in the interleaved cells of the anatomy chapter, their NVML timelines, and the power
sampler's overhead.
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.rows.kinds import COMPARISON, METERED, SAMPLER_OVERHEAD, STEP
from impl.rows.report_records import ENERGY_CHECK, NVML_CURVE
from reports import analysis, cells
from reports.captions import how_text, make_figure
from reports.figures import Image, _figure, _save, _styled, color
from reports.format import (
    Column,
    Placement,
    estimate_column,
    fmt,
    fmt_estimate,
    make_table,
    text_column,
)
from reports.sections import appendix, overlap
from reports.view import View

# A cell is a comparison row; its energy column is keyed as a step row's (cells.energy_check);
# the sampler's rows are sampler-overhead rows.
CELL, STEP_ROW, SAMPLER = COMPARISON.names, STEP.names, SAMPLER_OVERHEAD.names


def section_energy(view: View) -> dict:
    """Energy per step against mean power × step time in the interleaved cells drawn in the
    anatomy chapter, the NVML timelines of those cells, and the sampler's overhead."""
    rows, runs = view.rows, view.runs
    check = ENERGY_CHECK
    columns = (text_column(check.variant), Column(check.power_w, "mean power, all GPUs", "W"),
               estimate_column(STEP_ROW.energy_per_step_j, "energy/step", "J"),
               estimate_column(check.power_times_step_j, "power × step", "J"),
               estimate_column(check.ratio, "energy / (power × step)"))
    machines = []
    for index, cell in enumerate(cells.anatomy_cells(rows)):
        checked = cells.energy_check(cell)
        if not checked:
            continue
        where = f"{overlap.cell_text(cell)} on {view.machines.words[cell['machine']]}"
        how = how_text([cell], runs)
        entry = {"heading": where, "figures": [], "table": make_table(
            f"tab-energy-{index}", f"Energy per step against mean power × step time per "
            f"variant ({where}), paired by round, with 95% intervals. "
            f"{appendix.ENERGY_NOTE} In an interleaved cell the sampled power is one mean over "
            f"every variant's segments (the samples are not split by variant), so every row "
            f"shows the same power and a variant that draws less or more than the cell's mean "
            f"moves its ratio too. {how}", columns, checked, note=lambda *_: None,
            placement=Placement("energy per step against mean power × step time"))}
        series = analysis.nvml_series((cell.get(CELL.nvml) or {}).get(METERED.series), "whole cell")
        if series:
            entry["figures"].append(make_figure(
                f"fig-nvml-{index}", nvml_timelines([series]),
                f"Power, GPU utilisation and SM clock during the cell's timed rounds, mean over "
                f"its GPUs ({where}), sampled by NVML every "
                f"{fmt((cell.get(CELL.nvml) or {}).get('period_ms'))} ms; every variant's "
                f"segments are in this one series, in their shuffled order. {how}",
                f"NVML timelines, {where}"))
        machines.append(entry)
    overhead = [{"machine": r["machine"], "ratio": fmt_estimate(r[SAMPLER.overhead_ratio]),
                 SAMPLER.verdict: r.get(SAMPLER.verdict), "period": fmt(r.get(SAMPLER.period_ms)),
                 "how": how_text([r], runs)}
                for r in view.machines.in_order(analysis.sampler_overhead(rows))
                if SAMPLER.overhead_ratio in r]
    return {"empty": not machines and not overhead, "machines": machines, "overhead": overhead}


NVML_PANELS = (("power_w", "power per GPU (W)"), ("gpu_util_pct", "GPU utilisation (%)"),
               ("sm_clock_mhz", "SM clock (MHz)"))


@_styled
def nvml_timelines(series: Sequence[dict]) -> Image:
    """Power, utilisation and SM clock over the timed rounds, mean over the run's GPUs."""
    fig, axes = _figure(len(NVML_PANELS), 1, height=4.2, sharex=True)
    for ax, (field, label) in zip(axes[:, 0], NVML_PANELS):
        for entry in series:
            values = entry[NVML_CURVE.mean].get(field)
            if values:
                legend = entry[NVML_CURVE.strategy]
                ax.plot(entry[NVML_CURVE.t_s], values, marker=".", markersize=3, linewidth=1,
                        color=color(legend), label=legend)
        ax.set_ylabel(label)
    axes[0, 0].legend(ncols=len(series) or 1, frameon=False)
    axes[-1, 0].set_xlabel("time since the sampler started (s)")
    return _save(fig, "png")
