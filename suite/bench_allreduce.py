"""All-reduce bandwidth in the style of nccl-tests: algbw and busbw per size, with #wrong.

Sizes 1 MiB – 1 GiB on GPU (bf16, like docs/ANCHORS.md), up to 64 MiB on gloo (256 MiB in --full).
Each round runs a fixed number of in-place all-reduces between CUDA events (perf_counter on
CPU), then synchronises and meets at a barrier. After timing, a buffer of (rank + 1) is
all-reduced once and every element compared with n(n+1)/2: the wrong-element count sits
beside each bandwidth figure, as in nccl-tests.
"""

from __future__ import annotations

import statistics

import pytest
import torch
import torch.distributed as dist

from impl import metrics
from impl.rows.kinds import ALLREDUCE
from impl.rows.study_records import AXES
from impl.rows.write import write_row
from suite.conftest import launched_world, suite_axes
from suite.harness import StepClock, sync

SIZES_MIB = (1, 4, 16, 64, 256, 1024)
CPU_MAX_MIB = {"quick": 16, "default": 64, "full": 256}


def sizes_mib(cuda: bool, mode: str) -> list[int]:
    return [s for s in SIZES_MIB if cuda or s <= CPU_MAX_MIB[mode]]


def pytest_generate_tests(metafunc):
    """Only what this launch can run: world sizes 2 up to the launched world, and on gloo the
    sizes of the mode."""
    if "size_mib" in metafunc.fixturenames:
        axes = suite_axes(metafunc.config)
        worlds = [w for w in axes[AXES.world_sizes] if 1 < w <= launched_world()]
        cuda = axes[AXES.backend] == "nccl"
        metafunc.parametrize("world_size", worlds, ids=lambda w: f"w{w}-{axes['profile']}")
        metafunc.parametrize("size_mib", sizes_mib(cuda, metafunc.config.option.suite_mode),
                             ids=lambda s: f"{s}MiB")


def ops_per_round(size_mib: int, cuda: bool) -> int:
    """At least nccl-tests' 20 iterations, and at least 256 MiB moved per round on GPU.

    Small messages take microseconds: with 20 of them a round is dominated by its closing
    sync and barrier, whose jitter the regression gate then reads as a change in bandwidth.
    """
    if not cuda:
        return 2
    return 5 if size_mib > 256 else max(20, 256 // size_mib)


def test_allreduce(benchmark, dist_context, rounds, pytestconfig, size_mib, world_size):
    context = dist_context
    cuda = context.device.type == "cuda"
    group = context.group(world_size)
    if group is None:
        pytest.skip(f"rank {context.rank} is outside the {world_size}-rank group")
    dtype = torch.bfloat16 if cuda else torch.float32
    size_bytes = size_mib * 2**20
    buffer = torch.zeros(size_bytes // dtype.itemsize, dtype=dtype, device=context.device)
    ops = ops_per_round(size_mib, cuda)
    clock = StepClock(context.device)

    def all_reduces() -> None:
        for _ in range(ops):
            dist.all_reduce(buffer, group=group)

    def one_round() -> None:
        clock.time(all_reduces)
        sync(context.device, group)

    for _ in range(rounds.warmup):
        one_round()
    clock.marks.clear()
    benchmark.group = f"allreduce-w{world_size}-{context.profile}"
    benchmark.pedantic(one_round, rounds=rounds.rounds, iterations=1, warmup_rounds=0)
    time_ms = statistics.median(clock.step_ms()) / ops

    buffer.fill_(context.rank + 1)
    dist.all_reduce(buffer, group=group)
    expected = world_size * (world_size + 1) // 2
    wrong = int((buffer != expected).sum().item())
    write_row(benchmark, ALLREDUCE.row(
        backend=context.backend, profile=context.profile,
        world_size=world_size, dtype=str(dtype).removeprefix("torch."),
        size_bytes=size_bytes, ops_per_round=ops, time_ms=time_ms,
        algbw_gbps=metrics.algbw_gbps(size_bytes, time_ms),
        busbw_gbps=metrics.busbw_gbps(size_bytes, time_ms, world_size),
        wrong_elements=wrong, device=torch.cuda.get_device_name(context.device)
        if cuda else "cpu",
    ))
    assert wrong == 0, f"all-reduce of {size_mib} MiB over {world_size} ranks: {wrong} wrong"
