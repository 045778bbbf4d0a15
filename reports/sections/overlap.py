"""The overlap chapters: the abstract's answers, the interleaved results, the anatomy of a
step, interference, and the course study beside the real measurements.

Every number comes from reports.cells (comparison rows of suite/bench_overlap.py, measured
interleaved, each figure with its 95% interval) and is printed with reports.format; a step
timeline drawn here is also collected in ``timelines`` for the Perfetto export
(reports.traces), under the file name its caption gives.
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.rows.gate_records import ESTIMATED
from impl.rows.kinds import COMPARISON, PAIRED, REFERENCE, STEP
from impl.rows.report_records import BLOCKS
from reports import cells, figures
from reports.captions import (
    Machines,
    and_list,
    how_text,
    make_figure,
)
from reports.format import (
    Column,
    Placement,
    estimate_column,
    fmt_estimate,
    fmt_times,
    make_table,
    text_column,
)
from reports.view import View

CELL = COMPARISON.names  # a cell is a comparison row: cell[CELL.workload]
# The result table's rows are keyed as step rows are: the figures a cell holds per strategy.
# The references table's rows are keyed as the cell's references (REFERENCE.limit_ms).
STEP_ROW = STEP.names
PROFILE_ORDER = ("nvlink", "shm", "socket")
CPU_CAVEAT = ("a CPU machine with 2 cores shared with other work: its intervals are wide and "
              "its numbers check the method, they do not answer for GPUs")


def fabric_rank(cell: dict, machines: Machines) -> tuple:
    labels = machines.labels
    profile = cell[CELL.profile]
    return (labels.index(cell["machine"]) if cell["machine"] in labels else len(labels),
            PROFILE_ORDER.index(profile) if profile in PROFILE_ORDER else len(PROFILE_ORDER),
            profile, cell[CELL.world_size], cells.is_mpi(cell))


def fabric_heading(cell: dict, machines: Machines) -> str:
    ranks = "GPUs" if cell["machine"] in machines.gpu else "ranks"
    launcher = ", mpirun" if cells.is_mpi(cell) else ""
    return (f"{machines.words[cell['machine']]} · {cell['profile']} · "
            f"{cell['world_size']} {ranks} ({cell.get('backend')}{launcher})")


def cell_text(cell: dict) -> str:
    return (f"{cell['workload']}, K = {cell['chunks']}, {cell['world_size']} ranks, "
            f"{cell['profile']}")


def saved_pct(speedup: dict | None) -> dict | None:
    """A speedup Estimate as the share of sequential's time saved, 100·(1 − 1/speedup).

    Percentile bootstrap intervals follow a monotone transform, so the interval's ends map
    to the interval of the transformed figure."""
    e = ESTIMATED
    if not speedup or speedup.get(e.value) is None:
        return None
    convert = lambda x: None if x is None or x <= 0 else 100 * (1 - 1 / x)
    return {e.value: convert(speedup[e.value]), e.low: convert(speedup.get(e.low)),
            e.high: convert(speedup.get(e.high)), e.rounds: speedup.get(e.rounds)}


# --- the answers, in words ----------------------------------------------------------------


def efficiency_text(cell: dict, strategy: str) -> str:
    found = cells.figures(cell, strategy).get(STEP_ROW.overlap_efficiency)
    if cells.other_chunking(cell, strategy):
        return (f"no overlap efficiency: it made {cells.bucket_count(cell, strategy)} "
                f"bucket(s), not the K = {cell['chunks']} chunks that sequential sends, so part "
                f"of its gain is fewer, larger messages rather than overlap")
    note = cells.efficiency_note(cell, strategy)
    if not found or found.get("value") is None:
        return f"overlap efficiency n/a ({note})" if note else "overlap efficiency n/a"
    text = f"overlap efficiency {fmt_estimate(found)}"
    return f"{text} ({note})" if note else text


def answer_text(entry: dict) -> str:
    """One workload's answer: the strategy that hides most, with intervals and verdicts."""
    cell, best, found = entry["cell"], entry["best"], entry["figures"]
    versus = found["vs_sequential"]
    hidden = found.get(STEP_ROW.hidden_comm_fraction)
    text = (f"{cell['workload']}, read at {entry['why']}: {best} is fastest, "
            f"{fmt_times(versus[PAIRED.speedup])} over sequential "
            f"({cells.verdict_text(versus[PAIRED.verdict], 'sequential')}); "
            f"{efficiency_text(cell, best)}; hidden communication fraction "
            f"{fmt_estimate(hidden)}.")
    if entry["versus"]:
        text += " In the same rounds it is " + and_list(
            [cells.verdict_text(v[PAIRED.verdict], other) for other, v in entry["versus"].items()]
        ) + "."
    if entry["best_k"]:
        top = entry["best_k"]
        text += (f" The best of all {entry['candidates']} (K, strategy) pairs measured is "
                 f"{top['strategy']} at K = {top['cell']['chunks']}, "
                 f"{fmt_times(top['figures']['vs_sequential']['speedup'])}: optimistic, since "
                 f"the best of several noisy figures favours a lucky one.")
    return text


