"""Page 1's answer: per machine and workload, the best strategy at the pre-registered K.

One row per answer of reports/cells.py (an interleaved cell over two or more ranks, read at
K = cells.ANSWER_CHUNKS where measured), MPI cells left to the chapter (they have references of
their own): the strategy with the largest median speedup over sequential, that speedup and its
overlap efficiency with 95% intervals, its verdicts against DDP (buckets matched to K, and
25 MB), and the run it comes from in words (machine, mode, commit, time). A figure is marked
when it comes from a partial run, from a dirty tree, or from a commit older than this
checkout's code of its strategy (reports/archive.py counts the commits). Beside the table,
one figure of the same data, and three to five findings computed from it.

    context = section(rows, runs, archive)
    # {"table", "figure", "findings", "absent", "answers", "definitions"}
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from impl.rows.kinds import COMPARISON, PAIRED, STEP
from impl.strategies import summary
from impl.strategy_records import VARIANTS, strategy_of
from reports import cells, figures
from reports.archive import ROOT, Archive
from reports.captions import Run, make_figure
from reports.format import NA, Cell, Table, fmt, fmt_estimate
from reports.sections import hidden
from reports.sections.overlap import fabric_rank, saved_pct
from reports.view import View

# An answer's cell is a comparison row (cell[CELL.workload]); its figures are named as a step
# row's, and the steps measured before interleaving are step rows.
CELL, STEP_ROW = COMPARISON.names, STEP.names

VERDICT_SHORT = {"faster": "faster", "slower": "slower", cells.NO_DIFFERENCE: "n.s."}
MAX_FINDINGS = 5


# --- rows ---------------------------------------------------------------------------------------


def strategy_files(strategy: str) -> tuple[str, ...]:
    """The files that hold a strategy's code: its class's module, and for a named variant
    (chunked+priority is chunked with a knob) impl/strategy_records.py, which declares its
    options, and impl/strategies/knobs.py, which applies them."""
    from impl.strategies import STRATEGIES

    base = strategy_of(strategy)
    if base not in STRATEGIES:
        return ()
    module = Path(sys.modules[STRATEGIES[base].__module__].__file__).resolve()
    files = [str(module.relative_to(ROOT))]
    if strategy in VARIANTS:
        files += ["impl/strategy_records.py", "impl/strategies/knobs.py"]
    return tuple(files)


def provenance(run: Run, strategy: str, archive: Archive) -> list[str]:
    """Why a headline figure may not describe this checkout's code: partial run, dirty tree,
    code changed since the run's commit (or its commit unknown here). Empty when none."""
    marks = []
    if run.partial:
        failed = ", ".join(run.failed_passes) or "a pass"
        marks.append(f"from a partial run ({failed} did not finish; the appendix on runs has "
                     f"its note)")
    commit = run.fingerprint.get("git_commit")
    if run.fingerprint.get("git_dirty"):
        marks.append(f"made from a tree whose tracked files differed from {commit[:7]} (dirty)"
                     if commit else "made from a dirty tree")
    files = strategy_files(strategy)
    changed = archive.changes_since(commit, files) if files else None
    if not commit:
        marks.append("its run recorded no commit: the age of its code is unknown")
    elif files and changed is None:
        marks.append(f"commit {commit[:7]} is not in this checkout's history: the age of its "
                     f"code is unknown")
    elif changed:
        # The strategy's name, not its files: paths break mid-word in page 1's notes.
        marks.append(f"older than this checkout's code: {changed} change(s) to {strategy}'s "
                     f"code since {commit[:7]}")
    return marks


def rows_of(view: View) -> list[dict]:
    """One entry per answer (not MPI), in the report's machine order."""
    runs, entries = view.runs, []
    for answer in sorted(cells.answers(view.rows), key=lambda a: (fabric_rank(a["cell"],
                                                                              view.machines),
                                                             cells.workload_rank(
                                                                 a["cell"][CELL.workload]))):
        cell = answer["cell"]
        if cells.is_mpi(cell):
            continue
        run = runs[cell["run"]]
        found = answer["figures"]
        entries.append({
            "answer": answer, "cell": cell, "best": answer["best"], "run": run,
            "gpu": cell["machine"] in view.machines.gpu,
            "speedup": found["vs_sequential"]["speedup"],
            "efficiency": None if cells.other_chunking(cell, answer["best"])
            else found.get(STEP_ROW.overlap_efficiency),
            "efficiency_note": efficiency_note(cell, answer["best"]),
            "ddp": ddp_text(answer), "marks": provenance(run, answer["best"], view.archive)})
    return entries


