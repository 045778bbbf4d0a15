"""Uncertainty of every derived figure: bootstrap intervals over rounds, and verdicts.

Each comparison in this suite runs its variants in the same rounds (suite/harness.py,
``measure_interleaved``), so round r of every variant saw the same machine state. A figure
that combines variants (a speedup, an efficiency, a difference) is therefore resampled
*paired by round*: one bootstrap resample draws round indices and takes those rounds of every
variant together, so drift shared by a round cancels instead of widening the interval.

Intervals are 95% percentile intervals of ``scipy.stats.bootstrap`` (fixed seed, so the same
data always print the same numbers). A verdict ("faster", "slower") is given only when the
interval of the difference excludes zero; otherwise "no significant difference".

Samples that share no rounds (two result files made at different times, as the regression
gate compares) are resampled each on its own instead: ``estimate(..., paired=False)``.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest, bootstrap

from impl.rows.gate_records import ESTIMATED

CONFIDENCE = 0.95
RESAMPLES = 4000
MIN_ROUNDS = 3  # fewer rounds give no interval at all
NO_DIFFERENCE = "no significant difference"


@dataclass(frozen=True)
class Estimate:
    """A statistic on all rounds with its 95% bootstrap interval (None where undefined)."""

    value: float | None
    low: float | None
    high: float | None
    rounds: int

    @property
    def half_width(self) -> float | None:
        if self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2

    def excludes(self, point: float = 0.0) -> bool:
        """True when the whole interval lies on one side of ``point``."""
        if self.low is None or self.high is None:
            return False
        return self.low > point or self.high < point

    def to_json(self) -> dict:
        return {ESTIMATED.value: self.value, ESTIMATED.low: self.low, ESTIMATED.high: self.high,
                ESTIMATED.rounds: self.rounds}

    @classmethod
    def from_json(cls, data: dict) -> Estimate:
        return cls(data.get(ESTIMATED.value), data.get(ESTIMATED.low), data.get(ESTIMATED.high),
                   data.get(ESTIMATED.rounds, 0))


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def estimate(statistic: Callable[..., np.ndarray], *samples: Sequence[float],
             seed: int = 0, resamples: int = RESAMPLES, paired: bool = True) -> Estimate:
    """``statistic(*samples, axis=-1)`` with its bootstrap interval, samples paired by round.

    ``statistic`` must be vectorised over the last axis (numpy reductions with ``axis``) and
    may return NaN where the figure is undefined (say, an efficiency without headroom); a
    resample landing there makes the interval undefined too, which is reported as such.
    ``paired=False`` resamples each sample on its own (their lengths may then differ);
    ``rounds`` is the shortest sample's length.
    """
    arrays = [np.asarray(s, dtype=float) for s in samples]
    rounds = min(len(a) for a in arrays)
    if paired and len({len(a) for a in arrays}) != 1:
        raise ValueError(f"paired samples need equal round counts, got {[len(a) for a in arrays]}")
    if rounds == 0:
        return Estimate(None, None, None, 0)
    value = _finite(statistic(*arrays, axis=-1))
    if rounds < MIN_ROUNDS or value is None:
        return Estimate(value, None, None, rounds)
    if all(np.ptp(a) == 0 for a in arrays):  # every round identical: nothing to resample
        return Estimate(value, value, value, rounds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NaN resamples are handled below
        # Batches bound memory when a benchmark saved many thousands of rounds.
        batch = max(1, 4_000_000 // max(len(a) for a in arrays))
        result = bootstrap(arrays, statistic, n_resamples=resamples, batch=batch,
                           vectorized=True, paired=paired, confidence_level=CONFIDENCE,
                           method="percentile", rng=np.random.default_rng(seed))
    interval = result.confidence_interval
    return Estimate(value, _finite(interval.low), _finite(interval.high), rounds)


def _median(values: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(values, axis=axis)


def median(values: Sequence[float]) -> Estimate:
    """Median over rounds."""
    return estimate(_median, values)


def difference(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """Median over rounds of the paired difference a_r − b_r (same unit as a and b)."""
    return estimate(lambda x, y, axis=-1: np.median(x - y, axis=axis), a, b)


def _ratio_of_medians(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(x, axis=axis) / np.median(y, axis=axis)


def ratio(numerator: Sequence[float], denominator: Sequence[float]) -> Estimate:
    """median(numerator) / median(denominator), rounds resampled together.

    With step times, ratio(reference, candidate) is the candidate's speedup over the reference.
    """
    return estimate(_ratio_of_medians, numerator, denominator)


def ratio_unpaired(numerator: Sequence[float], denominator: Sequence[float]) -> Estimate:
    """median(numerator) / median(denominator) of two samples that share no rounds (two runs
    made apart), each resampled on its own; their lengths may differ."""
    return estimate(_ratio_of_medians, numerator, denominator, paired=False)


def proportion(count: int, trials: int) -> Estimate:
    """count / trials with its 95% Clopper-Pearson (exact binomial) interval, from
    ``scipy.stats.binomtest(count, trials).proportion_ci()``; ``rounds`` holds ``trials``."""
    if trials <= 0:
        return Estimate(None, None, None, 0)
    interval = binomtest(count, trials).proportion_ci(confidence_level=CONFIDENCE,
                                                      method="exact")
    return Estimate(count / trials, float(interval.low), float(interval.high), trials)


def verdict(diff: Estimate, below: str = "faster", above: str = "slower") -> str:
    """``below`` when the interval of a − b lies under zero, ``above`` when over it, else
    "no significant difference" (also when there is no interval: too few rounds)."""
    if not diff.excludes(0.0):
        return NO_DIFFERENCE
    return below if diff.high < 0 else above


def round_order(names: Sequence[str], seed: int, round_index: int) -> list[str]:
    """The order the variants run in round ``round_index``: a shuffle every rank repeats.

    ``random.Random`` seeded with a string is deterministic across processes and machines
    (it does not depend on PYTHONHASHSEED), so every rank issues its collectives in the
    same order without exchanging anything.
    """
    order = list(names)
    random.Random(f"overlap-suite:{seed}:{round_index}").shuffle(order)
    return order
