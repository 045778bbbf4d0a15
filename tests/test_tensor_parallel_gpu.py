"""The tensor-parallel block on GPUs (NCCL): every schedule and GEMM backend, checked against
the single-device block in fp32, at world sizes 1, 2 and 4 (each skips without enough GPUs).

On the GPU machine:
    python -m pytest tests/test_tensor_parallel_gpu.py -q -rs
The project's kernels are built on first use (about a minute).
"""

from __future__ import annotations

import pytest

from impl import capabilities
from impl.profiles import ALWAYS
from impl.tensor_parallel import layers as tp
from impl.tensor_parallel.schedules import SCHEDULES, Gemm, build_schedule, missing_gemm_backend
from tests.multirank import run_ranks

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(capabilities.missing_gpu() is not None,
                                 reason=capabilities.missing_gpu() or "")]

# NVLink multicast off, as the suite launches it (the fused ops check for it).
NCCL = {"OVERLAP_BACKEND": "nccl", **ALWAYS}
BACKENDS = {"fp32": ("torch", "v3"), "bf16": ("torch", "v5", "v6")}
# Every dimension a multiple of 128 (the kernels' tiles) and of 8 (v6's TMA path).
BLOCKS = {dtype: tp.TpMlpConfig(f"tp_mlp_h256_t1024_{dtype}", 1024, 256, 1024, dtype,
                                pieces_per_peer=2) for dtype in BACKENDS}


def skip_reason(backend: str, schedule: str, world: int) -> str | None:
    if reason := missing_gemm_backend(backend):
        return reason
    if schedule == "fused":
        if backend != "torch":
            return "fused runs cuBLAS inside PyTorch's ops"
        return capabilities.missing_fused_tp(world, "nccl")
    return None


def checks_on_rank(context) -> dict:
    """Every dtype × backend × schedule on this rank: its check, or why it was skipped (decided
    here: the rank's environment is the one the fused ops see)."""
    results = {}
    group = context.group(context.world_size)
    for dtype, config in BLOCKS.items():
        reference = tp.reference_outputs(config, context.device)
        for backend in BACKENDS[dtype]:
            for schedule in SCHEDULES:
                if reason := skip_reason(backend, schedule, context.world_size):
                    results[dtype, backend, schedule] = {"skip": reason}
                    continue
                runner = tp.TpMlpRunner(config, build_schedule(
                    schedule, group, Gemm(backend, tp.DTYPES[dtype]), context.device,
                    config.pieces_per_peer))
                check = tp.check_runner(runner, reference)
                runner.step()  # a second step: buffers reused, streams reordered
                timeline = runner.timeline()
                results[dtype, backend, schedule] = {
                    **check, "comm": sum(i.lane == "comm" for i in timeline.intervals),
                    "compute": sum(i.lane == "compute" for i in timeline.intervals)}
    return results


@pytest.fixture(scope="module", params=[1, 2, 4], ids=lambda w: f"world{w}")
def gpu_ranks(request):
    world = request.param
    if reason := capabilities.missing_gpu(world):
        pytest.skip(reason)
    return world, run_ranks(checks_on_rank, world, env=NCCL)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize(("dtype", "backend"), [(d, b) for d, bs in BACKENDS.items()
                                                for b in bs])
def test_gpu_block_equals_single_device_block(gpu_ranks, dtype, backend, schedule):
    world, results = gpu_ranks
    if "skip" in results[0][dtype, backend, schedule]:
        pytest.skip(results[0][dtype, backend, schedule]["skip"])
    for rank, per_rank in enumerate(results):
        check = per_rank[dtype, backend, schedule]
        assert check["max_rel_err"] <= check["tolerance"], (rank, check)
        if world == 1 and (dtype, backend, schedule) == ("fp32", "torch", "sync"):
            # One rank: no collective moves anything, and the block runs the reference's own
            # cuBLAS calls on the same operands, so it is the reference bit for bit.
            assert check["max_rel_err"] == 0.0, (rank, check)
        elif world > 1 or (dtype, backend) != ("fp32", "torch"):
            # Another reduction order (pieces, ranks) or dtype or GEMM: rounding shows, so a
            # zero would mean the block was compared with itself.
            assert check["max_rel_err"] > 0, (rank, check)
        pieces = world * BLOCKS[dtype].pieces_per_peer
        expected_comm = {"sync": 4, "overlapped": 4 * pieces, "fused": 0}[schedule]
        assert check["comm"] == (0 if world == 1 else expected_comm), (rank, check)
        assert check["compute"] >= 6
