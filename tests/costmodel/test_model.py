"""The cost model (impl/costmodel/) on hand-made steps whose answer is known, and on real ones."""

from __future__ import annotations

import random

import pytest
import torch

from impl import metrics
from impl.costmodel import variant_plans
from impl.costmodel.compute import ReadyProfile, bucket_ends, parameter_layout
from impl.costmodel.schedule import Collective, Plan, simulate
from impl.presets import preset
from impl.strategies import StrategyOptions, build_strategy
from impl.workloads import build_model


def four_chunks(step_ms: float | None = None) -> ReadyProfile:
    """Forward 0–2 ms, backward 2–10 ms producing four chunks at 4, 6, 8, 10; update 1 ms."""
    return ReadyProfile((1, 2, 3, 4), (4.0, 6.0, 8.0, 10.0), 10.0, 1.0, 1,
                        backward_start_ms=2.0, step_ms=step_ms)


def each(duration: float, profile: ReadyProfile | None = None) -> tuple[Collective, ...]:
    profile = profile or four_chunks()
    return tuple(Collective(ready, duration) for ready in profile.ready_ms)


def test_chunks_shorter_than_compute_leave_only_the_last_exposed():
    outcome = simulate(four_chunks(), Plan(each(1.5)))
    # c0 4–5.5, c1 6–7.5, c2 8–9.5, c3 10–11.5, then the update: 12.5.
    assert outcome.step_ms == pytest.approx(12.5)
    assert outcome.exposed_comm_ms == pytest.approx(1.5)
    assert outcome.hidden_fraction == pytest.approx(0.75)
    assert outcome.compute_slowdown_ms == 0.0


def test_the_step_starts_from_the_measured_compute_only_step():
    # The timeline ends at 11 ms but the compute-only step measured 11.4: the delay is added.
    assert simulate(four_chunks(11.4), Plan(each(1.5))).step_ms == pytest.approx(12.9)


def test_long_collectives_queue_behind_each_other():
    # c0 4–7, c1 7–10, c2 10–13, c3 13–16, update 16–17.
    outcome = simulate(four_chunks(), Plan(each(3.0)))
    assert outcome.step_ms == pytest.approx(17.0)
    assert outcome.exposed_comm_ms == pytest.approx(6.0)


def test_sequential_waits_for_backward():
    outcome = simulate(four_chunks(), Plan(each(1.5), after_backward=True))
    assert outcome.step_ms == pytest.approx(10.0 + 4 * 1.5 + 1.0)
    assert outcome.hidden_fraction == 0.0


def test_interference_slows_compute_only_while_a_collective_runs():
    # Each of c0, c1, c2 overlaps 1 ms of backward at half speed: backward loses 3 × 0.5 ms,
    # and each later chunk is ready that much later. c3 runs alone after backward.
    outcome = simulate(four_chunks(), Plan(each(1.0), slowdown=2.0))
    assert outcome.compute_slowdown_ms == pytest.approx(1.5)
    assert outcome.step_ms == pytest.approx(11.5 + 1.0 + 1.0)
    ends = [end for lane, _, _, _, end in outcome.intervals if lane == "comm"]
    assert ends == pytest.approx([5.0, 7.5, 10.0, 12.5])


def test_update_inside_the_overlap_follows_each_collective():
    outcome = simulate(four_chunks(), Plan(each(1.5), update_in_overlap=True))
    # Each chunk's quarter of the update follows its all-reduce; the last ends at 11.75.
    assert outcome.step_ms == pytest.approx(11.75)
    assert outcome.step_ms == pytest.approx(metrics.schedule_bound_ms(
        [4, 6, 8, 10], [1.5] * 4, 10.0, 1.0, update_in_overlap=True))


def test_an_update_share_beside_backward_waits_and_holds_back_the_next_collective():
    # c0 4–5.5, its share 5.5–6.25 (0.25 + 0.5 beside backward); c1 6.25–7.75, share
    # 7.75–8.5; c2 8.5–10; backward is over: c2's share 10–10.25, c3 10.25–11.75, share 12.
    outcome = simulate(four_chunks(), Plan(each(1.5), update_in_overlap=True,
                                           update_beside_ms=0.5))
    ends = [end for lane, _, _, _, end in outcome.intervals if lane == "comm"]
    assert ends == pytest.approx([5.5, 7.75, 10.0, 11.75])
    assert outcome.step_ms == pytest.approx(12.0)


