"""CPU–GPU hybrid training, both strategies of the study, and their checks.

- fine-grained (offload.py): the GPU runs forward and backward, each gradient goes to the host
  as soon as it exists, Adam runs on the CPU (host_adam.py) while backward goes on; with the
  delayed parameter update (offload-overlap-dpu) each update lands one step late;
- coarse-grained (coarse.py): a GPU worker and a CPU worker train on shares of each batch,
  gradients summed over gloo every step, shares balanced from measured times.

    trainer = build_trainer("offload-overlap", model, loss, HybridOptions(lr=1e-3))
    loss_value = trainer.step(batch)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from impl.hybrid.base import DeviceAdam, DeviceAdamForeach, HybridOptions, Loss, Trainer
from impl.hybrid.offload import OffloadAfterBackward, OffloadOverlap, OffloadOverlapDelayed
from impl.hybrid.trainer_check import TrainingCheck, TrainingCheckFailed, check_training
from impl.rows.declare import Field
from impl.rows.kinds import HYBRID_STEP
from impl.workloads import WorkloadConfig, build_model

TRAINERS: dict[str, type[Trainer]] = {
    "device-adam": DeviceAdam,
    "device-adam-foreach": DeviceAdamForeach,
    "offload-after-backward": OffloadAfterBackward,
    "offload-overlap": OffloadOverlap,
    "offload-overlap-dpu": OffloadOverlapDelayed,
}

_FIELD = HYBRID_STEP.field
HYBRID_FIELDS: tuple[Field, ...] = (
    _FIELD.step_ms, _FIELD.residual_imbalance, _FIELD.gradient_error, _FIELD.weight_error,
    _FIELD.hidden_host_fraction)  # defined with the hybrid row (impl/rows/kinds.py)


def host_initialised_model(workload: WorkloadConfig, device: torch.device,
                           seed: int = 0) -> nn.Module:
    """The workload's model initialised on the CPU, then moved to ``device``.

    ``impl.workloads.build_model`` initialises on the device itself, and a CUDA generator draws
    other numbers than the CPU's: a GPU worker and a CPU worker, or a GPU run and its CPU
    reference, must start from the same weights.
    """
    return build_model(workload, torch.device("cpu"), seed).to(device)


def build_trainer(name: str, model: nn.Module, loss: Loss, options: HybridOptions) -> Trainer:
    if name not in TRAINERS:
        raise ValueError(f"unknown hybrid trainer {name!r}; choose one of {list(TRAINERS)}")
    return TRAINERS[name](model, loss, options)


def loss_curves_match(candidate: Sequence[float], reference: Sequence[float],
                      tolerance: float = 0.05) -> float:
    """The coarse-grained hybrid's criterion: per epoch, the mean training losses of the two
    runs differ by at most ``tolerance`` × the reference's first-epoch loss. Returns the largest
    difference in those units; the caller compares it with ``tolerance``.

    The hybrid computes the reference's full-batch gradient in two parts summed in another
    order (and, with a GPU, other kernels), so its weights leave the reference's by rounding
    that training then amplifies; the curves must still coincide well within the loss's own
    fall from the first epoch to the last.
    """
    if len(candidate) != len(reference) or not reference:
        raise ValueError(f"curves of {len(candidate)} and {len(reference)} epochs cannot be "
                         "compared")
    return max(abs(a - b) for a, b in zip(candidate, reference)) / reference[0]


__all__ = ["HYBRID_FIELDS", "TRAINERS", "HybridOptions", "Trainer", "TrainingCheck",
           "TrainingCheckFailed", "build_trainer", "check_training", "host_initialised_model",
           "loss_curves_match"]
