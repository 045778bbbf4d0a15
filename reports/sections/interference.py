"""Interference: compute beside communication (template sections/interference.html.j2; the CPU's
and one GPU's blocks move to interference-cpu.html.j2, reports/layout.py): how much slower the
step's GEMMs run while an all-reduce runs beside them, per machine, with 95% intervals.
"""

from __future__ import annotations

from impl.rows.kinds import INTERFERENCE, SLOWDOWN
from impl.rows.report_records import BLOCKS
from reports import cells, figures
from reports.captions import how_text, make_figure
from reports.format import Column, Placement, estimate_column, make_table, text_column
from reports.view import View

# The interference rows' fields (row[INTERFERENCE_ROW.gemm]); a table row keeps the workload,
# ranks and GEMM under the row's own names, and a slowdown's ratio and verdict under its own.
INTERFERENCE_ROW = INTERFERENCE.names
INTERFERENCE_COLUMNS = (text_column(INTERFERENCE_ROW.workload),
                        Column.of(INTERFERENCE.field.world_size, "ranks", unit=""),
                        text_column(INTERFERENCE_ROW.gemm, "GEMM", nowrap=True),
                        estimate_column("alone_ms", "GEMMs alone", "ms"),
                        text_column("interferer", "beside"),
                        estimate_column(SLOWDOWN.ratio, "time × alone"),
                        text_column(SLOWDOWN.verdict))


def section_interference(view: View) -> dict:
    rows, runs = view.rows, view.runs
    found = view.machines.in_order(cells.interference(rows))
    machines = []
    for label in dict.fromkeys(r["machine"] for r in found):
        mine = [r for r in found if r["machine"] == label]
        table_rows, bars = [], []
        for row in mine:
            gemm = row[INTERFERENCE_ROW.gemm]
            shape = (f"{gemm['per_step']}× {gemm['m']}×{gemm['n']}×{gemm['k']} "
                     f"{gemm['dtype']}")
            for interferer, slowdown in row[INTERFERENCE_ROW.slowdown].items():
                table_rows.append({INTERFERENCE_ROW.workload: row[INTERFERENCE_ROW.workload],
                                   INTERFERENCE_ROW.world_size: row[INTERFERENCE_ROW.world_size],
                                   INTERFERENCE_ROW.gemm: shape,
                                   "alone_ms": row[INTERFERENCE_ROW.gemm_alone_ms],
                                   "interferer": interferer,
                                   SLOWDOWN.ratio: slowdown[SLOWDOWN.ratio],
                                   SLOWDOWN.verdict: slowdown[SLOWDOWN.verdict]})
                bars.append({"label": f"{row['workload']} ({row['profile']}), beside "
                                      f"{interferer}", "interferer": interferer,
                             "ratio": slowdown[SLOWDOWN.ratio]})
        where = view.machines.words[label]
        how = how_text(mine, runs)
        machines.append({"machine": label, "figure": make_figure(
            f"fig-interference-{label}", figures.interference(bars),
            f"Interference on {where}: the workload's dominant GEMM, timed alone and with "
            f"traffic running beside it (all-reduces of its weight gradient's bytes; on GPUs "
            f"also device copies and a memory-bound add on another stream), in the same "
            f"shuffled rounds; bars are GEMM time beside / alone with their 95% intervals. "
            f"{how}", f"GEMM slowdown beside traffic, {label}"),
            "table": make_table(
                f"tab-interference-{label}", f"Interference on {where}: GEMM time alone (median "
                f"over rounds with its 95% interval), and beside each kind of traffic as a "
                f"ratio to alone with its interval and verdict (slower only where the interval "
                f"of the difference excludes 0). {how}", INTERFERENCE_COLUMNS, table_rows,
                note=lambda *_: None,
                placement=Placement("GEMM time alone and beside traffic"))})
    return {"empty": not machines, BLOCKS.machines: machines}
