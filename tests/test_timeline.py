"""The timeline is real: what overlaps and what does not, and the metric formulas on it."""

from __future__ import annotations

import pytest
import torch

from impl import metrics
from impl.presets import preset
from impl.strategies import StrategyOptions, build_strategy
from impl.workloads import build_model, make_batch
from tests.multirank import run_ranks


def test_interval_algebra():
    assert metrics.merge_intervals([(3, 4), (0, 1), (0.5, 2)]) == [(0, 2), (3, 4)]
    assert metrics.overlap_ms([(0, 10)], [(5, 15), (20, 30)]) == 5
    assert metrics.hidden_comm_fraction([(0, 10)], [(5, 15)]) == 0.5
    assert metrics.hidden_comm_fraction([(0, 10)], []) is None


def test_formulas():
    assert metrics.limit_ms(60.0, 5.0) == 60.0
    assert metrics.overlap_efficiency(66.7, 64.8, 59.7) == pytest.approx(0.2714, abs=1e-4)
    assert metrics.overlap_efficiency(60.0, 58.0, 60.0) is None  # nothing to hide
    # nccl-tests: 1 GiB in 10 ms over 4 ranks -> algbw 107.4 GB/s, busbw 161.1 GB/s
    assert metrics.algbw_gbps(2**30, 10.0) == pytest.approx(107.374, abs=1e-3)
    assert metrics.busbw_gbps(2**30, 10.0, 4) == pytest.approx(161.061, abs=1e-3)
    assert metrics.samples_per_s(2, 8192, 64.0) == pytest.approx(256000.0)


def timelines(context, chunks: int) -> dict:
    workload = preset("mlp_1024x8")
    group = context.group(context.world_size)
    result = {}
    for name in ("sequential", "chunked", "threaded"):
        strategy = build_strategy(name, build_model(workload, context.device), workload, group,
                                  StrategyOptions(chunks=chunks))
        for step in range(2):
            strategy.step(make_batch(workload, context.device, rank=context.rank, step=step))
        result[name] = strategy.finish_timeline()
        strategy.close()
    return result


@pytest.fixture(scope="module")
def two_rank_timelines():
    return run_ranks(timelines, 2, 8)[0]


def test_sequential_never_overlaps(two_rank_timelines):
    timeline = two_rank_timelines["sequential"]
    assert len(timeline.lane("comm")) == 8
    assert metrics.overlap_ms(timeline.lane("compute"), timeline.lane("comm")) == 0.0
    assert timeline.hidden_comm_fraction() == 0.0


@pytest.mark.parametrize("strategy", ["chunked", "threaded"])
def test_chunked_communication_overlaps_backward(two_rank_timelines, strategy):
    timeline = two_rank_timelines[strategy]
    comm = timeline.lane("comm")
    assert len(comm) == 8 and all(end >= start for start, end in comm)
    assert metrics.overlap_ms(timeline.lane("compute"), comm) > 0
    labels = [i.label for i in timeline.intervals if i.lane == "compute"]
    assert labels[0] == "forward" and labels[-1] == "update"
    assert labels[1:-1] == [f"backward c{c}" for c in range(8)]


def test_world_of_one_says_it_does_not_communicate():
    workload = preset("mlp_tiny")
    cpu = torch.device("cpu")
    strategy = build_strategy("chunked", build_model(workload, cpu), workload, None,
                              StrategyOptions(chunks=4))
    strategy.step(make_batch(workload, cpu))
    timeline = strategy.finish_timeline()
    assert timeline.lane("comm") == []
    assert timeline.notes == ["world size 1: no communication (all-reduce is a no-op)"]
    assert timeline.hidden_comm_fraction() is None
