"""The offload's crossover ladder (impl/hybrid/crossover.py): which batches it walks, where it
stops, what it claims, and the bound's crossover; and how the suite plans it."""

from __future__ import annotations

import pytest
import torch

from impl.hybrid.crossover import Ladder, bound_crossover_tokens


def ratio(value: float, high: float | None = None) -> dict:
    return {"value": value, "low": value - 0.02, "high": value + 0.02 if high is None else high}


def walk(ladder: Ladder, ratios: dict[int, dict]) -> list[int]:
    """Every batch the ladder asks for, measured at ``ratios``; the order it asked."""
    asked = []
    while (batch := ladder.next_batch()) is not None:
        asked.append(batch)
        ladder.measured(batch, ratios[batch])
    return asked


def test_a_host_bound_model_doubles_its_batch_until_the_ratio_is_inside():
    ladder = Ladder(start_batch=16, tokens_per_row=1024)
    ratios = {16: ratio(1.56), 32: ratio(1.21), 64: ratio(1.04), 128: ratio(1.01)}
    assert walk(ladder, ratios) == [16, 32, 64]
    crossover = ladder.crossover()
    assert (crossover.tokens, crossover.outside_tokens) == (65_536, 32_768)
    assert crossover.verdict == ("within 1.10× from 65,536 tokens a step (1.040× [1.020, 1.060]); "
                                 "1.210× [1.190, 1.230] at 32,768")


def test_a_model_inside_at_its_batch_halves_it_until_the_ratio_is_outside():
    ladder = Ladder(start_batch=8192)
    ratios = {8192: ratio(1.02), 4096: ratio(1.06), 2048: ratio(1.48)}
    assert walk(ladder, ratios) == [8192, 4096, 2048]
    crossover = ladder.crossover()
    assert (crossover.tokens, crossover.outside_tokens) == (4096, 2048)


def test_a_point_is_inside_only_when_its_whole_interval_is():
    ladder = Ladder(start_batch=16, points=2)
    walk(ladder, {16: ratio(1.05, high=1.12), 32: ratio(1.08, high=1.11)})
    crossover = ladder.crossover()
    assert crossover.tokens is None
    assert crossover.verdict == ("no batch measured reaches 1.10×: 1.080× [1.060, 1.110] at 32 "
                                 "tokens a step, the most measured, and the ladder stops at 2 "
                                 "batches")


def test_a_batch_past_the_gpus_memory_ends_the_climb_and_is_named():
    ladder = Ladder(start_batch=16)
    ladder.measured(ladder.next_batch(), ratio(1.5))
    assert ladder.next_batch() == 32
    ladder.out_of_memory(32, "CUDA out of memory. Tried to allocate 20.00 GiB")
    assert ladder.next_batch() is None
    assert ladder.crossover().verdict == (
        "no batch measured reaches 1.10×: 1.500× [1.480, 1.520] at 16 tokens a step, the most "
        "measured, and "
        "batch 32 did not fit (CUDA out of memory. Tried to allocate 20.00 GiB)")


def test_a_model_inside_down_to_one_row_says_so():
    ladder = Ladder(start_batch=2, points=4)
    assert walk(ladder, {2: ratio(1.01), 1: ratio(1.03)}) == [2, 1]
    crossover = ladder.crossover()
    assert (crossover.tokens, crossover.outside_tokens) == (1, None)
    assert crossover.verdict == ("within 1.10× at every batch measured, down to 1 tokens a step "
                                 "(1.030× [1.010, 1.050])")


def test_nothing_measured_says_why():
    ladder = Ladder(start_batch=16)
    ladder.out_of_memory(16, "CUDA out of memory")
    assert ladder.crossover().verdict == ("nothing measured: batch 16 did not fit (CUDA out of "
                                          "memory)")


@pytest.mark.parametrize("start, per_row, points", [(0, 1, 4), (16, 0, 4), (16, 1, 0)])
def test_a_ladder_refuses_what_it_cannot_walk(start, per_row, points):
    with pytest.raises(ValueError, match=f"got {start}, {per_row} and {points}"):
        Ladder(start, per_row, points)


def test_the_bounds_crossover_is_where_the_gpu_step_reaches_host_work_over_within():
    # 10 ms + 1 ms per thousand tokens; host work 55 ms: the GPU step reaches 50 ms at 40,000.
    fused = {t: 10 + t / 1000 for t in (16_384, 32_768, 65_536)}
    assert bound_crossover_tokens(fused, host_work_ms=55.0) == pytest.approx(40_000)
    assert bound_crossover_tokens(fused, host_work_ms=5.0) == 0.0  # inside at no tokens
    assert bound_crossover_tokens({16_384: 26.4}, host_work_ms=55.0) is None
    assert bound_crossover_tokens({1: 30.0, 2: 20.0}, host_work_ms=55.0) is None


def test_the_plan_walks_the_ladder_the_expected_rates_point_to(monkeypatch):
    from impl.presets import gpt_small_bf16, mlp_4096x8_b8192
    from suite import bench_hybrid

    monkeypatch.setattr(bench_hybrid, "gpu_here", lambda: True)
    monkeypatch.setattr(bench_hybrid.deadline, "suite_device", lambda: torch.device("cuda"))
    # At a third of an H100's peak the decoder's step is far under its host Adam at 20 GB/s, and
    # the fp32 MLP's over it: one climbs, the other descends.
    monkeypatch.setattr(bench_hybrid.deadline, "device_flops",
                        lambda workload, device: 0.3 * (989e12 if workload.dtype == "bf16"
                                                        else 67e12))
    assert bench_hybrid.expected_ladder(gpt_small_bf16()) == [16, 32, 64, 128]
    assert bench_hybrid.expected_ladder(mlp_4096x8_b8192()) == [8192, 4096, 2048, 1024]
