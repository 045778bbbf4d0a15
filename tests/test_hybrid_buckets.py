"""The offload's flat buckets (impl/hybrid/buckets.py): the layout, what a step pays per bucket
instead of per tensor (counted, on the CPU), the check passing at every bucket size, and the
bounds that count the last bucket's tail."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from impl.hybrid import HybridOptions, build_trainer
from impl.hybrid.bounds import host_work_ms, offload_bounds
from impl.hybrid.buckets import BUCKET_ELEMENTS, bucket_layout, calls_per_step
from impl.presets import gpt_small_bf16, preset
from impl.workloads import Batch, build_model
from tests.test_hybrid import LR, check_low_precision_decoder

OFFLOADS = ("offload-after-backward", "offload-overlap", "offload-overlap-dpu")


def backward_order(model: nn.Module) -> list[torch.Tensor]:
    return list(reversed(list(model.parameters())))


def layout_calls(model: nn.Module, cap: int) -> dict[str, int]:
    """calls_per_step of the model's buckets at ``cap``."""
    params = backward_order(model)
    layout = bucket_layout([p.numel() for p in params], [p.dtype for p in params], cap)
    return calls_per_step([sum(params[i].numel() for i in bucket) for bucket in layout])


def test_consecutive_tensors_of_one_dtype_share_a_bucket_up_to_the_cap():
    kinds = ["bf16"] * 4 + ["fp32"] * 2
    assert bucket_layout([5, 3, 4, 10, 2, 2], kinds, 8) == [[0, 1], [2], [3], [4, 5]]
    assert bucket_layout([5, 3, 4, 10, 2, 2], kinds, 1) == [[i] for i in range(6)]
    assert calls_per_step([8, 4, 10]) == {"buckets": 3, "host_adam_calls": 3,
                                          "copies_to_host": 3, "copies_to_device": 3}


@pytest.mark.parametrize("value", [0, -4, 2.5, True, None])
def test_a_bucket_size_that_is_not_a_positive_integer_is_one_line(value):
    message = (f"hybrid bucket_elements={value!r}: choose an integer ≥ 1 (values a bucket holds; "
               "1 moves every tensor on its own)")
    with pytest.raises(ValueError) as error:
        HybridOptions(bucket_elements=value)
    assert str(error.value) == message
    with pytest.raises(ValueError) as error:
        bucket_layout([1, 2], ["bf16", "bf16"], value)
    assert str(error.value) == message


def test_gpt_small_bf16_moves_27_buckets_instead_of_149_tensors():
    """The GPU member whose host Adam ran at 37 GB/s, per tensor: 149 tensors (the two of
    7.68M values in two pieces each) paid 151 host Adam calls and as many copies each way; in
    the default buckets, 29. Its last bucket, the overlapped offload's tail, is the token
    embedding alone, as before."""
    model = build_model(gpt_small_bf16(), torch.device("meta"))
    assert len(list(model.parameters())) == 149
    assert layout_calls(model, 1) == {"buckets": 149, "host_adam_calls": 151,
                                      "copies_to_host": 151, "copies_to_device": 151}
    assert layout_calls(model, BUCKET_ELEMENTS) == {"buckets": 27, "host_adam_calls": 29,
                                                    "copies_to_host": 29, "copies_to_device": 29}
    params = backward_order(model)
    last = bucket_layout([p.numel() for p in params], [p.dtype for p in params],
                         BUCKET_ELEMENTS)[-1]
    assert [params[i].shape for i in last] == [torch.Size([10000, 768])]


def test_the_fp32_mlp_member_keeps_a_bucket_per_layer():
    """mlp_4096x8_b8192's layers of 16.8M values are each larger than a bucket: 8 buckets of 4
    pieces, as the per-tensor offload paid."""
    model = build_model(preset("mlp_4096x8_b8192"), torch.device("meta"))
    assert layout_calls(model, BUCKET_ELEMENTS) == layout_calls(model, 1) == {
        "buckets": 8, "host_adam_calls": 32, "copies_to_host": 32, "copies_to_device": 32}


