"""Timing for GPUs and several ranks: fixed rounds, device sync and a barrier per round.

Never calibrate rounds per rank: every rank must run the same number of collectives or the
run hangs, so warmup and rounds are fixed numbers, the same everywhere. Each step is also
timed on the device (CUDA events on the default stream; perf_counter on CPU) beside the
wall-clock round time pytest-benchmark records.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from impl.stats import round_order
from impl.strategies import Strategy, StrategyOptions, build_strategy
from impl.workloads import Batch, WorkloadConfig, build_model, make_batch

BATCHES_IN_ROTATION = 2  # distinct batches, made before timing so generation is not timed


@dataclass(frozen=True)
class Rounds:
    warmup: int
    rounds: int
    steps_per_round: int = 1
    check_steps: int = 3  # steps of the correctness check before timing

    @property
    def timed_steps(self) -> int:
        return self.rounds * self.steps_per_round


MODES = {
    # mode: (cpu rounds, gpu rounds)
    "quick": (Rounds(warmup=1, rounds=5, check_steps=2), Rounds(warmup=2, rounds=5, check_steps=2)),
    "default": (Rounds(warmup=2, rounds=10), Rounds(warmup=3, rounds=10, check_steps=2)),
    "full": (Rounds(warmup=3, rounds=30), Rounds(warmup=5, rounds=30)),
}


def rounds_for(mode: str, device: torch.device) -> Rounds:
    if mode not in MODES:
        raise ValueError(f"unknown suite mode {mode!r}; choose one of {sorted(MODES)}")
    return MODES[mode][device.type == "cuda"]


def sync(device: torch.device, group: dist.ProcessGroup | None) -> None:
    """End of a round: the device has finished and every rank of the group is here."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    if group is not None and dist.get_world_size(group) > 1:
        device_ids = [device.index] if device.type == "cuda" else None
        dist.barrier(group=group, device_ids=device_ids)


