"""Run-to-run agreement: the same figure measured by two or more runs of the same code.

Runs of one machine label at one commit, each made from a clean tree (a dirty tree's code is
not the commit's), are *repeats*. Every figure that two or more repeats measured, with its
95% interval in each, is compared: do the intervals overlap (do they share a point), and how
far apart are the runs' values (spread = (largest − smallest) / median of the runs' values).
A figure is, per kind of row (FIGURES): an interleaved cell's speedup over sequential per
strategy, a tensor-parallel variant's step, a pipeline schedule's step, a hybrid variant's
step. Pure functions: result files in, rows out; ``section`` renders them.

    groups = repeat_groups(archive.files)     # [{"label", "commit", "runs": [...]}, ...]
    rows = agreement_rows(groups)             # one per figure measured in 2+ runs
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from impl.rows.files import ResultsFile
from impl.rows.kinds import HYBRID_STEP, PIPELINE, TENSOR_PARALLEL
from impl.rows.merge import benchmark_rows
from reports import cells
from reports.format import (
    Cell,
    Table,
    device_words,
    fmt,
    fmt_estimate,
    fmt_pct,
    make_table,
    text_column,
)
from reports.view import View

TP = TENSOR_PARALLEL.names  # a tensor-parallel row's estimates are keyed by its field names

RUN_LABEL_CHARS = 16  # "20261123T194800Z": a run's file name up to its time stamp


def commit_of(results: ResultsFile) -> str | None:
    """The run's commit (the fingerprint's, else pytest-benchmark's commit_info), or None."""
    commit = results.fingerprint.get("git_commit") or (
        results.data.get("commit_info") or {}).get("id")
    return commit if commit and commit != "unknown" else None


def is_clean(results: ResultsFile) -> bool:
    dirty = results.fingerprint.get("git_dirty")
    if dirty is None:
        dirty = (results.data.get("commit_info") or {}).get("dirty")
    return dirty is False


def repeat_groups(files: Iterable[ResultsFile]) -> list[dict]:
    """Per machine label and commit, the clean runs, where there are two or more."""
    found: dict[tuple[str, str], list[ResultsFile]] = defaultdict(list)
    for results in files:
        if (commit := commit_of(results)) and is_clean(results):
            found[results.label, commit].append(results)
    return [{"label": label, "commit": commit,
             "runs": sorted(runs, key=lambda r: (r.sort_time, r.path.name))}
            for (label, commit), runs in sorted(found.items()) if len(runs) > 1]


def commits_text(files: Iterable[ResultsFile]) -> str:
    """Per machine label with several runs, how many are clean and at how many commits
    ("cpu-2core: 4 of 6 runs clean, at 4 commit(s)"), for the sentence that says no two clean
    runs share one."""
    by_label: dict[str, list[ResultsFile]] = defaultdict(list)
    for results in files:
        by_label[results.label].append(results)
    parts = []
    for label, found in sorted(by_label.items()):
        if len(found) < 2:
            continue
        clean = {commit_of(r) for r in found if commit_of(r) and is_clean(r)}
        count = sum(1 for r in found if commit_of(r) and is_clean(r))
        parts.append(f"{label}: {count} of {len(found)} runs clean"
                     + (f", at {len(clean)} commit(s)" if clean else ""))
    return "; ".join(parts)


# --- the figures compared, per kind of row ----------------------------------------------------


def _cell_figures(row: dict) -> list[tuple[str, str, dict]]:
    where = (f"{row['workload']}, K = {row['chunks']}, {row['world_size']} ranks, "
             f"{row['profile']}" + (", mpirun" if cells.is_mpi(row) else ""))
    return [(where, f"{s}: speedup over sequential",
             cells.figures(row, s)["vs_sequential"]["speedup"]) for s in cells.compared(row)]


