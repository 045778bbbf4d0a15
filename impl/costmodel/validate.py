"""The validation table: the cost model against every measured cell of the given results.

    python -m impl.costmodel.validate                    # every committed results file
    python -m impl.costmodel.validate results/h200x2 results/cpu-2core
    python -m impl.costmodel.validate --markdown     # the held-out tables of docs/costmodel.md

Prints first the held-out validation (impl/costmodel/heldout.py: every GPU cell predicted
from other runs' inputs, leave-one-K-out, leave-one-workload-out, beside the in-cell figures
and the trivial predictor "step = sequential"; ranking, best pick, efficiency; or one line
saying why none: no GPU cell, or no other run to draw a GPU cell's inputs from), then each
variant of each cell (measured step, predicted step, error, the same model
without interference, measured/predicted hidden fraction, and for a miss the reason), then
per strategy the median and largest |error| over the interleaved cells and whether they meet
the goal (impl/costmodel/accuracy.py), then the same over cells measured before interleaving.
A partial run (suite.partial: stopped part-way) is used with a one-line warning naming it;
--no-partial refuses it. Exit status: 0 printed (a missed goal is a finding, not a failure);
2 unusable input (one line naming the file or folder: no results/ here, a gzip-compressed
file, a partial run with --no-partial, no cell to validate).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from impl.costmodel import accuracy, heldout
from impl.costmodel.inputs import run_name
from impl.rows.files import ResultsError, ResultsFile, find_result_files, load_results
from impl.rows.merge import benchmark_rows, merge_rows
from impl.rows.predictions import SUMMARY

RESULTS = "results"


def load_runs(paths: Sequence[str]) -> list[ResultsFile]:
    """The result files of ``paths`` (files, or folders searched), oldest first; each file
    and each row passes its kind's declaration (impl/rows/files.py: a mistyped field is a
    ResultsError naming it)."""
    return sorted((load_results(p) for p in find_result_files(paths)),
                  key=lambda r: (r.sort_time, r.path.name))


def runs_rows(runs: Sequence[ResultsFile], merged: bool = True) -> list[dict]:
    """Every benchmark row of ``runs`` as the report reads them. Rows carry their file's
    index as ``run`` (oldest first) and its path as ``file`` (what messages name,
    inputs.run_name); ``merged``: a newer file's row replaces an older one's, else every
    run's row is kept (held-out validation draws its inputs from other runs)."""
    rows = [{**row, "file": str(results.path)} for index, results in enumerate(runs)
            for row in benchmark_rows(results.label, index, results.benchmarks)]
    return merge_rows(rows) if merged else rows


def load_rows(paths: Sequence[str], merged: bool = True) -> list[dict]:
    """Every benchmark row of the files (or folders): ``runs_rows(load_runs(paths))``."""
    return runs_rows(load_runs(paths), merged)


def missing_results(folder: str, why: str) -> str:
    """The line for a results folder that is not there (a command run outside the
    repository's root): what is missing, where, and what to pass."""
    return (f"error: {folder}/: no such folder in {Path.cwd()}; {why}, or run from the "
            "repository's root")


def partial_runs(runs: Sequence[ResultsFile], refuse: bool) -> str | None:
    """The one line on the partial runs among ``runs`` (suite.partial: a run stopped part-way,
    some of its benchmarks missing): a warning, or with ``refuse`` (--no-partial) the error;
    None when every run is complete."""
    partial = [str(r.path) for r in runs if r.partial]
    if not partial:
        return None
    one = len(partial) == 1
    what = (f"{', '.join(partial)}: {'a partial run' if one else 'partial runs'} "
            "(suite.partial: stopped part-way, some benchmarks missing)")
    if refuse:
        return f"error: {what}, refused by --no-partial"
    return (f"warning: {what}, used as {'it is' if one else 'they are'}; --no-partial "
            f"refuses {'it' if one else 'them'}")


def summary_lines(checks: Sequence[accuracy.Check], interleaved: bool = True) -> list[str]:
    """Per machine and strategy: cells, median and max |error|, the model without
    interference, and the largest gap in the hidden-communication fraction."""
    summary = accuracy.by_strategy(checks, interleaved)
    if not summary:
        return []
    what = "interleaved cells" if interleaved else "cells measured before interleaving"
    lines = [f"Per strategy over the {what} (error = predicted / measured − 1; goal: median "
             f"|error| ≤ {accuracy.STEP_GOAL_MEDIAN:.0%}, max ≤ "
             f"{accuracy.STEP_GOAL_MAX:.0%}, hidden fraction within "
             f"{accuracy.HIDDEN_GOAL}):",
             f"  {'machine':11}{'strategy':20}{'cells':>6}{'median |err|':>14}{'max |err|':>11}"
             f"{'no interference':>17}{'max hidden gap':>16}  goal"]
    for (machine, name), s in summary.items():
        gap = "—" if s[SUMMARY.max_hidden_gap] is None else f"{s[SUMMARY.max_hidden_gap]:.2f}"
        lines.append(f"  {machine:11}{name:20}{s[SUMMARY.cells]:>6}"
                     f"{s[SUMMARY.median_abs_error]:>14.1%}{s[SUMMARY.max_abs_error]:>11.1%}"
                     f"{s[SUMMARY.median_calm_error]:>+17.1%}{gap:>16}"
                     f"  {'met' if s[SUMMARY.meets_goal] else 'missed'}")
    return lines