class StepClock:
    """Per-step device time: CUDA events on the current stream, or perf_counter on CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list[tuple] = []

    def time(self, step: Callable[[], None]) -> None:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
        else:
            start = time.perf_counter()
            step()
            end = time.perf_counter()
        self.marks.append((start, end))

    def step_ms(self) -> list[float]:
        """Call after the device has synchronised."""
        if self.cuda:
            return [start.elapsed_time(end) for start, end in self.marks]
        return [(end - start) * 1e3 for start, end in self.marks]


def batches(workload: WorkloadConfig, device: torch.device, rank: int) -> list[Batch]:
    return [make_batch(workload, device, seed=0, rank=rank, step=s)
            for s in range(BATCHES_IN_ROTATION)]


def make_round(strategy: Strategy, data: list[Batch], rounds: Rounds, clock: StepClock,
               group: dist.ProcessGroup | None) -> Callable[[], None]:
    """One benchmark round: ``steps_per_round`` timed steps, then device sync and barrier."""
    counter = iter(range(10**9))

    def one_round() -> None:
        for _ in range(rounds.steps_per_round):
            batch = data[next(counter) % len(data)]
            clock.time(lambda b=batch: strategy.step(b))
        sync(strategy.device, group)

    return one_round


def run_rounds(one_round: Callable[[], None], rounds: Rounds, clock: StepClock) -> list[float]:
    """Warmup, then timed rounds; the device step times of the timed rounds only."""
    for _ in range(rounds.warmup):
        one_round()
    clock.marks.clear()
    for _ in range(rounds.rounds):
        one_round()
    return clock.step_ms()


def measure_step_ms(strategy_name: str, workload: WorkloadConfig,
                    group: dist.ProcessGroup | None, device: torch.device,
                    options: StrategyOptions, rounds: Rounds, rank: int) -> float:
    """Median device step time of a strategy, outside pytest-benchmark (reference runs)."""
    model = build_model(workload, device)
    strategy = build_strategy(strategy_name, model, workload, group, options)
    try:
        clock = StepClock(device)
        one_round = make_round(strategy, batches(workload, device, rank), rounds, clock, group)
        return statistics.median(run_rounds(one_round, rounds, clock))
    finally:
        strategy.close()


def measure_comm_only_ms(all_reduce_chunks: Callable[[], None], device: torch.device,
                         group: dist.ProcessGroup, rounds: Rounds) -> float:
    """Median time of ``all_reduce_chunks``: every chunk launched back to back, no compute.

    Same launch pattern as the overlapped strategies (async, then wait all), so fabrics where
    concurrent chunks move data faster than one buffer are measured at that chunking.
    """
    clock = StepClock(device)

    def one_round() -> None:
        clock.time(all_reduce_chunks)
        sync(device, group)

    return statistics.median(run_rounds(one_round, rounds, clock))


def torch_all_reduce_chunks(chunks: list[torch.Tensor],
                            group: dist.ProcessGroup) -> Callable[[], None]:
    def launch_and_wait() -> None:
        works = [dist.all_reduce(c, group=group, async_op=True) for c in chunks]
        for work in works:
            work.wait()

    return launch_and_wait


# --- interleaved measurement: every variant of a comparison in the same rounds ---------------


@dataclass
class Variant:
    """One side of a comparison: a step to time and, after each round, values to keep.

    ``step`` runs one step; its device work may still be queued when it returns (the clock's
    CUDA events bracket it on the stream). ``after_round`` runs after the round's device sync
    and barrier, outside every timed region: it returns per-round values such as a resolved
    timeline's figures.
    """

    name: str
    step: Callable[[], None]
    after_round: Callable[[], dict] | None = None


@dataclass
class Measurement:
    """Every per-round value of an interleaved run (the results file keeps all of it)."""

    names: list[str]
    seed: int
    steps_per_round: int
    orders: list[list[str]] = field(default_factory=list)
    step_ms: dict[str, list[list[float]]] = field(default_factory=dict)  # [round][step]
    wall_s: dict[str, list[float]] = field(default_factory=dict)  # segment incl. sync, per round
    extras: dict[str, list[dict]] = field(default_factory=dict)

    def round_ms(self, name: str) -> list[float]:
        """Per round: the median step time of ``name`` in that round."""
        return [statistics.median(steps) for steps in self.step_ms[name]]

    def to_json(self) -> dict:
        return {"names": self.names, "seed": self.seed, "steps_per_round": self.steps_per_round,
                "orders": self.orders, "step_ms": self.step_ms, "wall_s": self.wall_s,
                "extras": self.extras}


def measure_interleaved(variants: Sequence[Variant], rounds: Rounds, device: torch.device,
                        group: dist.ProcessGroup | None, seed: int = 0) -> Measurement:
    """Run every variant's steps in each round, in an order shuffled per round (same on all ranks).

    Warmup rounds run the same way and are dropped. Each variant's segment of a round is
    ``steps_per_round`` steps, then device sync and a barrier, so no variant's queued work
    spills into the next one's timing.
    """
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"variant names must be unique, got {names}")
    by_name = {v.name: v for v in variants}
    result = Measurement(names, seed, rounds.steps_per_round,
                         step_ms={n: [] for n in names}, wall_s={n: [] for n in names},
                         extras={n: [] for n in names})
    for index in range(rounds.warmup + rounds.rounds):
        order = round_order(names, seed, index)
        timed = index >= rounds.warmup
        if timed:
            result.orders.append(order)
        for name in order:
            variant, clock = by_name[name], StepClock(device)
            started = time.perf_counter()
            for _ in range(rounds.steps_per_round):
                clock.time(variant.step)
            sync(device, group)
            wall = time.perf_counter() - started
            extra = variant.after_round() if variant.after_round else None
            if timed:
                result.step_ms[name].append(clock.step_ms())
                result.wall_s[name].append(wall)
                if extra is not None:
                    result.extras[name].append(extra)
    return result


def record_round_times(benchmark, round_seconds: Sequence[float]) -> None:
    """Give a pytest-benchmark row the per-round times measured by ``measure_interleaved``.

    The rounds of a comparison are timed by the interleaved run, not by pytest-benchmark's
    own loop, so the fixture's statistics are filled from those times. pytest-benchmark has no
    public call for this (its issue #52); ``_make_stats`` plus ``update`` is what its own
    ``pedantic`` does per round. ``tests/test_harness.py`` checks the stored data.
    """
    if benchmark._mode:
        raise RuntimeError(f"benchmark fixture already used in {benchmark._mode} mode")
    benchmark._mode = "record_round_times(...)"
    stats = benchmark._make_stats(1)
    for seconds in round_seconds:
        stats.update(seconds)
