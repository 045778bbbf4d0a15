"""CPU–GPU hybrid training: the fine-grained (offload) steps end with the reference's weights
(Adam on the CPU in fp32), the coarse-grained hybrid on 2 gloo ranks with them and with its
loss curve, the share balancing, the digits experiment and the GPT forward table's tool."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from impl import capabilities
from impl.check import max_abs_diff
from impl.hybrid import (
    HybridOptions,
    build_trainer,
    host_initialised_model,
    loss_curves_match,
    offload,
    offload_tolerance,
    reference_weights,
)
from impl.hybrid.coarse import (
    CoarseHybrid,
    balance,
    balanced_shares,
    even_shares,
    worker_device,
)
from impl.hybrid.digits import (
    DigitsConfig,
    load_data,
    run_digits,
)
from impl.hybrid.gpt_forward import forward_ms
from impl.workloads import Batch, GPTConfig, build_model, loss_fn, make_batch, preset
from tests.multirank import run_ranks

ROOT = Path(__file__).parent.parent
WORKLOAD = "mlp_tiny"
STEPS = 4
LR = 1e-3
DIGITS_EPOCHS = 20  # about 2 s on one core; the study's 100 run in the benchmarks
needs_sklearn = pytest.mark.skipif(capabilities.missing_sklearn() is not None,
                                   reason=capabilities.missing_sklearn() or "")


def mlp_loss(outputs, targets):
    return loss_fn(preset(WORKLOAD), outputs, targets)


def mlp_batches(device: torch.device) -> list:
    """The same batches on any device: drawn on the CPU (a CUDA generator draws others)."""
    cpu = [make_batch(preset(WORKLOAD), torch.device("cpu"), 0, 0, step) for step in range(STEPS)]
    return [Batch(b.inputs.to(device), b.targets.to(device)) for b in cpu]


@pytest.fixture(scope="module")
def reference() -> list[torch.Tensor]:
    cpu = torch.device("cpu")
    return reference_weights(build_model(preset(WORKLOAD), cpu), mlp_loss, mlp_batches(cpu), LR)


def trained_weights(name: str, device: torch.device) -> tuple[list[torch.Tensor], object]:
    model = host_initialised_model(preset(WORKLOAD), device)
    trainer = build_trainer(name, model, mlp_loss, HybridOptions(lr=LR, cpu_threads=2))
    try:
        for batch in mlp_batches(device):
            trainer.step(batch)
        timeline = trainer.finish_timeline()
    finally:
        trainer.close()
    return [p.detach().cpu() for p in model.parameters()], timeline


def test_the_reference_moves_far_past_the_tolerance(reference):
    initial = list(build_model(preset(WORKLOAD), torch.device("cpu")).parameters())
    assert max_abs_diff(reference, initial) > 50 * offload_tolerance(LR, STEPS)


@pytest.mark.parametrize("name", ["device-adam", "offload-after-backward", "offload-overlap"])
def test_fine_grained_weights_equal_the_reference_on_cpu(reference, name):
    weights, timeline = trained_weights(name, torch.device("cpu"))
    # Same Adam on the same fp32 CPU tensors with the same gradients: bit for bit.
    assert max_abs_diff(weights, reference) == 0.0
    if name.startswith("offload"):
        adam = sorted(i.chunk for i in timeline.intervals if i.lane == "host")
        assert adam == list(range(len(reference))), "one host Adam task per parameter"


def test_fine_grained_pieces_give_the_same_weights(reference, monkeypatch):
    # 65536-element layers in pieces of 1000: 66 host Adam tasks per layer, same result.
    monkeypatch.setattr(offload, "PIECE_ELEMENTS", 1000)
    weights, timeline = trained_weights("offload-overlap", torch.device("cpu"))
    assert max_abs_diff(weights, reference) == 0.0
    pieces = [i for i in timeline.intervals if i.lane == "host"]
    assert len(pieces) == len(reference) * 66


@pytest.mark.gpu
@pytest.mark.skipif(capabilities.missing_gpu() is not None, reason=capabilities.missing_gpu() or "")
@pytest.mark.parametrize("name", ["device-adam", "offload-after-backward", "offload-overlap"])
def test_fine_grained_weights_on_gpu_within_tolerance(reference, name):
    weights, timeline = trained_weights(name, torch.device("cuda"))
    error = max_abs_diff(weights, reference)
    assert error <= offload_tolerance(LR, STEPS), f"{name}: {error:.3g}"
    if name.startswith("offload"):
        copies = [i for i in timeline.intervals if i.lane == "comm"]
        assert len(copies) == 2 * len(reference), "one copy to the host and one back per weight"


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
    shares = [20, 44]  # deliberately unbalanced: the weights must not depend on the shares
    batches = mlp_batches(device)  # the same batches for both workers
    model = host_initialised_model(preset(WORKLOAD), device)
    trainer = CoarseHybrid(model, mlp_loss, HybridOptions(lr=LR, cpu_threads=1), group, shares)
    losses = [trainer.step(batch).item() for batch in batches]
    probe = CoarseHybrid(host_initialised_model(preset(WORKLOAD), device), mlp_loss,
                         HybridOptions(lr=LR), group, shares)
    balanced = balance(probe, batches[0])
    return {"weights": [p.detach().cpu().numpy() for p in model.parameters()],
            "losses": losses, "balance": balanced, "device": device.type}


def test_coarse_grained_weights_equal_the_reference_on_two_ranks(reference):
    ranks = run_ranks(coarse_run, 2)
    for rank, result in enumerate(ranks):
        weights = [torch.from_numpy(w) for w in result["weights"]]
        assert max_abs_diff(weights, reference) <= offload_tolerance(LR, STEPS), f"rank {rank}"
    assert ranks[0]["weights"][0].tobytes() == ranks[1]["weights"][0].tobytes()
    assert ranks[0]["losses"] == ranks[1]["losses"], "both workers report the whole batch's loss"
    balanced = ranks[0]["balance"]
    assert balanced == ranks[1]["balance"]
    assert sum(balanced["shares"]) == preset(WORKLOAD).batch
    assert balanced["shares_before"] == [20, 44]


@pytest.mark.gpu
@pytest.mark.skipif(capabilities.missing_gpu() is not None, reason=capabilities.missing_gpu() or "")
def test_coarse_grained_gpu_and_cpu_workers_within_tolerance(reference):
    ranks = run_ranks(coarse_run, 2, True)
    assert [r["device"] for r in ranks] == ["cuda", "cpu"]
    for rank, result in enumerate(ranks):
        weights = [torch.from_numpy(w) for w in result["weights"]]
        error = max_abs_diff(weights, reference)
        assert error <= offload_tolerance(LR, STEPS), f"rank {rank}: {error:.3g}"


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
    assert result["curve"]["train_loss"] == digits_reference["curve"]["train_loss"]


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