class Model(NamedTuple):
    """What predictions take from held-out validation of the runs they are fitted on."""

    bands: dict[str, float]  # per variant (heldout.relative_bands)
    overheads: dict  # per GPU model, world size and variant (heldout.overheads)
    lanes: dict  # per GPU model[, world size], workload and variant (lanes.py)
    pair_band: float | None = None  # the best pick's hedge (pairs.py)


def held_out_model(paths: Sequence[str] = (RESULTS,),
                   runs: Sequence[ResultsFile] | None = None) -> Model:
    """From the GPU cells of ``paths`` (default: every committed result): each strategy's
    held-out error, the predictions' bands (heldout.relative_bands), and per GPU model and
    strategy the overhead beyond the schedule (heldout.overheads), per GPU model, workload
    and variant its lane beside backward (impl/costmodel/lanes.py), and the pair band of the
    best pick (impl/costmodel/pairs.py). ``runs``: those files, already loaded (load_runs)."""
    return runs_model(load_runs(paths) if runs is None else runs)


def runs_model(runs: Sequence[ResultsFile]) -> Model:
    """``held_out_model`` of runs already loaded."""
    every_run = runs_rows(runs, merged=False)
    found = heldout.validate_held_out(every_run, merge_rows(every_run))
    return Model(found.bands, found.overheads, found.lanes, found.pair_band)


def held_out_lines(rows: Sequence[dict], merged: Sequence[dict]) -> list[str]:
    """The headline: every GPU cell predicted from inputs none of which came from it
    (impl/costmodel/heldout.py), as Markdown (docs/costmodel.md holds this text); one line
    saying why where none was (``not_held_out``)."""
    found = heldout.validate_held_out(rows, merged)
    if not found.table:
        return [not_held_out(rows, merged)]
    return [f"Held-out validation (error = predicted / measured − 1; the headline split is "
            f"\"{heldout.HEADLINE}\"; goal: median |error| ≤ {accuracy.STEP_GOAL_MEDIAN:.0%}, "
            f"max ≤ {accuracy.STEP_GOAL_MAX:.0%}):", "",
            *heldout.markdown(found.table, found.decisions, found.unreproduced)]


def not_held_out(rows: Sequence[dict], merged: Sequence[dict]) -> str:
    """Why held-out validation predicted no cell, in one line: no GPU cell, or no other run
    to draw a GPU cell's inputs from (the files that hold the cells named)."""
    cells = heldout.gpu_cells(merged)
    if not cells:
        return "Held-out validation: no GPU cell (NCCL, 2 or more ranks) in these files."
    files = ", ".join(sorted({run_name(c.row) for c in cells}))
    if len({r.get("run") for r in rows}) == 1:
        return (f"Held-out validation: {files} is the only run given, and held-out validation "
                "predicts each GPU cell from another run's inputs (compute-only step, "
                "all-reduce sweep, interference): pass another run of the same GPU model "
                "beside it.")
    return (f"Held-out validation: no GPU cell of {files} could be predicted from another "
            "run's inputs: held-out validation needs another run of the same GPU model with "
            "its compute-only step and all-reduce sweep.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.costmodel.validate", description=(
        "The cost model's predictions beside every measured multi-GPU cell."))
    parser.add_argument("paths", nargs="*", default=[RESULTS],
                        help=f"result files or folders (default: {RESULTS}/)")
    parser.add_argument("--markdown", action="store_true", help="print only the held-out "
                        "validation, as Markdown (the tables of docs/costmodel.md)")
    parser.add_argument("--no-partial", action="store_true", help="refuse partial result files "
                        "(runs stopped part-way: suite.partial) instead of using them with a "
                        "warning")
    args = parser.parse_args(argv)
    if args.paths == [RESULTS] and not Path(RESULTS).is_dir():
        print(missing_results(RESULTS, "pass result files or folders"), file=sys.stderr)
        return 2
    try:
        runs = load_runs(args.paths)
    except ResultsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    partial = partial_runs(runs, args.no_partial)
    if partial and args.no_partial:
        print(partial, file=sys.stderr)
        return 2
    every_run = runs_rows(runs, merged=False)
    rows = merge_rows(every_run)
    checks = accuracy.validate(rows)
    if not checks:
        print(f"error: {' '.join(args.paths)}: no measured cell with communication (an "
              "overlap cell of suite/bench_overlap.py at 2 or more ranks)", file=sys.stderr)
        return 2
    headline = held_out_lines(every_run, rows)
    if args.markdown and len(headline) == 1:
        print(f"error: {' '.join(args.paths)}: {headline[0]}", file=sys.stderr)
        return 2
    if partial:
        print(partial, file=sys.stderr)
    if args.markdown:
        print("\n".join(headline))
        return 0
    lines = [*headline, "", "Every cell with its own inputs (the in-cell consistency check):",
             *accuracy.format_checks(checks)]
    for interleaved in (True, False):
        lines += ["", *summary_lines(checks, interleaved)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