def test_a_host_hand_off_delays_every_launch():
    # c0 4.5–6, c1 6.5–8, c2 8.5–10, c3 10.5–12, update: 13.
    assert simulate(four_chunks(), Plan(each(1.5), handoff_ms=0.5)).step_ms == pytest.approx(13)


def test_a_collective_launched_beside_backward_lasts_longer():
    # c0 4–6, c1 6–8, c2 8–10 launch while backward runs (1.5 + 0.5 ms); c3 launches at 10,
    # after backward, and lasts 1.5: 10–11.5, update: 12.5. Beside the step's end, c2 would
    # have run to 9.5 alone, so only the queue shifts.
    outcome = simulate(four_chunks(), Plan(each(1.5), beside_ms=0.5))
    ends = [end for lane, _, _, _, end in outcome.intervals if lane == "comm"]
    assert ends == pytest.approx([6.0, 8.0, 10.0, 11.5])
    assert outcome.step_ms == pytest.approx(12.5)
    with pytest.raises(ValueError, match=r"slowdown=1.0, beside_ms=-0.1"):
        simulate(four_chunks(), Plan(each(1.5), beside_ms=-0.1))


def test_a_collective_waiting_for_sms_slows_no_compute():
    # Each collective beside backward first waits 0.5 ms (backward at full speed), then runs
    # 1 ms beside it at half speed: c0 waits 4–4.5, runs 4.5–5.5 (backward at 5.0); c1 ready
    # at 6.5, waits to 7, runs 7–8; c2 ready at 9, waits to 9.5, runs 9.5–10.5; backward
    # ends at 11.5, 3 × 0.5 ms late as without the wait; c3 11.5–12.5 alone, update: 13.5.
    outcome = simulate(four_chunks(), Plan(each(1.0), slowdown=2.0, beside_ms=0.5))
    ends = [end for lane, _, _, _, end in outcome.intervals if lane == "comm"]
    assert ends == pytest.approx([5.5, 8.0, 10.5, 12.5])
    assert outcome.compute_slowdown_ms == pytest.approx(1.5)
    assert outcome.step_ms == pytest.approx(13.5)


def test_without_interference_the_schedule_is_the_bound_on_random_steps():
    rng = random.Random(7)
    for _ in range(200):
        chunks = rng.randint(1, 12)
        ready = sorted(rng.uniform(1, 20) for _ in range(chunks))
        backward_end = ready[-1]
        comm = [rng.uniform(0, 4) for _ in range(chunks)]
        update = rng.uniform(0, 2)
        profile = ReadyProfile(tuple(range(1, chunks + 1)), tuple(ready), backward_end, update,
                               1, backward_start_ms=rng.uniform(0, ready[0]))
        for in_overlap in (False, True):
            plan = Plan(tuple(Collective(r, c) for r, c in zip(ready, comm)),
                        update_in_overlap=in_overlap)
            assert simulate(profile, plan).step_ms == pytest.approx(metrics.schedule_bound_ms(
                ready, comm, backward_end, update, in_overlap))
            slowed = simulate(profile, Plan(plan.collectives, update_in_overlap=in_overlap,
                                            slowdown=1.5))
            assert slowed.step_ms >= simulate(profile, plan).step_ms - 1e-9


def test_slowdown_below_one_is_refused():
    with pytest.raises(ValueError, match=r"slowdown=0.5, beside_ms=0.0, update_beside_ms=0.0: "
                                         r"work beside other work cannot speed up; allowed "
                                         r"slowdown ≥ 1, beside_ms and update_beside_ms ≥ 0"):
        simulate(four_chunks(), Plan(each(1.0), slowdown=0.5))


