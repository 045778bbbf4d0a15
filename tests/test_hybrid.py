"""CPU–GPU hybrid training: every trainer passes the gradient-and-update check
(impl/hybrid/trainer_check.py) on the CPU and a GPU, and deliberately wrong updates fail it;
host Adam's implementations agree; the host-work split on a known timeline; the coarse-grained
hybrid on 2 gloo ranks with its check and loss curve; the share balancing, the digits
experiment and the GPT forward table's tool."""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from impl import capabilities
from impl.hybrid import (
    HybridOptions,
    TrainingCheckFailed,
    build_trainer,
    check_training,
    host_adam,
    host_initialised_model,
    loss_curves_match,
)
from impl.hybrid.base import NonFiniteLoss, calibrated_loss_scale
from impl.hybrid.coarse import (
    CoarseHybrid,
    balance,
    balanced_shares,
    even_shares,
    split_decision,
    worker_device,
)
from impl.hybrid.digits import (
    DigitsConfig,
    load_data,
    run_digits,
)
from impl.hybrid.gpt_forward import forward_ms
from impl.hybrid.measure import host_work_split
from impl.hybrid.offload import OffloadOverlap
from impl.hybrid.trainer_check import check_first_step, ieee_fp32, weight_tolerance
from impl.presets import preset
from impl.strategy_check import max_abs_diff
from impl.timeline import Interval, Timeline
from impl.workloads import Batch, GPTConfig, build_model, loss_fn, make_batch
from tests.multirank import run_ranks

ROOT = Path(__file__).parent.parent
WORKLOAD = "mlp_tiny"
STEPS = 4
LR = 1e-3
DIGITS_EPOCHS = 20  # about 2 s on one core; the study's 100 run in the benchmarks
OFFLOADS = ("offload-after-backward", "offload-overlap", "offload-overlap-dpu")
TRAINERS = ("device-adam", "device-adam-foreach", *OFFLOADS)
needs_sklearn = pytest.mark.skipif(capabilities.missing_sklearn() is not None,
                                   reason=capabilities.missing_sklearn() or "")
needs_gpu = [pytest.mark.gpu, pytest.mark.skipif(capabilities.missing_gpu() is not None,
                                                 reason=capabilities.missing_gpu() or "")]
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=needs_gpu)]


def mlp_loss(outputs, targets):
    return loss_fn(preset(WORKLOAD), outputs, targets)


def mlp_batches(device: torch.device) -> list:
    """The same batches on any device: drawn on the CPU (a CUDA generator draws others)."""
    cpu = [make_batch(preset(WORKLOAD), torch.device("cpu"), 0, 0, step) for step in range(STEPS)]
    return [Batch(b.inputs.to(device), b.targets.to(device)) for b in cpu]


def check(trainer, name: str = "trainer"):
    """The check as the benchmark runs it: its fp32 reference on the trainer's device."""
    workload = preset(WORKLOAD)
    reference = build_model(workload, torch.device("cpu")).to(trainer.device)
    return check_training(name, trainer, reference, mlp_loss, mlp_batches(trainer.device),
                          max(workload.batch, workload.width))


def checked(name: str, device: str, trainer_class=None, **options):
    model = host_initialised_model(preset(WORKLOAD), torch.device(device))
    options = HybridOptions(lr=LR, cpu_threads=2, **options)
    trainer = (trainer_class(model, mlp_loss, options) if trainer_class
               else build_trainer(name, model, mlp_loss, options))
    try:
        return check(trainer, name), trainer.finish_timeline()
    finally:
        trainer.close()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", TRAINERS)
def test_every_trainer_passes_its_check(name, device):
    result, timeline = checked(name, device)
    assert result.failure is None
    assert result.update_delay == (1 if name.endswith("dpu") else 0)
    # The same Adam on the same gradients: on the CPU only rounding apart (fused against the
    # reference's loop); a GPU's fused kernel rounds its own way (failure None bounds it).
    if device == "cpu":
        assert result.weight_error <= 1e-2 * result.weight_tolerance
    assert 0 <= result.gradient_error <= 0.05 * result.gradient_tolerance
    if name in OFFLOADS:  # mlp_tiny's 8 tensors of 65536 values fill one default bucket
        assert [i.chunk for i in timeline.intervals if i.lane == "host"] == [0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["offload-overlap", "offload-overlap-dpu"])
def test_buckets_handed_to_the_launching_thread_train_as_the_hooks_do(name, device, monkeypatch):
    threads = []
    issue = OffloadOverlap._issue

    def issued_on(self, *args):
        threads.append(threading.current_thread().name)
        return issue(self, *args)

    monkeypatch.setattr(OffloadOverlap, "_issue", issued_on)
    handed, _ = checked(name, device, hand_off=True)
    assert handed.failure is None
    assert threads and all(thread.startswith("offload-launch") for thread in threads)
    threads.clear()
    hooked, _ = checked(name, device)
    assert threads and not any(thread.startswith("offload-launch") for thread in threads)
    # The same operations in the same order, only issued from another thread.
    if device == "cpu":
        assert handed.weight_error == hooked.weight_error
        assert handed.gradient_error == hooked.gradient_error


