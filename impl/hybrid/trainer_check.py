"""The hybrid trainers' check: right gradients, and the right update applied to them.

A GPU cannot reproduce a CPU run of Adam: the two backwards round differently (other kernels,
other reduction orders), and Adam's first steps move a weight by about ±lr whatever the size of
its gradient, so a near-zero gradient element whose sign the rounding flips moves its weight by
2·lr the other way. Weights after N steps on the GPU therefore differ from the CPU's by whole
multiples of lr, with nothing wrong. The check splits what can be compared exactly from what
can only be compared up to rounding, step by step:

1. gradients: the trainer's gradients of step t (``Trainer.last_gradients``) against a
   backward of the same batch at the reference's weights, in the trainer's dtype: for fp32 an
   IEEE fp32 backward (no TF32) within a rounding tolerance relative to each tensor's largest
   value (``gradient_tolerance``); for bf16/fp16 a backward of the reference's weights rounded
   to that dtype (an fp16 backward with the trainer's loss scale, divided out in fp32), which
   the trainer's must match within one rounding (``ROUNDING_MARGIN`` u):
   against an fp32 backward a correct 8-layer bf16 MLP is off by up to 0.04 of the largest
   value and one doubled update by 0.13, so no fp32 tolerance tells them apart, while the
   same-dtype backward gives 0 and 0.14 (mlp_tiny in bf16 on the CPU).
2. update: the reference applies torch's Adam (fp32) to the trainer's own gradients, the
   gradient of step t − ``update_delay`` at step t (the delayed update applies each one a step
   late), and the trainer's weights after every step (its fp32 master where it keeps one that
   is up to date: ``Trainer.checked_weights``) must equal the reference's within
   ``weight_tolerance``: 1% of lr a step, where a missing, doubled, stale or misplaced update is
   off by about lr.

The reference follows its own chain of weights: it never copies the trainer's. It may live on
the CPU or on the trainer's GPU: on a GPU it is the same fp32 arithmetic, in fp32 kernels other
than the trainer's low-precision ones, and a 403M-parameter member's check takes seconds instead
of the minutes its CPU backward and Adam took on a GPU machine's host.
"""

from __future__ import annotations

import copy
import math
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.optim.adam import adam

from impl.hybrid.base import Loss, Trainer
from impl.workloads import Batch

ROUNDING_MARGIN = 8  # the bound's constant: rounding errors seldom reach sqrt(K)·u each


class TrainingCheckFailed(AssertionError):
    """A hybrid trainer's gradients or update differ from the reference's."""