def _tp_figures(row: dict) -> list[tuple[str, str, dict]]:
    where = (f"{row['preset']}, {row['gemm_backend']}, {row['scaling']}, "
             f"{row['world_size']} ranks")
    step = (row.get(TP.estimates) or {}).get(TP.step_ms)
    return [(where, f"{row['schedule']}: step (ms)", step)] if step else []


def _pipeline_figures(row: dict) -> list[tuple[str, str, dict]]:
    where = f"{row['workload']}, p = {row['stages']}, m = {row['microbatches']}"
    step = row.get(PIPELINE.names.step_ms_estimate)
    return [(where, f"{row['variant']}: step (ms)", step)] if step else []


def _hybrid_figures(row: dict) -> list[tuple[str, str, dict]]:
    where = f"{row['study']}, {row['workload']}, {device_words(row['device'])}"
    step = row.get(HYBRID_STEP.names.step_ms_estimate)
    return [(where, f"{row['variant']}: step (ms)", step)] if step else []


# kind -> (what the table calls it, the figures of one row: (where, what, estimate))
FIGURES: dict[str, tuple[str, Callable[[dict], list[tuple[str, str, dict]]]]] = {
    "comparison": ("interleaved cell", _cell_figures),
    "tensor_parallel": ("tensor parallel", _tp_figures),
    "pipeline": ("pipeline", _pipeline_figures),
    "hybrid_step": ("hybrid", _hybrid_figures),
}


def overlaps(estimates: Sequence[dict]) -> bool | None:
    """Whether every interval shares a point with every other (None: one has no interval)."""
    if any(e.get("low") is None or e.get("high") is None for e in estimates):
        return None
    return max(e["low"] for e in estimates) <= min(e["high"] for e in estimates)


def spread_pct(estimates: Sequence[dict]) -> float | None:
    """(largest − smallest value) / median value, in %: how far apart the runs landed."""
    values = [e["value"] for e in estimates if e.get("value") is not None]
    if len(values) < 2 or statistics.median(values) == 0:
        return None
    return 100 * (max(values) - min(values)) / abs(statistics.median(values))


def agreement_rows(groups: Sequence[dict]) -> list[dict]:
    """One row per figure that two or more runs of a group measured."""
    table = []
    for group in groups:
        measured: dict[tuple, list[tuple[ResultsFile, dict]]] = defaultdict(list)
        for results in group["runs"]:
            for row in benchmark_rows(results.label, 0, results.benchmarks):
                if row.get("kind") not in FIGURES:
                    continue
                kind_name, figures = FIGURES[row["kind"]]
                for where, what, estimate in figures(row):
                    if estimate and estimate.get("value") is not None:
                        measured[kind_name, where, what].append((results, estimate))
        for (kind_name, where, what), found in measured.items():
            if len(found) < 2:
                continue
            estimates = [e for _, e in found]
            table.append({"machine": group["label"], "commit": group["commit"][:7],
                          "kind": kind_name, "where": where, "what": what,
                          "runs": [(run_name(r), e) for r, e in found],
                          "overlap": overlaps(estimates), "spread_pct": spread_pct(estimates)})
    return table


def run_name(results: ResultsFile) -> str:
    mode = (results.data.get("suite") or {}).get("mode") or "unknown"
    return f"{results.path.name[:RUN_LABEL_CHARS]} ({mode})"


# --- what the report says -----------------------------------------------------------------------


def summary(rows: Sequence[dict]) -> dict | None:
    """Counts over every compared figure: overlapping intervals, median and largest spread."""
    if not rows:
        return None
    decided = [r for r in rows if r["overlap"] is not None]
    spreads = [r["spread_pct"] for r in rows if r["spread_pct"] is not None]
    widest = max((r for r in rows if r["spread_pct"] is not None),
                 key=lambda r: r["spread_pct"], default=None)
    return {"figures": len(rows), "decided": len(decided),
            "overlapping": sum(bool(r["overlap"]) for r in decided),
            "median_spread": statistics.median(spreads) if spreads else None,
            "widest": widest,
            "machines": sorted({f"{r['machine']} at {r['commit']}" for r in rows})}


