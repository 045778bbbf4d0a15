"""Pipeline schedules: plans that cannot deadlock, and the weights of single-device training
on 2 and 4 gloo ranks for every schedule and several micro-batch counts."""

from __future__ import annotations

import pytest
import torch

from impl import capabilities
from impl.pipeline import SCHEDULES, PipelineOptions, build_schedule, cut_stage
from impl.pipeline.measure import bubble_fraction, bubble_theory, mean_bubble
from impl.pipeline.plans import (
    MICROBATCH_COUNTS,
    Action,
    Message,
    Op,
    actions,
    check_deadlock_free,
    message_groups,
    replay,
)
from impl.pipeline.schedule_check import (
    max_abs_err_vs_single,
    pipeline_weights,
    single_device_weights,
)
from impl.presets import preset
from impl.strategy_check import max_abs_diff, weight_tolerance
from impl.workloads import build_model, make_batch
from tests.multirank import run_ranks

WORKLOAD = "mlp_tiny"
LR = 0.02  # large enough that three steps move the weights far past the tolerance
STEPS = 3
VARIANTS = ("gpipe", "gpipe+recompute", "1f1b", "torch-gpipe", "torch-1f1b")
MICROBATCHES = (1, 2, 4, 8)


def F(i: int) -> Action:  # noqa: N802 - reads like the schedule diagrams
    return Action("F", i)


def B(i: int) -> Action:  # noqa: N802
    return Action("B", i)


def test_gpipe_runs_every_forward_then_every_backward():
    assert actions("gpipe", 1, 4, 3) == [F(0), F(1), F(2), B(0), B(1), B(2)]


def test_1f1b_warms_up_p_minus_s_minus_1_forwards_then_alternates():
    assert actions("1f1b", 0, 4, 5) == [F(0), F(1), F(2), F(3), B(0), F(4), B(1), B(2), B(3),
                                        B(4)]
    assert actions("1f1b", 3, 4, 3) == [F(0), B(0), F(1), B(1), F(2), B(2)]
    assert actions("1f1b", 0, 4, 2) == [F(0), F(1), B(0), B(1)]  # fewer micro-batches than p


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("stages", [2, 3, 4, 8])
def test_plans_cannot_deadlock(schedule, stages):
    for m in (*MICROBATCH_COUNTS, 3, 5):
        check_deadlock_free(schedule, stages, m)


def test_replay_finds_a_deadlock():
    # Both stages receive before they send: each waits for the other forever.
    activation, gradient = Message("activation", 0, 0, 1), Message("gradient", 0, 1, 0)
    groups = [[[Op(False, gradient)], [Op(True, activation)]],
              [[Op(False, activation)], [Op(True, gradient)]]]
    with pytest.raises(RuntimeError) as error:
        replay(groups, "toy plan")
    assert str(error.value) == ("toy plan would deadlock; stages wait in "
                                "{0: ['recv gradient 0'], 1: ['recv activation 0']}")


def test_replay_refuses_groups_the_two_sides_post_differently():
    # The plan that hung on 2 H200 (GPipe, p = 2, m = 1): stage 0 paired its activation send
    # with the gradient receive, stage 1 posted them apart with its computation in between.
    activation, gradient = Message("activation", 0, 0, 1), Message("gradient", 0, 1, 0)
    groups = [[[Op(True, activation), Op(False, gradient)]],
              [[Op(False, activation)], [Op(True, gradient)]]]
    with pytest.raises(RuntimeError) as error:
        replay(groups, "the old gpipe plan")
    assert str(error.value) == (
        "the old gpipe plan groups messages differently on stages 0 and 1: stage 0 posts "
        "['send activation 0', 'recv gradient 0'] as one group, stage 1 does not; NCCL needs "
        "both sides of a pair to group their messages the same way")


def test_send_and_receive_share_a_group_only_where_the_peer_pairs_them_too():
    activation, gradient = Message("activation", 0, 0, 1), Message("gradient", 0, 1, 0)
    assert message_groups("gpipe", 0, 2, 1) == [[], [[Op(True, activation)],
                                                     [Op(False, gradient)]], []]
    assert message_groups("gpipe", 1, 2, 1) == [[[Op(False, activation)]], [],
                                                [[Op(True, gradient)]]]
    # 1F1B's steady state: forward's send with the next backward's receive, on both sides
    steady = message_groups("1f1b", 0, 2, 4)[2]
    assert steady == [[Op(True, Message("activation", 1, 0, 1)),
                       Op(False, Message("gradient", 0, 1, 0))]]