def nvlink_text(view: View) -> str:
    """The NVLink answer, or why there is none yet and which files are old-format."""
    rows, runs = view.rows, view.runs
    found = [a for a in cells.answers(rows) if a["cell"][CELL.profile] == "nvlink"
             and a["cell"].get(CELL.backend) == "nccl"]
    if found:
        first = min(found, key=lambda a: (cells.workload_rank(a["cell"][CELL.workload]),
                                          -a["cell"][CELL.world_size]))
        return (f"The NVLink answer ({fabric_heading(first['cell'], view.machines)}): "
                f"{answer_text(first)}")
    old = sorted({runs[r["run"]].path for r in cells.old_format_steps(rows)
                  if r[STEP_ROW.profile] == "nvlink" and r[STEP_ROW.world_size] > 1})
    if old:
        return (f"There is no interleaved NVLink result over several GPUs yet, so this report "
                f"gives no NVLink answer. The NVLink files loaded ({', '.join(old)}) were "
                f"measured before interleaving: references taken at other moments, no "
                f"intervals; their rows are listed in the appendix, not used here.")
    return "No NVLink result over several GPUs was loaded, so this report gives no NVLink answer."


def world_one_text(rows: Sequence[dict], machines: Machines) -> str | None:
    found = sorted(cells.world_one(rows), key=lambda f: fabric_rank(f["cell"], machines))
    if not found:
        return None
    agree = [f for f in found if f[PAIRED.verdict] == cells.NO_DIFFERENCE]
    listed = "; ".join(f"{f['cell']['machine']} {f['cell']['workload']}: "
                       f"{fmt_estimate(f[PAIRED.difference_ms])} ms"
                       f"{'' if f in agree else ' (' + f[PAIRED.verdict] + ')'}" for f in found)
    return (f"At world size 1 the all-reduce is a no-op, so sequential and compute-only run the "
            f"same computation: their paired difference (sequential − compute-only) has an "
            f"interval containing 0 in {len(agree)} of {len(found)} cells ({listed}).")


# --- the interleaved results --------------------------------------------------------------------

RESULT_COLUMNS = (
    text_column(STEP_ROW.workload), Column(STEP_ROW.chunks, "K"), text_column(STEP_ROW.strategy),
    estimate_column(STEP_ROW.step_ms, "step", "ms"), estimate_column("speedup", "× sequential"),
    estimate_column(STEP_ROW.overlap_efficiency, "eff. (limit)"),
    estimate_column(STEP_ROW.bound_efficiency, "eff. (bound)"),
    estimate_column(STEP_ROW.hidden_comm_fraction, "hidden comm."),
    text_column("vs_ddp", "vs DDP"), text_column("vs_ddp_25mb", "vs DDP 25 MB"),
)
REFERENCE_COLUMNS = (
    text_column(STEP_ROW.workload), Column(STEP_ROW.chunks, "K"),
    estimate_column(REFERENCE.compute_only_ms, "compute-only", "ms"),
    estimate_column(REFERENCE.comm_only_ms, "comm-only", "ms"),
    estimate_column(REFERENCE.sequential_ms, "sequential", "ms"),
    estimate_column(REFERENCE.limit_ms, "limit", "ms"),
    estimate_column(REFERENCE.bound_ms, "bound", "ms"),
    estimate_column(REFERENCE.bound_update_in_overlap_ms, "bound, update in overlap", "ms"),
    estimate_column(REFERENCE.compute_to_comm, "compute : comm"),
)
VERDICT_SHORT = {"faster": "faster", "slower": "slower", cells.NO_DIFFERENCE: "n.s."}


def strategy_rows(cell: dict) -> list[dict]:
    """One table row per compared strategy of a cell, with its figures and verdicts."""
    table = []
    for strategy in cells.compared(cell):
        found = cells.figures(cell, strategy)
        row = {"cell": cell, STEP_ROW.strategy: strategy, STEP_ROW.workload: cell[CELL.workload],
               STEP_ROW.chunks: cell[CELL.chunks], STEP_ROW.step_ms: found[STEP_ROW.step_ms],
               "speedup": found["vs_sequential"][PAIRED.speedup],
               **{key: found.get(key) for key in (STEP_ROW.overlap_efficiency,
                                                  STEP_ROW.bound_efficiency,
                                                  STEP_ROW.hidden_comm_fraction)}}
        for peer in ("ddp", "ddp_25mb"):
            versus = found.get(f"vs_{peer}")
            row[f"vs_{peer}"] = VERDICT_SHORT[versus[PAIRED.verdict]] if versus else "–"
        table.append(row)
    return table


def cell_note(key: str, row: dict) -> str | None:
    """Footnotes of the result tables: why an efficiency is missing or needs care."""
    if key in (STEP_ROW.overlap_efficiency, STEP_ROW.bound_efficiency):
        note = cells.efficiency_note(row["cell"], row[STEP_ROW.strategy])
        if key == STEP_ROW.bound_efficiency and note is None and row.get(key) and (
                row[key].get("low") is None):
            return ("no interval: some resamples had no headroom against the schedule bound "
                    "(sequential at or below it)")
        return note
    if key == STEP_ROW.hidden_comm_fraction and not row.get(key):
        return "no communication in the step's timeline"
    return None


