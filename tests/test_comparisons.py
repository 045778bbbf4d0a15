"""The schedule bound, the lost-time decomposition and a cell's figures on hand-made timelines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from impl import comparisons, metrics, stats
from impl.timeline import Interval, Timeline


def compute_only_timeline(forward: float, backward: list[float], update: float) -> Timeline:
    """forward, then one backward interval per chunk back to back, then the update."""
    intervals, t = [Interval("compute", "forward", None, 0.0, forward)], forward
    for chunk, duration in enumerate(backward):
        intervals.append(Interval("compute", f"backward c{chunk}", chunk, t, t + duration))
        t += duration
    intervals.append(Interval("compute", "update", None, t, t + update))
    return Timeline(intervals)


def comm_only_timeline(durations: list[float]) -> Timeline:
    intervals, t = [], 0.0
    for chunk, duration in enumerate(durations):
        intervals.append(Interval("comm", f"all-reduce c{chunk}", chunk, t, t + duration))
        t += duration
    return Timeline(intervals)


def test_schedule_bound_known_answers():
    # Communication hidden except the last chunk's: ready at 4, 8, 12; 2 ms each; update 1.
    assert metrics.schedule_bound_ms([4, 8, 12], [2, 2, 2], 12, 1) == 12 + 2 + 1
    # Communication-bound: all-reduces queue behind each other.
    assert metrics.schedule_bound_ms([1, 2, 3], [5, 5, 5], 3, 1) == 1 + 15 + 1
    # Backward ends after the last all-reduce: the bound is the compute-only step.
    assert metrics.schedule_bound_ms([1, 2], [0.5, 0.5], 10, 1) == 11
    with pytest.raises(ValueError, match="3 ready times for 2 chunk durations"):
        metrics.schedule_bound_ms([1, 2, 3], [1, 1], 3, 0)


def test_schedule_bound_is_at_least_the_limit():
    rng = np.random.default_rng(0)
    for _ in range(200):
        backward = list(rng.uniform(0.1, 5, size=6))
        comm = list(rng.uniform(0.1, 5, size=6))
        timeline = compute_only_timeline(3.0, backward, 1.0)
        bound = metrics.schedule_bound_ms(timeline.ready_ms(), comm, timeline.backward_end_ms(),
                                          timeline.update_ms())
        assert bound >= metrics.limit_ms(timeline.span_ms(), sum(comm)) - 1e-9


def test_timeline_readings_for_the_bound():
    timeline = compute_only_timeline(3.0, [1.0, 2.0, 0.0], 0.5)
    assert timeline.ready_ms() == [4.0, 6.0, 6.0]  # chunk 2 ready together with chunk 1
    assert timeline.backward_end_ms() == 6.0
    assert timeline.backward_ms() == 3.0
    assert timeline.update_ms() == 0.5
    assert timeline.span_ms() == 6.5
    assert comm_only_timeline([1.5, 2.5]).comm_ms() == [1.5, 2.5]


def test_lost_time_parts_on_a_hand_made_overlapped_step():
    reference = compute_only_timeline(2.0, [3.0, 3.0], 1.0)  # span 9
    # Overlapped: backward c1 slowed by 1 ms beside c0's all-reduce; c1's all-reduce after
    # backward is exposed for 2 ms; 0.5 ms of idle before the update.
    step = Timeline([
        Interval("compute", "forward", None, 0.0, 2.0),
        Interval("compute", "backward c0", 0, 2.0, 5.0),
        Interval("comm", "all-reduce c0", 0, 5.0, 7.0),
        Interval("compute", "backward c1", 1, 5.0, 9.0),
        Interval("comm", "all-reduce c1", 1, 9.0, 11.0),
        Interval("compute", "update", None, 11.5, 12.5),
    ])
    parts = step.lost_time_vs(reference)
    assert parts == {"exposed_comm_ms": 2.0, "compute_slowdown_ms": 1.0, "other_ms": 0.5}
    assert sum(parts.values()) == step.span_ms() - reference.span_ms()


def test_efficiency_is_undefined_without_headroom_and_vectorises():
    assert metrics.overlap_efficiency(66.7, 64.8, 59.7) == pytest.approx(0.2714, abs=1e-4)
    assert metrics.overlap_efficiency(60.0, 58.0, 60.0) is None
    values = metrics.efficiency(np.array([10.0, 10.0]), np.array([8.0, 9.0]), np.array([6.0, 10]))
    assert values[0] == pytest.approx(0.5) and math.isnan(values[1])


def test_ideal_speedup():
    assert metrics.ideal_speedup(1.0) == 2.0
    assert metrics.ideal_speedup(1.5) == pytest.approx(2.5 / 1.5)
    assert metrics.ideal_speedup(0.25) == pytest.approx(1.25)


def synthetic_cell(rounds: int = 12, seed: int = 0):
    """A cell whose answer is known: compute 10 ms (2 chunks), comm 4 ms, sequential 14,
    'fast' overlaps perfectly up to the last chunk (12), 'slow' does not overlap (14)."""
    rng = np.random.default_rng(seed)
    noise = lambda: rng.normal(0, 0.05, rounds)  # noqa: E731
    round_ms = {"compute-only": 10 + noise(), "comm-only": 4 + noise(),
                "sequential": 14 + noise(), "fast": 12 + noise(), "slow": 14 + noise()}
    compute = compute_only_timeline(1.0, [4.0, 4.0], 1.0)  # ready at 5 and 9, ends at 10
    timelines = {
        "compute-only": [compute] * rounds,
        "comm-only": [comm_only_timeline([2.0, 2.0])] * rounds,
        "sequential": [compute] * rounds,
        "fast": [Timeline([*compute.intervals[:3],
                           Interval("comm", "all-reduce c0", 0, 5.0, 7.0),
                           Interval("comm", "all-reduce c1", 1, 9.0, 11.0),
                           Interval("compute", "update", None, 11.0, 12.0)])] * rounds,
        "slow": [Timeline([*compute.intervals[:3],
                           Interval("comm", "all-reduce c0", 0, 9.0, 11.0),
                           Interval("comm", "all-reduce c1", 1, 11.0, 13.0),
                           Interval("compute", "update", None, 13.0, 14.0)])] * rounds,
    }
    return round_ms, timelines


def test_cell_figures_recover_the_known_answer():
    round_ms, timelines = synthetic_cell()
    figures = comparisons.cell_figures(round_ms, timelines, "sequential", ["fast", "slow"])
    references = figures["references"]
    assert references["bound_ms"]["value"] == 12.0  # 9 + 2 (last chunk) + 1 (update)
    assert references["compute_to_comm"]["value"] == pytest.approx(10 / 4, rel=0.02)
    fast, slow = figures["strategies"]["fast"], figures["strategies"]["slow"]
    # Against the bound, 'fast' is perfect; against max(compute, comm) it reaches 2/4.
    assert fast["bound_efficiency"]["low"] < 1.0 < fast["bound_efficiency"]["high"]
    assert fast["overlap_efficiency"]["value"] == pytest.approx(0.5, abs=0.05)
    assert fast["vs_sequential"]["verdict"] == "faster"
    assert slow["vs_sequential"]["verdict"] == stats.NO_DIFFERENCE
    assert fast["hidden_comm_fraction"]["value"] == 0.5
    assert slow["hidden_comm_fraction"]["value"] == 0.0
    assert fast["lost_time"]["exposed_comm_ms"]["value"] == 2.0
    assert slow["lost_time"]["exposed_comm_ms"]["value"] == 4.0


def test_other_chunking_gets_no_efficiency():
    round_ms, timelines = synthetic_cell()
    figures = comparisons.cell_figures(round_ms, timelines, "sequential", ["fast"],
                                       other_chunking=["fast"])
    assert "overlap_efficiency" not in figures["strategies"]["fast"]
    assert figures["strategies"]["fast"]["vs_sequential"]["verdict"] == "faster"


def test_median_round_picks_the_representative_step():
    assert comparisons.median_round([5.0, 1.0, 9.0, 3.0, 7.0]) == 0
    assert comparisons.median_round([2.0, 1.0, 4.0, 3.0]) == 0


def test_schedule_bound_with_the_update_inside_the_overlap():
    # Each chunk's third of the 3 ms update follows its all-reduce on the communication side.
    assert metrics.schedule_bound_ms([4, 8, 12], [2, 2, 2], 12, 3, update_in_overlap=True) == 15
    assert metrics.schedule_bound_ms([4, 8, 12], [2, 2, 2], 12, 3) == 17
    # Backward-bound: the update hides completely, and the step beats compute-only (12 + 3).
    assert metrics.schedule_bound_ms([4, 8, 20], [0.5] * 3, 20, 3, update_in_overlap=True) == 21.5
