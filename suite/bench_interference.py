"""Interference: the workload's dominant GEMM alone, and beside traffic on another stream.

Overlap hides communication only if the compute it hides behind does not slow down. This
measures by how much it does: a fixed batch of the workload's dominant GEMM (the largest
matrix product of its step) alone, and with work running on a second stream at the same time:

- all-reduce: NCCL (or gloo) all-reduces of the bytes that GEMM's weight gradient has, the
  traffic an overlapped step puts beside it (2 or more ranks);
- copy: device-to-device copies of the same bytes (GPU only);
- add: a memory-bound elementwise kernel over the same bytes (GPU only).

The interfering work is sized once, before timing, to outlast the GEMMs (on rank 0, then
broadcast: every rank must issue the same number of collectives). The variants run
interleaved in the same rounds; the slowdown is the paired ratio of GEMM times with its 95%
interval and a verdict.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.distributed as dist

from impl import capabilities, stats
from impl.rows.kinds import GEMM, INTERFERENCE, SLOWDOWN
from impl.rows.write import write_row
from impl.workloads import DTYPES, WorkloadConfig
from suite.conftest import launched_world, suite_axes
from suite.harness import StepClock, Variant, measure_interleaved, record_round_times, sync

GPU_GEMMS = 10  # ten 8192³ bf16 products ≈ 14 ms on an H200 (docs/ANCHORS.md)
CPU_GEMM_MS = 20.0  # CPU: as many products as fill about this long
COVER = 1.3  # the interfering work lasts this much longer than the GEMMs alone
# The row's GEMM is described by the fields a GEMM row describes its own with.
GEMM_ROW = GEMM.names


@dataclass(frozen=True)
class Gemm:
    m: int
    n: int
    k: int
    dtype: str

    @property
    def weight_grad_elements(self) -> int:
        return self.k * self.n


def dominant_gemm(config: WorkloadConfig) -> Gemm:
    """The largest matrix product of the workload's step (forward shape; backward has two
    of the same size): batch × width × width for an MLP, tokens × 4·width × width for a GPT's
    MLP, rows × features × features for the seed layer."""
    if config.kind == "mlp":
        return Gemm(config.batch, config.width, config.width, config.dtype)
    if config.kind == "gpt":
        return Gemm(config.batch * config.context, 4 * config.width, config.width, config.dtype)
    return Gemm(config.rows, config.features, config.features, config.dtype)


def interferers(world_size: int, cuda: bool) -> tuple[str, ...]:
    return (*(("all-reduce",) if world_size > 1 else ()), *(("copy", "add") if cuda else ()))


def pytest_generate_tests(metafunc):
    if "interference_workload" in metafunc.fixturenames:
        axes = suite_axes(metafunc.config)
        workloads = [w for w in axes["workloads"] if w.kind != "seed_layer"]
        metafunc.parametrize("interference_workload", workloads,
                             ids=[f"{w.name}-w{launched_world()}-{axes['profile']}"
                                  for w in workloads])


def timed_ms(work: Callable[[], None], device: torch.device, repeats: int = 3) -> float:
    """Median time of ``work`` (synchronised), for sizing only."""
    clock = StepClock(device)
    for _ in range(repeats + 1):
        clock.time(work)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return sorted(clock.step_ms()[1:])[repeats // 2]


def agreed(value: int, device: torch.device, group) -> int:
    """Rank 0's value on every rank of ``group`` (sizes that decide collective counts)."""
    if group is None:
        return value
    tensor = torch.tensor([value], device=device)
    dist.broadcast(tensor, src=dist.get_global_rank(group, 0), group=group)
    return int(tensor.item())


