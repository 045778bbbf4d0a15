"""Timing for GPUs and several ranks: fixed rounds, device sync and a barrier per round.

Never calibrate rounds per rank: every rank must run the same number of collectives or the
run hangs, so warmup and rounds are fixed numbers, the same everywhere. Each step is also
timed on the device (CUDA events on the default stream; perf_counter on CPU) beside the
wall-clock round time pytest-benchmark records.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

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
