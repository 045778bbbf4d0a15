"""The study's MLP experiment on real handwritten digits: Adam, lr 1e-3, batch 100, 100 epochs.

Data: scikit-learn's ``load_digits`` (1797 images of 8×8 pixels, shipped with the package, no
download), pixels scaled to [0, 1], a seeded 80/20 split; or a local MNIST file given by path
(an ``.npz`` with ``x_train``, ``y_train``, ``x_test``, ``y_test``, as Keras ships it). The
classifier: inputs → 256 → 256 → 10, ReLU, cross-entropy (the study names no widths; these
are in the preset's name). Each epoch draws a seeded permutation and drops the last partial
batch, so every step has the study's 100 rows and the coarse-grained hybrid can share them.
"""

from __future__ import annotations

import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from impl import capabilities
from impl.hybrid.base import Trainer
from impl.rows.kinds import DIGITS_CURVE
from impl.rows.study_records import BALANCE
from impl.threads import fastest_threads
from impl.workloads import Batch

NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
CLASSES = 10


@dataclass(frozen=True)
class DigitsConfig:
    name: str = "digits_mlp_h256x2_b100"
    hidden: tuple[int, ...] = (256, 256)
    batch: int = 100
    lr: float = 1e-3
    epochs: int = 100  # the study's; the suite's quick and CPU modes run fewer (they say so)
    test_fraction: float = 0.2
    seed: int = 0


@dataclass(frozen=True)
class DigitsData:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    source: str

    def to(self, device: torch.device) -> DigitsData:
        return DigitsData(self.x_train.to(device), self.y_train.to(device),
                          self.x_test.to(device), self.y_test.to(device), self.source)


def load_data(path: str | Path | None = None, config: DigitsConfig = DigitsConfig()
              ) -> DigitsData:
    """scikit-learn's digits split 80/20 with the config's seed, or a local MNIST ``.npz``."""
    if path is not None:
        return _load_npz(Path(path))
    if reason := capabilities.missing_sklearn():
        raise RuntimeError(reason)
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.from_numpy(digits.data.astype(np.float32) / 16.0)
    labels = torch.from_numpy(digits.target.astype(np.int64))
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(config.seed))
    test = round(len(labels) * config.test_fraction)
    train_rows, test_rows = order[test:], order[:test]
    return DigitsData(images[train_rows], labels[train_rows], images[test_rows],
                      labels[test_rows], "sklearn.datasets.load_digits (8×8, 1797 images)")


def _load_npz(path: Path) -> DigitsData:
    """The four arrays of an MNIST ``.npz``; anything else is a ValueError naming the file and
    what is wrong (one line: a ``.npy``, a corrupt archive, empty or mismatched arrays)."""
    expected = f"give an .npz with {', '.join(NPZ_KEYS)}"
    if not path.is_file():
        raise ValueError(f"MNIST path {str(path)!r} is not a file; {expected}")
    unreadable = (OSError, ValueError, EOFError, zipfile.BadZipFile)  # not numpy, cut, pickled
    try:
        archive = np.load(path, allow_pickle=False)
    except unreadable as error:
        raise ValueError(f"{path}: not a readable .npz archive ({error}); {expected}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: one array of shape {archive.shape} (a .npy file), not an "
                         f".npz archive; {expected}")
    with archive:
        if missing := [k for k in NPZ_KEYS if k not in archive.files]:
            raise ValueError(f"{path}: no {', '.join(missing)} in the archive (it has "
                             f"{', '.join(archive.files) or 'nothing'}); expected {NPZ_KEYS}")
        try:
            x_train, y_train, x_test, y_test = (archive[k] for k in NPZ_KEYS)
        except unreadable as error:
            raise ValueError(f"{path}: cannot read its arrays ({error}); {expected}") from None
    _check_split(path, "train", x_train, y_train)
    _check_split(path, "test", x_test, y_test)
    if x_train.shape[1:] != x_test.shape[1:]:
        raise ValueError(f"{path}: x_train images are {x_train.shape[1:]} but x_test images "
                         f"{x_test.shape[1:]}; both splits need the same pixels")

    def images(x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(x.reshape(len(x), -1).astype(np.float32) / 255.0)

    return DigitsData(images(x_train), torch.from_numpy(y_train.astype(np.int64)),
                      images(x_test), torch.from_numpy(y_test.astype(np.int64)),
                      f"{path} ({x_train.shape[1:]} pixels, {len(y_train)} training images)")


def _check_split(path: Path, split: str, x: np.ndarray, y: np.ndarray) -> None:
    """ValueError naming the array unless x holds ≥ 1 numeric image and y one label from 0
    to 9 per image."""
    if x.ndim < 2 or len(x) == 0 or not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"{path}: x_{split} has shape {x.shape} and dtype {x.dtype}; expected "
                         "one or more numeric images (images × pixels…)")
    if y.shape != (len(x),) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"{path}: y_{split} has shape {y.shape} and dtype {y.dtype}; expected "
                         f"{len(x)} integer labels, one per image of x_{split}")
    if y.min() < 0 or y.max() >= CLASSES:
        raise ValueError(f"{path}: y_{split} holds labels {y.min()} to {y.max()}; expected 0 "
                         f"to {CLASSES - 1}")