class Interference:
    """Buffers and the steps of every variant; ``side`` work runs on a second stream (GPU)
    or, for gloo, on gloo's own threads while this thread multiplies."""

    def __init__(self, gemm: Gemm, device: torch.device, group):
        self.device, self.group, self.cuda = device, group, device.type == "cuda"
        dtype = DTYPES[gemm.dtype] if self.cuda else torch.float32
        make = lambda *shape: torch.randn(*shape, device=device, dtype=dtype)  # noqa: E731
        self.a, self.b = make(gemm.m, gemm.k), make(gemm.k, gemm.n)
        self.traffic, self.target = make(gemm.weight_grad_elements), make(gemm.weight_grad_elements)
        self.side = torch.cuda.Stream(device) if self.cuda else None
        self.gemms = 1
        if not self.cuda:
            one = timed_ms(self._gemm_batch, device)
            self.gemms = max(1, math.ceil(CPU_GEMM_MS / max(one, 1e-3)))
        else:
            self.gemms = GPU_GEMMS
        self.gemms = agreed(self.gemms, device, group)
        gemm_ms = timed_ms(self._gemm_batch, device)
        self.repeats = {}
        for name, op in (("all-reduce", self._all_reduce), ("copy", self._copy),
                         ("add", self._add)):
            if name in interferers(dist.get_world_size(group) if group else 1, self.cuda):
                self.repeats[name] = agreed(math.ceil(COVER * gemm_ms / timed_ms(op, device)),
                                            device, group)

    def _gemm_batch(self) -> None:
        for _ in range(self.gemms):
            torch.mm(self.a, self.b)

    def _all_reduce(self) -> None:
        dist.all_reduce(self.traffic, group=self.group)

    def _copy(self) -> None:
        self.target.copy_(self.traffic)

    def _add(self) -> None:
        self.target.add_(1.0)

    def step(self, interferer: str | None) -> Callable[[], None]:
        """One step: the GEMM batch, with ``interferer`` running beside it (or alone)."""
        if interferer is None:
            return self._gemm_batch
        op = {"all-reduce": self._all_reduce, "copy": self._copy, "add": self._add}[interferer]
        repeats = self.repeats[interferer]

        def beside() -> None:
            if self.cuda:
                # The side stream is launched first so its work is running when the GEMMs
                # start on the current stream; only the GEMMs are timed (StepClock events on
                # the current stream), the segment's sync waits for the side stream.
                self.side.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(self.side):
                    for _ in range(repeats):
                        op()
                self._gemm_batch()
            else:
                works = [dist.all_reduce(self.traffic, group=self.group, async_op=True)
                         for _ in range(repeats)]
                self._gemm_batch()
                for work in works:
                    work.wait()

        return beside


def test_interference(benchmark, interference_workload, dist_context, rounds):
    context = dist_context
    group = context.group(context.world_size)
    kinds = interferers(context.world_size, context.device.type == "cuda")
    if not kinds:
        pytest.skip("nothing can run beside the GEMM: one rank and no GPU "
                    f"({capabilities.missing_gpu()})")
    gemm = dominant_gemm(interference_workload)
    setup = Interference(gemm, context.device, group)
    sync(context.device, group)
    started = time.perf_counter()
    variants = [Variant("alone", setup.step(None)),
                *(Variant(f"beside {kind}", setup.step(kind)) for kind in kinds)]
    measurement = measure_interleaved(variants, rounds, context.device, group)
    alone = measurement.round_ms("alone")
    slowdowns = {}
    for kind in kinds:
        beside = measurement.round_ms(f"beside {kind}")
        slowdowns[kind] = {SLOWDOWN.ratio: stats.ratio(beside, alone).to_json(),
                           SLOWDOWN.verdict: stats.verdict(stats.difference(beside, alone)),
                           "repeats": setup.repeats[kind]}
    benchmark.group = f"interference-w{context.world_size}-{context.profile}"
    record_round_times(benchmark, [sum(s) / 1e3 for s in measurement.step_ms["alone"]])
    write_row(benchmark, INTERFERENCE.row(
        workload=interference_workload.name,
        world_size=context.world_size, profile=context.profile,
        backend=context.backend,
        device=torch.cuda.get_device_name(context.device)
        if context.device.type == "cuda" else "cpu",
        gemm={GEMM_ROW.m: gemm.m, GEMM_ROW.n: gemm.n, GEMM_ROW.k: gemm.k,
              GEMM_ROW.dtype: str(setup.a.dtype)[6:], "per_step": setup.gemms},
        traffic_bytes=setup.traffic.numel() * setup.traffic.element_size(),
        gemm_alone_ms=stats.median(alone).to_json(), slowdown=slowdowns,
        measurement=measurement.to_json(), seconds=time.perf_counter() - started,
    ))