@pytest.mark.parametrize("bucket_elements", [1, 100_000, BUCKET_ELEMENTS])
@pytest.mark.parametrize("name", OFFLOADS)
def test_a_bf16_decoder_step_pays_per_bucket_and_passes_the_check(name, bucket_elements):
    """gpt_tiny in bf16 (29 tensors) on the CPU: the check passes at every bucket size, and the
    last step's counted calls are the layout's: one hook per tensor, the rest per bucket."""
    model, trainer, result = check_low_precision_decoder(
        name, HybridOptions(lr=LR, cpu_threads=2, bucket_elements=bucket_elements))
    assert result.failure is None, result.failure
    expected = layout_calls(model, bucket_elements)
    assert trainer.step_calls == {"gradient_hooks": 29, **expected}
    assert expected["buckets"] == {1: 29, 100_000: 4, BUCKET_ELEMENTS: 1}[bucket_elements]
    # A bucket of several tensors holds their weights in one flat buffer: they are its views.
    for flat, members in zip(trainer.flat, trainer.buckets):
        assert {p.untyped_storage().data_ptr() for p in members} == {
            flat.untyped_storage().data_ptr()}


class WithUnusedWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(4, 4)
        self.unused = nn.Parameter(torch.zeros(3))

    def forward(self, inputs):
        return self.used(inputs)


@pytest.mark.parametrize("name", OFFLOADS)
def test_a_parameter_without_a_gradient_stops_the_step_in_one_line(name):
    """A bucket launches when its last member's gradient is ready: one that never comes would
    hold its bucket's update back without a word."""
    trainer = build_trainer(name, WithUnusedWeight(), nn.functional.mse_loss,
                            HybridOptions(lr=LR, cpu_threads=1))
    try:
        with pytest.raises(RuntimeError) as error:
            trainer.step(Batch(torch.ones(2, 4), torch.zeros(2, 4)))
    finally:
        trainer.close()
    assert str(error.value) == (
        f"{name}: step 0 (counting from 0) left 1 parameter(s) without a gradient (shapes "
        "[(3,)]): the offload updates every trainable parameter each step; set "
        "requires_grad=False on parameters the loss does not use")


def test_the_overlapped_bound_counts_the_last_bucket_and_the_whole_host_work():
    # 1 ns a value of host Adam (28 B at 28 GB/s) and 1 ns each way (2 B at 2 GB/s): 3 ns.
    rates = {"adam_gbps": 28.0, "to_host_gbps": 2.0, "to_device_gbps": 2.0}
    assert host_work_ms(1_000_000, 2, rates) == pytest.approx(3.0)
    gpu_bound = offload_bounds(10.0, 1_000_000, 100_000, 2, rates)
    assert gpu_bound["offload-overlap"] == pytest.approx(10.3)  # GPU step + the last bucket
    assert gpu_bound["offload-overlap-dpu"] == pytest.approx(10.0)
    host_bound = offload_bounds(1.0, 1_000_000, 100_000, 2, rates)
    assert host_bound["offload-overlap"] == pytest.approx(3.0)  # the step's whole host work
    assert host_bound["offload-overlap-dpu"] == pytest.approx(3.0)


class FakeRounds:
    def __init__(self, round_ms: dict[str, list[float]]):
        self.by_variant = round_ms

    def round_ms(self, variant: str) -> list[float]:
        return self.by_variant[variant]


def test_the_bounds_read_host_adam_from_the_host_adam_rows_timing(monkeypatch):
    """One timing of the trainers' host Adam per run: the bounds' rate is the host_adam rows'
    fused grouped median (28 B a parameter), not a second timing of its own."""
    from suite import bench_hybrid

    rounds = FakeRounds({"fused-grouped": [2.0, 1.0, 1.5], "fused-intra-op": [3.0, 3.0, 3.0],
                         "fused-pool": [0.1, 0.1, 0.1]})
    measured = bench_hybrid.HostAdamMeasured(parameters=1_000_000, threads=7,
                                             measurement=rounds, absent={})
    monkeypatch.setattr(bench_hybrid, "host_adam_measured", lambda rounds: measured)
    monkeypatch.setattr(bench_hybrid, "measure_copy_rates",
                        lambda device: {"to_host_gbps": 50.0, "to_device_gbps": 40.0})
    monkeypatch.setattr(bench_hybrid, "_rates", {})
    rates = bench_hybrid.offload_rates(rounds=None)
    assert rates == {"adam_gbps": pytest.approx(28e6 / 1.5e6), "threads": 7,
                     "parameters": 1_000_000, "to_host_gbps": 50.0, "to_device_gbps": 40.0}


