"""Bad input gets an error that names the value and what is allowed; a missing peer ends."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from impl.gradients import check_chunks
from impl.presets import preset
from impl.profiles import apply_profile, check_profile
from impl.strategies import StrategyOptions, build_strategy, check_strategy
from impl.workloads import Batch, build_model, make_batch
from suite.run import free_port

CPU = torch.device("cpu")


@pytest.mark.parametrize("chunks", [0, -3, 257, 2.5, "4", True])
def test_chunk_count_out_of_range_names_value_and_range(chunks):
    model = build_model(preset("mlp_tiny"), CPU)
    with pytest.raises(ValueError) as error:
        check_chunks(chunks, model, "mlp_tiny")
    assert str(error.value) == (f"chunks={chunks!r} is out of range for workload 'mlp_tiny': "
                                "choose an integer from 1 to 256")


def test_chunk_limit_follows_small_models():
    workload = preset("seed_layer_1024x512")
    model = build_model(workload, CPU)
    build_strategy("chunked", model, workload, None, StrategyOptions(chunks=256)).close()
    with pytest.raises(ValueError, match=r"chunks=257 .* from 1 to 256"):
        build_strategy("chunked", model, workload, None, StrategyOptions(chunks=257))


def test_unknown_strategy_lists_choices():
    with pytest.raises(ValueError) as error:
        check_strategy("pipelined")
    assert "unknown strategy 'pipelined'" in str(error.value)
    for name in ("chunked", "ddp", "mpi", "sequential", "synthetic", "threaded"):
        assert name in str(error.value)


def test_unknown_workload_lists_presets():
    with pytest.raises(ValueError,
                       match=r"unknown workload 'mlp_huge'; choose one of .*'mlp_tiny'"):
        preset("mlp_huge")


def test_unknown_profile_and_conflicting_environment():
    with pytest.raises(ValueError, match=r"unknown interconnect profile 'infiniband'; choose "
                                         r"one of \['nvlink', 'shm', 'socket'\]"):
        check_profile("infiniband")
    environ = {"NCCL_P2P_DISABLE": "1"}
    with pytest.raises(ValueError, match="profile 'nvlink' needs NCCL_P2P_DISABLE unset"):
        apply_profile("nvlink", environ)
    socket = {}
    apply_profile("socket", socket)
    assert socket["NCCL_P2P_DISABLE"] == socket["NCCL_SHM_DISABLE"] == "1"
    assert socket["NCCL_NVLS_ENABLE"] == "0"


def test_batch_that_does_not_fit_the_workload():
    workload = preset("mlp_tiny")
    strategy = build_strategy("sequential", build_model(workload, CPU), workload, None,
                              StrategyOptions())
    wrong = Batch(torch.zeros(64, 128), torch.zeros(64, 128))
    with pytest.raises(ValueError) as error:
        strategy.step(wrong)
    assert str(error.value) == ("batch of shape (64, 128) does not fit workload 'mlp_tiny': "
                                "expected inputs of shape (64, 256)")
    strategy.step(make_batch(workload, CPU))  # the right one still works afterwards


def _launch(code: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Runs ``code``; a hang past ``timeout`` seconds fails the test (a guard, not a timing)."""
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_world_size_larger_than_gpus_present():
    if torch.cuda.device_count() >= 64:
        pytest.skip("this machine has 64 GPUs")
    env = {"OVERLAP_BACKEND": "nccl", "WORLD_SIZE": "64", "LOCAL_WORLD_SIZE": "64", "RANK": "0"}
    result = _launch("from impl.dist import init_distributed; init_distributed()", env, 60)
    assert result.returncode != 0
    assert "ValueError: world size 64 on this node with nccl: needs 64 CUDA GPU(s)" in result.stderr


def test_bad_timeout_variable_is_named():
    env = {"OVERLAP_PG_TIMEOUT_S": "soon"}
    result = _launch("from impl.dist import init_distributed; init_distributed()", env, 60)
    assert "ValueError: OVERLAP_PG_TIMEOUT_S='soon' is not an integer" in result.stderr


def test_missing_peer_ends_with_an_error_not_a_hang():
    """Rank 0 of 2 starts alone: the rendezvous times out after OVERLAP_PG_TIMEOUT_S."""
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "OVERLAP_BACKEND": "gloo",
           "OVERLAP_PG_TIMEOUT_S": "5"}
    result = _launch("from impl.dist import init_distributed; init_distributed()", env, 120)
    assert result.returncode != 0
    assert "1/2 clients joined" in result.stderr or "Timed out" in result.stderr, result.stderr


def _sum_over_groups(context) -> dict:
    import torch.distributed as dist

    sums = {}
    for size in context.world_sizes:
        group = context.group(size)
        value = torch.ones(1)
        if group is not None:
            dist.all_reduce(value, group=group)
        sums[size] = value.item() if group is not None else None
    return sums


def test_a_launch_of_three_ranks_has_its_whole_world_as_a_group():
    """--ranks 3 is allowed: the benchmarks of the launched world (autotune, interference) need
    a group of all 3 ranks beside the subgroups of 1 and 2."""
    from tests.multirank import run_ranks

    sums = run_ranks(_sum_over_groups, 3)
    assert sums[0] == {1: 1.0, 2: 2.0, 3: 3.0}
    assert sums[2] == {1: None, 2: None, 3: 3.0}
