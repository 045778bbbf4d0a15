"""Cells in a subgroup of a larger world cannot deadlock: 4 gloo ranks run every strategy and
named variant in the 2-rank group while ranks 2 and 3 wait in the barrier, and in the whole
world, side by side.

A variant whose knobs exist only with NCCL on a GPU is refused on gloo with its one line; its
group goes through the same path as on NCCL: made on every rank before the cells
(impl/strategies/knobs.py), looked up by the members alone, then used by them alone.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from impl.capabilities import gpu_count, missing_copy_engine, missing_gpu, missing_whole_world
from impl.dist import barrier, group_sizes
from impl.presets import preset
from impl.strategies import STRATEGIES
from impl.strategies.knobs import (
    VARIANTS,
    GroupOptions,
    make_variant_groups,
    options_group,
    variant_group_options,
    variant_strategy,
)
from impl.strategy_check import errors_vs_sequential, weight_tolerance
from impl.workloads import DTYPES, build_model
from tests.multirank import run_ranks

WORKLOAD = "mlp_tiny"
CHUNKS = 4
WORLD = 4


def every_variant() -> list[str]:
    """Every strategy torchrun runs, and every named variant."""
    plain = [name for name, cls in STRATEGIES.items() if not cls.needs_mpi and name != "synthetic"]
    return [*plain, *VARIANTS]


def gloo_refusal(name: str, group) -> str | None:
    """Why ``name`` cannot be built on a gloo group (its one line), or None."""
    from impl.strategies import build_strategy

    strategy, options = variant_strategy(name, CHUNKS)
    workload = preset(WORKLOAD)
    try:
        model = build_model(workload, torch.device("cpu"))
        build_strategy(strategy, model, workload, group, options).close()
    except ValueError as error:
        return str(error)
    return None


def in_each_group(context) -> dict:
    """On every rank: for the 2-rank group and the whole world, each variant's weight error
    against sequential (or its refusal), and the knob groups' members and a sum over them."""
    # What init_distributed does under NCCL, before any cell, on every rank.
    make_variant_groups(group_sizes(context.world_size))
    workload = preset(WORKLOAD)
    results = {}
    for size in (2, WORLD):
        group = context.group(size)
        if group is not None:  # ranks 2 and 3 go straight to the barrier when size is 2
            refused = {name: gloo_refusal(name, group) for name in every_variant()}
            runnable = {name: variant_strategy(name, CHUNKS, check_finite=True)
                        for name, why in refused.items() if why is None}
            errors = errors_vs_sequential(runnable, workload, group, context.device, steps=2)
            knob_groups = {}
            for options in variant_group_options():
                made = options_group(group, options)  # a lookup: the members alone call it
                tensor = torch.tensor([float(dist.get_rank())])
                dist.all_reduce(tensor, group=made)
                knob_groups[str(options)] = (dist.get_process_group_ranks(made), tensor.item())
            results[size] = {"errors": errors, "refused": {n: w for n, w in refused.items() if w},
                             "knob_groups": knob_groups}
        barrier(context)
    return results


@pytest.fixture(scope="module")
def ranks():
    return run_ranks(in_each_group, WORLD)


def test_every_variant_runs_in_a_subgroup_and_in_the_whole_world(ranks):
    tolerance = weight_tolerance(DTYPES[preset(WORKLOAD).dtype], 1.0)
    for size in (2, WORLD):
        members = [r for r in range(WORLD) if r < size]
        errors = ranks[0][size]["errors"]
        assert {"sequential", "threaded", "chunked", "ddp", "chunked+update",
                "threaded+update", "chunked+layers", "chunked+first1mb"} <= set(errors)
        for name, error in errors.items():
            assert error <= tolerance, f"{name} in the {size}-rank group: {error:.3g}"
        for rank in members:
            assert ranks[rank][size]["errors"] == errors
        assert all(size not in ranks[rank] for rank in range(size, WORLD))


def test_nccl_only_variants_are_refused_on_gloo_in_one_line(ranks):
    refused = ranks[0][2]["refused"]
    assert refused["chunked+priority"] == "comm_priority='high' is an NCCL knob; this group " \
                                          "runs gloo"
    assert refused["chunked+ctas8"] == "nccl_max_ctas is an NCCL knob; this group runs gloo"
    assert refused["chunked+carveout32"].startswith("cublas_sm_carveout is a GPU knob")
    assert refused["copy-engine"] == ("copy-engine at 2 ranks: "
                                      + missing_copy_engine("gloo", "gloo-tcp", 2))
    assert set(refused) == {"chunked+priority", "chunked+ctas8", "chunked+carveout32",
                            "copy-engine", "copy-engine+update"}


def test_knob_groups_made_up_front_serve_the_members_alone(ranks):
    for size, total in ((2, 0 + 1), (WORLD, 0 + 1 + 2 + 3)):
        for rank in range(size):
            groups = ranks[rank][size]["knob_groups"]
            assert set(groups) == {str(GroupOptions(high_priority=True)),
                                   str(GroupOptions(max_ctas=8))}
            for members, summed in groups.values():
                assert members == list(range(size))
                assert summed == total


def missing_group_refused(context) -> str:
    """A subgroup whose options were not made up front: the members get an error at once."""
    group = context.group(2)
    message = ""
    if group is not None:
        try:
            options_group(group, GroupOptions(max_ctas=3))
        except ValueError as error:
            message = str(error)
    barrier(context)
    return message


def test_a_subgroup_with_options_not_made_up_front_is_an_error_not_a_hang():
    messages = run_ranks(missing_group_refused, WORLD)
    assert messages[0] == messages[1] == (
        "GroupOptions(high_priority=False, max_ctas=3) for ranks [0, 1] of a world of 4: a "
        "subgroup with NCCL options must be made on every rank before the cells run "
        "(impl.strategies.knobs.make_group)")
    assert messages[2:] == ["", ""]


KNOB_VARIANTS = ("chunked+priority", "chunked+ctas8")


def knob_variants_in_half_the_world(context) -> dict:
    """On NCCL: the knob variants' weight errors against sequential in the group of the first
    half of the ranks (the others wait in the barrier) and in the whole world."""
    workload = preset("mlp_tiny")
    candidates = {name: variant_strategy(name, CHUNKS, check_finite=True)
                  for name in KNOB_VARIANTS}
    results = {}
    for size in (context.world_size // 2, context.world_size):
        group = context.group(size)
        if group is not None:
            results[size] = errors_vs_sequential(candidates, workload, group, context.device,
                                                 steps=2)
        barrier(context)
    return results


@pytest.mark.gpu
@pytest.mark.skipif(missing_gpu(2) is not None, reason=missing_gpu(2) or "")
def test_knob_variants_run_in_half_the_gpus_while_the_others_wait():
    world = gpu_count()
    ranks = run_ranks(knob_variants_in_half_the_world, world, env={"OVERLAP_BACKEND": "nccl"})
    tolerance = weight_tolerance(DTYPES[preset("mlp_tiny").dtype], 1.0)
    for size in (world // 2, world):
        assert set(ranks[0][size]) == set(KNOB_VARIANTS)
        assert all(error <= tolerance for error in ranks[0][size].values()), ranks[0][size]
    assert world // 2 not in ranks[-1]


def test_symmetric_memory_runs_on_the_whole_launch_only():
    assert missing_whole_world(1, 4) is None
    assert missing_whole_world(4, 4) is None
    assert missing_whole_world(2, 4) == (
        "symmetric memory runs on the whole launch only (a rendezvous in 2 of 4 ranks would "
        "leave the others' exchange count behind): launch 2 ranks to measure it at w = 2")