def results_table(table_id: str, caption: str, cell_list: Sequence[dict]) -> object:
    rows = [row for cell in cell_list for row in strategy_rows(cell)]
    return make_table(table_id, caption, RESULT_COLUMNS, rows, note=cell_note)


def references_table(table_id: str, caption: str, cell_list: Sequence[dict]) -> object:
    rows = [{STEP_ROW.workload: c[CELL.workload], STEP_ROW.chunks: c[CELL.chunks],
             **c[CELL.references]}
            for c in cell_list]
    # The update-inside-the-overlap bound exists only in cells that measured such a variant.
    columns = [c for c in REFERENCE_COLUMNS if c.key != REFERENCE.bound_update_in_overlap_ms
               or any(row.get(c.key) for row in rows)]
    return make_table(table_id, caption, columns, rows, note=lambda *_: None)


def section_results(view: View) -> dict:
    rows, runs, machines = view.rows, view.runs, view.machines
    blocks: dict[tuple, list[list[dict]]] = {}
    for group in cells.groups(rows):
        if group[0][CELL.world_size] != 1:
            blocks.setdefault(fabric_rank(group[0], machines), []).append(group)
    answers = cells.answers(rows)
    out: dict = {"empty": not blocks and not cells.world_one(rows), BLOCKS.blocks: [],
                 "answer_chunks": cells.ANSWER_CHUNKS, "world_one": None,
                 "world_one_text": world_one_text(rows, machines), "cpu_caveat": CPU_CAVEAT,
                 "nvlink": nvlink_text(view)}
    for index, key in enumerate(sorted(blocks)):
        found = blocks[key]
        chosen = [cells.answer_cell(group)[0] for group in found]
        first = chosen[0]
        where = fabric_heading(first, machines)
        lines = {g[0][CELL.workload]: sorted(g, key=lambda c: c[CELL.chunks]) for g in found}
        panels = [{"title": workload, "lines": {
            strategy: [(c[CELL.chunks], cells.figures(c, strategy)["vs_sequential"]["speedup"])
                       for c in sweep if strategy in c[CELL.strategies]]
            for strategy in dict.fromkeys(s for c in sweep for s in cells.compared(c))}}
            for workload, sweep in lines.items()]
        mpi = any(cells.is_mpi(c) for c in chosen)
        block = {"heading": where, "machine": first["machine"],
                 "cpu": first["machine"] not in machines.gpu,
                 "mpi_note": cells.MPI_NOTE if mpi else None, "figures": [],
                 "answers": [answer_text(a) for a in answers
                             if fabric_rank(a["cell"], machines) == key]}
        block["figures"].append(make_figure(
            f"fig-speedup-k-{index}", figures.speedup_by_chunks(panels),
            f"Speedup over sequential against the chunk count K on {where}, every strategy "
            f"with its 95% interval (bars; strategies are drawn slightly apart at each K so "
            f"their bars stay visible). K = 1 cannot overlap anything in threaded or chunked: "
            f"it is a reference point. Every cell of the sweep is in the appendix. "
            f"{how_text([c for g in found for c in g], runs)}",
            f"Speedup over sequential against K, {where}"))
        out[BLOCKS.blocks].append(block)
    single = cells.world_one(rows)
    if single:
        out["world_one"] = world_one_table(single, view)
    return out


WORLD_ONE_COLUMNS = (text_column("machine"), text_column(STEP_ROW.workload),
                     estimate_column(REFERENCE.compute_only_ms, "compute-only", "ms"),
                     estimate_column(REFERENCE.sequential_ms, "sequential", "ms"),
                     estimate_column(PAIRED.difference_ms, "sequential − compute-only", "ms"),
                     text_column(PAIRED.verdict))


def world_one_table(found: Sequence[dict], view: View) -> object:
    table_rows = [{"machine": f["cell"]["machine"], STEP_ROW.workload: f["cell"][CELL.workload],
                   **{key: f["cell"][CELL.references][key]
                      for key in (REFERENCE.compute_only_ms, REFERENCE.sequential_ms)},
                   **{key: f[key] for key in (PAIRED.difference_ms, PAIRED.verdict)}}
                  for f in view.machines.in_order([{**f, "machine": f["cell"]["machine"]}
                                                   for f in found])]
    return make_table(
        "tab-world-one", "World size 1: the all-reduce of one rank is a no-op, so sequential "
        "and compute-only run the same computation and must agree. The paired difference has "
        "its 95% interval; a verdict other than 'no significant difference' is a bias of the "
        f"measurement, not of a strategy. {how_text([f['cell'] for f in found], view.runs)}",
        WORLD_ONE_COLUMNS, table_rows, note=lambda *_: None,
        placement=Placement("one rank: sequential against compute-only"))
