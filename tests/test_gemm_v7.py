"""v7's tile choice, padding plan and sweep shapes (CPU), and v7 itself against float64 (Hopper).

    python -m pytest tests/test_gemm_v7.py -q            # CPU: the pure parts
    python -m pytest tests/test_gemm_v7.py -q -m gpu     # Hopper: every tile width and path
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import torch

from impl.capabilities import missing_hopper, missing_nvcc
from impl.kernels import ops, sweep, tiles
from tests.test_kernels import assert_within_bound, random_matrix

HOPPER_SKIP = missing_hopper() or missing_nvcc()
H100_SMS = 132


def test_skinny_m_takes_narrow_tiles_and_big_squares_wide_ones() -> None:
    # 256 x 8192: 64 wide tiles fill half of 132 SMs; 128 narrow ones fill nearly all.
    assert tiles.tiles(256, 8192, 256) == 64 and tiles.tiles(256, 8192, 128) == 128
    assert tiles.choose_block_n(256, 8192, 8192, H100_SMS) == 128
    # 8192^2: 2048 wide tiles are 16 waves (15.5 full); narrow ones would be 32 waves at
    # 0.88 of the rate each.
    assert tiles.choose_block_n(8192, 8192, 8192, H100_SMS) == 256
    assert tiles.estimated_time(8192, 8192, 8192, 256, H100_SMS) == 16 * 128


def test_equal_estimates_go_to_the_wide_tile() -> None:
    # One wave of each width; the narrow tile does half the work at half the rate.
    rates = {256: 1.0, 128: 0.5}
    assert tiles.choose_block_n(128, 512, 64, H100_SMS, rates) == 256
    # At an equal rate, a result no wider than 128 columns takes the narrow tile.
    assert tiles.choose_block_n(128, 100, 64, H100_SMS, {256: 1.0, 128: 1.0}) == 128


def test_tile_choice_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="sms must be at least 1; got 0"):
        tiles.choose_block_n(128, 128, 128, 0)
    with pytest.raises(ValueError, match="k must be >= 0; got -1"):
        tiles.choose_block_n(128, 128, -1, H100_SMS)
    with pytest.raises(ValueError, match="block_n 64 has no measured rate; known: 128, 256"):
        tiles.estimated_time(128, 128, 128, 64, H100_SMS)


H100_RIDGE = 989.0 / 3.35  # bf16 FLOP per HBM byte of the H100 SXM row of peaks.py


def plan_rows(plan: ops.V7Plan) -> tuple:
    return plan.row_multiple, plan.copy_a, plan.copy_b


def test_plan_copies_only_the_operand_tma_cannot_read_in_place() -> None:
    # k and n odd: neither stride is a multiple of 8, so both are copied, onto whole lines.
    assert plan_rows(ops.v7_plan(4097, 4099, 4101, H100_SMS, H100_RIDGE)) == (64, True, True)
    # n odd alone: B is copied and A read in place, with or without a peaks row.
    assert plan_rows(ops.v7_plan(4096, 4097, 4096, H100_SMS, H100_RIDGE)) == (64, False, True)
    assert plan_rows(ops.v7_plan(4096, 4097, 4096, H100_SMS, None)) == (64, False, True)
    # k odd alone: A is copied; B's rows (n apart) are read in place, its k-th row the last.
    assert plan_rows(ops.v7_plan(2048, 2048, 2047, H100_SMS, H100_RIDGE)) == (64, True, False)
    plan = ops.v7_plan(4096, 4096, 4096, H100_SMS, H100_RIDGE, a_aligned=False)
    assert plan_rows(plan) == (64, True, False)


def test_plan_copies_each_operand_onto_lines_only_where_its_copy_pays() -> None:
    # 3000 x 5000 x 2000, width 256 (A a third of each slice's bytes): A's copy, 24 MB at the
    # ridge 7.1 GFLOP, is under a third of 0.4 · 60 GFLOP; B's, 40 MB (11.8), under two
    # thirds: both copied.
    assert tiles.copies_onto_lines(3000, 5000, 2000, 256, H100_RIDGE) == (True, True)
    assert plan_rows(ops.v7_plan(3000, 5000, 2000, H100_SMS, H100_RIDGE)) == (64, True, True)
    # 8316 x 648 x 4216, width 128: A (35M elements, read 6 times) would cost 41 GFLOP at the
    # ridge against half of 18 it can win; B (2.7M, read 65 times) 3.2: B alone is copied.
    assert tiles.copies_onto_lines(8316, 648, 4216, 128, H100_RIDGE) == (False, True)
    # 1000^3: either copy would cost more than it can win; rows stay as they are.
    assert plan_rows(ops.v7_plan(1000, 1000, 1000, H100_SMS, H100_RIDGE)) == (8, False, False)
    # Whole lines already: nothing to copy; forced onto lines, still nothing.
    assert plan_rows(ops.v7_plan(4096, 4096, 4096, H100_SMS, H100_RIDGE)) == (8, False, False)
    assert plan_rows(ops.v7_plan(4096, 4096, 4096, H100_SMS, H100_RIDGE, to_lines=True)) == (
        8, False, False)
    # Forced: every operand off the lines, or none but those TMA cannot read in place.
    assert plan_rows(ops.v7_plan(1000, 1000, 1000, H100_SMS, H100_RIDGE, to_lines=True)) == (
        64, True, True)
    assert plan_rows(ops.v7_plan(3000, 5000, 2000, H100_SMS, H100_RIDGE, to_lines=False)) == (
        8, False, False)
    assert plan_rows(ops.v7_plan(3000, 5001, 2000, H100_SMS, H100_RIDGE, to_lines=False)) == (
        64, False, True)
    # m = 64: 64 narrow tiles fill 64 of 132 SMs; two K parts fill 128 of them.
    plan = ops.v7_plan(64, 8192, 8192, H100_SMS, H100_RIDGE)
    assert (plan.block_n, plan.splits) == (128, 2)


def test_split_k_only_where_tiles_leave_sms_idle() -> None:
    # 128 wide tiles fill 2 waves on 132 SMs: nothing to win; nor without a ridge point.
    assert tiles.choose_splits(8192, 8192, 8192, 256, H100_SMS, H100_RIDGE) == 1
    assert tiles.choose_splits(64, 8192, 8192, 256, H100_SMS, None) == 1
    # 324 x 920 x 4640: 24 narrow tiles of 73 slices; 5 parts of 15 slices fill 120 SMs.
    assert tiles.choose_splits(324, 920, 4640, 128, H100_SMS, H100_RIDGE) == 5
    # Each part keeps MIN_SPLIT_SLICES slices: k = 512 (8 slices) splits at most in two.
    assert list(tiles.split_candidates(512)) == [1, 2]
    assert list(tiles.split_candidates(64)) == [1]
    assert tiles.split_candidates(1 << 20)[-1] == tiles.MAX_SPLITS
    # m = 128 is memory-bound: reading B (128 MiB) takes longer than the compute a split
    # would save, so it stays whole.
    assert tiles.choose_splits(128, 8192, 8192, 128, H100_SMS, H100_RIDGE) == 1
    # The model's cost: one wave of 4 parts of 32 slices, floored at the operands' bytes at
    # HBM bandwidth, plus the partials' 8·4·64·8192 bytes.
    per_byte = H100_RIDGE / (tiles.SLICE_FLOP * H100_SMS)
    operands = 2 * (64 * 8192 * 2 + 8192 * 8192) * per_byte
    assert operands > 32
    assert tiles.estimated_time(64, 8192, 8192, 256, H100_SMS, splits=4,
                                ridge_flop_per_byte=H100_RIDGE) == pytest.approx(
        operands + 8 * 4 * 64 * 8192 * per_byte)
    with pytest.raises(ValueError, match=r"splits must be in \[1, 16\]; got 17"):
        tiles.estimated_time(64, 8192, 8192, 256, H100_SMS, splits=17)
    with pytest.raises(ValueError, match="gemm v7: splits 0 is out of range; allowed: 1 to 16"):
        ops.v7_plan(64, 8192, 8192, H100_SMS, H100_RIDGE, splits=0)


def test_stream_k_shares_only_a_partial_last_wave() -> None:
    # 4096^2 in 256-wide tiles: 512 tiles are 3 whole waves and 116 tiles of 64 slices.
    assert tiles.stream_k_tiles(512, 64, H100_SMS) == 116
    assert tiles.stream_k_tiles(264, 64, H100_SMS) == 0  # two whole waves
    assert tiles.stream_k_tiles(8, 64, H100_SMS) == 8  # fewer tiles than SMs: all of them
    assert tiles.stream_k_tiles(1, 32, H100_SMS) == 0  # 32 slices cannot feed 132 SMs
    # 8 tiles of 64 slices over 132 SMs: 4 slices each, floored at their A and B boxes
    # (each 128 x 64 and 64 x 128) read from HBM, and 8 + 132 partial tiles.
    per_byte = H100_RIDGE / (tiles.SLICE_FLOP * H100_SMS)
    operands = 2 * (64 * 4096 + 4096 * 1024 + 64 * 1024) * per_byte
    unshared = 2 * (128 + 128) * 64 * 8 * 64 * per_byte
    assert unshared > 4 * 0.5 / tiles.TILE_RATES[128]
    assert tiles.estimated_time(64, 1024, 4096, 128, H100_SMS, ridge_flop_per_byte=H100_RIDGE,
                                stream_k=True) == pytest.approx(
        max(unshared, operands) + 8 * 128 * 128 * 140 * per_byte)
    # 70b_mlp_down_2048t: stream-K for 116 of 512 tiles of 448 slices ran 1.38 times as long
    # as the plain schedule in the first sweep with it; the model does not take it.
    assert not tiles.chooses_stream_k(2048, 8192, 28672, 256, 1, H100_SMS, H100_RIDGE)
    with pytest.raises(ValueError, match="stream-K runs unsplit; got splits 2"):
        tiles.estimated_time(64, 1024, 4096, 128, H100_SMS, splits=2, stream_k=True)
    # Forced on, the plan runs unsplit with the partial wave's tiles; where there is no
    # partial wave it has none, and without a ridge point the model never picks it.
    plan = ops.v7_plan(4096, 4096, 4096, H100_SMS, H100_RIDGE, block_n=256, stream_k=True)
    assert (plan.splits, plan.stream_k_tiles) == (1, 116)
    plan = ops.v7_plan(64, 8192, 8192, H100_SMS, H100_RIDGE, splits=2)
    assert (plan.splits, plan.stream_k_tiles) == (2, 0)  # a forced split stays
    assert ops.v7_plan(8448, 8192, 8192, H100_SMS, H100_RIDGE).stream_k_tiles == 0
    assert not tiles.chooses_stream_k(1108, 2848, 4536, 256, 1, H100_SMS, None)


def test_onto_lines_copies_rows_onto_whole_lines_and_keeps_the_shape() -> None:
    t = torch.arange(6, dtype=torch.float32).view(2, 3) + 1
    copied = ops.onto_lines(t)
    assert copied.shape == (2, 3) and copied.stride() == (64, 1)
    assert copied.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert copied.data_ptr() != t.data_ptr()
    wide = torch.ones(3, 130, dtype=torch.bfloat16)
    assert ops.onto_lines(wide).stride() == (192, 1)
    assert torch.equal(ops.onto_lines(wide), wide)


def test_plan_rejects_a_width_without_a_kernel() -> None:
    with pytest.raises(ValueError) as raised:
        ops.v7_plan(128, 128, 128, H100_SMS, H100_RIDGE, block_n=64)
    assert str(raised.value) == "gemm v7: block_n 64 is not a tile width; allowed: 128, 192, 256"


def test_a_width_without_a_rate_runs_only_forced_unsplit_and_without_stream_k() -> None:
    # 8316 x 648 x 4216: 2.95 waves of 128-wide tiles, 1.48 of 256-wide, 1.97 of 192-wide.
    assert ops.V7_UNFITTED_WIDTHS == (192,) and 192 not in tiles.TILE_RATES
    assert ops.v7_plan(8316, 648, 4216, H100_SMS, H100_RIDGE).block_n == 128
    forced = ops.v7_plan(8316, 648, 4216, H100_SMS, H100_RIDGE, block_n=192)
    assert (forced.block_n, forced.splits, forced.stream_k_tiles) == (192, 1, 0)
    assert (forced.copy_a, forced.copy_b) == (False, True)  # B's 648-element rows
    # Where the rated widths split K or share a last wave stream-K, it does neither...
    assert ops.v7_plan(64, 8192, 8192, H100_SMS, H100_RIDGE, block_n=128).splits > 1
    assert ops.v7_plan(64, 8192, 8192, H100_SMS, H100_RIDGE, block_n=192).splits == 1
    assert ops.v7_plan(4096, 4096, 4096, H100_SMS, H100_RIDGE, block_n=192).stream_k_tiles == 0
    # ...unless forced to.
    assert ops.v7_plan(64, 8192, 8192, H100_SMS, H100_RIDGE, block_n=192, splits=4).splits == 4
    assert ops.v7_plan(4096, 4096, 4096, H100_SMS, H100_RIDGE, block_n=192,
                       stream_k=True).stream_k_tiles > 0
    # The plan never picks it, on any shape of the sweep.
    assert all(ops.v7_plan(s.m, s.n, s.k, H100_SMS, H100_RIDGE).block_n in tiles.TILE_RATES
               for s in sweep.sweep_shapes())


def test_two_ctas_per_sm_only_when_forced_at_width_128_without_stream_k() -> None:
    # The plan never picks it: 1024^3 takes the narrow tile at one CTA per SM.
    plan = ops.v7_plan(1024, 1024, 1024, H100_SMS, H100_RIDGE)
    assert (plan.block_n, plan.ctas_per_sm) == (128, 1)
    # Forced, it runs at width 128 whatever the plan would pick, unsplit or with the
    # narrow tile's split-K, and without stream-K even where the plan would take it.
    plan = ops.v7_plan(8192, 8192, 8192, H100_SMS, H100_RIDGE, ctas_per_sm=2)
    assert (plan.block_n, plan.splits, plan.stream_k_tiles, plan.ctas_per_sm) == (128, 1, 0, 2)
    plan = ops.v7_plan(64, 8192, 8192, H100_SMS, H100_RIDGE, ctas_per_sm=2)
    assert (plan.block_n, plan.splits, plan.ctas_per_sm) == (128, 2, 2)
    forced = ops.v7_plan(4096, 4096, 4096, H100_SMS, H100_RIDGE, block_n=128, stream_k=True)
    assert forced.stream_k_tiles > 0
    plan = ops.v7_plan(4096, 4096, 4096, H100_SMS, H100_RIDGE, block_n=128, ctas_per_sm=2)
    assert (plan.stream_k_tiles, plan.ctas_per_sm) == (0, 2)
    assert ops.v7_plan(128, 128, 128, H100_SMS, H100_RIDGE, ctas_per_sm=1).ctas_per_sm == 1


@pytest.mark.parametrize("forced, message", [
    ({"ctas_per_sm": 3}, "gemm v7: ctas_per_sm 3 is not allowed; allowed: 1 or 2 (2 only at "
                         "block_n 128 without stream-K)"),
    ({"ctas_per_sm": 0}, "gemm v7: ctas_per_sm 0 is not allowed; allowed: 1 or 2 (2 only at "
                         "block_n 128 without stream-K)"),
    ({"ctas_per_sm": 2, "block_n": 256}, "gemm v7: ctas_per_sm 2 is not allowed with block_n "
                                         "256; allowed: 1 or 2, and 2 only at block_n 128 "
                                         "without stream-K"),
    ({"ctas_per_sm": 2, "stream_k": True}, "gemm v7: ctas_per_sm 2 is not allowed with "
                                           "stream-K; allowed: 1 or 2, and 2 only at block_n "
                                           "128 without stream-K"),
], ids=["3", "0", "width-256", "stream-k"])
def test_plan_and_launcher_reject_a_ctas_per_sm_without_a_kernel(forced, message) -> None:
    with pytest.raises(ValueError) as raised:
        ops.v7_plan(4096, 4096, 4096, H100_SMS, H100_RIDGE, **forced)
    assert str(raised.value) == message
    # The launcher says the same before it looks at the device (here: CPU tensors).
    a, b = torch.zeros(64, 32, dtype=torch.bfloat16), torch.zeros(32, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError) as raised:
        ops.v7_launcher(a, b, **forced)
    assert str(raised.value) == message


def test_sweep_covers_every_family_with_unique_names() -> None:
    shapes = sweep.sweep_shapes()
    assert len({s.name for s in shapes}) == len(shapes)
    assert {s.family for s in shapes} == set(sweep.FAMILIES) - {sweep.FRESH}
    assert len(sweep.transformer_shapes()) == 3 * 3 * 4
    assert [s.name for s in sweep.shapes_for("quick")] == list(sweep.QUICK_SHAPES)
    assert sweep.shapes_for("full", seed=7) == (*shapes, *sweep.fresh_shapes(7))


def test_the_default_sweep_is_the_held_out_families_and_two_of_every_other() -> None:
    chosen = sweep.shapes_for("default", seed=7)
    assert chosen == sweep.shapes_for("default", seed=7)  # the same draw every time
    by_family = {family: [s for s in chosen if s.family == family] for family in sweep.FAMILIES}
    every = sweep.sweep_shapes()
    for family in set(sweep.HELD_OUT_FAMILIES) - {sweep.FRESH}:
        assert by_family[family] == [s for s in every if s.family == family]
    assert by_family[sweep.FRESH] == sweep.fresh_shapes(7)
    for family in set(sweep.FAMILIES) - set(sweep.HELD_OUT_FAMILIES):
        assert len(by_family[family]) == 2, family
    assert len(chosen) == 8 + 8 + 8 + 2 * 6
    listed = chosen[:-sweep.FRESH_COUNT]
    assert [s for s in every if s in listed] == list(listed)  # in sweep order, fresh last


def test_the_held_out_families_are_the_draw_their_comment_names() -> None:
    held_out = [(s.m, s.n, s.k) for s in sweep.sweep_shapes() if s.family == "held_out"]
    assert held_out[:3] == [(1108, 2848, 4536), (8780, 264, 374), (324, 920, 4640)]
    assert sweep.drawn("overlap-suite:gemm-held-out-2", "held_out_2", 8)[4] == sweep.SweepShape(
        "held_out_2_8316x648x4216", "held_out_2", 8316, 648, 4216)


def test_each_run_draws_fresh_shapes_with_its_seed() -> None:
    first, again, other = (sweep.fresh_shapes(seed) for seed in (11, 11, 12))
    assert first == again and first != other
    listed = {s.name for s in sweep.sweep_shapes()}
    for index, shape in enumerate(first + other):
        assert shape.name.startswith("fresh_") and shape.name not in listed
        assert all(256 <= size < 16384 for size in (shape.m, shape.n, shape.k)), shape
        if index % sweep.FRESH_COUNT % 2 == 0:  # every other draw can be read in place
            assert shape.n % 8 == 0 and shape.k % 8 == 0, shape
    assert sweep.run_seed({sweep.SEED_VARIABLE: "12"}) == 12
    assert sweep.seed_for_run({sweep.SEED_VARIABLE: "12"}) == 12
    assert 1 <= sweep.seed_for_run({}) < 10**6
    today = int(datetime.now(timezone.utc).strftime("%Y%m%d"))
    assert sweep.run_seed({}) in (today, today + 1)  # a hand run: the UTC date (at midnight)


def test_a_bad_seed_is_one_line_before_anything_runs(monkeypatch, tmp_path, capsys) -> None:
    from suite import run

    monkeypatch.setenv(sweep.SEED_VARIABLE, "x1")
    assert run.main(["--results-dir", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err == (f"error: {sweep.SEED_VARIABLE}='x1': allowed a whole "
                                       "number (the fresh GEMM shapes' seed)\n")
    assert not (tmp_path / "r").exists()


def test_sweep_families_are_what_they_say() -> None:
    for shape in sweep.sweep_shapes():
        if shape.family == "unaligned":
            assert shape.k % 8 or shape.n % 8, shape
        elif not shape.family.startswith("held_out"):
            assert shape.k % 8 == 0 and shape.n % 8 == 0, shape
        if shape.family == "ragged":
            assert shape.m % 128 and shape.n % 128 and shape.k % 64, shape
        if shape.family == "small_k":
            assert shape.k <= 1024
        if shape.family == "skinny_m":
            assert shape.m <= 512
    assert sweep.transformer_shapes()[0] == sweep.SweepShape("1b_qkv_2048t", "transformer",
                                                              2048, 3072, 2048)


# (tile width, CTAs per SM): every width, and the narrow one two to an SM.
WIDTHS = [(128, 1), (192, 1), (256, 1), (128, 2)]
WIDTH_IDS = ["bn128", "bn192", "bn256", "bn128x2"]


@pytest.mark.parametrize("block_n, ctas_per_sm", WIDTHS, ids=WIDTH_IDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("shape", [
    (1024, 512, 512),     # one wave, K-deep
    (4096, 4096, 4096),   # many tiles per CTA: the persistent loop and its barrier phases
    (1000, 520, 328),     # ragged edges through TMA's zero fill
    (1000, 521, 333),     # k and n odd: padded operands, single-element stores
    (1000, 524, 328),     # n = 4 mod 8: 8-byte stores
    (1000, 526, 328),     # n = 6 mod 8: 4-byte stores
    (3000, 5000, 2000),   # strides off 128-byte lines: copied onto whole lines
    (300, 136, 8),        # one 64-deep slice, zero-filled past k
    (17, 33, 65),
], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.gpu
@pytest.mark.skipif(HOPPER_SKIP is not None, reason=str(HOPPER_SKIP))
def test_v7_writes_every_element_right(shape, dtype, block_n: int, ctas_per_sm: int) -> None:
    m, n, k = shape
    a, b = random_matrix(m, k, dtype, 11), random_matrix(k, n, dtype, 12)
    out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    launch = ops.v7_launcher(a, b, block_n=block_n, out=out, ctas_per_sm=ctas_per_sm)
    assert (launch.plan.block_n, launch.plan.ctas_per_sm) == (block_n, ctas_per_sm)
    c = launch()
    assert c.data_ptr() == out.data_ptr()
    assert not bool(c.isnan().any()), "an element was not written"
    assert_within_bound(c, a, b)


@pytest.mark.parametrize("splits", [2, 3, 7])
@pytest.mark.parametrize("block_n, ctas_per_sm", WIDTHS, ids=WIDTH_IDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("shape", [
    (64, 1024, 4096),     # skinny: the case split-K is for
    (1000, 520, 1000),    # ragged edges; 16 slices in uneven parts
    (300, 521, 333),      # n odd: the sum's single-element stores; 6 slices, fewer parts
    (17, 33, 65),         # 2 slices: at most 2 parts, whatever is asked
], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.gpu
@pytest.mark.skipif(HOPPER_SKIP is not None, reason=str(HOPPER_SKIP))
def test_v7_split_k_writes_every_element_right(shape, dtype, block_n: int, ctas_per_sm: int,
                                               splits: int) -> None:
    m, n, k = shape
    a, b = random_matrix(m, k, dtype, 15), random_matrix(k, n, dtype, 16)
    out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    launch = ops.v7_launcher(a, b, block_n=block_n, out=out, splits=splits,
                             ctas_per_sm=ctas_per_sm)
    assert (launch.plan.splits, launch.plan.ctas_per_sm) == (splits, ctas_per_sm)
    c = launch()
    assert not bool(c.isnan().any()), "an element was not written"
    assert_within_bound(c, a, b)


@pytest.mark.parametrize("block_n", [128, 192, 256])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("shape", [
    (64, 1024, 4096),     # fewer tiles than SMs: each tile's 64 slices over up to 23 CTAs
    (1000, 520, 1000),    # ragged edges in stream-K tiles
    (300, 522, 3000),     # n = 2 mod 8: 4-byte stores from the sum
    (300, 521, 3000),     # n odd: single-element stores from the sum
    (4096, 4096, 4096),   # whole waves first, then 116 (or 100) tiles stream-K
], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.gpu
@pytest.mark.skipif(HOPPER_SKIP is not None, reason=str(HOPPER_SKIP))
def test_v7_stream_k_writes_every_element_right(shape, dtype, block_n: int) -> None:
    m, n, k = shape
    a, b = random_matrix(m, k, dtype, 17), random_matrix(k, n, dtype, 18)
    out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    launch = ops.v7_launcher(a, b, block_n=block_n, out=out, stream_k=True)
    assert launch.plan.stream_k_tiles > 0
    c = launch()
    assert not bool(c.isnan().any()), "an element was not written"
    assert_within_bound(c, a, b)
    assert torch.equal(launch(), c), "the parts' sum is not deterministic"


@pytest.mark.gpu
@pytest.mark.skipif(HOPPER_SKIP is not None, reason=str(HOPPER_SKIP))
def test_v7_rejects_a_wrong_output() -> None:
    a, b = random_matrix(64, 32, torch.bfloat16, 13), random_matrix(32, 16, torch.bfloat16, 14)
    out = torch.empty(64, 15, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match=r"out must be a contiguous, 16-byte aligned 64x16 "
                                         r"torch.bfloat16 tensor on cuda:0; got \[64, 15\]"):
        ops.v7_launcher(a, b, out=out)
    shifted = torch.empty(64 * 16 + 1, dtype=torch.bfloat16, device="cuda")[1:].view(64, 16)
    with pytest.raises(ValueError, match=r"16-byte aligned .* at address 0x[0-9a-f]*2\b"):
        ops.v7_launcher(a, b, out=shifted)