@pytest.mark.parametrize("name", ["offload-overlap", "offload-overlap-dpu"])
def test_an_error_in_the_launching_thread_ends_the_step_with_its_message(name, monkeypatch):
    def failing_copy(self, index, *args):
        raise RuntimeError(f"copy of bucket {index} failed")

    monkeypatch.setattr(OffloadOverlap, "_copy_to_host", failing_copy)
    model = host_initialised_model(preset(WORKLOAD), torch.device("cpu"))
    trainer = build_trainer(name, model, mlp_loss, HybridOptions(lr=LR, cpu_threads=2,
                                                                 hand_off=True))
    with pytest.raises(RuntimeError, match="copy of bucket 0 failed"):
        trainer.step(mlp_batches(torch.device("cpu"))[0])
    trainer.close()  # returns: the launching thread has nothing left to wait for


def test_the_check_can_tell_a_wrong_update_from_rounding():
    """Adam moves every weight by about lr in the first steps: far past the tolerance; and the
    gradient at weights one update away is far from the gradient before it."""
    model = build_model(preset(WORKLOAD), torch.device("cpu"))
    initial = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    batch = mlp_batches(torch.device("cpu"))[0]
    mlp_loss(model(batch.inputs), batch.targets).backward()
    before = [p.grad.clone() for p in model.parameters()]
    optimizer.step()
    optimizer.zero_grad()
    mlp_loss(model(batch.inputs), batch.targets).backward()
    moved = min((p.detach() - w).abs().max().item() for p, w in zip(model.parameters(), initial))
    assert moved > 50 * weight_tolerance(LR, 1, torch.float32, 0.0)
    result, _ = checked("device-adam", "cpu")
    change = min(((p.grad - g).abs().max() / g.abs().max()).item()
                 for p, g in zip(model.parameters(), before))
    assert change > 100 * result.gradient_tolerance


# Deliberately wrong updates: each must fail the check, on the CPU and on a GPU. The trainers
# under test hold mlp_tiny in three buckets (MUTATED_BUCKET: 3, 3 and 2 tensors), and each
# mutation spoils bucket 0 (the last three layers) alone.
MUTATED_BUCKET = 3 * 65536


def missing(trainer):  # one piece never updated
    update = trainer.adam.update
    trainer.adam.update = lambda i, piece, grad: None if i == piece == 0 else update(i, piece,
                                                                                     grad)


def doubled(trainer):  # one piece updated twice with the same gradient
    update = trainer.adam.update

    def twice(i, piece, grad):
        if i == piece == 0:
            update(i, piece, grad)
        return update(i, piece, grad)
    trainer.adam.update = twice


def stale(trainer):  # after the first step, one bucket is never copied: Adam reads the last
    copy = trainer._copy_to_host

    def skip(index, grads, produced):
        events = copy(index, grads, produced)
        if index == 0 and trainer.steps_done:
            trainer.host_grads[0].copy_(trainer.stale)
        trainer.stale = trainer.host_grads[0].clone()
        return events
    trainer._copy_to_host = skip


def swapped(trainer):  # a bucket's first two gradients packed in each other's place
    copy = trainer._copy_to_host

    def swap(index, grads, produced):
        return copy(index, [grads[1], grads[0], *grads[2:]] if index == 0 else grads, produced)
    trainer._copy_to_host = swap


def misplaced(trainer):  # a bucket's new weights written one element off
    copy = trainer._copy_to_device

    def shifted(index, piece, produced, *record):
        if index != 0:
            return copy(index, piece, produced, *record)
        start, end = trainer.adam.spans[0][piece]
        target = trainer.flat[0][start:end]
        target.copy_(trainer.adam.pieces[0][piece].roll(1).to(target.device))
    trainer._copy_to_device = shifted


MUTATIONS = {"missing": missing, "doubled": doubled, "stale": stale, "swapped": swapped,
             "misplaced": misplaced}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["offload-overlap", "offload-overlap-dpu"])
@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_wrong_update_fails_the_check(mutation, name, device):
    trainer = build_trainer(name, host_initialised_model(preset(WORKLOAD), torch.device(device)),
                            mlp_loss, HybridOptions(lr=LR, cpu_threads=2,
                                                    bucket_elements=MUTATED_BUCKET))
    assert [len(members) for members in trainer.buckets] == [3, 3, 2]
    MUTATIONS[mutation](trainer)
    try:
        result = check(trainer, name)
    finally:
        trainer.close()
    assert result.failure is not None
    assert result.failure.startswith(f"{name}: ")
    with pytest.raises(TrainingCheckFailed) as error:
        result.require()
    which = "gradients" if mutation in ("stale", "swapped") else "weights"
    assert f"{name}: {which} " in str(error.value), str(error.value)


def test_a_delayed_update_is_not_the_plain_one():
    """The delayed update's first step leaves the weights as they were; checked as a plain
    update (delay 0) it fails, so the check tells the two algorithms apart."""
    model = host_initialised_model(preset(WORKLOAD), torch.device("cpu"))
    initial = [p.detach().clone() for p in model.parameters()]
    trainer = build_trainer("offload-overlap-dpu", model, mlp_loss, HybridOptions(lr=LR))
    try:
        trainer.step(mlp_batches(torch.device("cpu"))[0])
        trainer.drain()
        assert max_abs_diff([p.detach() for p in model.parameters()], initial) == 0.0
    finally:
        trainer.close()

    class NotDelayed(OffloadOverlap):
        update_delay = 1  # claims the delayed update but applies each update at once

        def _apply_previous_update(self, index, produced):
            pass

        def _update(self, index, piece, copied, produced, record):
            super()._update(index, piece, copied, produced, record)
            self._copy_to_device(index, piece, produced, record)

    result, _ = checked("not-delayed", "cpu", NotDelayed)
    assert result.failure is not None and "1 step late" in result.failure