def efficiency_note(cell: dict, strategy: str) -> str | None:
    """cells.efficiency_note, with one wording for every DDP that made other buckets than K
    (the count is in the chapter), so the table needs one footnote for them."""
    if cells.other_chunking(cell, strategy):
        return ("DDP made fewer buckets than K: the limit describes K-chunk all-reduces, so "
                "no efficiency (its bucket count is in the chapter)")
    return cells.efficiency_note(cell, strategy)


def ddp_text(answer: dict) -> str:
    """The best strategy's verdicts against DDP in the same rounds ("faster / n.s.")."""
    best, parts = answer["best"], []
    for peer in (cells.DDP, cells.DDP_DEFAULT):
        if peer == best:
            parts.append(f"is {peer}")
        elif peer in answer["versus"]:
            parts.append(f"{VERDICT_SHORT[answer['versus'][peer]['verdict']]} vs {peer}")
    return "; ".join(parts) or "no DDP in the cell"


def machine_words(entry: dict) -> str:
    """"2× NVIDIA H200, NVLink" (one GPU per rank) or "CPU (2 cores), gloo over TCP, 2 ranks":
    what the cell ran on, from its run's fingerprint."""
    cell, fingerprint = entry["cell"], entry["run"].fingerprint
    fabric = hidden.FABRICS.get(cell[CELL.profile], cell[CELL.profile])
    gpus = Counter(fingerprint.get("gpu_names") or [])
    if gpus:
        return f"{cell['world_size']}× {gpus.most_common(1)[0][0]}, {fabric}"
    cores = fingerprint.get("cpu_cores")
    return f"CPU{f' ({cores} cores)' if cores else ''}, {fabric}, {cell['world_size']} ranks"


def run_text(run: Run) -> str:
    """"quick run, 09676a9, 2026-11-23 09:40": mode, commit and UTC time, the time last so that
    a footnote mark never reads as part of the commit; the appendix on runs lists the run with
    its file."""
    commit = run.fingerprint.get("git_commit")
    made = (datetime.fromisoformat(run.created).astimezone(UTC).strftime("%Y-%m-%d %H:%M")
            if run.created else "time unknown")
    return f"{run.mode or 'unknown'} run, {commit[:7] if commit else NA}, {made}"


# --- the table ----------------------------------------------------------------------------------

HEADERS = ["#", "machine, fabric", "workload", f"best (K = {cells.ANSWER_CHUNKS})",
           "× sequential", "overlap eff.", "vs DDP", "run, commit, time (UTC)"]


def table(entries: Sequence[dict]) -> Table:
    """The headline table; notes say why an efficiency is missing and mark provenance."""
    notes: dict[str, str] = {}

    def mark(texts: Sequence[str]) -> str:
        letters = []
        for text in texts:
            notes.setdefault(text, "abcdefghijklmnopqrstuvwxyz"[len(notes) % 26])
            letters.append(notes[text])
        return ",".join(letters)

    body = []
    for index, entry in enumerate(entries, 1):
        cell, speedup, efficiency = entry["cell"], entry["speedup"], entry["efficiency"]
        k_mark = [] if cell[CELL.chunks] == cells.ANSWER_CHUNKS else [entry["answer"]["why"]]
        body.append([
            Cell(str(index), numeric=True), Cell(machine_words(entry)),
            Cell(cell[CELL.workload]),
            Cell(entry["best"] + ("" if not k_mark else f", K = {cell['chunks']}"),
                 mark=mark(k_mark)),
            Cell(f"{fmt(speedup['value'])}×", numeric=True, detail=range_text(speedup)),
            Cell(fmt((efficiency or {}).get("value")), numeric=True,
                 mark=mark([entry["efficiency_note"]] if entry["efficiency_note"] else []),
                 detail=range_text(efficiency) if efficiency else ""),
            Cell(entry["ddp"]),
            Cell(run_text(entry["run"]), mark=mark(entry["marks"]))])
    return Table("tab-headline", f"The best strategy at K = {cells.ANSWER_CHUNKS} (fixed before "
                 "the data were seen) per machine and workload: speedup over sequential and "
                 "overlap efficiency (defined above), 95% intervals below; vs DDP (buckets of "
                 "gradient bytes / K, and 25 MB): faster or slower where the interval of the "
                 "difference excludes 0, else n.s.; the appendix on runs lists each run with "
                 "its file.", HEADERS, body,
                 [(m, t) for t, m in notes.items()],
                 [True, False, False, False, True, True, False, False])