@pytest.mark.parametrize("threads, half", [(31, 15), (2, 1), (1, None)])
def test_the_delayed_update_is_timed_again_on_half_the_host_threads(monkeypatch, threads, half):
    """Beside the default (host Adam on every core but one), the delayed update with half of
    them: on a host of one thread there is no half, and the variant is absent, with why."""
    from suite import bench_hybrid

    monkeypatch.setattr(bench_hybrid, "host_threads", lambda: threads)
    variants = bench_hybrid.offload_variants(gpt_small_bf16())
    name = "offload-overlap-dpu+half-threads"
    if half is None:
        assert name not in variants
        assert bench_hybrid.absent_reason(gpt_small_bf16(), name) == (
            f"{name}: host Adam has 1 thread here, and half of it is none")
    else:
        assert variants[name] == ("offload-overlap-dpu", {"cpu_threads": half})
        assert ("offload-overlap-dpu+half-threads", "offload-overlap-dpu") in \
            bench_hybrid.offload_pairs(variants)


def test_both_overlapped_offloads_are_timed_again_with_their_hooks_handing_off():
    """Beside each overlapped offload, its twin whose hooks hand the buckets to a launching
    thread, compared with it in the member's comparison row."""
    from suite import bench_hybrid

    variants = bench_hybrid.offload_variants(gpt_small_bf16())
    assert variants["offload-overlap+hand-off"] == ("offload-overlap", {"hand_off": True})
    assert variants["offload-overlap-dpu+hand-off"] == ("offload-overlap-dpu",
                                                        {"hand_off": True})
    pairs = bench_hybrid.offload_pairs(variants)
    assert ("offload-overlap-dpu+hand-off", "offload-overlap-dpu") in pairs
    assert ("offload-overlap+hand-off", "device-adam") in pairs


@pytest.mark.parametrize("member", ["mlp_8192x16_b2048_bf16", "gpt_1b_bf16"])
def test_a_member_over_half_a_billion_parameters_runs_three_variants_alone(monkeypatch, member):
    """Every variant's trainer lives through the interleaved rounds, each offload with 16
    bytes a parameter on the host: the 1.25B decoder's cast, per-tensor and half-thread twins
    would have asked a 125 GiB host for 140 GB. An absent variant says why."""
    from impl.presets import preset
    from suite import bench_hybrid

    monkeypatch.setattr(bench_hybrid, "host_threads", lambda: 31)
    workload = preset(member)
    assert list(bench_hybrid.offload_variants(workload)) == [
        "device-adam", "offload-overlap", "offload-overlap-dpu"]
    assert bench_hybrid.absent_reason(workload, "offload-overlap-dpu+host-cast") == (
        f"offload-overlap-dpu+host-cast: {member} has over 500,000,000 parameters, and each "
        "offload holds 16 bytes a parameter on the host")


def test_an_fp16_member_leaves_out_adam_in_fp16_itself():
    """device-adam-foreach applies Adam to the weights in their dtype and takes no loss scale:
    for an fp16 decoder that is no recipe (most gradients subnormal), so it is absent, with why."""
    from impl.presets import preset
    from suite import bench_hybrid

    variants = bench_hybrid.offload_variants(preset("gpt_medium_fp16"))
    assert "device-adam-foreach" not in variants and "device-adam" in variants
    assert "device-adam-foreach" in bench_hybrid.offload_variants(gpt_small_bf16())
    assert bench_hybrid.absent_reason(preset("gpt_medium_fp16"), "device-adam-foreach") == (
        "device-adam-foreach: Adam in fp16 itself, with no loss scale, is no fp16 recipe: most "
        "of a decoder's gradients are subnormal there (impl/hybrid/base.py)")


def test_a_member_whose_measurement_failed_fails_its_other_rows_at_once(monkeypatch, capfd):
    """The first row's failure is printed at once and kept: the member's other rows raise it
    without measuring again."""
    from types import SimpleNamespace

    from suite import bench_hybrid

    calls = []

    def failing(workload, rounds):
        calls.append(workload.name)
        raise FloatingPointError("step 7 has a non-finite loss")

    monkeypatch.setattr(bench_hybrid, "measure_offload", failing)
    monkeypatch.setattr(bench_hybrid, "_offload_failed", {})
    monkeypatch.setattr(bench_hybrid, "offload_family",
                        lambda: {"gpt_small_bf16": (gpt_small_bf16(), None)})
    context = SimpleNamespace(rank=0)
    with pytest.raises(FloatingPointError):
        bench_hybrid.offload_measured(context, None, "gpt_small_bf16")
    with pytest.raises(bench_hybrid.MeasurementFailed) as again:
        bench_hybrid.offload_measured(context, None, "gpt_small_bf16")
    assert calls == ["gpt_small_bf16"]
    assert str(again.value) == ("measured once, failed: gpt_small_bf16: FloatingPointError: "
                                "step 7 has a non-finite loss")
    assert "[offload gpt_small_bf16] failed: gpt_small_bf16: FloatingPointError" in \
        capfd.readouterr().err