@pytest.mark.parametrize("bucket_elements, pieces", [
    (1, 8 * 66),  # a tensor a bucket: 66 pieces of 1000 per 65536-value layer
    (host_adam.PIECE_ELEMENTS, 525),  # one bucket of 524288 values: pieces cross the tensors
])
def test_pieces_are_updated_as_one_tensor(monkeypatch, bucket_elements, pieces):
    monkeypatch.setattr(host_adam, "PIECE_ELEMENTS", 1000)
    model = host_initialised_model(preset(WORKLOAD), torch.device("cpu"))
    trainer = build_trainer("offload-overlap", model, mlp_loss,
                            HybridOptions(lr=LR, cpu_threads=2, bucket_elements=bucket_elements))
    try:
        result = check(trainer, "offload-overlap")
        timeline = trainer.finish_timeline()
    finally:
        trainer.close()
    assert result.failure is None and result.weight_error <= 1e-3 * result.weight_tolerance
    assert len([i for i in timeline.intervals if i.lane == "host"]) == pieces


@pytest.mark.parametrize("implementation", host_adam.ADAM_IMPLEMENTATIONS)
@pytest.mark.parametrize("layout", host_adam.THREAD_LAYOUTS)
def test_host_adam_implementations_agree(implementation, layout):
    weights = [torch.randn(5000, generator=torch.Generator().manual_seed(0))]
    grad = torch.randn(5000, generator=torch.Generator().manual_seed(1))
    reference = weights[0].clone().requires_grad_()
    optimizer = torch.optim.Adam([reference], lr=LR)
    engine = host_adam.HostAdam(weights, LR, implementation, layout, threads=2)
    try:
        for _ in range(3):
            reference.grad = grad
            optimizer.step()
            futures = [engine.submit(engine.update, 0, 0, grad)]
            futures[0].result()
    finally:
        engine.close()
    assert torch.allclose(engine.master[0], reference.detach(), rtol=0, atol=1e-7)


