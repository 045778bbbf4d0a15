"""The held-out protocol: fit on some runs, predict others, never mixing them.

    python -m impl.costmodel.protocol --fit results/h200x2 results/h200x1 \\
        --test results/h200x4/20261127T172120Z-q3ah0pvf.json

For each GPU model of the test runs' cells (comparison rows at 2 or more ranks), the model
is fitted on the ``--fit`` runs alone, exactly as ``python -m impl.costmodel.freeze`` fits
it (compute-only steps of the newest fit run on that GPU model, the all-reduce sweep of each
world size, the held-out bands, overheads and lanes of the fit runs' cells), and predicts
every test cell's workload, K and world size; ``python -m impl.costmodel.score``'s table
follows: per world size and variant the median and largest |error|, band coverage, ranking
of the pairs the measurements separate, and the best pick per cell. A file in both lists,
or a test run measured before the newest fit run, is refused: the split is by run date and
machine instance, never by cell.

Exit status: 0 printed; 2 unusable input (one line naming the file and the problem).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from impl.costmodel import freeze, score
from impl.costmodel.fabric_file import FabricError
from impl.costmodel.validate import load_runs, runs_model, runs_rows
from impl.rows.files import ResultsError, ResultsFile
from impl.rows.kinds import COMPARISON

CELL = COMPARISON.names  # the test runs' cells: cell[CELL.device]


def started(run: ResultsFile) -> str:
    """When a run was measured (pytest-benchmark's ``datetime``), as ISO text."""
    return run.data.get("datetime") or ""


def check_split(fit: Sequence[ResultsFile], test: Sequence[ResultsFile]) -> None:
    """ValueError naming the file where the split mixes the two sides."""
    if both := sorted({r.path.resolve() for r in fit} & {r.path.resolve() for r in test}):
        raise ValueError(f"{both[0]}: in both --fit and --test; a run is fitted on or tested, "
                         "never both")
    newest_at, newest = max((started(run), str(run.path)) for run in fit)
    for run in test:
        if (measured_at := started(run)) < newest_at:
            raise ValueError(f"{run.path}: measured {measured_at[:16]}, before the fit run "
                             f"{newest} ({newest_at[:16]}); test only runs measured "
                             "after every fit run")


def held_out(fit: Sequence[str], test: Sequence[str]) -> list[str]:
    """The test runs' cells predicted by the model fitted on ``fit``: score's lines."""
    # Each run is read and validated once (a whole file's check takes a while): the split's
    # check, the rows and the model's fit all use the same loaded runs.
    fit_runs, test_runs = load_runs(fit), load_runs(test)
    check_split(fit_runs, test_runs)
    fit_rows, test_rows = runs_rows(fit_runs), runs_rows(test_runs)
    model = runs_model(fit_runs)
    cells = [r for r in test_rows if COMPARISON.holds(r)
             and r.get(CELL.world_size, 1) >= 2 and r.get(CELL.backend) == "nccl"]
    if not cells:
        raise ValueError(f"{', '.join(test)}: no comparison cell at 2 or more ranks on a GPU")
    out = []
    for device in sorted({r[CELL.device] for r in cells}):
        mine = [r for r in cells if r[CELL.device] == device]
        rows = freeze.on_device(fit_rows, device)
        if not rows:
            out.append(f"{device}: no fit run measured on it; its {len(mine)} cells are not "
                       "predicted")
            continue
        predictions = freeze.frozen(rows, freeze.node_fabric(device), sorted(
            {r[CELL.world_size] for r in mine}), sorted({r[CELL.chunks] for r in mine}), model)
        out += [f"{device}: fitted on {', '.join(fit)}; tested on {', '.join(test)}",
                *score.lines(score.scored(predictions, mine), model.pair_band)]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.costmodel.protocol", description=(
        "Fit the cost model on some runs and score its predictions of others."))
    parser.add_argument("--fit", nargs="+", required=True, help="result files or folders to "
                        "fit on")
    parser.add_argument("--test", nargs="+", required=True, help="result files or folders "
                        "measured after every fit run")
    args = parser.parse_args(argv)
    try:
        print("\n".join(held_out(args.fit, args.test)))
    except (ResultsError, FabricError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
