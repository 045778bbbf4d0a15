"""Frozen predictions (impl/costmodel/freeze.py) scored against runs measured after them.

    python -m impl.costmodel.score results/predictions/<name>.json results/h200x4/<run>.json

Each measured variant of each cell (a comparison row: workload, K, world size) is matched to
the frozen prediction of the same workload, strategy, world size and K. Printed per world size
and variant: cells, median and largest |error| (error = predicted / measured − 1) and how many
measurements fall inside the prediction's band; then per cell the fastest variant predicted
against the one measured. A run that was measured before the predictions were frozen is
refused: it cannot test them.

Exit status: 0 printed; 2 unusable input (one line naming the file and the problem).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from impl.costmodel.accuracy import measured_variants
from impl.costmodel.validate import load_rows
from impl.rows.files import ResultsError


@dataclass(frozen=True)
class Scored:
    workload: str
    chunks: int
    world_size: int
    variant: str
    measured_ms: float
    predicted: dict

    @property
    def error(self) -> float:
        return self.predicted["step_ms"] / self.measured_ms - 1

    @property
    def inside(self) -> bool | None:
        low, high = self.predicted.get("low_ms"), self.predicted.get("high_ms")
        return None if low is None else low <= self.measured_ms <= high


def scored(predictions: Sequence[dict], rows: Sequence[dict]) -> list[Scored]:
    frozen = {(p["workload"], p["strategy"], p["world_size"], p["chunks"]): p
              for p in predictions if p.get("step_ms") is not None}
    found = []
    for row in rows:
        if row.get("kind") != "comparison" or row.get("world_size", 1) < 2:
            continue
        for name, (estimate, _) in measured_variants(row).items():
            key = (row["workload"], name, row["world_size"], row["chunks"])
            if key in frozen:
                found.append(Scored(row["workload"], row["chunks"], row["world_size"], name,
                                    estimate["value"], frozen[key]))
    return found


def lines(found: Sequence[Scored]) -> list[str]:
    out = ["per world size and variant (error = predicted / measured − 1):",
           f"  {'w':>2} {'variant':16}{'cells':>6}{'median |err|':>14}{'max |err|':>11}"
           f"{'in band':>9}"]
    groups = defaultdict(list)
    for s in found:
        groups[s.world_size, s.variant].append(s)
    for (world, variant), mine in sorted(groups.items()):
        errors = [abs(s.error) for s in mine]
        banded = [s.inside for s in mine if s.inside is not None]
        out.append(f"  {world:>2} {variant:16}{len(mine):>6}{statistics.median(errors):>14.1%}"
                   f"{max(errors):>11.1%}{f'{sum(banded)}/{len(banded)}':>9}")
    banded = [s.inside for s in found if s.inside is not None]
    out += ["", f"band coverage: {sum(banded)} of {len(banded)} measurements inside their band",
            "", "fastest per cell, predicted against measured:"]
    cells = defaultdict(list)
    for s in found:
        cells[s.workload, s.chunks, s.world_size].append(s)
    for (workload, chunks, world), mine in sorted(cells.items()):
        predicted = min(mine, key=lambda s: s.predicted["step_ms"])
        measured = min(mine, key=lambda s: s.measured_ms)
        verdict = "right" if predicted is measured else (
            f"wrong: measured {measured.variant} {measured.measured_ms:.2f} ms, predicted "
            f"{predicted.variant} measured {predicted.measured_ms:.2f} ms")
        out.append(f"  {workload} K = {chunks} w = {world}: {predicted.variant} ({verdict})")
    return out


def committed_at(path: str) -> datetime | None:
    """When ``path`` was first committed (git), or None outside a checkout."""
    try:
        text = subprocess.run(["git", "log", "--diff-filter=A", "--format=%cI", "--", path],
                              capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    return datetime.fromisoformat(text[-1]) if text else None


def measured_before(runs: Sequence[str], frozen_at: datetime) -> list[str]:
    """The runs whose measurement (pytest-benchmark's ``datetime``) precedes ``frozen_at``."""
    early = []
    for run in runs:
        started = json.loads(Path(run).read_text()).get("datetime")
        if started and datetime.fromisoformat(started).astimezone(timezone.utc) < frozen_at:
            early.append(run)
    return early


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.costmodel.score", description=(
        "Score frozen predictions against runs measured after them."))
    parser.add_argument("frozen", help="a file written by python -m impl.costmodel.freeze")
    parser.add_argument("runs", nargs="+", help="result files measured after it")
    args = parser.parse_args(argv)
    try:
        document = json.loads(Path(args.frozen).read_text())
        predictions = document["predictions"]
        rows = load_rows(args.runs)
    except (OSError, ValueError, KeyError) as error:
        print(f"error: {args.frozen}: not a file of frozen predictions ({error})",
              file=sys.stderr)
        return 2
    except ResultsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    frozen_at = committed_at(args.frozen)
    if frozen_at is None:
        print(f"warning: {args.frozen} is not committed: nothing shows it came before the runs",
              file=sys.stderr)
    elif early := measured_before(args.runs, frozen_at):
        print(f"error: {', '.join(early)}: measured before {args.frozen} was committed "
              f"({frozen_at:%Y-%m-%d %H:%M %Z}): it cannot test those predictions",
              file=sys.stderr)
        return 2
    found = scored(predictions, rows)
    if not found:
        print(f"error: {', '.join(args.runs)}: no measured cell at 2 or more ranks matches a "
              f"prediction of {args.frozen}", file=sys.stderr)
        return 2
    print(f"{args.frozen} (frozen at {document['frozen'].get('commit', '?')[:7]}) against "
          f"{', '.join(args.runs)}:")
    print("\n".join(lines(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