def build_classifier(config: DigitsConfig, inputs: int, device: torch.device,
                     seed: int = 0) -> nn.Sequential:
    """inputs → hidden… → 10, ReLU between; identical weights for the same seed."""
    widths = [inputs, *config.hidden, CLASSES]
    layers: list[nn.Module] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for a, b in zip(widths, widths[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        model = nn.Sequential(*layers[:-1])  # no ReLU after the logits
    return model.to(device)


def classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels)


def classifier_threads(data: DigitsData, config: DigitsConfig, most: int) -> tuple[int, dict]:
    """The CPU thread count, up to ``most``, at which the classifier's training step (forward,
    backward, Adam) runs fastest here, and the probe (impl/threads.py): the classifier is small,
    and every core of a 64-core GPU host made its epoch 1.2–1.6 s, against 0.015 s on the
    32-core ones."""
    cpu = torch.device("cpu")
    data = data.to(cpu)
    model = build_classifier(config, data.x_train.shape[1], cpu, config.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    batch = epoch_batches(data, config, 0)[0]

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        classification_loss(model(batch.inputs), batch.targets).backward()
        optimizer.step()

    return fastest_threads(step, most)


def epoch_batches(data: DigitsData, config: DigitsConfig, epoch: int) -> list[Batch]:
    """This epoch's batches of ``config.batch`` rows in a seeded order, last partial dropped."""
    generator = torch.Generator().manual_seed(config.seed * 1_000_003 + epoch)
    order = torch.randperm(len(data.y_train), generator=generator).to(data.x_train.device)
    full = len(order) // config.batch * config.batch
    return [Batch(data.x_train[rows], data.y_train[rows])
            for rows in order[:full].split(config.batch)]


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of ``model`` on (x, y)."""
    logits = model(x)
    return (classification_loss(logits, y).item(),
            (logits.argmax(dim=1) == y).float().mean().item())


def train_curve(trainer: Trainer, data: DigitsData, config: DigitsConfig,
                epochs: int) -> dict:
    """Train ``epochs`` epochs; per epoch the mean training loss, test loss and accuracy."""
    if epochs < 1:
        raise ValueError(f"epochs={epochs}: choose an integer ≥ 1 (the study ran 100)")
    curve: dict[str, list[float]] = {"train_loss": [], "test_loss": [], "test_accuracy": [],
                                     "epoch_s": []}
    for epoch in range(epochs):
        started = time.perf_counter()
        losses = [trainer.step(batch) for batch in epoch_batches(data, config, epoch)]
        curve["train_loss"].append(torch.stack(losses).mean().item())  # one sync per epoch
        curve["epoch_s"].append(time.perf_counter() - started)
        test_loss, accuracy = evaluate(trainer.model, data.x_test, data.y_test)
        curve["test_loss"].append(test_loss)
        curve["test_accuracy"].append(accuracy)
    return curve


DIGITS_VARIANTS = ("cpu", "gpu", "coarse-hybrid", "offload-overlap")
ROW = DIGITS_CURVE.names  # run_digits's result names its fields as the digits_curve row does


def run_digits(variant: str, data: DigitsData, config: DigitsConfig, epochs: int,
               threads: int, group=None) -> dict:
    """One curve of the study's experiment: ``variant`` trained from the config's seed.

    cpu: model and Adam on the CPU. gpu: both on the GPU. offload-overlap: the fine-grained
    hybrid (GPU model, Adam on the CPU; on a CPU-only machine the model stays on the CPU).
    coarse-hybrid: this rank's worker of the coarse-grained hybrid over ``group`` (every rank
    calls it), shares balanced first on a copy of the model, so training starts balanced.
    """
    from impl.hybrid import HybridOptions, build_trainer
    from impl.hybrid.coarse import CoarseHybrid, balance, even_shares, worker_device

    if variant not in DIGITS_VARIANTS:
        raise ValueError(f"unknown digits variant {variant!r}; choose one of {DIGITS_VARIANTS}")
    options = HybridOptions(lr=config.lr, cpu_threads=threads)
    inputs = data.x_train.shape[1]
    info: dict = {}
    if variant == "coarse-hybrid":
        import torch.distributed as dist

        device = worker_device(dist.get_rank(group))
        data = data.to(device)
        shares = even_shares(config.batch, dist.get_world_size(group))
        probe = CoarseHybrid(build_classifier(config, inputs, device, config.seed),
                             classification_loss, options, group, shares)
        balanced = info[ROW.balance] = balance(probe, epoch_batches(data, config, 0)[0])
        trainer = CoarseHybrid(build_classifier(config, inputs, device, config.seed),
                               classification_loss, options, group, balanced[BALANCE.shares])
    else:
        device = torch.device("cuda" if variant == "gpu" or (
            variant == "offload-overlap" and torch.cuda.is_available()) else "cpu")
        data = data.to(device)
        trainer = build_trainer("device-adam" if variant in ("cpu", "gpu") else variant,
                                build_classifier(config, inputs, device, config.seed),
                                classification_loss, options)
    try:
        curve = train_curve(trainer, data, config, epochs)
    finally:
        trainer.close()
    return {ROW.variant: variant, ROW.device: device.type, ROW.epochs: epochs, ROW.curve: curve,
            **info}