def range_text(estimate: dict | None) -> str:
    if not estimate or estimate.get("low") is None or estimate.get("high") is None:
        return "(no interval)" if estimate and estimate.get("value") is not None else ""
    return f"[{fmt(estimate['low'])}, {fmt(estimate['high'])}]"


# --- the figure ---------------------------------------------------------------------------------


@figures._styled
def figure(entries: Sequence[dict]) -> figures.Image:
    """Speedup over sequential and overlap efficiency per headline row (its number), with 95%
    intervals, coloured by strategy."""
    # Drawn at the width page 1 gives it (report.css: 56 mm), so its type prints at its size.
    fig, axes = figures.plt.subplots(1, 2, figsize=(56 / 25.4, 0.75 + 0.2 * len(entries)),
                                     sharey=True, squeeze=False, layout="constrained")
    positions = list(range(len(entries)))[::-1]
    strategies = list(dict.fromkeys(e["best"] for e in entries))
    styles = figures.series_styles(strategies)
    for ax, key, label, line in ((axes[0, 0], "speedup", "× sequential", 1.0),
                                 (axes[0, 1], "efficiency", "overlap efficiency", None)):
        for position, entry in zip(positions, entries):
            values, errors = figures._errors([entry[key]])
            if values[0] != values[0]:  # undefined: nothing to draw, the table says why
                continue
            style = styles[entry["best"]]
            ax.errorbar(values, [position], xerr=errors, fmt=style.marker, markersize=3,
                        color=style.color, elinewidth=0.9, capsize=1.5)
        if line is not None:
            ax.axvline(line, color="black", linestyle=":", linewidth=0.8)
        ax.set_xlabel(label)
        ax.grid(axis="y", visible=False)
    axes[0, 1].set_xlim(-0.05, 1.05)
    axes[0, 1].axvline(1.0, color="black", linestyle=":", linewidth=0.8)
    axes[0, 0].set_yticks(positions, [str(i) for i in range(1, len(entries) + 1)])
    axes[0, 0].set_ylim(-0.7, len(entries) - 0.3)
    handles = [figures.plt.Line2D([], [], marker=styles[s].marker, linestyle="", markersize=3,
                                  color=styles[s].color) for s in strategies]
    fig.legend(handles, strategies, loc="outside lower center", ncols=2, frameon=False,
               fontsize=6)
    return figures._save(fig)


# --- the findings -------------------------------------------------------------------------------


def saved_text(speedup: dict) -> str:
    """A speedup as the share of sequential's time saved, with its interval."""
    return f"{fmt_estimate(saved_pct(speedup))}%"


def findings(entries: Sequence[dict]) -> list[str]:
    """Three to five one-sentence findings, each computed from the headline rows (a finding
    whose data are missing is left out)."""
    found = []
    gpu = [e for e in entries if e["gpu"]]
    if gpu:
        top = max(gpu, key=lambda e: e["speedup"]["value"])
        found.append(f"On GPUs the largest gain at K = {cells.ANSWER_CHUNKS} is {top['best']} "
                     f"on {top['cell']['workload']} ({top['cell']['machine']}), saving "
                     f"{saved_text(top['speedup'])} of sequential's step.")
    faster = [e for e in entries
              if e["answer"]["figures"]["vs_sequential"][PAIRED.verdict] == "faster"]
    found.append(f"The best strategy is faster than sequential in {len(faster)} of "
                 f"{len(entries)} rows (the interval of the paired difference excluding 0).")
    with_efficiency = [e for e in entries if (e["efficiency"] or {}).get("value") is not None]
    if with_efficiency:
        low = min(with_efficiency, key=lambda e: e["efficiency"]["value"])
        high = max(with_efficiency, key=lambda e: e["efficiency"]["value"])
        found.append(f"Where it is defined, the best strategy's overlap efficiency runs from "
                     f"{fmt_estimate(low['efficiency'])} ({low['cell']['machine']}, "
                     f"{low['cell']['workload']}) to {fmt_estimate(high['efficiency'])} "
                     f"({high['cell']['machine']}, {high['cell']['workload']}): no cell hides "
                     f"all the communication that a perfect overlap would.")
    judged = [e for e in entries if e["best"] not in (cells.DDP, cells.DDP_DEFAULT)
              and cells.DDP in e["answer"]["versus"]]
    if judged:
        beats = [e for e in judged
                 if e["answer"]["versus"][cells.DDP][PAIRED.verdict] == "faster"]
        found.append(f"The best strategy beats DDP with buckets matched to K in {len(beats)} "
                     f"of {len(judged)} rows where DDP is not itself the best (interval of the "
                     f"difference excluding 0).")
    bucketed = [e for e in entries if cells.other_chunking(e["cell"], e["best"])]
    if bucketed:
        machines = ", ".join(dict.fromkeys(e["cell"]["machine"] for e in bucketed))
        found.append(f"In {len(bucketed)} of {len(entries)} rows ({machines}) the fastest is "
                     f"DDP with fewer buckets than K: its gain comes from fewer, larger "
                     f"messages, not from overlap, so it has no overlap efficiency.")
    marked = [e for e in entries if e["marks"]]
    if marked:
        found.append(f"{len(marked)} of {len(entries)} headline rows carry a provenance mark "
                     f"(partial run, dirty tree or code changed since): read them as "
                     f"measurements of older code.")
    better_k = [e for e in entries if e["answer"]["best_k"]]
    if better_k:
        found.append(f"In {len(better_k)} of {len(entries)} rows another K gave a larger "
                     f"median speedup than K = {cells.ANSWER_CHUNKS}; the best of several "
                     f"noisy figures is optimistic, so the chapter gives it beside the answer.")
    return found[:MAX_FINDINGS]