def posted_groups(context, schedules, microbatches) -> dict:
    """The groups each stage really posted in one step (gloo), per schedule and m."""
    group, workload = context.group(context.world_size), preset(WORKLOAD)
    posted = {}
    for name in schedules:
        for m in microbatches:
            stage = cut_stage(build_model(workload, context.device), workload,
                              context.world_size, context.rank)
            runner = build_schedule(name, stage, workload, group, PipelineOptions(microbatches=m))
            runner.step(make_batch(workload, context.device))
            posted[name, m] = runner.posted
    return posted


@pytest.mark.parametrize("stages", [2, 4])
def test_the_groups_each_rank_posted_follow_nccl_rules(stages):
    per_rank = run_ranks(posted_groups, stages, ("gpipe", "1f1b"), (1, 2, 4))
    for name, m in per_rank[0]:
        posted = [results[name, m] for results in per_rank]
        replay(posted, f"{name} with {stages} stages and {m} micro-batches, as posted")
        for rank, groups in enumerate(posted):
            planned = [g for slot in message_groups(name, rank, stages, m) for g in slot]
            assert groups == planned, (name, m, rank)


def test_bubble_formulas():
    assert bubble_theory(2, 1) == 0.5
    assert bubble_theory(4, 4) == pytest.approx(3 / 7)
    assert bubble_theory(1, 8) == 0.0
    assert bubble_fraction(10.0, 7.5) == 0.25
    assert mean_bubble(10.0, [10.0, 5.0]) == 0.25


@pytest.mark.parametrize("bad, message", [
    (dict(schedule="zb"), "unknown pipeline schedule 'zb'; choose one of ['gpipe', '1f1b', "
                          "'torch-gpipe', 'torch-1f1b']"),
    (dict(microbatches=3), "microbatches=3 does not divide the batch of 64 rows of workload "
                           "'mlp_tiny'"),
    (dict(stages=9), "stages=9: workload 'mlp_tiny' has 8 layers; choose 1 to 8 stages"),
    (dict(workload="gpt_tiny"), "workload 'gpt_tiny' is a gpt: pipeline stages are cut from "
                                "MLP workloads only"),
])
def test_bad_arguments_name_the_value(bad, message):
    args = {"schedule": "gpipe", "microbatches": 4, "stages": 1, "workload": WORKLOAD, **bad}
    workload = preset(args["workload"])
    model = build_model(preset(WORKLOAD), torch.device("cpu"))
    with pytest.raises(ValueError) as error:
        stage = cut_stage(model, preset(WORKLOAD), min(args["stages"], 8), 0)
        stage.count = args["stages"]
        build_schedule(args["schedule"], stage, workload, None,
                       PipelineOptions(microbatches=args["microbatches"]))
    assert str(error.value) == message


@pytest.mark.parametrize("call, message", [
    (lambda model, w: cut_stage(model, w, 2, 5), "stage index 5: a pipeline of 2 stages has "
                                                "stages 0 to 1"),
    (lambda model, w: cut_stage(model, w, 0, 0), "stages=0: choose an integer ≥ 1"),
    (lambda model, w: build_schedule("gpipe", cut_stage(model, w, 1, 0), w, None,
                                     PipelineOptions(microbatches=0)),
     "microbatches=0: choose an integer ≥ 1 (the suite runs 1, 2, 4, 8, 16, 32)"),
    (lambda model, w: bubble_theory(1, 0), "microbatches=0: choose an integer ≥ 1 (the suite "
                                           "runs 1, 2, 4, 8, 16, 32)"),
    (lambda model, w: bubble_theory(0, 4), "stages=0: choose an integer ≥ 1"),
])
def test_zero_counts_and_stage_indices_name_the_value(call, message):
    workload = preset(WORKLOAD)
    with pytest.raises(ValueError) as error:
        call(build_model(workload, torch.device("cpu")), workload)
    assert str(error.value) == message


def test_extra_compute_is_applied_to_the_stages(monkeypatch):
    """OVERLAP_EXTRA_COMPUTE (the gate's slowdown) gives each stage its share of the model's
    extra rows, with the weights of single-device training of the same model."""
    monkeypatch.setenv("OVERLAP_EXTRA_COMPUTE", "0.5")
    workload = preset(WORKLOAD)
    assert workload.extra_compute == 0.5
    stage = cut_stage(build_model(workload, torch.device("cpu")), workload, 1, 0)
    rows = []
    stage.module.layers[0].register_forward_hook(lambda m, x, y: rows.append(x[0].shape[0]))
    schedule = build_schedule("gpipe", stage, workload, None, PipelineOptions(microbatches=4))
    from impl.workloads import make_batch

    schedule.step(make_batch(workload, torch.device("cpu")))
    per_microbatch = workload.batch // 4
    extra = round(0.5 * workload.depth * per_microbatch)
    assert rows == [per_microbatch, extra] * 4
    layers, weights = pipeline_weights("1f1b", workload, None, torch.device("cpu"),
                                       PipelineOptions(microbatches=2, lr=LR), STEPS)
    reference = single_device_weights(workload, torch.device("cpu"), LR, STEPS)
    assert max_abs_diff(weights, reference) <= weight_tolerance(
        torch.float32, max(w.abs().max().item() for w in reference))


