"""The interleaved engine on CPU: shuffled order on every rank, per-round values, row statistics."""

from __future__ import annotations

import torch

from impl.stats import round_order
from suite.harness import Rounds, Variant, measure_interleaved, record_round_times
from tests.multirank import run_ranks

ROUNDS = Rounds(warmup=2, rounds=5, steps_per_round=3)


def busy(n: int):
    """A step of real work whose size is n (matrix products on the CPU)."""
    a = torch.randn(n, n)
    return lambda: a @ a


def test_every_variant_runs_every_round_in_the_shared_order():
    calls: list[str] = []

    def variant(name: str, n: int) -> Variant:
        work = busy(n)
        return Variant(name, lambda: (calls.append(name), work()),
                       after_round=lambda: {"after": name},
                       before_round=lambda: calls.append(f"before {name}"))

    names = ["small", "large", "medium"]
    measurement = measure_interleaved([variant("small", 16), variant("large", 256),
                                       variant("medium", 64)], ROUNDS, torch.device("cpu"), None,
                                      seed=3)
    expected = [round_order(names, 3, r) for r in range(ROUNDS.warmup + ROUNDS.rounds)]
    segments = [calls[i:i + 4] for i in range(0, len(calls), 4)]
    assert [segment[1] for segment in segments] == [n for order in expected for n in order]
    assert all(segment[0] == f"before {segment[1]}" for segment in segments)
    assert measurement.orders == expected[ROUNDS.warmup:]  # warmup rounds are dropped
    for name in names:
        assert len(measurement.step_ms[name]) == ROUNDS.rounds
        assert all(len(steps) == ROUNDS.steps_per_round for steps in measurement.step_ms[name])
        assert measurement.extras[name] == [{"after": name}] * ROUNDS.rounds
        assert len(measurement.wall_s[name]) == ROUNDS.rounds
    large, small = measurement.round_ms("large"), measurement.round_ms("small")
    assert min(large) > max(small), "a 256² product must take longer than a 16² one"


def test_meter_is_read_around_each_segment():
    readings = iter(range(1000))
    measurement = measure_interleaved([Variant("a", busy(8)), Variant("b", busy(8))], ROUNDS,
                                      torch.device("cpu"), None, meter=lambda: next(readings))
    # Two readings per segment, one unit apart: each segment's energy is exactly 1.
    assert measurement.energy_j == {"a": [1] * ROUNDS.rounds, "b": [1] * ROUNDS.rounds}


def test_duplicate_variant_names_are_refused():
    try:
        measure_interleaved([Variant("a", busy(4)), Variant("a", busy(4))], ROUNDS,
                            torch.device("cpu"), None)
    except ValueError as error:
        assert "variant names must be unique, got ['a', 'a']" in str(error)
    else:
        raise AssertionError("duplicate names were accepted")


def _orders_on_rank(context):
    group = context.group(context.world_size)
    measurement = measure_interleaved([Variant(n, busy(8)) for n in "abcd"], ROUNDS,
                                      context.device, group, seed=11)
    return measurement.orders


def test_two_ranks_run_the_same_order():
    first, second = run_ranks(_orders_on_rank, 2)
    assert first == second
    assert len({tuple(order) for order in first}) > 1, "the order should change between rounds"


def test_recorded_round_times_become_the_row_statistics(benchmark):
    record_round_times(benchmark, [0.010, 0.012, 0.011, 0.013])
    assert benchmark.stats.stats.data == [0.010, 0.012, 0.011, 0.013]
    assert benchmark.stats.stats.median == 0.0115
    try:
        record_round_times(benchmark, [1.0])
    except RuntimeError as error:
        assert "already used" in str(error)
    else:
        raise AssertionError("a second recording was accepted")
