"""The tensor-parallel layers equal the single-device layer under every schedule (CPU, gloo).

World sizes 1, 2 and 4, each a set of real processes (tests/multirank.py). The fused schedule
runs PyTorch's own reference implementations of its two ops (``_fused_*_fallback``, the
semantics the CUDA ops implement) so that its arguments are checked here; the real ops need
GPUs (tests/test_tensor_parallel_gpu.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest
import torch

from impl.presets import preset
from impl.tensor_parallel import layers as tp
from impl.tensor_parallel import metrics as tp_metrics
from impl.tensor_parallel.schedules import (
    SCHEDULES,
    Gemm,
    OverlappedSchedule,
    build_schedule,
    columns_of,
    missing_gemm_backend,
    row_pieces,
)
from tests.multirank import run_ranks

SP = preset("tp_mlp_h32_t64_fp32")
CONFIGS = {
    "sp": SP,
    "ar": replace(SP, name="tp_mlp_ar_h32_t64_fp32", sequence_parallel=False),
    "sp_bf16": replace(SP, name="tp_mlp_h32_t64_bf16", dtype="bf16"),
}


def fallback_ops() -> tuple:
    from torch.distributed._symmetric_memory import (
        _fused_all_gather_matmul_fallback,
        _fused_matmul_reduce_scatter_fallback,
    )

    return _fused_all_gather_matmul_fallback, _fused_matmul_reduce_scatter_fallback


def schedule_for(name: str, context, config: tp.TpMlpConfig, schedule_class=None):
    group = context.group(context.world_size)
    gemm = Gemm("torch", tp.DTYPES[config.dtype])
    if schedule_class is not None:
        return schedule_class(group, gemm, context.device, config.pieces_per_peer)
    options = {"fused_ops": fallback_ops()} if name == "fused" else {}
    return build_schedule(name, group, gemm, context.device, config.pieces_per_peer, **options)


class MisroutedSchedule(OverlappedSchedule):
    """Sends every piece to, and takes every piece from, the wrong peer: collectives still
    match across ranks (no hang), the answer is wrong. The check must catch it."""

    def _peer(self, owner: int) -> int:
        return super()._peer((owner + 1) % self.world)


def standalone_layers(context, schedule_name: str) -> dict:
    """Column-parallel (gathered output) and row-parallel Linear against torch autograd."""
    tokens, fan_in, fan_out = 32, 24, 40
    generator = torch.Generator().manual_seed(1)
    full = {n: torch.randn(*shape, generator=generator, dtype=torch.float64)
            for n, shape in (("x", (tokens, fan_in)), ("w", (fan_in, fan_out)),
                             ("dy", (tokens, fan_out)))}
    x, w = full["x"].clone().requires_grad_(), full["w"].clone().requires_grad_()
    (x @ w).backward(full["dy"])
    reference = {"y": (full["x"] @ full["w"]), "dx": x.grad, "dw": w.grad}
    world, rank = context.world_size, context.rank
    config = replace(SP, pieces_per_peer=1)
    results = {}
    for layer in ("column", "row"):
        schedule = schedule_for(schedule_name, context, config)
        if layer == "column":
            w_i = full["w"].float().tensor_split(world, dim=1)[rank].contiguous()
            x_i = full["x"].float().clone()
            want_dx, want_dw = reference["dx"], reference["dw"].tensor_split(world, dim=1)[rank]
        else:
            w_i = full["w"].float().tensor_split(world, dim=0)[rank].contiguous()
            x_i = full["x"].float().tensor_split(world, dim=1)[rank].contiguous()
            want_dx = reference["dx"].tensor_split(world, dim=1)[rank]
            want_dw = reference["dw"].tensor_split(world, dim=0)[rank]
        x_i.requires_grad_(), w_i.requires_grad_()
        y = (tp.column_parallel(x_i, w_i, schedule, gather_output=True) if layer == "column"
             else tp.row_parallel(x_i, w_i, schedule))
        y.backward(full["dy"].float())
        results[layer] = tp.relative_errors(
            {"y": y.detach(), "dx": x_i.grad, "dw": w_i.grad},
            {"y": reference["y"], "dx": want_dx, "dw": want_dw})
    results["tolerance"] = tp.relative_tolerance("fp32", max(tokens, fan_in, fan_out), world)
    return results


def every_schedule(context) -> dict:
    """On one rank: the check of every config × schedule, its timeline, and the broken one."""
    results = {}
    for key, config in CONFIGS.items():
        reference = tp.reference_outputs(config, context.device)
        for name in SCHEDULES:
            if name == "fused" and not config.sequence_parallel:
                continue
            runner = tp.TpMlpRunner(config, schedule_for(name, context, config))
            check = tp.check_runner(runner, reference)
            timeline = runner.timeline()
            results[key, name] = {
                **check,
                "comm": [(i.label, i.chunk) for i in timeline.intervals if i.lane == "comm"],
                "compute": sorted({i.label for i in timeline.intervals if i.lane == "compute"}),
                "notes": timeline.notes,
                "figures": tp_metrics.timeline_figures(timeline),
            }
    if context.world_size > 1:
        runner = tp.TpMlpRunner(SP, schedule_for("", context, SP, MisroutedSchedule))
        results["misrouted"] = tp.check_runner(runner, tp.reference_outputs(SP, context.device))
    for name in ("sync", "overlapped"):
        results["standalone", name] = standalone_layers(context, name)
    return results


@pytest.fixture(scope="module", params=[1, 2, 4], ids=lambda w: f"world{w}")
def ranks(request):
    world = request.param
    return world, run_ranks(every_schedule, world)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_block_equals_single_device_block(ranks, config, schedule):
    world, results = ranks
    if schedule == "fused" and not CONFIGS[config].sequence_parallel:
        pytest.skip("the fused ops are the sequence-parallel form's")
    for rank, per_rank in enumerate(results):
        check = per_rank[config, schedule]
        assert set(check["errors"]) == {"y", "dx", "dw1", "dw2"}
        assert check["max_rel_err"] <= check["tolerance"], (rank, check)
        # Different arithmetic from the fp64 reference: an error of exactly 0 would mean the
        # reference was compared with itself.
        assert check["max_rel_err"] > 0, (rank, check)
    # Every rank saw the group-wide worst error.
    assert len({r[config, schedule]["max_rel_err"] for r in results}) == 1


def test_bf16_error_is_rounding_sized(ranks):
    """bf16's error sits within its tolerance and far above fp32's: the tolerance follows the
    dtype, not a constant."""
    world, results = ranks
    bf16, fp32 = results[0]["sp_bf16", "sync"], results[0]["sp", "sync"]
    assert 2.0**-9 < bf16["max_rel_err"] <= bf16["tolerance"]
    assert fp32["max_rel_err"] < 1e-5 < bf16["max_rel_err"] / 100


def test_a_misrouted_schedule_fails_the_check(ranks):
    world, results = ranks
    if world == 1:
        pytest.skip("one rank has no peer to misroute to")
    check = results[0]["misrouted"]
    assert check["max_rel_err"] > 100 * check["tolerance"], check


@pytest.mark.parametrize("schedule", ["sync", "overlapped"])
@pytest.mark.parametrize("layer", ["column", "row"])
def test_standalone_layers_equal_torch_autograd(ranks, layer, schedule):
    world, results = ranks
    for rank, per_rank in enumerate(results):
        errors = per_rank["standalone", schedule][layer]
        tolerance = per_rank["standalone", schedule]["tolerance"]
        assert 0 < max(errors.values()) <= tolerance, (rank, layer, errors)


def test_timelines_show_each_schedule_s_collectives(ranks):
    world, results = ranks
    rank0 = results[0]
    gemms = sorted(f"W{i} {kind}" for i in (1, 2) for kind in ("fwd", "dgrad", "wgrad"))
    if world == 1:
        for schedule in SCHEDULES:
            assert rank0["sp", schedule]["comm"] == []
            assert rank0["sp", schedule]["compute"] == gemms
            assert rank0["sp", schedule]["notes"] == ["world size 1: no communication"]
            assert rank0["sp", schedule]["figures"]["exposed_comm_ms"] == 0
        return
    # Forward: all-gather (W1), reduce-scatter (W2); backward: W2's all-gather, W1's scatter.
    assert [label for label, _ in rank0["sp", "sync"]["comm"]] == [
        "all-gather", "reduce-scatter", "all-gather", "reduce-scatter"]
    assert [label for label, _ in rank0["ar", "sync"]["comm"]] == ["all-reduce", "all-reduce"]
    pieces = world * SP.pieces_per_peer
    overlapped = rank0["sp", "overlapped"]["comm"]
    assert len(overlapped) == 4 * pieces
    assert [chunk for _, chunk in overlapped] == list(range(pieces)) * 4
    assert rank0["sp", "overlapped"]["compute"] == gemms
    assert rank0["sp", "fused"]["comm"] == []  # inside PyTorch's op: not observable
    assert {"fused W1 fwd", "fused W2 fwd", "fused W2 dgrad",
            "fused W1 dgrad"} <= set(rank0["sp", "fused"]["compute"])
    figures = rank0["sp", "sync"]["figures"]
    assert figures["comm_ms"] > 0 and figures["exposed_comm_ms"] == pytest.approx(
        figures["comm_ms"])  # one stream: nothing overlaps


# --- pieces, shapes and the choices' errors --------------------------------------------------


def test_row_pieces_cover_every_rank_s_rows_in_order():
    pieces = row_pieces(6, 2, 3)
    assert [owner for owner, _ in pieces] == [0, 0, 0, 1, 1, 1]
    assert [(s.start, s.stop) for _, s in pieces] == [(0, 2), (2, 4), (4, 6), (6, 8),
                                                      (8, 10), (10, 12)]
    with pytest.raises(ValueError, match="7 rows do not split into 2 equal pieces"):
        row_pieces(7, 2, 2)


def test_columns_of_puts_each_rank_s_output_in_its_columns():
    stacked = torch.arange(12.0).reshape(4, 3)  # 2 ranks × 2 rows × 3 columns
    assert columns_of(stacked, 2).tolist() == [[0, 1, 2, 6, 7, 8], [3, 4, 5, 9, 10, 11]]


def test_shapes_that_do_not_split_are_refused_with_the_values():
    with pytest.raises(ValueError, match="tokens 64 is not a multiple of world size 4 × "
                                         "pieces per peer 32"):
        replace(SP, pieces_per_peer=32).check(4)
    with pytest.raises(ValueError, match="ffn 128 does not split over 3 ranks"):
        SP.check(3)
    assert SP.scaled(4, "weak").ffn == 4 * SP.ffn and SP.scaled(4, "strong") == SP


@pytest.mark.parametrize("call, expected", [
    (lambda: SP.check(0), "world size 0: choose an integer ≥ 1 (ranks)"),
    (lambda: SP.scaled(0, "weak"), "world size 0: choose an integer ≥ 1"),
    (lambda: tp.gemm_shapes(SP, 0), "world size 0: choose an integer ≥ 1"),
    (lambda: tp.shard(SP, 0, 0, "w1", torch.ones(4, 4)), "world size 0: choose an integer"),
    (lambda: replace(SP, pieces_per_peer=0), "pieces_per_peer=0; choose an integer ≥ 1"),
    (lambda: replace(SP, tokens=0), "tokens=0; choose an integer ≥ 1"),
    (lambda: replace(SP, ffn=-8), "ffn=-8; choose an integer ≥ 1"),
])
def test_zero_sizes_and_worlds_name_the_value(call, expected):
    with pytest.raises(ValueError, match=re.escape(expected)):
        call()


def test_bad_choices_name_the_value_and_what_is_allowed():
    with pytest.raises(ValueError, match="unknown GEMM backend 'v9'; choose one of torch, v3"):
        Gemm("v9", torch.float32)
    with pytest.raises(TypeError, match="GEMM v5 does not take torch.float32"):
        Gemm("v5", torch.float32)
    with pytest.raises(ValueError, match="unknown schedule 'async'; choose one of sync, "
                                         "overlapped, fused"):
        build_schedule("async", None, Gemm("torch", torch.float32), torch.device("cpu"))
    with pytest.raises(ValueError, match="GEMM backend 'v3' is not available to it"):
        build_schedule("fused", None, Gemm("v3", torch.float32), torch.device("cpu"))
    with pytest.raises(ValueError, match="unknown workload 'tp_x'; choose one of "):
        preset("tp_x")
    with pytest.raises(ValueError, match="unknown scaling 'wide'"):
        SP.scaled(2, "wide")
    with pytest.raises(ValueError, match="gather_output needs replicated X"):
        tp.column_parallel(torch.ones(2, 2), torch.ones(2, 2), None, sequence_parallel=True,
                           gather_output=True)


def test_own_kernels_skip_on_cpu_with_the_capability_reason():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert missing_gemm_backend("torch") is None
    assert missing_gemm_backend("v6").startswith("needs 1 CUDA GPU(s); torch ")


# --- the formulas -------------------------------------------------------------------------------


def test_tolerance_follows_its_formula():
    assert tp.relative_tolerance("bf16", 32768, 2) == pytest.approx(
        2 * (7 * 2.0**-8 + 3 * math.sqrt(32768) * 2.0**-24))
    assert tp.relative_tolerance("fp32", 1024, 4) == pytest.approx(
        2 * (9 + 3 * 32) * 2.0**-24)


def test_metric_formulas():
    assert tp_metrics.layer_flops(8192, 8192, 32768) == 12 * 8192 * 8192 * 32768
    assert tp_metrics.scaling_efficiency(40.0, 25.0, 2, "strong") == pytest.approx(0.8)
    assert tp_metrics.scaling_efficiency(40.0, 50.0, 4, "weak") == pytest.approx(0.8)
    with pytest.raises(ValueError, match="not 'single'"):
        tp_metrics.scaling_efficiency(1.0, 1.0, 1, "single")
    # comm 0-4 and 6-8 ms, compute 2-7 ms: 3 ms of 6 overlap, 3 exposed.
    assert tp_metrics.exposed_comm_ms([(2.0, 7.0)], [(0.0, 4.0), (6.0, 8.0)]) == 3.0
    assert tp_metrics.comm_fraction(3.0, 12.0) == 0.25