def test_one_stage_timeline_has_every_microbatch():
    workload = preset(WORKLOAD)
    stage = cut_stage(build_model(workload, torch.device("cpu")), workload, 1, 0)
    schedule = build_schedule("1f1b", stage, workload, None, PipelineOptions(microbatches=4))
    schedule.step(make_batch(workload, torch.device("cpu")))
    labels = [i.label for i in schedule.finish_timeline().intervals]
    assert labels == ["forward 0", "backward 0", "forward 1", "backward 1", "forward 2",
                      "backward 2", "forward 3", "backward 3", "update"]
    assert schedule.busy_ms() > 0


def stage_weights(context, variants, microbatches) -> dict:
    group = context.group(context.world_size)
    workload, results = preset(WORKLOAD), {}
    for variant in variants:
        name, recompute = variant.split("+")[0], variant.endswith("+recompute")
        for m in microbatches:
            if reason := SCHEDULES[name].unsupported(context.world_size, m):
                results[variant, m] = reason
                continue
            options = PipelineOptions(microbatches=m, lr=LR, recompute=recompute)
            layers, weights = pipeline_weights(name, workload, group, context.device, options,
                                               STEPS)
            results[variant, m] = (list(layers), [w.numpy() for w in weights])
    return results


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"{w}stages")
def trained(request):
    if reason := capabilities.missing_pipelining():
        pytest.skip(reason)
    stages = request.param
    return stages, run_ranks(stage_weights, stages, VARIANTS, MICROBATCHES)


@pytest.fixture(scope="module")
def reference() -> list[torch.Tensor]:
    return single_device_weights(preset(WORKLOAD), torch.device("cpu"), LR, STEPS)


@pytest.mark.parametrize("variant", VARIANTS)
def test_weights_equal_single_device_training(trained, reference, variant):
    stages, per_rank = trained
    workload = preset(WORKLOAD)
    device = torch.device("cpu")
    initial = [layer.weight for layer in build_model(workload, device).layers]
    assert max_abs_diff(reference, initial) > 1e-2, "training did not move the weights"
    tolerance = weight_tolerance(torch.float32, max(w.abs().max().item() for w in reference))
    checked = 0
    for m in MICROBATCHES:
        if isinstance(per_rank[0][variant, m], str):  # the library's own limit, stated
            assert variant == "torch-1f1b" and m < stages, per_rank[0][variant, m]
            continue
        covered = []
        for rank, results in enumerate(per_rank):
            layers, weights = results[variant, m]
            covered += layers
            error = max_abs_diff([torch.from_numpy(w) for w in weights],
                                 [reference[i] for i in layers])
            assert error <= tolerance, f"{variant} m={m} stage {rank}: {error:.3g}"
        assert covered == list(range(workload.depth))
        checked += 1
    assert checked >= 2


def stage_errors(context, variants, microbatches) -> dict:
    """max |w_pipeline − w_single| per variant and m, the reference trained on this GPU."""
    group, workload = context.group(context.world_size), preset(WORKLOAD)
    errors = {}
    for variant in variants:
        name, recompute = variant.split("+")[0], variant.endswith("+recompute")
        for m in microbatches:
            options = PipelineOptions(microbatches=m, lr=LR, recompute=recompute)
            errors[variant, m] = max_abs_err_vs_single(name, workload, group, context.device,
                                                       options, STEPS)
    return errors


@pytest.mark.gpu
@pytest.mark.skipif(capabilities.missing_gpu(2) is not None,
                    reason=capabilities.missing_gpu(2) or "")
def test_weights_equal_single_device_training_over_nccl(reference):
    """The same check with one stage per GPU and NCCL point-to-point groups."""
    errors = run_ranks(stage_errors, 2, VARIANTS, (2, 8), env={"OVERLAP_BACKEND": "nccl"})[0]
    tolerance = weight_tolerance(torch.float32, max(w.abs().max().item() for w in reference))
    assert len(errors) == len(VARIANTS) * 2
    for (variant, m), error in errors.items():
        assert error <= tolerance, f"{variant} m={m}: {error:.3g}"
