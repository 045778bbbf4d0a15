"""The overlap chapters: the abstract's answers, the interleaved results, the anatomy of a
step, interference, and the course study beside the real measurements.

Every number comes from reports.cells (comparison rows of suite/bench_overlap.py, measured
interleaved, each figure with its 95% interval) and is printed with reports.format; a step
timeline drawn here is also collected in ``timelines`` for the Perfetto export
(reports.traces), under the file name its caption gives.
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.metrics import ideal_speedup
from reports import analysis, cells, figures, traces
from reports.captions import (
    Run,
    and_list,
    how_text,
    in_machine_order,
    is_gpu_machine,
    machine_labels,
    machine_text,
    make_figure,
)
from reports.format import (
    NA,
    Column,
    estimate_column,
    fmt,
    fmt_estimate,
    fmt_pct,
    fmt_times,
    make_table,
    text_column,
)

PROFILE_ORDER = ("nvlink", "shm", "socket")
STUDY_SPEEDUP_PCT = 30.0  # the course study's reported speedup (docs/ANCHORS.md)
CPU_CAVEAT = ("a CPU machine with 2 cores shared with other work: its intervals are wide and "
              "its numbers check the method, they do not answer for GPUs")


def fabric_rank(cell: dict, runs: Sequence[Run]) -> tuple:
    labels = machine_labels(runs)
    profile = cell["profile"]
    return (labels.index(cell["machine"]) if cell["machine"] in labels else len(labels),
            PROFILE_ORDER.index(profile) if profile in PROFILE_ORDER else len(PROFILE_ORDER),
            profile, cell["world_size"], cells.is_mpi(cell))


def fabric_heading(cell: dict, runs: Sequence[Run]) -> str:
    ranks = "GPUs" if is_gpu_machine(cell["machine"], runs) else "ranks"
    launcher = ", mpirun" if cells.is_mpi(cell) else ""
    return (f"{machine_text(cell['machine'], runs)} · {cell['profile']} · "
            f"{cell['world_size']} {ranks} ({cell.get('backend')}{launcher})")


def cell_text(cell: dict) -> str:
    return (f"{cell['workload']}, K = {cell['chunks']}, {cell['world_size']} ranks, "
            f"{cell['profile']}")


def saved_pct(speedup: dict | None) -> dict | None:
    """A speedup Estimate as the share of sequential's time saved, 100·(1 − 1/speedup).

    Percentile bootstrap intervals follow a monotone transform, so the interval's ends map
    to the interval of the transformed figure."""
    if not speedup or speedup.get("value") is None:
        return None
    convert = lambda x: None if x is None or x <= 0 else 100 * (1 - 1 / x)
    return {"value": convert(speedup["value"]), "low": convert(speedup.get("low")),
            "high": convert(speedup.get("high")), "rounds": speedup.get("rounds")}


# --- the answers, in words ----------------------------------------------------------------


def efficiency_text(cell: dict, strategy: str) -> str:
    found = cells.figures(cell, strategy).get("overlap_efficiency")
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
    hidden = found.get("hidden_comm_fraction")
    text = (f"{cell['workload']}, read at {entry['why']}: {best} is fastest, "
            f"{fmt_times(versus['speedup'])} over sequential "
            f"({cells.verdict_text(versus['verdict'], 'sequential')}); "
            f"{efficiency_text(cell, best)}; hidden communication fraction "
            f"{fmt_estimate(hidden)}.")
    if entry["versus"]:
        text += " In the same rounds it is " + and_list(
            [cells.verdict_text(v["verdict"], other) for other, v in entry["versus"].items()]
        ) + "."
    if entry["best_k"]:
        top = entry["best_k"]
        text += (f" The best of all {entry['candidates']} (K, strategy) pairs measured is "
                 f"{top['strategy']} at K = {top['cell']['chunks']}, "
                 f"{fmt_times(top['figures']['vs_sequential']['speedup'])}: optimistic, since "
                 f"the best of several noisy figures favours a lucky one.")
    return text


def nvlink_text(rows: Sequence[dict], runs: Sequence[Run]) -> str:
    """The NVLink answer, or why there is none yet and which files are old-format."""
    found = [a for a in cells.answers(rows) if a["cell"]["profile"] == "nvlink"
             and a["cell"].get("backend") == "nccl"]
    if found:
        first = min(found, key=lambda a: (cells.workload_rank(a["cell"]["workload"]),
                                          -a["cell"]["world_size"]))
        return (f"The NVLink answer ({fabric_heading(first['cell'], runs)}): "
                f"{answer_text(first)}")
    old = sorted({runs[r["run"]].path for r in cells.old_format_steps(rows)
                  if r["profile"] == "nvlink" and r["world_size"] > 1})
    if old:
        return (f"There is no interleaved NVLink result over several GPUs yet, so this report "
                f"gives no NVLink answer. The NVLink files loaded ({', '.join(old)}) were "
                f"measured before interleaving: references taken at other moments, no "
                f"intervals; their rows are listed in the appendix, not used here.")
    return "No NVLink result over several GPUs was loaded, so this report gives no NVLink answer."


def world_one_text(rows: Sequence[dict], runs: Sequence[Run]) -> str | None:
    found = sorted(cells.world_one(rows), key=lambda f: fabric_rank(f["cell"], runs))
    if not found:
        return None
    agree = [f for f in found if f["verdict"] == cells.NO_DIFFERENCE]
    listed = "; ".join(f"{f['cell']['machine']} {f['cell']['workload']}: "
                       f"{fmt_estimate(f['difference'])} ms"
                       f"{'' if f in agree else ' (' + f['verdict'] + ')'}" for f in found)
    return (f"At world size 1 the all-reduce is a no-op, so sequential and compute-only run the "
            f"same computation: their paired difference (sequential − compute-only) has an "
            f"interval containing 0 in {len(agree)} of {len(found)} cells ({listed}).")


# --- the interleaved results --------------------------------------------------------------------

RESULT_COLUMNS = (
    text_column("workload", "workload"), Column("chunks", "K"),
    text_column("strategy", "strategy"), estimate_column("step_ms", "step", "ms"),
    estimate_column("speedup", "× sequential"),
    estimate_column("overlap_efficiency", "eff. (limit)"),
    estimate_column("bound_efficiency", "eff. (bound)"),
    estimate_column("hidden_comm_fraction", "hidden comm."),
    text_column("vs_ddp", "vs DDP"), text_column("vs_ddp_25mb", "vs DDP 25 MB"),
)
REFERENCE_COLUMNS = (
    text_column("workload", "workload"), Column("chunks", "K"),
    estimate_column("compute_only_ms", "compute-only", "ms"),
    estimate_column("comm_only_ms", "comm-only", "ms"),
    estimate_column("sequential_ms", "sequential", "ms"),
    estimate_column("limit_ms", "limit", "ms"), estimate_column("bound_ms", "bound", "ms"),
    estimate_column("bound_update_in_overlap_ms", "bound, update in overlap", "ms"),
    estimate_column("compute_to_comm", "compute : comm"),
)
VERDICT_SHORT = {"faster": "faster", "slower": "slower", cells.NO_DIFFERENCE: "n.s."}


def strategy_rows(cell: dict) -> list[dict]:
    """One table row per compared strategy of a cell, with its figures and verdicts."""
    table = []
    for strategy in cells.compared(cell):
        found = cells.figures(cell, strategy)
        row = {"cell": cell, "strategy": strategy, "workload": cell["workload"],
               "chunks": cell["chunks"], "step_ms": found["step_ms"],
               "speedup": found["vs_sequential"]["speedup"],
               "overlap_efficiency": found.get("overlap_efficiency"),
               "bound_efficiency": found.get("bound_efficiency"),
               "hidden_comm_fraction": found.get("hidden_comm_fraction")}
        for peer in ("ddp", "ddp_25mb"):
            versus = found.get(f"vs_{peer}")
            row[f"vs_{peer}"] = VERDICT_SHORT[versus["verdict"]] if versus else "–"
        table.append(row)
    return table


def cell_note(key: str, row: dict) -> str | None:
    """Footnotes of the result tables: why an efficiency is missing or needs care."""
    if key in ("overlap_efficiency", "bound_efficiency"):
        note = cells.efficiency_note(row["cell"], row["strategy"])
        if key == "bound_efficiency" and note is None and row.get(key) and (
                row[key].get("low") is None):
            return ("no interval: some resamples had no headroom against the schedule bound "
                    "(sequential at or below it)")
        return note
    if key == "hidden_comm_fraction" and not row.get(key):
        return "no communication in the step's timeline"
    return None


def results_table(table_id: str, caption: str, cell_list: Sequence[dict]) -> object:
    rows = [row for cell in cell_list for row in strategy_rows(cell)]
    return make_table(table_id, caption, RESULT_COLUMNS, rows, note=cell_note)


def references_table(table_id: str, caption: str, cell_list: Sequence[dict]) -> object:
    rows = [{"workload": c["workload"], "chunks": c["chunks"], **c["references"]}
            for c in cell_list]
    # The update-inside-the-overlap bound exists only in cells that measured such a variant.
    columns = [c for c in REFERENCE_COLUMNS if c.key != "bound_update_in_overlap_ms"
               or any(row.get(c.key) for row in rows)]
    return make_table(table_id, caption, columns, rows, note=lambda *_: None)


def section_results(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    blocks: dict[tuple, list[list[dict]]] = {}
    for group in cells.groups(rows):
        if group[0]["world_size"] != 1:
            blocks.setdefault(fabric_rank(group[0], runs), []).append(group)
    answers = cells.answers(rows)
    out: dict = {"empty": not blocks and not cells.world_one(rows), "blocks": [],
                 "answer_chunks": cells.ANSWER_CHUNKS, "world_one": None,
                 "world_one_text": world_one_text(rows, runs), "cpu_caveat": CPU_CAVEAT,
                 "nvlink": nvlink_text(rows, runs)}
    for index, key in enumerate(sorted(blocks)):
        found = blocks[key]
        chosen = [cells.answer_cell(group)[0] for group in found]
        first = chosen[0]
        where = fabric_heading(first, runs)
        lines = {g[0]["workload"]: sorted(g, key=lambda c: c["chunks"]) for g in found}
        panels = [{"title": workload, "lines": {
            strategy: [(c["chunks"], cells.figures(c, strategy)["vs_sequential"]["speedup"])
                       for c in sweep if strategy in c["strategies"]]
            for strategy in dict.fromkeys(s for c in sweep for s in cells.compared(c))}}
            for workload, sweep in lines.items()]
        mpi = any(cells.is_mpi(c) for c in chosen)
        block = {"heading": where, "cpu": not is_gpu_machine(first["machine"], runs),
                 "mpi_note": cells.MPI_NOTE if mpi else None, "figures": [],
                 "answers": [answer_text(a) for a in answers
                             if fabric_rank(a["cell"], runs) == key]}
        block["figures"].append(make_figure(
            f"fig-speedup-k-{index}", figures.speedup_by_chunks(panels),
            f"Speedup over sequential against the chunk count K on {where}, every strategy "
            f"with its 95% interval (bars; strategies are drawn slightly apart at each K so "
            f"their bars stay visible). K = 1 cannot overlap anything in threaded or chunked: "
            f"it is a reference point. Every cell of the sweep is in the appendix. "
            f"{how_text([c for g in found for c in g], runs)}",
            f"Speedup over sequential against K, {where}"))
        out["blocks"].append(block)
    single = cells.world_one(rows)
    if single:
        out["world_one"] = world_one_table(single, runs)
    return out


WORLD_ONE_COLUMNS = (text_column("machine", "machine"), text_column("workload", "workload"),
                     estimate_column("compute_only_ms", "compute-only", "ms"),
                     estimate_column("sequential_ms", "sequential", "ms"),
                     estimate_column("difference", "sequential − compute-only", "ms"),
                     text_column("verdict", "verdict"))


def world_one_table(found: Sequence[dict], runs: Sequence[Run]) -> object:
    table_rows = [{"machine": f["cell"]["machine"], "workload": f["cell"]["workload"],
                   "compute_only_ms": f["cell"]["references"]["compute_only_ms"],
                   "sequential_ms": f["cell"]["references"]["sequential_ms"],
                   "difference": f["difference"], "verdict": f["verdict"]}
                  for f in in_machine_order([{**f, "machine": f["cell"]["machine"]}
                                             for f in found], runs)]
    return make_table(
        "tab-world-one", "World size 1: the all-reduce of one rank is a no-op, so sequential "
        "and compute-only run the same computation and must agree. The paired difference has "
        "its 95% interval; a verdict other than 'no significant difference' is a bias of the "
        f"measurement, not of a strategy. {how_text([f['cell'] for f in found], runs)}",
        WORLD_ONE_COLUMNS, table_rows, note=lambda *_: None)


# --- the anatomy of a step ------------------------------------------------------------------

VARIANT_NOTES = {cells.COMPUTE_ONLY: "no communication: the reference computation",
                 cells.COMM_ONLY: "no compute: the K all-reduces back to back"}


def variant_step(cell: dict, variant: str) -> dict | None:
    """A variant's step time (Estimate as JSON): its own figures, or the reference's."""
    if variant in cell["strategies"]:
        return cell["strategies"][variant]["step_ms"]
    key = {cells.COMPUTE_ONLY: "compute_only_ms", cells.COMM_ONLY: "comm_only_ms"}.get(
        variant, "sequential_ms")
    return cell["references"].get(key)


def trace_name(cell: dict, variant: str) -> str:
    return "traces/" + traces.file_name(cell["machine"], cell["workload"], f"K{cell['chunks']}",
                                        f"w{cell['world_size']}", cell["profile"], variant)


def cell_timelines(cell: dict) -> list[dict]:
    """Every representative step of a cell, for the Gantt chart and the trace export."""
    found = []
    for variant in sorted(cell.get("timelines") or {}, key=cells.variant_rank):
        about = {"machine": cell["machine"], "workload": cell["workload"],
                 "chunks": cell["chunks"], "world_size": cell["world_size"],
                 "profile": cell["profile"], "variant": variant,
                 "step": "last step of the median round"}
        found.append({"variant": variant, "timeline": cell["timelines"][variant],
                      "file": trace_name(cell, variant), "about": about,
                      "process": f"rank 0 · {variant} · {cell_text(cell)}"})
    return found


def step_entries(cell: dict) -> list[dict]:
    """The bars of the step-times figure: references, then every compared strategy."""
    references = cell["references"]
    entries = [{"label": "compute-only", "estimate": references["compute_only_ms"],
                "color": figures.color(cells.COMPUTE_ONLY)}]
    if references.get("comm_only_ms"):
        entries += [{"label": "comm-only", "estimate": references["comm_only_ms"],
                     "color": figures.color(cells.COMM_ONLY)},
                    {"label": "limit max(compute, comm)", "estimate": references["limit_ms"],
                     "color": "#dddddd"},
                    {"label": "schedule bound", "estimate": references.get("bound_ms"),
                     "color": "#aaaaaa"}]
    if references.get("bound_update_in_overlap_ms"):  # the bound of the "+update" variants
        entries.append({"label": "schedule bound, update inside the overlap",
                        "estimate": references["bound_update_in_overlap_ms"],
                        "color": "#bbbbbb"})
    entries.append({"label": cell.get("sequential_reference") or "sequential",
                    "estimate": references["sequential_ms"],
                    "color": figures.color("sequential")})
    entries += [{"label": strategy, "estimate": cells.figures(cell, strategy)["step_ms"],
                 "color": figures.color(strategy)} for strategy in cells.compared(cell)]
    return entries


LOST_COLUMNS = (text_column("strategy", "strategy"),
                estimate_column("exposed_comm_ms", "exposed comm.", "ms"),
                estimate_column("compute_slowdown_ms", "compute slowdown", "ms"),
                estimate_column("other_ms", "other", "ms"),
                estimate_column("parts_sum_ms", "sum of parts", "ms"),
                estimate_column("gap_ms", "step − compute-only", "ms"),
                Column("sum_vs_gap_pct", "sum vs gap", "%"))


def finding_text(cell: dict) -> str:
    """The main finding of a cell, generated from its data: what its fastest strategy hides
    and where the rest of its lost time goes."""
    strategy = cells.best_strategy(cell)
    found = cells.finding(cell, strategy)
    hidden = found["hidden"]
    part = found["largest"]
    parts = found["parts"]
    text = f"The fastest here, {strategy}, "
    text += (f"hides {fmt_pct(100 * hidden['value'])} of its communication "
             f"[{fmt_pct(100 * hidden['low'])}, {fmt_pct(100 * hidden['high'])}]"
             if hidden and None not in (hidden.get("value"), hidden.get("low"), hidden.get("high"))
             else "has no observed communication to hide"
             if not hidden or hidden.get("value") is None else
             f"hides {fmt_pct(100 * hidden['value'])} of its communication")
    if part == "compute_slowdown_ms" and found["backward_ms"] is not None:
        text += (f", but its backward slows from {fmt(found['backward_reference_ms'])} to "
                 f"{fmt(found['backward_ms'])} ms (representative steps of compute-only and "
                 f"{strategy}); compute slowdown is the largest part of its lost time, "
                 f"{fmt_estimate(parts[part])} ms per step.")
    elif part == "exposed_comm_ms":
        text += (f"; the largest part of its lost time is communication left exposed, "
                 f"{fmt_estimate(parts[part])} ms per step.")
    else:
        text += (f"; the largest part of its lost time is neither communication nor backward "
                 f"compute (launches, waits, forward and update), {fmt_estimate(parts[part])} "
                 f"ms per step.")
    return text


def lost_rows(cell: dict) -> list[dict]:
    table = []
    for entry in cells.lost_time(cell):
        total, gap = cells.value(entry["parts_sum_ms"]), cells.value(entry["gap_ms"])
        table.append({**entry, "sum_vs_gap_pct": None if not gap or total is None
                      else 100 * (total - gap) / abs(gap)})
    return table


def section_anatomy(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    machines = []
    for index, cell in enumerate(sorted(cells.anatomy_cells(rows),
                                        key=lambda c: fabric_rank(c, runs))):
        where = f"{cell_text(cell)} on {machine_text(cell['machine'], runs)}"
        how = how_text([cell], runs)
        steps = cell_timelines(cell)
        panels = []
        for entry in steps:
            variant = entry["variant"]
            hidden = (cell["strategies"].get(variant) or {}).get("hidden_comm_fraction")
            panels.append({"title": f"{variant}: step {fmt_estimate(variant_step(cell, variant))}"
                                    f" ms" + (f", hidden comm. {fmt_estimate(hidden)}"
                                              if hidden else ""),
                           "bars": analysis.timeline_bars(entry["timeline"]),
                           "note": VARIANT_NOTES.get(variant)})
        files = ", ".join(e["file"] for e in steps)
        entry = {"heading": where, "machine": cell["machine"], "figures": [], "table": None,
                 "finding": None, "timelines": steps}
        entry["figures"].append(make_figure(
            f"fig-gantt-{index}", figures.gantt(panels),
            f"The representative step of every variant ({where}): for each, the last step of "
            f"its median round (the round whose median step time is the median over rounds), "
            f"from its own timeline: compute lane (forward, the backward of each gradient "
            f"chunk, SGD update) and communication lane (each chunk's all-reduce; for DDP each "
            f"bucket, observed through a communication hook). A chunk's backward and "
            f"all-reduce share a colour; grey is forward and update. Panel titles give the "
            f"median step over rounds with its 95% interval. Perfetto traces of these steps: "
            f"{files}. {how}", f"Gantt chart of the representative steps, {where}"))
        entry["figures"].append(make_figure(
            f"fig-steps-{index}", figures.step_bars(step_entries(cell)),
            f"Step times with their 95% intervals ({where}): the references measured in the "
            f"same rounds, the limit max(compute-only, comm-only), the schedule bound (a "
            f"perfect overlap of this chunking with zero interference) and every strategy. "
            f"{how}", f"Step times and bounds, {where}"))
        if cells.compared(cell):
            entry["figures"].append(make_figure(
                f"fig-lost-{index}", figures.lost_time(cells.lost_time(cell)),
                f"Where the lost time goes ({where}): per strategy, step − compute-only split "
                f"into exposed communication, compute slowdown beside communication and the "
                f"rest (stacked, medians over rounds; each part's 95% interval is drawn at the "
                f"end of its segment), and below it the same gap measured by the step clocks, "
                f"with its interval. The parts come from the timelines, the gap from the clocks: "
                f"their agreement checks the timelines (table below). {how}",
                f"Lost time per strategy, {where}"))
            entry["table"] = make_table(
                f"tab-lost-{index}", f"Lost time per strategy ({where}), ms per step, medians "
                f"over rounds with 95% intervals. Sum vs gap: (sum of parts − gap) / gap. "
                f"{how}", LOST_COLUMNS, lost_rows(cell), note=lambda *_: None)
            entry["finding"] = finding_text(cell)
        machines.append(entry)
    return {"empty": not machines, "machines": machines}


def _doc(function) -> str:
    """A formula's docstring as one paragraph (the report quotes the code's own words)."""
    return " ".join(function.__doc__.split())


def _docs():
    from impl.metrics import lost_time_ms, schedule_bound_ms

    return _doc(lost_time_ms), _doc(schedule_bound_ms), _doc(ideal_speedup)


LOST_TIME_DOC, BOUND_DOC, IDEAL_DOC = _docs()


# --- interference -----------------------------------------------------------------------------

INTERFERENCE_COLUMNS = (text_column("workload", "workload"), Column("world_size", "ranks"),
                        text_column("gemm", "GEMM", nowrap=True),
                        estimate_column("alone_ms", "GEMMs alone", "ms"),
                        text_column("interferer", "beside"),
                        estimate_column("ratio", "time × alone"),
                        text_column("verdict", "verdict"))


def section_interference(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    found = in_machine_order(cells.interference(rows), runs)
    machines = []
    for label in dict.fromkeys(r["machine"] for r in found):
        mine = [r for r in found if r["machine"] == label]
        table_rows, bars = [], []
        for row in mine:
            gemm = row["gemm"]
            shape = (f"{gemm['per_step']}× {gemm['m']}×{gemm['n']}×{gemm['k']} "
                     f"{gemm['dtype']}")
            for interferer, slowdown in row["slowdown"].items():
                table_rows.append({"workload": row["workload"], "world_size": row["world_size"],
                                   "gemm": shape, "alone_ms": row["gemm_alone_ms"],
                                   "interferer": interferer, "ratio": slowdown["ratio"],
                                   "verdict": slowdown["verdict"]})
                bars.append({"label": f"{row['workload']} ({row['profile']}), beside "
                                      f"{interferer}", "interferer": interferer,
                             "ratio": slowdown["ratio"]})
        where = machine_text(label, runs)
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
                note=lambda *_: None)})
    return {"empty": not machines, "machines": machines}


# --- the course study, reproduced --------------------------------------------------------------


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
        low = min(simulated, key=lambda r: r["speedup_pct"])
        high = max(simulated, key=lambda r: r["speedup_pct"])
        text += (f" (rerun here: {fmt_pct(low['speedup_pct'])} at K = {low['chunks']} to "
                 f"{fmt_pct(high['speedup_pct'])} at K = {high['chunks']}, "
                 f"{len(simulated)} runs of the simulation)" if len(simulated) > 1 else
                 f" (rerun here: {fmt_pct(low['speedup_pct'])} at K = {low['chunks']})")
    if nearest:
        entry = nearest[0]
        cell = entry["cell"]
        chunked = cell["strategies"].get("chunked")
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


STUDY_COLUMNS = (text_column("what", "the study's figure or claim"),
                 text_column("study", "course study (sleeps)"),
                 text_column("simulated", "simulation, reproduced here"),
                 text_column("nearest", "real, at the study's ratio"),
                 text_column("reference", "real, reference workload"))


def _saved_text(cell: dict, strategy: str) -> str:
    found = cell["strategies"].get(strategy)
    if not found:
        return f"{strategy} not measured in that cell"
    versus = found["vs_sequential"]
    return (f"{strategy}: {fmt_estimate(saved_pct(versus['speedup']))}% "
            f"({cells.verdict_text(versus['verdict'], 'sequential')})")


def study_rows(rows: Sequence[dict], runs: Sequence[Run]) -> list[dict]:
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
    if old and not any(is_gpu_machine(r["cell"]["machine"], runs) for r in reference):
        first = max(old, key=lambda o: (o["profile"] == "nvlink", o["world_size"]))
        shown.append(f"≈ {fmt(first['ratio'])} ({first['machine']}, {first['profile']}, "
                     f"{first['world_size']} GPUs, {REFERENCE_NAME}: compute "
                     f"{fmt(first['compute_only_ms'])} ms, all-reduce "
                     f"{fmt(first['comm_only_ms'])} ms; measured before interleaving, "
                     f"no interval)")
    ref_ratio = "; ".join(shown) or NA
    sims = "; ".join(f"{fmt_pct(r['speedup_pct'])} at K = {r['chunks']} ({r['machine']}, "
                     f"× {fmt(r['scale'])} time scale)" for r in simulated) or NA
    ideal = float(ideal_speedup(cells.STUDY_COMPUTE_TO_COMM))
    table = [
        {"what": "compute : communication", "study": "1.5 (300 ms compute, 200 ms "
         "communication per chunk)", "simulated": "1.5 (the same sleeps, scaled)",
         "nearest": f"{fmt_estimate(near['ratio'])} ({where})" if near else NA,
         "reference": ref_ratio},
        {"what": "time saved by overlap (chunked, phase 4)",
         "study": f"up to ~{STUDY_SPEEDUP_PCT:g}%", "simulated": sims,
         "nearest": _saved_text(near["cell"], "chunked") if near else NA,
         "reference": _saved_text(reference[0]["cell"], "chunked") if reference else
         "no interleaved measurement"},
        {"what": "time saved by a communication thread (threaded, phase 2)",
         "study": "overlap by a second thread (OpenMP sections)", "simulated": "the same "
         "model: the overlapped run is a second thread",
         "nearest": _saved_text(near["cell"], "threaded") if near else NA,
         "reference": _saved_text(reference[0]["cell"], "threaded") if reference else
         "no interleaved measurement"},
        {"what": "fastest strategy at that ratio", "study": "not compared (no DDP)",
         "simulated": NA,
         "nearest": _saved_text(near["cell"], near["best"]) if near else NA,
         "reference": _saved_text(reference[0]["cell"],
                                  cells.best_strategy(reference[0]["cell"]))
         if reference else "no interleaved measurement"},
        {"what": "perfect overlap at that ratio (ideal)",
         "study": f"{fmt_pct(100 * (1 - 1 / ideal))} at 1.5 (impl.metrics.ideal_speedup)",
         "simulated": NA,
         "nearest": (f"{fmt_pct(100 * (1 - 1 / float(ideal_speedup(near['ratio']['value']))))}"
                     f" at the measured ratio") if near else NA,
         "reference": NA},
    ]
    return table


REFERENCE_NAME = cells.REFERENCE_WORKLOADS[0]
SYNTHETIC_COLUMNS = (text_column("machine", "machine"), Column("chunks", "K"),
                     Column("scale", "time scale"),
                     Column("sequential_ms", "one after the other", "ms"),
                     Column("step_ms", "overlapped", "ms"),
                     text_column("spread", "overlapped, round range", nowrap=True),
                     Column("speedup_pct", "time saved", "%"))


def section_study(rows: Sequence[dict], runs: Sequence[Run]) -> dict:
    """The chapter "The course study, reproduced": the claims beside real measurements, the
    regime figure and the sleep-based simulation."""
    simulated = in_machine_order(analysis.synthetic(rows), runs)
    points = cells.regime_points(rows)
    out: dict = {"empty": not simulated and not points, "summary": study_text(rows),
                 "table": None, "figures": [],
                 "synthetic": None, "synthetic_figures": [], "timelines": [],
                 "ideal_doc": IDEAL_DOC, "ratio": cells.STUDY_COMPUTE_TO_COMM}
    if out["empty"]:
        return out
    out["table"] = make_table(
        "tab-study", "The course study's claims beside this suite. The study's numbers come "
        "from sleeps (docs/ANCHORS.md); the simulation column reruns that model "
        "(suite/bench_synthetic.py); the real columns are interleaved measurements with 95% "
        "intervals: the cell whose measured compute:communication is nearest the study's 1.5, "
        "and the reference workload. Time saved = 100·(1 − step/sequential).", STUDY_COLUMNS,
        study_rows(rows, runs), note=lambda *_: None)
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
        machines = ", ".join(machine_text(label, runs)
                             for label in dict.fromkeys(r["machine"] for r in simulated))
        how = how_text(simulated, runs)
        out["synthetic"] = make_table(
            "tab-synthetic", f"Simulation (sleep-based), not a measurement: the course study's "
            f"model, per chunk 300 ± 50 ms of 'compute' and 200 ± 30 ms of 'communication' "
            f"scaled by the time scale, on {machines}; round range: the fastest and slowest "
            f"overlapped round. {how}", SYNTHETIC_COLUMNS, simulated)
        out["synthetic_figures"].append(make_figure(
            "fig-synthetic", figures.synthetic(simulated, STUDY_SPEEDUP_PCT),
            f"Simulation (sleep-based), not a measurement: simulated step one after the other "
            f"and overlapped by a second thread, and the time saved against the course "
            f"study's ~{STUDY_SPEEDUP_PCT:g}% (on {machines}). {how}",
            "Simulated speedup of the sleep-based model"))
        largest = max(simulated, key=lambda r: (r["chunks"], r["machine"]))
        if largest.get("timeline"):
            name = "traces/" + traces.file_name(largest["machine"], "synthetic",
                                                f"K{largest['chunks']}")
            out["timelines"].append({"variant": "synthetic", "timeline": largest["timeline"],
                                     "file": name, "process": "simulation (sleeps)",
                                     "about": {"machine": largest["machine"],
                                               "chunks": largest["chunks"],
                                               "variant": "synthetic (sleep-based)"}})
            out["synthetic_figures"].append(make_figure(
                "fig-synthetic-gantt", figures.gantt([{
                    "title": f"simulation, K = {largest['chunks']} ({largest['machine']}): "
                             f"sleeps, no compute and no communication",
                    "bars": analysis.timeline_bars(largest["timeline"]), "note": None}]),
                f"Simulation (sleep-based), not a measurement: the overlapped timeline of the "
                f"simulated step with K = {largest['chunks']} on "
                f"{machine_text(largest['machine'], runs)} (Perfetto trace: {name}). "
                f"{how_text([largest], runs)}", "Gantt chart of the simulated step"))
    return out


def timelines(context: dict) -> list[dict]:
    """Every step timeline the report draws (anatomy and simulation), for the trace export."""
    return ([t for m in context["anatomy"]["machines"] for t in m["timelines"]]
            + context["study"]["timelines"])