def abstract_line(files: Sequence[ResultsFile], rows: Sequence[dict]) -> str:
    """The abstract's one line on how well figures reproduce between runs of the same code."""
    found = summary(rows)
    if found is None:
        listed = commits_text(files)
        return ("No two clean runs of one machine share a commit, so no figure has been "
                "measured twice with the same code yet" + (f" ({listed})" if listed else "")
                + ".")
    widest = found["widest"]
    text = (f"Of {found['figures']} figures measured by two or more clean runs at one commit "
            f"({', '.join(found['machines'])}), {found['overlapping']} of {found['decided']} "
            f"have 95% intervals that overlap across the runs; the runs' values differ by "
            f"{fmt_pct(found['median_spread'])} (median)")
    if widest:
        text += (f", at most {fmt_pct(widest['spread_pct'])} ({widest['where']}, "
                 f"{widest['what']})")
    return text + "."


def runs_text(row: dict) -> str:
    return "; ".join(f"{name}: {fmt_estimate(e)}" for name, e in row["runs"])


AGREEMENT_COLUMNS = (text_column("machine", "machine"), text_column("commit", "commit"),
                     text_column("where", "setting"), text_column("what", "figure"),
                     text_column("runs_text", "each run: median [95% interval]"),
                     text_column("overlap_text", "intervals overlap"),
                     text_column("spread_text", "spread between runs"))


def agreement_table(rows: Sequence[dict]) -> Table:
    shown = [{**r, "runs_text": runs_text(r),
              "overlap_text": {True: "yes", False: "no", None: "n/a (no interval)"}[r["overlap"]],
              "spread_text": fmt_pct(r["spread_pct"])} for r in rows]
    return make_table("tab-agreement", "Every figure measured by two or more clean runs of one "
                      "machine at one commit: each run's median with its 95% interval, "
                      "whether the intervals share a point, and the spread between the runs "
                      "((largest − smallest) / median of the runs' values).",
                      AGREEMENT_COLUMNS, shown)


def summary_table(rows: Sequence[dict]) -> Table:
    """Per machine, commit and kind of figure: how many agree, median and largest spread."""
    by_group: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        by_group[row["machine"], row["commit"], row["kind"]].append(row)
    headers = ["machine", "commit", "figures of", "runs", "compared", "intervals overlap",
               "median spread", "largest spread"]
    body = []
    for (machine, commit, kind), found in by_group.items():
        counted = summary(found)
        runs = sorted({name for r in found for name, _ in r["runs"]})
        body.append([Cell(machine), Cell(commit), Cell(kind), Cell("; ".join(runs)),
                     Cell(fmt(counted["figures"]), numeric=True),
                     Cell(f"{counted['overlapping']} of {counted['decided']}"),
                     Cell(fmt_pct(counted["median_spread"]), numeric=True),
                     Cell(fmt_pct(counted["widest"]["spread_pct"]) if counted["widest"]
                          else "n/a", numeric=True)])
    return Table("tab-agreement-summary", "Run-to-run agreement per machine, commit and kind "
                 "of figure: figures measured by two or more clean runs, how many have 95% "
                 "intervals that overlap across the runs, and the spread between the runs' "
                 "values. Every figure is in the appendix.", headers, body, [],
                 [False, False, False, False, True, False, True, True])


def section(view: View) -> dict:
    """The body section (summary, or the sentence saying there is nothing to compare yet), the
    abstract's line (its template reads ``reproducibility.line``) and the appendix's table
    (every figure)."""
    files = view.archive.files
    rows = agreement_rows(repeat_groups(files))
    return {"empty": not files, "line": abstract_line(files, rows),
            "summary": summary_table(rows) if rows else None,
            "table": agreement_table(rows) if rows else None}


def section_appendix(view: View) -> dict:
    """The appendix of every figure: the table the body section built."""
    table = view.built["reproducibility"]["table"]
    return {"empty": table is None, "table": table}
