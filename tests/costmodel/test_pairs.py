"""The pair band's parts (impl/costmodel/pairs.py): the error of a ratio, and the hedge."""

import pytest

from impl.costmodel import pairs
from impl.costmodel.accuracy import Check
from impl.costmodel.heldout import pair_band


def test_a_pair_error_is_the_ratios_relative_error():
    # predicted 10 / 12, measured 10 / 11: r = 0.8333 / 0.9091 = 0.9167, 1 / r − 1 = 1 / 11,
    # the same either way round.
    assert pairs.pair_errors([(10.0, 10.0), (12.0, 11.0)]) == [pytest.approx(1 / 11)]
    assert pairs.pair_errors([(12.0, 11.0), (10.0, 10.0)]) == [pytest.approx(1 / 11)]
    # A shared error of the compute side cancels: both predicted 20% long.
    assert pairs.pair_errors([(12.0, 10.0), (14.4, 12.0)]) == [pytest.approx(0.0)]
    assert len(pairs.pooled_errors([[(1.0, 1.0)] * 3, [(1.0, 1.0)] * 2])) == 3 + 1


def test_the_hedge_is_the_best_and_those_within_the_band_fastest_first():
    steps = {"sequential": 11.5, "chunked": 10.0, "ddp": 10.5}
    assert pairs.hedge(steps, 0.06) == ["chunked", "ddp"]
    assert pairs.hedge(steps, 0.04) == ["chunked"]
    assert pairs.hedge(steps, 0.15) == ["chunked", "ddp", "sequential"]


def check(run: int, variant: str, predicted: float, measured: float, **rest) -> Check:
    return Check("h200x2", "w", 20, 2, "bf16", variant, measured, None, None, predicted, None,
                 None, None, "", run=run, **rest)


def test_the_pair_band_pools_the_interleaved_cells_pairs():
    checks = [check(0, "sequential", 10.0, 10.0), check(0, "chunked", 9.0, 9.9),
              check(1, "sequential", 10.0, 10.0), check(1, "chunked", 9.0, 9.0),
              check(1, "ddp", 9.5, 10.0),
              check(2, "chunked", 9.0, 1.0, interleaved=False)]  # not interleaved: left out
    # Pairs: run 0 r = (10 / 9) / (10 / 9.9) = 1.1: 0.1; run 1 0, 1 / 0.95 − 1 = 0.0526 and
    # (9 / 9.5) / 0.9 − 1 = 0.0526. Four errors, too few for the 90% rank: the largest.
    assert pair_band(checks) == pytest.approx(0.1)
    assert pair_band(checks[:2]) == pytest.approx(0.1)
    assert pair_band(checks[:1]) is None  # one variant: no pair
