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

from impl.costmodel import pairs
from impl.costmodel.accuracy import measured_variants
from impl.costmodel.validate import load_rows
from impl.rows.files import ResultsError
from impl.rows.kinds import COMPARISON
from impl.rows.predictions import FROZEN_BY, FROZEN_FILE, PREDICTION

CELL = COMPARISON.names  # the measured cells: cell[CELL.workload]


@dataclass(frozen=True)
class Scored:
    workload: str
    chunks: int
    world_size: int
    variant: str
    measured_ms: float
    predicted: dict
    measured_low_ms: float | None = None  # the measurement's 95% interval
    measured_high_ms: float | None = None
    run: str = ""  # the file measured

    @property
    def predicted_ms(self) -> float:
        return self.predicted[PREDICTION.step_ms]

    @property
    def error(self) -> float:
        return self.predicted_ms / self.measured_ms - 1

    @property
    def inside(self) -> bool | None:
        low, high = self.predicted.get(PREDICTION.low_ms), self.predicted.get(PREDICTION.high_ms)
        return None if low is None else low <= self.measured_ms <= high


def scored(predictions: Sequence[dict], rows: Sequence[dict]) -> list[Scored]:
    frozen = {(p[PREDICTION.workload], p[PREDICTION.strategy], p[PREDICTION.world_size],
               p[PREDICTION.chunks]): p
              for p in predictions if p.get(PREDICTION.step_ms) is not None}
    found = []
    for row in rows:
        if not COMPARISON.holds(row) or row.get(CELL.world_size, 1) < 2:
            continue
        workload, world, chunks = row[CELL.workload], row[CELL.world_size], row[CELL.chunks]
        for name, (estimate, _) in measured_variants(row).items():
            key = (workload, name, world, chunks)
            if key in frozen:
                found.append(Scored(workload, chunks, world, name,
                                    estimate["value"], frozen[key], estimate.get("low"),
                                    estimate.get("high"), row.get("file", "")))
    return found


def lines(found: Sequence[Scored], pair_band: float | None = None) -> list[str]:
    """Score's table; the best pick's hedge from ``pair_band`` (pairs.py), or for files
    frozen without one, from the overlap of the two steps' bands."""
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
    out += ["", f"band coverage: {sum(banded)} of {len(banded)} measurements inside their band"]
    cells = defaultdict(list)
    for s in found:  # a cell of each run measured
        cells[s.workload, s.chunks, s.world_size, s.run].append(s)
    runs = len({s.run for s in found})
    rule = (f"predicted within the pair band, ±{pair_band:.1%}, of the best's step"
            if pair_band is not None else "whose band reaches the predicted best's")
    picks = {cell: pick(mine, pair_band) for cell, mine in sorted(cells.items())}
    slowest = sum(p.slowest is not None for p in picks.values())
    return out + ["", *ranking_lines(cells.values()), "",
                  f"fastest per cell, predicted against measured (the strategies {rule} "
                  "cannot be separated from it):",
                  *(p.line(cell[:3], Path(cell[3]).name if runs > 1 else "")
                    for cell, p in picks.items()),
                  f"hedges holding the cell's slowest strategy, measured apart from its best "
                  f"(95% intervals): {slowest} of "
                  f"{sum(len(p.hedge) > 1 for p in picks.values())}"]


def measured_apart(a: Scored, b: Scored) -> bool:
    """The two measurements' 95% intervals do not overlap."""
    if None in (a.measured_low_ms, b.measured_low_ms):
        return False
    low, high = sorted((a, b), key=lambda s: s.measured_ms)
    return low.measured_high_ms < high.measured_low_ms


def bands_apart(a: Scored, b: Scored) -> bool:
    """The two predictions' bands do not overlap."""
    if None in (a.predicted.get(PREDICTION.low_ms), b.predicted.get(PREDICTION.low_ms)):
        return False
    low, high = sorted((a, b), key=lambda s: s.predicted_ms)
    return low.predicted[PREDICTION.high_ms] < high.predicted[PREDICTION.low_ms]


def ranking_lines(cells) -> list[str]:
    """Of the pairs of one cell whose measurements are apart, how many the predictions
    order right: all of them, and those whose bands are apart too."""
    pairs = [(a, b) for mine in cells for i, a in enumerate(mine) for b in mine[i + 1:]
             if measured_apart(a, b)]
    right = [(a, b) for a, b in pairs if (a.measured_ms < b.measured_ms)
             == (a.predicted_ms < b.predicted_ms)]
    apart = [(a, b) for a, b in pairs if bands_apart(a, b)]
    apart_right = [pair for pair in apart if pair in right]
    return [f"ranking: {len(right)} of {len(pairs)} pairs whose measurements are apart ordered "
            f"right; with the bands apart too, {len(apart_right)} right and "
            f"{len(apart) - len(apart_right)} wrong"]


@dataclass(frozen=True)
class Pick:
    """One cell's best pick: the strategies that cannot be told from the predicted best,
    the fastest measured, and the slowest measured where the hedge holds it and its 95%
    interval is apart from the fastest's (a hedge never to make)."""

    hedge: list[Scored]
    measured: Scored
    slowest: Scored | None

    def line(self, cell: tuple, run: str = "") -> str:
        workload, chunks, world = cell
        names = ", ".join(s.variant for s in self.hedge)
        picked = names if len(self.hedge) == 1 else f"cannot separate {names}"
        verdict = "right" if self.measured in self.hedge else (
            f"wrong: measured best {self.measured.variant} {self.measured.measured_ms:.2f} ms")
        if self.slowest is not None:
            verdict += (f"; holds the slowest, {self.slowest.variant}, measured "
                        f"{self.slowest.measured_ms / self.measured.measured_ms - 1:.1%} "
                        f"behind {self.measured.variant}")
        return f"  {workload} K = {chunks} w = {world}{f' ({run})' if run else ''}: " \
               f"{picked} ({verdict})"


def pick(mine: Sequence[Scored], pair_band: float | None = None) -> Pick:
    """The predicted best, or the strategies it cannot be told from, against the measured:
    with ``pair_band``, those predicted within it of the best's step (pairs.hedge); without,
    those whose band's low end reaches the best's high end."""
    predicted = min(mine, key=lambda s: s.predicted_ms)
    measured = min(mine, key=lambda s: s.measured_ms)
    if pair_band is not None:
        by_variant = {s.variant: s for s in mine}
        names = pairs.hedge({name: s.predicted_ms for name, s in by_variant.items()}, pair_band)
        hedge = [by_variant[name] for name in names]
    else:
        reach = predicted.predicted.get(PREDICTION.high_ms)
        hedge = sorted((s for s in mine if s is predicted or (
            reach is not None and s.predicted.get(PREDICTION.low_ms) is not None
            and s.predicted[PREDICTION.low_ms] <= reach)), key=lambda s: s.predicted_ms)
    slowest = max(mine, key=lambda s: s.measured_ms)
    held = len(hedge) > 1 and slowest in hedge and measured_apart(slowest, measured)
    return Pick(hedge, measured, slowest if held else None)


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
        predictions = document[FROZEN_FILE.predictions]
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
    commit = document[FROZEN_FILE.frozen].get(FROZEN_BY.commit, "?")
    print(f"{args.frozen} (frozen at {commit[:7]}) against "
          f"{', '.join(args.runs)}:")
    print("\n".join(lines(found, document.get(FROZEN_FILE.pair_band))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
