"""Which strategies of one cell the model can tell apart: the band of a ratio of two steps.

A step's band (heldout.relative_bands) covers one prediction's error, and much of that error
is the compute side's. Every strategy of a cell is built on the same compute-only step, so
that part is shared and cancels in the ratio of two of them. "Is a faster than b" is a
question about that ratio: the best pick's hedge reads the ratio's held-out errors, not two
steps' bands side by side (those overlapped for strategies measured 6% apart).

    pair error   of a and b in one cell: max(r, 1 / r) − 1, r = (predicted a / predicted b)
                 / (measured a / measured b); the same either way round
    pair band    the conformal 90% half-width of the pair errors of held-out cells
                 (heldout.conformal_band)
    hedge        the predicted best, and every strategy predicted within (1 + pair band) ×
                 its step
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def pair_errors(cell: Sequence[tuple[float, float]]) -> list[float]:
    """The pair error of every two strategies of one cell, each given as (predicted ms,
    measured ms)."""
    ratios = [(pa / pb) / (ma / mb) for i, (pa, ma) in enumerate(cell) for pb, mb in cell[i + 1:]]
    return [max(r, 1 / r) - 1 for r in ratios]


def pooled_errors(cells: Iterable[Sequence[tuple[float, float]]]) -> list[float]:
    """The pair errors of every cell, pooled."""
    return [error for cell in cells for error in pair_errors(cell)]


def hedge(steps: Mapping[str, float], band: float) -> list[str]:
    """The strategies (by name) that cannot be told from the predicted best: those whose
    predicted step is within (1 + ``band``) of its step, fastest first."""
    best = min(steps.values())
    return sorted((name for name, step in steps.items() if step <= best * (1 + band)),
                  key=steps.__getitem__)