def unit_roundoff(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps / 2


def gradient_tolerance(dtype: torch.dtype, longest_reduction: int, layers: int) -> float:
    """Largest |g − g_ref| / max|g_ref| per tensor that rounding explains:
    ROUNDING_MARGIN · layers · sqrt(K) · u, for reductions of at most K terms in ``dtype``
    (unit roundoff u) through ``layers`` layers of backward, each adding its own rounding."""
    return ROUNDING_MARGIN * layers * math.sqrt(longest_reduction) * unit_roundoff(dtype)


def low_precision_gradient_tolerance(dtype: torch.dtype) -> float:
    """Largest |g − g_ref| / max|g_ref| against a backward in the trainer's own low-precision
    dtype at the same weights rounded: one rounding (u) with the margin; the same kernels on the
    same weights give 0, and a weight rounded the other way from a master one fp32 rounding off
    the reference's moves a gradient by far less than a rounding of it."""
    return ROUNDING_MARGIN * unit_roundoff(dtype)


def weight_tolerance(lr: float, steps: int, dtype: torch.dtype, largest_weight: float) -> float:
    """1% of lr a step (a wrong update is off by about lr), plus the weights' own rounding in
    ``dtype`` where the trainer's weights are not fp32 like the reference's."""
    return 0.01 * lr * steps + 2 * unit_roundoff(dtype) * largest_weight


@dataclass(frozen=True)
class TrainingCheck:
    steps: int
    update_delay: int
    gradient_error: float
    gradient_tolerance: float
    weight_error: float
    weight_tolerance: float
    failure: str | None  # the first step's failure, in words; None when every step passed
    loss_scale: float = 1.0  # the trainer's (Trainer.loss_scale), in the reference's backward too

    def to_json(self) -> dict:
        return asdict(self)

    def require(self) -> TrainingCheck:
        """Raise TrainingCheckFailed if a step failed; returns the check otherwise."""
        if self.failure:
            raise TrainingCheckFailed(self.failure)
        return self


def _relative_error(candidate: torch.Tensor, reference: torch.Tensor) -> float:
    """max |candidate − reference| / max |reference|; inf where either is not finite (a NaN
    would compare false against every tolerance and pass)."""
    scale = reference.abs().max().item()
    error = (candidate - reference).abs().max().item()
    if not (math.isfinite(scale) and math.isfinite(error)):
        return math.inf
    return error / scale if scale > 0 else error


@contextmanager
def ieee_fp32() -> Iterator[None]:
    """fp32 matmuls in full fp32 (no TF32) while the reference computes, whatever the run set."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def reference_gradients(reference: nn.Module, loss: Loss, batch: Batch,
                        dtype: torch.dtype, loss_scale: float = 1.0) -> list[torch.Tensor]:
    """The gradients of ``batch`` at the reference's weights, in ``dtype``: an IEEE fp32 backward
    of the reference itself, or one of a copy of it rounded to ``dtype`` (returned in fp32),
    with the trainer's loss scale (``Trainer.loss_scale``) and divided by it."""
    where = next(reference.parameters()).device
    inputs = batch.inputs.to(where)  # token ids stay integers
    if dtype == torch.float32:
        for param in reference.parameters():
            param.grad = None
        with ieee_fp32():
            loss(reference(inputs.float() if inputs.is_floating_point() else inputs),
                 batch.targets.to(where)).backward()
        return [p.grad for p in reference.parameters()]
    rounded = copy.deepcopy(reference).to(dtype)
    (loss(rounded(inputs.to(dtype) if inputs.is_floating_point() else inputs),
          batch.targets.to(where)) * loss_scale).backward()
    return [p.grad.float().div_(loss_scale) for p in rounded.parameters()]


def gradient_failure(name: str, step: int, dtype: torch.dtype, error: float,
                     tolerance: float, worst: str = "") -> str:
    precision = "an fp32" if dtype == torch.float32 else f"a {str(dtype).split('.')[-1]}"
    return (f"{name}: gradients of step {step} differ from {precision} backward at the "
            f"reference's weights by {error:.3g} of their largest value (rounding tolerance "
            f"{tolerance:.3g}){worst}")


def worst_tensor(errors: Sequence[float], expected: Sequence[torch.Tensor]) -> str:
    """Which tensor is furthest off, for a failure's message: where an error comes from
    (a tensor of tiny gradients, a whole layer) is most of what it says."""
    index = max(range(len(errors)), key=lambda i: errors[i])
    return (f"; worst: parameter {index} of shape {tuple(expected[index].shape)}, its largest "
            f"expected gradient {expected[index].abs().max().item():.3g}")


def tolerance_for(dtype: torch.dtype, longest_reduction: int, layers: int) -> float:
    if dtype == torch.float32:
        return gradient_tolerance(dtype, longest_reduction, layers)
    return low_precision_gradient_tolerance(dtype)


def check_training(name: str, trainer: Trainer, reference: nn.Module, loss: Loss,
                   batches: Sequence[Batch], longest_reduction: int) -> TrainingCheck:
    """Step ``trainer`` through ``batches``, checking every step as the module says.

    ``reference`` is an fp32 copy of the trainer's model before its first step, on the CPU or
    the trainer's device (changed here; the comparisons run where it is);
    ``longest_reduction`` the most terms any gradient element sums (batch rows or layer width).
    Every step runs even after a failure (the coarse-grained hybrid's workers must make the
    same exchanges); ``failure`` names the first failing step and its error.
    """
    params = list(reference.parameters())
    where = params[0].device
    optimizer = torch.optim.Adam(params, lr=trainer.options.lr)
    grad_dtype = next(trainer.model.parameters()).dtype
    grad_tolerance = tolerance_for(grad_dtype, longest_reduction,
                                   sum(p.dim() > 1 for p in params))
    waiting: deque[list[torch.Tensor]] = deque()
    grad_error = weight_error = tolerance = 0.0
    failure = None
    for step, batch in enumerate(batches, 1):
        trainer.step(batch)
        trainer.drain()
        computed = [g.to(where) for g in trainer.last_gradients()]
        expected = reference_gradients(reference, loss, batch, grad_dtype, trainer.loss_scale)
        errors = list(map(_relative_error, computed, expected))
        grad_error = max(grad_error, *errors)
        if grad_error > grad_tolerance and failure is None:
            failure = gradient_failure(name, step, grad_dtype, grad_error, grad_tolerance,
                                       worst_tensor(errors, expected))
        waiting.append(computed)
        if len(waiting) > trainer.update_delay:
            for param, grad in zip(params, waiting.popleft()):
                param.grad = grad
            optimizer.step()
        checked = [w.to(where) for w in trainer.checked_weights()]
        if not trainer.update_delay and failure is None:
            # The model's weights must be the checked ones in the model's dtype, bit for bit:
            # a master updated right but copied back wrong fails here.
            copied = [p.detach().to(where) for p in trainer.model.parameters()]
            if not all(torch.equal(w, c.to(w.dtype)) for w, c in zip(copied, checked)):
                failure = (f"{name}: weights after step {step} are not its fp32 master's "
                           "rounded to the model's dtype")
        weights = [w.float() for w in checked]
        largest = max(w.abs().max().item() for w in weights)
        tolerance = weight_tolerance(trainer.options.lr, step, checked[0].dtype, largest)
        weight_error = max(weight_error, *((w - p.detach()).abs().max().item()
                                           for w, p in zip(weights, params)))
        if weight_error > tolerance and failure is None:
            late = f", {trainer.update_delay} step late" if trainer.update_delay else ""
            failure = (
                f"{name}: weights after step {step} differ from Adam (fp32) applied to "
                f"the trainer's own gradients{late} by {weight_error:.3g} (tolerance "
                f"{tolerance:.3g}: 1% of lr a step)")
    return TrainingCheck(len(batches), trainer.update_delay, grad_error, grad_tolerance,
                         weight_error, tolerance, failure, trainer.loss_scale)


def check_first_step(name: str, trainer: Trainer, reference: nn.Module, loss: Loss, batch: Batch,
                     longest_reduction: int) -> TrainingCheck:
    """``check_training``'s first step for a model too large for an fp32 reference holding
    Adam's whole state beside it (the model only the offload can train): the gradients as
    there, and the update against Adam's first step applied to each tensor
    alone, from zero moments, one tensor's state at a time. Needs ``update_delay`` 0."""
    if trainer.update_delay:
        raise ValueError(f"{name}: the first-step check needs an update that is not delayed")
    params = list(reference.parameters())
    where = params[0].device
    grad_dtype = next(trainer.model.parameters()).dtype
    grad_tolerance = tolerance_for(grad_dtype, longest_reduction,
                                   sum(p.dim() > 1 for p in params))
    trainer.step(batch)
    trainer.drain()
    expected_grads = reference_gradients(reference, loss, batch, grad_dtype, trainer.loss_scale)
    failure, grad_error, weight_error, largest = None, 0.0, 0.0, 0.0
    updated = []
    for param, grad, expected_grad in zip(params, trainer.last_gradients(), expected_grads):
        grad = grad.to(where)
        grad_error = max(grad_error, _relative_error(grad, expected_grad))
        expected = param.detach().clone()
        adam([expected], [grad], [torch.zeros_like(expected)], [torch.zeros_like(expected)], [],
             [torch.tensor(0.0)], foreach=False, fused=False, amsgrad=False, beta1=0.9,
             beta2=0.999, lr=trainer.options.lr, weight_decay=0.0, eps=1e-8, maximize=False)
        updated.append(expected)
    del expected_grads
    if grad_error > grad_tolerance:
        failure = gradient_failure(name, 1, grad_dtype, grad_error, grad_tolerance)
    weights = zip(trainer.checked_weights(), trainer.model.parameters(), updated)
    for checked, copied, expected in weights:
        checked = checked.to(where)
        if failure is None and not torch.equal(copied.detach(), checked.to(copied.dtype)):
            failure = f"{name}: weights after step 1 are not its fp32 master's rounded"
        largest = max(largest, checked.abs().max().item())
        weight_error = max(weight_error, (checked.float() - expected).abs().max().item())
    tolerance = weight_tolerance(trainer.options.lr, 1, torch.float32, largest)
    if weight_error > tolerance and failure is None:
        failure = (f"{name}: weights after step 1 differ from Adam's first step (fp32) on the "
                   f"trainer's own gradients by {weight_error:.3g} (tolerance {tolerance:.3g})")
    return TrainingCheck(1, 0, grad_error, grad_tolerance, weight_error, tolerance, failure,
                         trainer.loss_scale)
