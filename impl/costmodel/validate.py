"""The validation table: the cost model against every measured cell of the given results.

    python -m impl.costmodel.validate                    # every committed results file
    python -m impl.costmodel.validate results/h200x2 results/cpu-2core

Prints each variant of each cell (measured step, predicted step, error, the same model
without interference, measured/predicted hidden fraction, and for a miss the reason), then
per strategy the median and largest |error| over the interleaved cells and whether they meet
the goal (impl/costmodel/accuracy.py), then the same over cells measured before interleaving.
Exit status: 0 printed (a missed goal is a finding, not a failure); 2 unusable input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from impl.costmodel import accuracy

RESULTS = "results"


def load_rows(paths: Sequence[str], merged: bool = True) -> list[dict]:
    """Every benchmark row of the files (or folders) as the report reads them: each file
    passes the report's checks (reports/results.py, then reports/loading.py's ``check_rows``:
    a mistyped field is a ResultsError naming it). Rows carry their file's index as ``run``
    (oldest first); ``merged``: a newer file's row replaces an older one's, else every run's
    row is kept (held-out validation draws its inputs from other runs)."""
    from reports.analysis import benchmark_rows, merge_rows
    from reports.loading import check_rows
    from reports.results import find_result_files, load_results

    files = sorted((load_results(p) for p in find_result_files(paths)),
                   key=lambda r: (r.sort_time, r.path.name))
    for results in files:
        check_rows(results)
    rows = [row for index, results in enumerate(files)
            for row in benchmark_rows(results.label, index, results.benchmarks)]
    return merge_rows(rows) if merged else rows


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
        gap = "—" if s["max_hidden_gap"] is None else f"{s['max_hidden_gap']:.2f}"
        lines.append(f"  {machine:11}{name:20}{s['cells']:>6}{s['median_abs_error']:>14.1%}"
                     f"{s['max_abs_error']:>11.1%}{s['median_calm_error']:>+17.1%}{gap:>16}"
                     f"  {'met' if s['meets_goal'] else 'missed'}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.costmodel.validate", description=(
        "The cost model's predictions beside every measured multi-GPU cell."))
    parser.add_argument("paths", nargs="*", default=[RESULTS],
                        help=f"result files or folders (default: {RESULTS}/)")
    args = parser.parse_args(argv)
    from reports.results import ResultsError

    try:
        rows = load_rows(args.paths)
    except ResultsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    checks = accuracy.validate(rows)
    if not checks:
        print(f"error: {' '.join(args.paths)}: no measured cell with communication (an "
              "overlap cell of suite/bench_overlap.py at 2 or more ranks)", file=sys.stderr)
        return 2
    lines = accuracy.format_checks(checks)
    for interleaved in (True, False):
        lines += ["", *summary_lines(checks, interleaved)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
