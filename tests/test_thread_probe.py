"""CPU rows take the thread count they run fastest at, measured (impl/threads.py): on the
64-core GPU hosts every core made the digits epoch 1.2–1.6 s, against 0.015 s on 32-core ones."""

from __future__ import annotations

import pytest
import torch

from impl import capabilities
from impl.hybrid.digits import DigitsConfig, classifier_threads, load_data
from impl.threads import thread_candidates


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
    threads, probe = classifier_threads(load_data(), DigitsConfig(), 2)
    assert sorted(probe) == [1, 2]
    assert threads == min(probe, key=probe.get)
    assert all(ms > 0 for ms in probe.values())
    assert torch.get_num_threads() == before


def test_the_coarse_cpu_worker_beside_a_gpu_takes_its_fastest_count(monkeypatch):
    """The GPU-host branch of suite/bench_hybrid.py's worker_threads, on this CPU: the CPU
    worker's step alone is probed at every count up to its share of the cores."""
    from impl.hybrid.coarse import cpu_worker_threads
    from impl.presets import preset
    from suite import bench_hybrid
    from suite.harness import batches

    monkeypatch.setattr(bench_hybrid, "gpu_here", lambda: True)
    workload = preset("mlp_tiny")
    cpu = torch.device("cpu")
    threads, probe = bench_hybrid.worker_threads(workload, cpu, bench_hybrid.mlp_loss(workload),
                                                 batches(workload, cpu, rank=0)[0])
    assert sorted(probe) == thread_candidates(cpu_worker_threads(2))
    assert threads == min(probe, key=probe.get)
    assert bench_hybrid.worker_threads(workload, torch.device("cuda"), None, None) == (1, None)
