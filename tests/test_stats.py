"""Bootstrap intervals and verdicts on synthetic data with known answers (impl/stats.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from impl import stats


def noisy(center: float, spread: float, rounds: int, seed: int) -> np.ndarray:
    return center + np.random.default_rng(seed).normal(0.0, spread, rounds)


def test_median_interval_covers_the_true_median_and_narrows_with_rounds():
    short = stats.median(noisy(10.0, 1.0, 10, seed=1))
    long = stats.median(noisy(10.0, 1.0, 400, seed=1))
    assert short.low < 10.0 < short.high
    assert long.low < 10.0 < long.high
    assert long.half_width < short.half_width / 3


def test_interval_coverage_is_near_95_percent():
    """Over 200 synthetic experiments the 95% interval of a difference holds the truth ≥ 88%."""
    hits = 0
    for seed in range(200):
        a, b = noisy(10.0, 1.0, 30, seed), noisy(9.0, 1.0, 30, seed + 1000)
        interval = stats.difference(a, b)
        hits += interval.low <= 1.0 <= interval.high
    assert 0.88 <= hits / 200 <= 0.995


def test_pairing_by_round_cancels_drift_shared_by_a_round():
    drift = np.linspace(0.0, 5.0, 20)  # the machine slows down during the run
    a = 10.0 + drift + noisy(0.0, 0.05, 20, seed=2)
    b = 10.5 + drift + noisy(0.0, 0.05, 20, seed=3)
    paired = stats.difference(a, b)
    assert paired.high < 0 and stats.verdict(paired) == "faster"
    # Unpaired medians of the same data cannot tell them apart: the drift swamps 0.5.
    assert stats.median(a).high > stats.median(b).low


def test_verdict_refuses_a_difference_inside_the_noise():
    a, b = noisy(10.0, 1.0, 10, seed=4), noisy(10.1, 1.0, 10, seed=5)
    interval = stats.difference(a, b)
    assert interval.low < 0 < interval.high
    assert stats.verdict(interval) == stats.NO_DIFFERENCE


def test_verdict_names_the_direction_when_the_interval_excludes_zero():
    slower = stats.difference(noisy(12.0, 0.1, 10, 6), noisy(10.0, 0.1, 10, 7))
    assert stats.verdict(slower) == "slower"
    assert stats.verdict(slower, below="better", above="worse") == "worse"


def test_ratio_of_medians_is_the_speedup():
    reference, candidate = noisy(20.0, 0.2, 15, 8), noisy(10.0, 0.1, 15, 9)
    speedup = stats.ratio(reference, candidate)
    assert speedup.value == pytest.approx(np.median(reference) / np.median(candidate))
    assert speedup.low < 2.0 < speedup.high


def test_too_few_rounds_give_a_value_without_interval_and_no_verdict():
    short = stats.difference([1.0, 2.0], [3.0, 4.0])
    assert short.value == -2.0 and short.low is None and short.high is None
    assert stats.verdict(short) == stats.NO_DIFFERENCE


def test_undefined_statistic_gives_no_interval():
    def always_nan(x, axis=-1):
        return np.full(np.shape(x)[:-1], np.nan)

    result = stats.estimate(always_nan, [1.0, 2.0, 3.0, 4.0])
    assert result.value is None and result.low is None


def test_unequal_round_counts_are_refused():
    with pytest.raises(ValueError, match=r"equal round counts, got \[3, 4\]"):
        stats.difference([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0])


def test_same_data_gives_the_same_interval():
    a, b = noisy(10.0, 1.0, 12, 10), noisy(11.0, 1.0, 12, 11)
    assert stats.difference(a, b) == stats.difference(a, b)


def test_round_order_is_a_permutation_that_changes_between_rounds():
    names = ["compute-only", "comm-only", "sequential", "chunked", "threaded", "ddp"]
    orders = [stats.round_order(names, seed=0, round_index=r) for r in range(10)]
    assert all(sorted(order) == sorted(names) for order in orders)
    assert len({tuple(order) for order in orders}) > 5


def test_round_order_is_identical_in_another_process():
    """Every rank computes the order itself: another interpreter, with another hash seed,
    must produce the same shuffle."""
    names = ["a", "b", "c", "d", "e", "f"]
    code = ("from impl.stats import round_order; "
            "print([round_order(list('abcdef'), 7, r) for r in range(5)])")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": "12345",
                                            "PYTHONPATH": ".", "PATH": "/usr/bin:/bin"})
    assert other.stdout.strip() == str([stats.round_order(names, 7, r) for r in range(5)])


def test_unpaired_ratio_takes_samples_of_different_lengths_and_widens_with_drift():
    base, cand = noisy(20.0, 0.2, 15, 12), noisy(22.0, 0.2, 40, 13)
    unpaired = stats.ratio_unpaired(base, cand)
    assert unpaired.value == pytest.approx(np.median(base) / np.median(cand))
    assert unpaired.low < 20 / 22 < unpaired.high and unpaired.rounds == 15
    # Resampled on their own, a shared drift is not cancelled: the interval is wider than
    # the paired one on the same (paired) data.
    drift = np.linspace(0.0, 4.0, 15)
    a, b = 20.0 + drift + noisy(0, 0.1, 15, 14), 22.0 + drift + noisy(0, 0.1, 15, 15)
    assert stats.ratio_unpaired(a, b).half_width > 3 * stats.ratio(a, b).half_width


def test_proportion_has_the_clopper_pearson_interval():
    none = stats.proportion(0, 40)
    assert none.value == 0.0 and none.low == 0.0
    assert none.high == pytest.approx(1 - 0.025 ** (1 / 40))  # exact for zero successes
    two = stats.proportion(2, 40)
    assert (round(two.low, 4), round(two.high, 4)) == (0.0061, 0.1692)
    assert stats.proportion(40, 40).low == pytest.approx(0.025 ** (1 / 40))
    assert stats.proportion(0, 0).value is None
