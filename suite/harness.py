"""Timing for GPUs and several ranks: fixed rounds, device sync and a barrier per round, and
the interleaved measurement every comparison of the suite is made with.

Never calibrate rounds per rank: every rank must run the same number of collectives or the
run hangs, so warmup and rounds are fixed numbers, the same everywhere. Steps are timed on the
device (CUDA events on the current stream; perf_counter on CPU); the wall-clock time of each
variant's segment of a round (steps, sync and barrier) is kept beside them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from impl.rows.kinds import MEASURED
from impl.stats import round_order
from impl.workloads import Batch, WorkloadConfig, make_batch

BATCHES_IN_ROTATION = 2  # distinct batches, made before timing so generation is not timed


@dataclass(frozen=True)
class Rounds:
    warmup: int
    rounds: int
    steps_per_round: int = 1
    check_steps: int = 3  # steps of the correctness check before timing


MODES = {
    # mode: (cpu rounds, gpu rounds). Every variant of a comparison runs in every round, so a
    # round costs (variants × steps_per_round) steps; intervals narrow with the round count.
    "quick": (Rounds(warmup=1, rounds=6, check_steps=2),
              Rounds(warmup=2, rounds=6, steps_per_round=2, check_steps=2)),
    "default": (Rounds(warmup=2, rounds=12, steps_per_round=2),
                Rounds(warmup=2, rounds=12, steps_per_round=3, check_steps=2)),
    "full": (Rounds(warmup=3, rounds=30, steps_per_round=2),
             Rounds(warmup=3, rounds=30, steps_per_round=3)),
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
    after_round: Callable[[], object] | None = None
    before_round: Callable[[], None] | None = None  # outside the timed steps, like after_round


@dataclass
class Measurement:
    """Every per-round value of an interleaved run (the results file keeps all of it)."""

    names: list[str]
    seed: int
    steps_per_round: int
    orders: list[list[str]] = field(default_factory=list)
    step_ms: dict[str, list[list[float]]] = field(default_factory=dict)  # [round][step]
    wall_s: dict[str, list[float]] = field(default_factory=dict)  # segment incl. sync, per round
    extras: dict[str, list] = field(default_factory=dict)  # after_round's values, per round
    energy_j: dict[str, list[float]] = field(default_factory=dict)  # per round, where metered

    def round_ms(self, name: str) -> list[float]:
        """Per round: the median step time of ``name`` in that round."""
        return [statistics.median(steps) for steps in self.step_ms[name]]

    def to_json(self) -> dict:
        # The keys a row's measurement declares (kinds.MEASURED), with the seed and orders.
        return {MEASURED.names: self.names, "seed": self.seed,
                MEASURED.steps_per_round: self.steps_per_round, "orders": self.orders,
                MEASURED.step_ms: self.step_ms, MEASURED.wall_s: self.wall_s,
                MEASURED.energy_j: self.energy_j}


def measure_interleaved(variants: Sequence[Variant], rounds: Rounds, device: torch.device,
                        group: dist.ProcessGroup | None, seed: int = 0,
                        meter: Callable[[], float] | None = None) -> Measurement:
    """Run every variant's steps in each round, in an order shuffled per round (same on all ranks).

    Warmup rounds run the same way and are dropped. Each variant's segment of a round is
    ``steps_per_round`` steps, then device sync and a barrier, so no variant's queued work
    spills into the next one's timing. ``meter``, where given (rank 0 with NVML), is a
    cumulative energy reading in joules taken around each segment.
    """
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"variant names must be unique, got {names}")
    by_name = {v.name: v for v in variants}
    result = Measurement(names, seed, rounds.steps_per_round,
                         step_ms={n: [] for n in names}, wall_s={n: [] for n in names},
                         extras={n: [] for n in names},
                         energy_j={n: [] for n in names} if meter else {})
    for index in range(rounds.warmup + rounds.rounds):
        order = round_order(names, seed, index)
        timed = index >= rounds.warmup
        if timed:
            result.orders.append(order)
        for name in order:
            variant, clock = by_name[name], StepClock(device)
            if variant.before_round:
                variant.before_round()
            energy_before = meter() if meter else None
            started = time.perf_counter()
            for _ in range(rounds.steps_per_round):
                clock.time(variant.step)
            sync(device, group)
            wall = time.perf_counter() - started
            energy = meter() - energy_before if meter else None
            extra = variant.after_round() if variant.after_round else None
            if timed:
                result.step_ms[name].append(clock.step_ms())
                result.wall_s[name].append(wall)
                if extra is not None:
                    result.extras[name].append(extra)
                if meter:
                    result.energy_j[name].append(energy)
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
