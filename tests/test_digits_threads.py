"""The digits study's CPU thread count is measured: the classifier is small, and on the
64-core GPU hosts every core made an epoch 80 times slower than 32 threads."""

from __future__ import annotations

import pytest
import torch

from impl import capabilities
from impl.hybrid.digits import DigitsConfig, fastest_threads, load_data, thread_candidates


@pytest.mark.parametrize(("most", "expected"), [
    (1, [1]), (2, [1, 2]), (16, [1, 2, 4, 8, 16]), (63, [1, 2, 4, 8, 16, 32, 63]),
    (64, [1, 2, 4, 8, 16, 32, 64])])
def test_the_counts_tried_are_powers_of_two_and_the_most(most, expected):
    assert thread_candidates(most) == expected


def test_no_thread_count_below_one():
    with pytest.raises(ValueError, match=r"most=0: choose a thread count ≥ 1"):
        thread_candidates(0)


@pytest.mark.skipif(bool(capabilities.missing_sklearn()), reason="needs scikit-learn's digits")
def test_the_fastest_count_is_one_tried_and_the_threads_are_restored():
    before = torch.get_num_threads()
    threads, probe = fastest_threads(load_data(), DigitsConfig(), 2)
    assert sorted(probe) == [1, 2]
    assert threads == min(probe, key=probe.get)
    assert all(ms > 0 for ms in probe.values())
    assert torch.get_num_threads() == before