@pytest.mark.parametrize("implementation", host_adam.ADAM_IMPLEMENTATIONS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_host_adam_divides_a_loss_scale_out_exactly_and_leaves_the_gradient_alone(
        implementation, dtype):
    """Given gradients multiplied by a power of two, host Adam's update is the one of the
    unscaled gradients, bit for bit (the fused kernel's grad_scale or a division of its fp32
    copy), and the caller's gradient is not unscaled in place."""
    grad = torch.randn(5000, generator=torch.Generator().manual_seed(1)).to(dtype)
    scaled = (grad.float() * 1024).to(dtype)
    kept = scaled.clone()
    plain = host_adam.HostAdam([torch.zeros(5000)], LR, implementation)
    unscaling = host_adam.HostAdam([torch.zeros(5000)], LR, implementation, grad_scale=1024.0)
    try:
        for _ in range(3):
            plain.update(0, 0, grad.float())
            unscaling.update(0, 0, scaled)
    finally:
        plain.close()
        unscaling.close()
    assert torch.equal(unscaling.master[0], plain.master[0])
    assert torch.equal(scaled, kept)


@pytest.mark.parametrize("threads, split", [(1, (1, 1)), (15, (1, 15)), (31, (2, 15)),
                                            (63, (4, 15)), (127, (8, 15))])
def test_grouped_workers_spread_pieces_over_groups_of_at_most_16_threads(threads, split):
    # One worker of every thread up to a 16-core host (intra-op's layout there); above it,
    # several pieces at once, each over a group (a 64-core host's 63 threads: 4 × 15).
    assert host_adam.thread_split("grouped", threads) == split
    assert host_adam.thread_split("intra-op", threads) == (1, threads)
    assert host_adam.thread_split("pool", threads) == (threads, 1)


def test_grouped_workers_updating_pieces_at_once_match_torch_adam(monkeypatch):
    monkeypatch.setattr(host_adam, "PIECE_ELEMENTS", 1000)
    weights = [torch.randn(5500, generator=torch.Generator().manual_seed(0))]
    grad = torch.randn(5500, generator=torch.Generator().manual_seed(1))
    reference = weights[0].clone().requires_grad_()
    optimizer = torch.optim.Adam([reference], lr=LR)
    engine = host_adam.HostAdam(weights, LR, "fused", "grouped", threads=33)  # 2 workers
    try:
        assert engine.pool._max_workers == 2 and len(engine.spans[0]) == 6
        for _ in range(3):
            reference.grad = grad
            optimizer.step()
            for future in [engine.submit(engine.update, 0, piece, grad[a:b])
                           for piece, (a, b) in enumerate(engine.spans[0])]:
                future.result()
    finally:
        engine.close()
    assert torch.allclose(engine.master[0], reference.detach(), rtol=0, atol=1e-7)


@pytest.mark.parametrize("args, message", [
    (("fast", "pool", 1), "host Adam implementation 'fast': choose one of fused, foreach, single"),
    (("fused", "omp", 1), "host Adam thread layout 'omp': choose one of intra-op, pool, grouped"),
    (("fused", "pool", 0), "host Adam threads=0: choose an integer ≥ 1"),
])
def test_host_adam_rejects_bad_options(args, message):
    with pytest.raises(ValueError) as error:
        host_adam.check_host_adam(*args)
    assert str(error.value) == message


def test_host_work_split_on_a_known_timeline():
    """forward 0–4, backward 4–10 ms; copies 5–6 and 10–11; Adam 6–8 and 10.5–12; the last
    copy back 12–13. Exposed Adam 10.5–12 (1.5 ms), exposed copies 10–10.5 and 12–13 (1.5 ms),
    of 6 ms of host work (5–8 and 10–13); the tail is 13 − 10."""
    timeline = Timeline([
        Interval("compute", "forward", None, 0.0, 4.0),
        Interval("compute", "backward", None, 4.0, 10.0),
        Interval("comm", "to host p0", 0, 5.0, 6.0),
        Interval("host", "adam p0", 0, 6.0, 8.0),
        Interval("comm", "to host p1", 1, 10.0, 11.0),
        Interval("host", "adam p1", 1, 10.5, 12.0),
        Interval("comm", "to device p1", 1, 12.0, 13.0),
    ])
    split = host_work_split(timeline, parameters=1000)
    assert split["exposed_adam_ms"] == pytest.approx(1.5)
    assert split["exposed_copies_ms"] == pytest.approx(1.5)
    assert split["hidden_host_fraction"] == pytest.approx(0.5)
    assert split["tail_ms"] == pytest.approx(3.0) and split["carried_ms"] == 0.0
    assert split["host_adam_ms"] == pytest.approx(3.5)
    assert split["host_adam_gbps"] == pytest.approx(28 * 1000 / 3.5e6)
    # With the delayed update the step ends at its last copy back (12–13 here) or compute:
    # Adam running after that is carried into the next step.
    delayed = Timeline([*timeline.intervals[:2], Interval("comm", "to device p0", 0, 7, 8),
                        Interval("host", "adam p0", 0, 9.0, 14.0)])
    split = host_work_split(delayed, parameters=1000, update_delay=1)
    assert split["carried_ms"] == pytest.approx(4.0) and split["tail_ms"] == 0.0
    assert split["hidden_host_fraction"] == pytest.approx(1.0)
    no_host = Timeline(timeline.intervals[:2])
    assert host_work_split(no_host, 1000)["hidden_host_fraction"] is None


def test_balanced_shares_follow_the_measured_rates():
    assert balanced_shares([50, 50], [10.0, 10.0], 100) == [50, 50]
    assert balanced_shares([50, 50], [10.0, 20.0], 100) == [67, 33]
    assert balanced_shares([99, 1], [1.0, 1000.0], 100) == [99, 1]  # a worker keeps one row
    assert even_shares(7, 2) == [4, 3]


@pytest.mark.parametrize("args, message", [
    (([50], [1.0, 2.0], 100), "one measured time per worker: rows=[50], compute_ms=[1.0, 2.0]"),
    (([50, 50], [1.0, 0.0], 100), "rows=[50, 50] and compute_ms=[1.0, 0.0] must be positive"),
    (([1, 1], [1.0, 1.0], 1), "a batch of 1 rows cannot be shared by 2 workers"),
])
def test_balanced_shares_reject_bad_input(args, message):
    with pytest.raises(ValueError) as error:
        balanced_shares(*args)
    assert str(error.value) == message


def coarse_run(context, gpu_worker: bool = False) -> dict:
    group = context.group(context.world_size)
    device = worker_device(context.rank) if gpu_worker else context.device
    shares = [20, 44]  # deliberately unbalanced: the update must not depend on the shares
    model = host_initialised_model(preset(WORKLOAD), device)
    trainer = CoarseHybrid(model, mlp_loss, HybridOptions(lr=LR, cpu_threads=1), group, shares)
    result = check(trainer, f"coarse-grained hybrid (worker {context.rank})")
    probe = CoarseHybrid(host_initialised_model(preset(WORKLOAD), device), mlp_loss,
                         HybridOptions(lr=LR), group, shares)
    balanced = balance(probe, mlp_batches(device)[0])
    return {"weights": [p.detach().cpu().numpy() for p in model.parameters()],
            "check": result, "balance": balanced, "device": device.type}


def test_coarse_grained_gradient_and_update_on_two_ranks():
    ranks = run_ranks(coarse_run, 2)
    for result in ranks:
        assert result["check"].failure is None, result["check"]
        # the summed, share-weighted gradient is the whole batch's up to rounding
        assert result["check"].gradient_error <= 0.05 * result["check"].gradient_tolerance
    assert ranks[0]["weights"][0].tobytes() == ranks[1]["weights"][0].tobytes()
    balanced = ranks[0]["balance"]
    assert balanced == ranks[1]["balance"]
    assert sum(balanced["shares"]) == preset(WORKLOAD).batch
    assert balanced["shares_before"] == [20, 44]


@pytest.mark.gpu
@pytest.mark.skipif(capabilities.missing_gpu() is not None, reason=capabilities.missing_gpu() or "")
def test_coarse_grained_gpu_and_cpu_workers_pass_the_check():
    ranks = run_ranks(coarse_run, 2, True)
    assert [r["device"] for r in ranks] == ["cuda", "cpu"]
    for rank, result in enumerate(ranks):
        assert result["check"].failure is None, f"rank {rank}: {result['check']}"


@pytest.fixture(scope="module")
def digits():
    if reason := capabilities.missing_sklearn():
        pytest.skip(reason)
    return load_data(config=DigitsConfig())


@pytest.fixture(scope="module")
def digits_reference(digits) -> dict:
    torch.set_num_threads(1)
    return run_digits("cpu", digits, DigitsConfig(), DIGITS_EPOCHS, threads=1)


@needs_sklearn
def test_digits_mlp_reaches_95_percent(digits, digits_reference):
    assert len(digits.y_train) == 1438 and len(digits.y_test) == 359
    curve = digits_reference["curve"]
    assert curve["test_accuracy"][-1] >= 0.95, curve["test_accuracy"]
    assert curve["train_loss"][-1] < 0.1 * curve["train_loss"][0]


@needs_sklearn
def test_digits_fine_grained_curve_is_the_reference(digits, digits_reference):
    result = run_digits("offload-overlap", digits, DigitsConfig(), DIGITS_EPOCHS, threads=2)
    # The same Adam on the same gradients, fused on the host against the reference's loop.
    assert loss_curves_match(result["curve"]["train_loss"],
                             digits_reference["curve"]["train_loss"]) <= 1e-4


def coarse_digits(context, epochs: int) -> dict:
    data = load_data(config=DigitsConfig())
    return run_digits("coarse-hybrid", data, DigitsConfig(), epochs, threads=1,
                      group=context.group(context.world_size))


@needs_sklearn
def test_digits_coarse_grained_curve_matches_the_reference(digits_reference):
    ranks = run_ranks(coarse_digits, 2, DIGITS_EPOCHS)
    curve = ranks[0]["curve"]
    assert curve["train_loss"] == ranks[1]["curve"]["train_loss"]
    assert loss_curves_match(curve["train_loss"],
                             digits_reference["curve"]["train_loss"]) <= 0.05
    assert curve["test_accuracy"][-1] >= 0.95
    assert sum(ranks[0]["balance"]["shares"]) == DigitsConfig().batch


def test_local_mnist_file(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "mnist.npz"
    np.savez(path, x_train=rng.integers(0, 256, (30, 28, 28), dtype=np.uint8),
             y_train=rng.integers(0, 10, 30), x_test=rng.integers(0, 256, (5, 28, 28),
                                                                  dtype=np.uint8),
             y_test=rng.integers(0, 10, 5))
    data = load_data(path)
    assert data.x_train.shape == (30, 784) and data.x_test.shape == (5, 784)
    assert data.x_train.min() >= 0.0 and data.x_train.max() <= 1.0
    np.savez(path, x_train=np.zeros((2, 4)))
    with pytest.raises(ValueError) as error:
        load_data(path)
    assert str(error.value) == (f"{path}: no y_train, x_test, y_test in the archive (it has "
                                "x_train); expected ('x_train', 'y_train', 'x_test', 'y_test')")
    with pytest.raises(ValueError, match="is not a file"):
        load_data(tmp_path / "absent.npz")


def _npz(path, **arrays):
    good = {"x_train": np.zeros((3, 4)), "y_train": np.array([1, 2, 3]),
            "x_test": np.zeros((1, 4)), "y_test": np.zeros(1, int)}
    np.savez(path, **{**good, **arrays})
    return path


@pytest.mark.parametrize("make, expected", [
    (lambda p: np.save(p.with_suffix(".npy"), np.zeros((10, 28, 28))) or p.with_suffix(".npy"),
     "one array of shape (10, 28, 28) (a .npy file), not an .npz archive; give an .npz with "
     "x_train, y_train, x_test, y_test"),
    (lambda p: p.write_bytes(b"PK\x03\x04 cut short") and p,
     "not a readable .npz archive (File is not a zip file)"),
    (lambda p: _npz(p, x_train=np.zeros((0, 4))),
     "x_train has shape (0, 4) and dtype float64; expected one or more numeric images"),
    (lambda p: _npz(p, x_train=np.float64(0)), "x_train has shape () and dtype float64"),
    (lambda p: _npz(p, y_test=np.zeros(2, int)),
     "y_test has shape (2,) and dtype int64; expected 1 integer labels, one per image"),
    (lambda p: _npz(p, y_train=np.array([1, 2, 30])), "y_train holds labels 1 to 30; expected "
                                                        "0 to 9"),
    (lambda p: _npz(p, x_test=np.zeros((1, 5))), "x_train images are (4,) but x_test images "
                                                  "(5,)"),
    (lambda p: _npz(p, x_train=np.array([{}], dtype=object)),
     "cannot read its arrays (Object arrays cannot be loaded when allow_pickle=False)"),
])
def test_a_local_file_that_is_not_mnist_is_one_line(tmp_path, make, expected):
    path = make(tmp_path / "mnist.npz")
    with pytest.raises(ValueError) as error:
        load_data(path)
    assert str(error.value).startswith(f"{path}: ") and expected in str(error.value)


def test_gpt_forward_times_every_iteration():
    config = GPTConfig("gpt_probe", layers=1, heads=1, width=16, context=8, batch=1, vocab=50,
                       dropout=0.2)
    times = forward_ms(config, torch.device("cpu"), 3)
    assert len(times) == 3 and all(t > 0 for t in times)


def test_gpt_forward_cli_rejects_bad_values():
    result = subprocess.run([sys.executable, "-m", "impl.hybrid.gpt_forward", "--iterations",
                             "0"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "--iterations=0: choose an integer ≥ 1" in result.stderr


@pytest.mark.skipif(capabilities.gpu_count() > 0, reason="checks the message of a CPU machine")
def test_gpt_forward_cli_without_gpu():
    result = subprocess.run([sys.executable, "-m", "impl.hybrid.gpt_forward", "--device",
                             "cuda"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: --device cuda: {capabilities.missing_gpu()}"


# Hostile input: one line naming the value, before anything trains.


@pytest.mark.parametrize("options, message", [
    ({"lr": float("nan")}, "hybrid lr=nan: choose a finite number > 0"),
    ({"lr": -1e-3}, "hybrid lr=-0.001: choose a finite number > 0"),
    ({"lr": float("inf")}, "hybrid lr=inf: choose a finite number > 0"),
    ({"cpu_threads": 0}, "hybrid cpu_threads=0: choose None (every core) or an integer ≥ 1"),
    ({"hand_off": 1}, "hybrid hand_off=1: choose True or False"),
    ({"host_adam": "fast"}, "host Adam implementation 'fast': choose one of fused, foreach, "
                            "single"),
])
def test_hybrid_options_are_checked_when_built(options, message):
    with pytest.raises(ValueError) as error:
        HybridOptions(**options)
    assert str(error.value) == message


@pytest.mark.parametrize("name", TRAINERS)
def test_a_nan_batch_stops_the_step_before_any_weight_changes(name):
    model = host_initialised_model(preset(WORKLOAD), torch.device("cpu"))
    trainer = build_trainer(name, model, mlp_loss, HybridOptions(lr=LR, cpu_threads=2))
    good, bad = mlp_batches(torch.device("cpu"))[:2]
    bad.inputs[3, 5] = float("nan")
    try:
        trainer.step(good)  # the delayed update has one pending after this step
        trainer.drain()
        before = [p.detach().clone() for p in model.parameters()]
        with pytest.raises(NonFiniteLoss) as error:
            trainer.step(bad)
        trainer.drain()
    finally:
        trainer.close()
    assert str(error.value) == (f"{name}: step 1 (counting from 0) has a non-finite loss (nan); "
                                "stopped before this step changed any weight: check the batch "
                                "and the learning rate (an earlier step's non-finite gradient "
                                "shows here first)")
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))


@pytest.mark.parametrize("grad_elements", [1, 10, 5001])
def test_host_adam_refuses_a_gradient_of_another_length(grad_elements):
    engine = host_adam.HostAdam([torch.zeros(5000)], LR)
    try:
        with pytest.raises(ValueError) as error:
            engine.update(0, 0, torch.ones(grad_elements))
    finally:
        engine.close()
    assert str(error.value) == (f"host Adam: gradient of {grad_elements} elements for piece 0 "
                                "of parameter 0, which has 5000")
    assert torch.equal(engine.master[0], torch.zeros(5000))


# Mixed precision: bf16 or fp16 weights and gradients on the device, the fp32 master (offload:
# on the host) updated by Adam; checked against fp32 Adam applied to the trainer's own gradients.
LOW_PRECISION = {"bf16": torch.bfloat16, "fp16": torch.float16}
UNIT_ROUNDOFF = {"bf16": 2 ** -8, "fp16": 2 ** -11}


@pytest.mark.parametrize("device, cast", [
    pytest.param("cpu", "host", id="cpu"),
    pytest.param("cuda", "host", id="cuda-host-cast", marks=needs_gpu),
    pytest.param("cuda", "device", id="cuda-device-cast", marks=needs_gpu)])
@pytest.mark.parametrize("name", ["device-adam", *OFFLOADS])
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_low_precision_trainers_update_an_fp32_master(name, device, cast, dtype):
    workload = dataclasses.replace(preset(WORKLOAD), dtype=dtype)
    data = [make_batch(workload, torch.device("cpu"), 0, 0, step) for step in range(STEPS)]
    scale = calibrated_loss_scale(host_initialised_model(workload, torch.device("cpu")),
                                  mlp_loss, data[0])
    assert scale == {"bf16": 1.0, "fp16": 4.0}[dtype]  # its largest gradient is 11.2
    model = host_initialised_model(workload, torch.device(device))
    trainer = build_trainer(name, model, mlp_loss, HybridOptions(lr=LR, cpu_threads=2, cast=cast,
                                                                 loss_scale=scale))
    try:
        reference = build_model(workload, torch.device("cpu")).float().to(device)
        result = check_training(name, trainer, reference, mlp_loss,
                                [Batch(b.inputs.to(device), b.targets.to(device)) for b in data],
                                max(workload.batch, workload.width))
    finally:
        trainer.close()
    assert result.failure is None
    # Gradients against a backward in the model's dtype at the reference's weights: one
    # rounding of that dtype (8 u) of tolerance. On the CPU the same kernels on weights a
    # rounding apart give at most about one u (bf16: 0; fp16 at its loss scale: 1.1 u).
    assert result.gradient_tolerance == 8 * UNIT_ROUNDOFF[dtype]
    if device == "cpu":
        assert result.gradient_error <= 2 * UNIT_ROUNDOFF[dtype]
    if name.endswith("dpu"):  # checked on its low-precision weights: their rounding of the largest
        assert result.weight_error <= result.weight_tolerance
    else:  # checked on the fp32 master: as strictly as an fp32 model
        assert result.weight_tolerance < 1.01 * weight_tolerance(LR, STEPS, torch.float32, 0.0)
        assert result.weight_error <= 1e-2 * result.weight_tolerance
    assert all(p.dtype == LOW_PRECISION[dtype] for p in model.parameters())


def test_the_reference_computes_in_ieee_fp32_and_restores_the_setting():
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # TF32 where a run allows it
    try:
        with ieee_fp32():
            assert torch.get_float32_matmul_precision() == "highest"
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(previous)


def test_device_adam_keeps_a_master_only_for_low_precision_weights():
    fp32 = build_trainer("device-adam", build_model(preset(WORKLOAD), torch.device("cpu")),
                         mlp_loss, HybridOptions(lr=LR))
    bf16 = build_trainer("device-adam", build_model(dataclasses.replace(
        preset(WORKLOAD), dtype="bf16"), torch.device("cpu")), mlp_loss, HybridOptions(lr=LR))
    assert fp32.masters is fp32.params and not fp32.mixed
    assert bf16.mixed and all(m.dtype == torch.float32 for m in bf16.masters)


def check_low_precision_decoder(name: str, options: HybridOptions, dtype: str = "bf16"):
    """gpt_tiny in ``dtype`` (bf16 or fp16), three steps of trainer ``name`` on the CPU checked
    against the reference: (its model, the trainer, closed, and the check's result)."""
    workload = dataclasses.replace(preset("gpt_tiny"), dtype=dtype)
    model = host_initialised_model(workload, torch.device("cpu"))
    trainer = build_trainer(name, model, lambda o, t: loss_fn(workload, o, t), options)
    data = [make_batch(workload, torch.device("cpu"), 0, 0, step) for step in range(3)]
    try:
        result = check_training(name, trainer, build_model(workload, torch.device("cpu")).float(),
                                lambda o, t: loss_fn(workload, o, t), data,
                                workload.batch * workload.context)
    finally:
        trainer.close()
    return model, trainer, result


def decoder_loss_scale(dtype: str) -> float:
    workload = dataclasses.replace(preset("gpt_tiny"), dtype=dtype)
    model = host_initialised_model(workload, torch.device("cpu"))
    return calibrated_loss_scale(model, lambda o, t: loss_fn(workload, o, t),
                                 make_batch(workload, torch.device("cpu"), 0, 0, 0))


@pytest.mark.parametrize("name", ["device-adam", "offload-overlap", "offload-overlap-dpu"])
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_a_low_precision_decoder_trains_through_every_trainer(name, dtype):
    options = HybridOptions(lr=LR, loss_scale=decoder_loss_scale(dtype))
    model, _, result = check_low_precision_decoder(name, options, dtype)
    assert result.failure is None
    assert result.gradient_tolerance == 8 * UNIT_ROUNDOFF[dtype]
    assert result.loss_scale == {"bf16": 1.0, "fp16": 2.0 ** 11}[dtype]
    assert all(p.dtype == LOW_PRECISION[dtype] for p in model.parameters())


def test_an_fp16_decoder_s_loss_scale_lifts_its_gradients_out_of_the_subnormals():
    """Unscaled, 85% of gpt_tiny's non-zero fp16 gradients are below fp16's smallest normal;
    at its calibrated scale (2^11: its largest gradient is 0.028) about 0.1% are, and the
    largest is 58, under a thousandth of fp16's 65504."""
    workload = dataclasses.replace(preset("gpt_tiny"), dtype="fp16")
    batch = make_batch(workload, torch.device("cpu"), 0, 0, 0)
    shares = {}
    for scale in (1.0, decoder_loss_scale("fp16")):
        model = host_initialised_model(workload, torch.device("cpu"))
        (loss_fn(workload, model(batch.inputs), batch.targets) * scale).backward()
        grads = torch.cat([p.grad.float().abs().flatten() for p in model.parameters()])
        nonzero = grads[grads > 0]
        shares[scale] = ((nonzero < torch.finfo(torch.float16).tiny).float().mean().item(),
                         grads.max().item())
    assert shares[1.0][0] > 0.8
    assert shares[2.0 ** 11][0] < 2e-3
    assert 2 ** 5 < shares[2.0 ** 11][1] < 2 ** 6


@pytest.mark.parametrize("scale", [0.5, 3.0, 2.0 ** 17, True, float("nan")])
def test_a_loss_scale_that_is_no_power_of_two_in_range_is_refused(scale):
    with pytest.raises(ValueError) as error:
        HybridOptions(loss_scale=scale)
    assert str(error.value) == (f"hybrid loss_scale={scale!r}: choose a power of two from 1 "
                                "to 2^16")


def test_a_trainer_that_updates_gradients_as_they_are_refuses_a_loss_scale():
    model = build_model(dataclasses.replace(preset(WORKLOAD), dtype="fp16"), torch.device("cpu"))
    with pytest.raises(ValueError) as error:
        build_trainer("device-adam-foreach", model, mlp_loss, HybridOptions(loss_scale=1024.0))
    assert str(error.value) == ("device-adam-foreach: loss_scale=1024: this trainer updates "
                                "the gradients as backward leaves them; choose 1")


# The coarse-grained hybrid knows when not to split: the exchange against what the CPU adds.


def test_a_slow_cpu_and_a_costly_exchange_leave_the_gpu_alone():
    # GPU 254 rows in 3.8 ms, CPU 2 rows in 3.8 ms, exchange 40 ms (mlp_1024x8's shape of it).
    decision = split_decision([254, 2], [3.8, 3.8], 40.0, 256)
    assert decision["choice"] == "gpu-alone"
    assert decision["gpu_alone_ms"] == pytest.approx(256 / (254 / 3.8))
    assert decision["split_ms"] == pytest.approx(3.8 + 40.0)
    assert decision["crossover_compute_to_exchange"] == pytest.approx(128.0)
    assert decision["crossover_rows"] == math.ceil(256 * 128 / (256 / (254 / 3.8) / 40.0))
    assert decision["reason"] == (
        "worker 0 alone: worker 0 alone computes the 256 rows in 3.83 ms; shared, they take "
        "3.8 ms plus 40 ms of gradient exchange = 43.8 ms. Another worker helps only where "
        "worker 0's compute is over 128× the exchange; here it is 0.0957× (at these rates from "
        f"about {decision['crossover_rows']} rows a batch)")
    assert decision["crossover_rows"] == 342_232


def test_a_split_wins_where_compute_dwarfs_the_exchange():
    # Equal rates: half the compute each; it pays once the GPU's compute is over 2× the exchange.
    decision = split_decision([500, 500], [100.0, 100.0], 10.0, 1000)
    assert decision["choice"] == "split"
    assert decision["split_ms"] == pytest.approx(110.0) and decision["gpu_alone_ms"] == 200.0
    assert decision["crossover_compute_to_exchange"] == pytest.approx(2.0)
    assert decision["compute_to_exchange"] == pytest.approx(20.0)


@pytest.mark.parametrize("args, message", [
    (([256], [3.8], 1.0, 256), "a split needs two workers or more: rows=[256], compute_ms=[3.8]"),
    (([254, 2], [3.8, 0.0], 1.0, 256), "rows=[254, 2], compute_ms=[3.8, 0.0] and "
                                       "exchange_ms=1.0 must be positive"),
    (([254, 2], [3.8, 3.8], 0.0, 256), "rows=[254, 2], compute_ms=[3.8, 3.8] and "
                                       "exchange_ms=0.0 must be positive"),
])
def test_split_decision_rejects_bad_input(args, message):
    with pytest.raises(ValueError) as error:
        split_decision(*args)
    assert str(error.value) == message


def first_step_check(name: str, device: str, mutation=None):
    """check_first_step as the largest-model measurement runs it (bf16, reference on the
    trainer's device)."""
    workload = dataclasses.replace(preset(WORKLOAD), dtype="bf16")
    model = host_initialised_model(workload, torch.device(device))
    trainer = build_trainer(name, model, mlp_loss, HybridOptions(lr=LR, cpu_threads=2))
    if mutation:
        MUTATIONS[mutation](trainer)
    batch = make_batch(workload, torch.device("cpu"), 0, 0, 0)
    reference = build_model(workload, torch.device("cpu")).float().to(device)
    try:
        return check_first_step(name, trainer, reference, mlp_loss,
                                Batch(batch.inputs.to(device), batch.targets.to(device)),
                                max(workload.batch, workload.width))
    finally:
        trainer.close()


@pytest.mark.parametrize("device", DEVICES)
def test_the_first_step_check_passes_the_offload_on_its_master(device):
    result = first_step_check("offload-overlap", device)
    assert result.failure is None, result.failure
    assert result.steps == 1
    assert 0 < result.weight_error <= 1e-2 * result.weight_tolerance
    assert result.gradient_error <= result.gradient_tolerance


@pytest.mark.parametrize("mutation", ["doubled", "misplaced"])
def test_the_first_step_check_fails_a_wrong_update(mutation):
    result = first_step_check("offload-overlap", "cpu", mutation)
    assert result.failure is not None
    assert result.failure.startswith("offload-overlap: weights after step 1 "), result.failure


def test_the_first_step_check_refuses_a_delayed_update():
    with pytest.raises(ValueError, match="offload-overlap-dpu: the first-step check needs an "
                                         "update that is not delayed"):
        first_step_check("offload-overlap-dpu", "cpu")


def test_a_stale_bf16_gradient_fails_the_gradient_half_of_the_check():
    """Against an fp32 backward a stale bf16 gradient hid in a tolerance over 1 for deep models;
    against a bf16 backward at the reference's weights it is off by far more than one
    rounding."""
    workload = dataclasses.replace(preset(WORKLOAD), dtype="bf16")
    model = host_initialised_model(workload, torch.device("cpu"))
    trainer = build_trainer("offload-overlap", model, mlp_loss, HybridOptions(lr=LR, cpu_threads=2))
    stale(trainer)
    data = [make_batch(workload, torch.device("cpu"), 0, 0, step) for step in range(STEPS)]
    try:
        result = check_training("offload-overlap", trainer,
                                build_model(workload, torch.device("cpu")).float(), mlp_loss,
                                data, max(workload.batch, workload.width))
    finally:
        trainer.close()
    assert result.failure.startswith("offload-overlap: gradients of step 2 differ from a bfloat16 "
                                     "backward at the reference's weights by ")
    assert result.gradient_error > 10 * result.gradient_tolerance
    # The stale bucket is the model's last (reversed registration order): the output bias.
    assert re.search(r"; worst: parameter \d+ of shape \(\d+(, \d+)?\), its largest expected "
                     r"gradient [0-9.e+-]+$", result.failure), result.failure


@pytest.mark.parametrize("member, rate", [("gpt_small_bf16", 6e-4), ("gpt_medium_fp16", 3e-4),
                                          ("gpt_1b_bf16", 2e-4), ("mlp_4096x8_b8192", 1e-3)])
def test_a_decoder_trains_at_gpt3s_rate_for_its_size(member, rate):
    """101M, 324M and 1.25B parameters sit nearest GPT-3's 125M, 350M and 1.3B (6e-4, 3e-4,
    2e-4); an MLP keeps the study's 1e-3, which diverged the 324M decoder."""
    from impl.hybrid.base import learning_rate
    from impl.presets import preset
    from suite.bench_hybrid import parameter_count

    workload = preset(member)
    assert learning_rate(workload.kind, parameter_count(workload)) == rate
