"""CPU–GPU hybrid training, both strategies of the study, and their checks.

- fine-grained (offload.py): the GPU runs forward and backward, each gradient goes to the host
  as soon as it exists, Adam runs on the CPU in parallel threads while backward goes on;
- coarse-grained (coarse.py): a GPU worker and a CPU worker train on shares of each batch,
  gradients summed over gloo every step, shares balanced from measured times.

    trainer = build_trainer("offload-overlap", model, loss, HybridOptions(lr=1e-3))
    loss_value = trainer.step(batch)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from impl.hybrid.base import DeviceAdam, HybridOptions, Loss, Trainer
from impl.hybrid.offload import OffloadAfterBackward, OffloadOverlap
from impl.metrics import Field
from impl.workloads import Batch, MLPConfig, WorkloadConfig, build_model

TRAINERS: dict[str, type[Trainer]] = {
    "device-adam": DeviceAdam,
    "offload-after-backward": OffloadAfterBackward,
    "offload-overlap": OffloadOverlap,
}

HYBRID_FIELDS: tuple[Field, ...] = (
    Field("step_ms", "ms", "Median time of one training step (forward, backward, Adam update, "
          "and for the hybrids the copies and the host's work) over the timed rounds.", False),
    Field("residual_imbalance", "", "imbalance = |t_gpu − t_cpu| / max(t_gpu, t_cpu) of the two "
          "workers' forward-and-backward times per step after the shares were balanced "
          "(median over rounds).", False),
    Field("max_abs_err_vs_reference", "", "Largest absolute weight difference to the reference "
          "(the same training with Adam on the CPU in fp32) after the check's steps.", False),
)


def mlp_4096x8_b8192() -> MLPConfig:
    """The offload comparison's GPU shape: 134M fp32 parameters, whose host Adam (about 3.8 GB
    of traffic) and copies (0.5 GB each way) take about as long as the GPU's backward of a
    batch of 8192, so overlapping them has something to hide."""
    return MLPConfig("mlp_4096x8_b8192", width=4096, depth=8, batch=8192)


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


def reference_weights(model: nn.Module, loss: Loss, batches: Sequence[Batch],
                      lr: float) -> list[torch.Tensor]:
    """The reference: the same steps with the model and Adam on the CPU, fp32."""
    model = model.to("cpu", torch.float32)
    trainer = DeviceAdam(model, loss, HybridOptions(lr=lr))
    for batch in batches:
        trainer.step(Batch(batch.inputs.cpu().float(), batch.targets.cpu()))
    return [p.detach().clone() for p in model.parameters()]


def offload_tolerance(lr: float, steps: int) -> float:
    """How far the fine-grained hybrid's weights may be from the reference's: 1% of lr a step.

    Adam moves every weight by about lr per step (|m̂ / (√v̂ + ε)| is close to 1 in the first
    steps), so a missing, doubled, stale or misplaced update is off by about lr. The hybrid's
    Adam is the reference's (torch.optim.Adam on fp32 CPU tensors); only its gradients can
    differ, by the reduction order of the GPU's kernels (about 1e-6 relative), which changes an
    update by a far smaller fraction of lr.
    """
    return 0.01 * lr * steps


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


__all__ = ["HYBRID_FIELDS", "TRAINERS", "HybridOptions", "Trainer", "build_trainer",
           "host_initialised_model", "loss_curves_match", "mlp_4096x8_b8192", "offload_tolerance",
           "reference_weights"]