def why(old_format: bool, gpus: int) -> str:
    if old_format:
        return "measured before interleaving: its step rows are in the appendix"
    return "one GPU: nothing to all-reduce" if gpus == 1 else "no interleaved cell"


def absent_text(view: View, entries: Sequence[dict],
                cpus_left_out: Sequence[str] = ()) -> str | None:
    """Which loaded GPU machines have no interleaved cell in the table, and why; and the CPU
    machines left out of a table that has GPU rows."""
    runs, words = view.runs, view.machines.words
    shown = {e["cell"]["machine"] for e in entries}
    old = {r["machine"] for r in cells.old_format_steps(view.rows) if r[STEP_ROW.world_size] > 1}
    gpus = {r.label: len(r.fingerprint.get("gpu_names") or []) for r in runs}
    missing = [label for label in dict.fromkeys(r.label for r in runs)
               if label not in shown and label in view.machines.gpu]
    # The label in words, as in the answers above: a reader may meet it here first.
    parts = [f"{words[label]}, {why(label in old, gpus[label])}" for label in missing]
    parts += [f"{words[label]}, which checks the method: its answers are in the "
              f"appendix on overlap on the CPU" for label in cpus_left_out]
    return f"Not in the table: {'; '.join(parts)}." if parts else None


def section(view: View) -> dict:
    entries = rows_of(view)
    lead = hidden.lead_machine(view.runs, {e["cell"]["machine"] for e in entries})
    # Where GPUs answered, the table is theirs, and if the newest run is a CPU's, the one row
    # its sentence reads, so that a CPU user sees their own answer; other CPUs' rows move out
    # as their chapter blocks do (reports/layout.py).
    cpus_left_out = []
    if any(e["gpu"] for e in entries):
        cpus_left_out = list(dict.fromkeys(e["cell"]["machine"] for e in entries
                                           if not e["gpu"] and e["cell"]["machine"] != lead))
        lead_is_cpu = any(not e["gpu"] for e in entries if e["cell"]["machine"] == lead)
        own = [hidden.representative(entries, lead)] if lead_is_cpu else []
        entries = [e for e in entries if e["gpu"]] + own
    entries = hidden.in_reading_order(entries, lead)
    if not entries:
        return {"table": None, "figure": None, "findings": [], "absent": absent_text(
            view, entries), "count": 0, "answers": [], "definitions": None}
    image = make_figure("fig-headline", figure(entries),
                        "The table's rows by number: × sequential and overlap efficiency, "
                        "95% intervals; colour: the best strategy.",
                        "Headline speedups and efficiencies with intervals")
    return {"table": table(entries), "figure": image, "findings": findings(entries),
            "absent": absent_text(view, entries, cpus_left_out), "count": len(entries),
            "answers": hidden.sentences(entries, view),
            "definitions": f"{hidden.DEFINITIONS} {strategies_line(entries)}"}


def strategies_line(entries: Sequence[dict]) -> str:
    """What each strategy page 1 names does, from the strategy registry."""
    named = dict.fromkeys(e["best"] for e in entries)
    return "Strategies: " + "; ".join(f"{name}: {summary(name)}" for name in named) + "."