def test_ddp_buckets_close_at_the_cap_in_backward_order():
    spans = ((0, 100), (100, 150), (150, 400), (400, 410))
    assert bucket_ends(spans, 4, cap_bytes=400) == [100, 400, 410]
    assert bucket_ends(spans, 4, cap_bytes=10_000) == [410]


def test_a_parameter_is_ready_with_the_first_chunk_it_overlaps():
    # Two parameters of 6 elements, chunks of 4: chunk 1 [4, 8) ends when parameter 2 does.
    profile = ReadyProfile((4, 8, 12), (3.0, 5.0, 5.0), 5.0, 1.0, 1)
    spans = ((0, 6), (6, 12))
    assert profile.ready_of(6, spans) == 3.0  # parameter 1 is done when chunk 0 is
    assert profile.ready_of(12, spans) == 5.0
    assert profile.ready_of(6) == 5.0  # without spans: the chunk holding element 5


@pytest.mark.parametrize("name", ["mlp_tiny", "gpt_tiny"])
def test_parameter_layout_is_the_flat_gradient_buffers(name):
    spans, element_size = parameter_layout(name)
    model = build_model(preset(name), torch.device("cpu"))
    runner = build_strategy("sequential", model, preset(name), None, StrategyOptions(chunks=1))
    sizes = [p.numel() for p in runner.flat.params]
    assert [end - start for start, end in spans] == sizes
    assert element_size == runner.flat.buffer.element_size()
    runner.close()


def test_variants_are_read_from_the_knobs_table():
    spans, size = parameter_layout("mlp_tiny")  # 8 parameters of 65536 fp32 elements
    assert variant_plans.collective_ends("ddp", 5, spans, size)[:2] == [131072, 262144]
    assert len(variant_plans.collective_ends("ddp-25mb", 5, spans, size)) == 1
    assert variant_plans.collective_ends("chunked+first1mb", 5, spans, size)[0] == 2**20 // size
    assert variant_plans.unmodelled("chunked+ctas8").startswith("NCCL capped at 8 CTAs")
    assert variant_plans.unmodelled("chunked+update") is None


def test_the_synthetic_strategy_schedule_is_the_cost_models():
    """The course study's sleep model draws each step's chunk times from a seed (the step
    index); the cost model, given those draws as the ready times and collective durations,
    gives the sequential step as their sum and the overlapped step as all compute plus the
    last chunk's communication (each chunk's communication is shorter than the next chunk's
    compute). How close the wall clock comes to this is a timing, reported by
    suite/bench_synthetic.py as ``prediction_error_pct``, never asserted."""
    workload = preset("mlp_tiny")
    model = build_model(workload, torch.device("cpu"))
    strategy = build_strategy("synthetic", model, workload, None, StrategyOptions(
        chunks=5, synthetic_scale=0.5, synthetic_overlap=True))
    draws = strategy.chunk_durations_ms()
    assert draws == strategy.chunk_durations_ms()  # the same draws for the same step
    compute, comm = [c for c, _ in draws], [m for _, m in draws]
    assert all(75 <= c <= 175 for c in compute) and all(85 <= m <= 115 for m in comm)
    ready = [sum(compute[:c + 1]) for c in range(len(compute))]
    profile = ReadyProfile(tuple(range(1, 6)), tuple(ready), ready[-1], 0.0, 1)
    collectives = tuple(Collective(r, d) for r, d in zip(ready, comm))
    overlapped = simulate(profile, variant_plans.Plan(collectives))
    assert overlapped.step_ms == pytest.approx(sum(compute) + comm[-1])
    assert overlapped.hidden_fraction == pytest.approx(1 - comm[-1] / sum(comm))
    sequential = simulate(profile, variant_plans.Plan(collectives, after_backward=True))
    assert sequential.step_ms == pytest.approx(sum(compute) + sum(comm))


def test_a_node_fabric_at_one_world_size_times_every_size_as_the_file_does():
    from impl.costmodel.fabric_file import load_fabric

    node = load_fabric("ib400-h200x8")
    for world in (2, 8, 64, 1024):
        for size in (2**20, 2**30):
            assert node.at_world(world).all_reduce_ms(size) == node.all_reduce_ms(size, world)
