"""The host thread count a CPU computation runs fastest at here, measured.

Every core is not always fastest: on the 64-core GPU hosts (virtual machines), 63 and 64
threads made the digits classifier's epoch take 1.2–1.6 s, against 0.015 s with 32 threads on
the 32-core ones, and the coarse hybrid's benchmark took 64 s against 12 s
(results/h100x4/logs/20261128T0248-commands.md). A CPU row takes the count it runs fastest at,
and keeps the probe beside it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

PROBE_STEPS = 5  # timed steps per thread count, after one untimed


def thread_candidates(most: int) -> list[int]:
    """1, 2, 4, … below ``most``, and ``most``."""
    if most < 1:
        raise ValueError(f"most={most}: choose a thread count ≥ 1")
    return sorted({2 ** i for i in range(most.bit_length()) if 2 ** i < most} | {most})


def fastest_threads(step: Callable[[], object], most: int) -> tuple[int, dict[int, float]]:
    """The count of ``thread_candidates(most)`` at which ``step`` (CPU work, done when it
    returns) runs fastest, and each count's median step in ms; torch's count is restored."""
    previous, probe = torch.get_num_threads(), {}
    try:
        for threads in thread_candidates(most):
            torch.set_num_threads(threads)
            step()  # untimed: the thread pool grows to its new size here
            times = []
            for _ in range(PROBE_STEPS):
                started = time.perf_counter()
                step()
                times.append((time.perf_counter() - started) * 1e3)
            probe[threads] = statistics.median(times)
    finally:
        torch.set_num_threads(previous)
    return min(probe, key=probe.get), probe
