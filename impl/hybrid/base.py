"""The one contract of the hybrid study's training steps, and the plain one: all on one device.

Built from (model, loss, options); ``step(batch)`` does forward, backward and the Adam update
(the study's optimiser) and returns the loss; ``timeline`` describes the last step. The loss is
a callable (outputs, targets) -> scalar, so the same steps train the suite's MLP presets and
the study's digits classifier.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from impl.hybrid.buckets import BUCKET_ELEMENTS, check_bucket_elements
from impl.hybrid.host_adam import check_host_adam
from impl.timeline import TimedSteps, Timeline, TimelineRecorder
from impl.workloads import Batch

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# Where the offload casts low-precision values to and from the fp32 master (HybridOptions.cast).
CAST_ON_HOST, CAST_ON_DEVICE = "host", "device"
CAST_SIDES = (CAST_ON_HOST, CAST_ON_DEVICE)
# fp16's smallest normal is 6.1e-5: unscaled, 77% of the gradient elements of a 4-layer
# gpt_medium_fp16 are subnormal (all of a LayerNorm weight's), and the 24-layer decoder's
# gradients differed from the check's backward, at weights a rounding apart, by 0.087 of a
# tensor's largest value (one H100, 7 Dec). A loss scale lifts them; its power of two is
# chosen once from the model's first backward (calibrated_loss_scale): 2^14 lifts the
# decoder's, and overflows an MLP's.
# The scale is static (an update launched during backward cannot be skipped when a later
# gradient overflows, as a dynamic scale would): 1/1024 of fp16's range at the first step
# leaves the gradients room to grow a thousandfold over the run.
LARGEST_SCALED_GRADIENT = 2.0 ** 6
LARGEST_LOSS_SCALE = 2.0 ** 16  # DeepSpeed's first dynamic scale
# A decoder's Adam learning rate: GPT-3's for the model size nearest in log scale (Brown et al.
# 2020, Table 2.1: parameters, rate). At the MLPs' 1e-3 the 324M fp16 decoder diverged on one
# H100 with the plain update as with the delayed one: attention logits grew from 2.2 to 364 and
# gradients passed fp16's range at steps 72 and 59; at 3e-4 both trained 160 steps
# (results/h100x1/logs/20261207T1558-fp16-probe/).
GPT3_LEARNING_RATES = ((125e6, 6e-4), (350e6, 3e-4), (760e6, 2.5e-4), (1.3e9, 2e-4),
                       (2.7e9, 1.6e-4), (6.7e9, 1.2e-4), (13e9, 1e-4), (175e9, 0.6e-4))


class NonFiniteLoss(FloatingPointError):
    """A step's loss is NaN or infinite: the step stops before it changes any weight. Only the
    loss is checked (one sync a step), so an earlier step whose gradient overflowed shows here,
    a step or two later, with weights it already spoiled."""


@dataclass(frozen=True)
class HybridOptions:
    lr: float = 1e-3  # the study's Adam learning rate
    cpu_threads: int | None = None  # host threads for the CPU's share (None: every core)
    host_adam: str = "fused"  # the offload's host Adam: fused, foreach, single (host_adam.py)
    host_layout: str = "grouped"  # its threads: intra-op, pool or grouped (host_adam.py)
    # Where the offload casts bf16/fp16 values to and from the fp32 master: host or device
    # (impl/hybrid/offload.py); fp32 models have nothing to cast. The device: over the 22
    # committed GPU runs of gpt_small_bf16 its cast was the faster in 21 of each overlapped
    # offload's medians, and no interval favoured the host's (python -m impl.hybrid.cast_side).
    cast: str = CAST_ON_DEVICE
    # The offload's flat buckets (impl/hybrid/buckets.py): at most this many values of
    # consecutive small tensors moved and updated as one; 1 moves every tensor on its own.
    bucket_elements: int = BUCKET_ELEMENTS
    # What the loss is multiplied by before backward, divided out of the gradients in fp32
    # before Adam: a power of two, so both are exact. For fp16 models (calibrated_loss_scale).
    loss_scale: float = 1.0
    # The overlapped offloads' gradient hooks only record an event and hand the bucket to a
    # launching thread, which packs and copies it, waits for the delayed update's previous
    # Adam and starts host Adam: backward's thread never blocks, so it keeps the GPU fed. The
    # hooks do that work themselves where False (docs/hybrid.md: the delayed update's profile).
    hand_off: bool = False

    def __post_init__(self) -> None:
        # A NaN or negative lr would train every weight into garbage without an error.
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not (
                math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"hybrid lr={self.lr!r}: choose a finite number > 0")
        if self.cpu_threads is not None and (isinstance(self.cpu_threads, bool) or not isinstance(
                self.cpu_threads, int) or self.cpu_threads < 1):
            raise ValueError(f"hybrid cpu_threads={self.cpu_threads!r}: choose None (every "
                             "core) or an integer ≥ 1")
        check_host_adam(self.host_adam, self.host_layout, self.threads())
        if self.cast not in CAST_SIDES:
            raise ValueError(f"hybrid cast={self.cast!r}: choose one of {', '.join(CAST_SIDES)}")
        check_bucket_elements(self.bucket_elements)
        if isinstance(self.loss_scale, bool) or not isinstance(self.loss_scale, (int, float)) \
                or not (1 <= self.loss_scale <= LARGEST_LOSS_SCALE) \
                or math.frexp(self.loss_scale)[0] != 0.5:
            raise ValueError(f"hybrid loss_scale={self.loss_scale!r}: choose a power of two "
                             f"from 1 to 2^{int(math.log2(LARGEST_LOSS_SCALE))}")
        if not isinstance(self.hand_off, bool):
            raise ValueError(f"hybrid hand_off={self.hand_off!r}: choose True or False")

    def threads(self) -> int:
        return self.cpu_threads or os.cpu_count() or 1


def learning_rate(kind: str, parameters: int) -> float:
    """The study's Adam learning rate for a workload of ``kind`` (impl/workloads.py) with
    ``parameters``: a decoder's from GPT3_LEARNING_RATES, every other model's HybridOptions.lr."""
    if kind != "gpt":
        return HybridOptions.lr
    _, rate = min(GPT3_LEARNING_RATES, key=lambda size_rate: abs(math.log(size_rate[0]
                                                                          / parameters)))
    return rate


class Trainer(TimedSteps, ABC):
    name: str = ""
    #: True where the timeline mixes host readings with CUDA events (impl/timeline.py).
    host_marks: bool = False
    #: Steps between a gradient and the update that applies it: 0, or 1 for the delayed
    #: parameter update (the weights of step t + 1 do not yet hold step t's update).
    update_delay: int = 0
    #: True where the trainer takes a loss scale (HybridOptions.loss_scale) and unscales the
    #: gradients in fp32 before its update; the others refuse one.
    scales_loss: bool = False

    def __init__(self, model: nn.Module, loss: Loss, options: HybridOptions):
        self.model, self.loss, self.options = model, loss, options
        self.device = next(model.parameters()).device
        if options.loss_scale != 1.0 and not self.scales_loss:
            raise ValueError(f"{self.name}: loss_scale={options.loss_scale:g}: this trainer "
                             "updates the gradients as backward leaves them; choose 1")
        #: What the model's gradients are multiplied by: last_gradients divides it out.
        self.loss_scale = float(options.loss_scale)
        self.recorder = TimelineRecorder(self.device, host_marks=self.host_marks)
        self.timeline = Timeline()
        self.steps_done = 0

    @abstractmethod
    def _step(self, batch: Batch) -> torch.Tensor:
        """One training step; returns the loss (a tensor: reading it is a device sync)."""

    def close(self) -> None:
        """Release threads and hooks; the trainer cannot step afterwards."""

    def drain(self) -> None:
        """Wait for host work the last step left running (the delayed update's Adam), so that
        it does not run into whatever is timed next. The update stays pending."""

    def last_gradients(self) -> list[torch.Tensor]:
        """The gradients the last step computed, in ``model.parameters()`` order, as fp32 CPU
        tensors: what its update applies (now, or ``update_delay`` steps later)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return [p.grad.detach().to("cpu", torch.float32, copy=True).div_(self.loss_scale)
                for p in self.model.parameters()]

    def require_finite(self, loss: torch.Tensor) -> None:
        """Raise NonFiniteLoss if ``loss`` is NaN or infinite (a CPU-GPU sync point)."""
        if not torch.isfinite(loss).item():
            raise NonFiniteLoss(f"{self.name}: step {self.steps_done} (counting from 0) has a "
                                f"non-finite loss ({loss.item()}); stopped before this step "
                                "changed any weight: check the batch and the learning rate (an "
                                "earlier step's non-finite gradient shows here first)")

    def checked_weights(self) -> list[torch.Tensor]:
        """The weights the check compares with its fp32 reference, in ``model.parameters()``
        order, on the CPU: the fp32 master where the trainer keeps one that holds every update
        so far (so a bf16 model is checked as strictly as an fp32 one), else the model's."""
        return [p.detach().to("cpu", copy=True) for p in self.model.parameters()]

    def _forward_backward(self, batch: Batch, scale: float = 1.0,
                          check_loss: bool = True) -> torch.Tensor:
        """Forward and backward; with ``check_loss`` a non-finite loss stops the step before
        backward. That sync costs one kernel launch's gap, and it comes before the offload's
        first gradient hook, so neither its updates nor the delayed one of the previous step
        touch a weight."""
        start = self.recorder.mark()
        loss = self.loss(self.model(batch.inputs), batch.targets)
        forward_end = self.recorder.mark()
        self.recorder.add("compute", "forward", None, start, forward_end)
        if check_loss:
            self.require_finite(loss)
        scale *= self.loss_scale
        (loss * scale if scale != 1.0 else loss).backward()
        self.recorder.add("compute", "backward", None, forward_end, self.recorder.mark())
        return loss.detach()


def calibrated_loss_scale(model: nn.Module, loss: Loss, batch: Batch) -> float:
    """The loss scale of an fp16 ``model`` (1 for other dtypes): the largest power of two up to
    LARGEST_LOSS_SCALE that keeps the largest gradient of one unscaled backward of ``batch``
    under LARGEST_SCALED_GRADIENT. The gradients it leaves are cleared."""
    if next(model.parameters()).dtype != torch.float16:
        return 1.0
    loss(model(batch.inputs), batch.targets).backward()
    largest = max(p.grad.abs().max().item() for p in model.parameters() if p.grad is not None)
    for param in model.parameters():
        param.grad = None
    if not math.isfinite(largest):
        raise FloatingPointError("an fp16 backward without a loss scale overflows already: "
                                 "no loss scale keeps this model's gradients in range")
    if largest == 0:
        return LARGEST_LOSS_SCALE
    return float(2 ** min(math.log2(LARGEST_LOSS_SCALE),
                          max(0, math.floor(math.log2(LARGEST_SCALED_GRADIENT / largest)))))


class DeviceAdam(Trainer):
    """Everything on the model's device, the baseline a user would pick: torch.optim.Adam with
    its fused kernel. For bf16/fp16 models the same mixed-precision recipe as the offload (fp32
    master weights and Adam state, the low-precision weights cast from the master after each
    update), here all on the device, so both sides run the same algorithm: an fp16 model's
    loss scaled, its gradients unscaled in fp32."""

    name = "device-adam"
    scales_loss = True

    def __init__(self, model: nn.Module, loss: Loss, options: HybridOptions):
        super().__init__(model, loss, options)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.mixed = any(p.dtype != torch.float32 for p in self.params)
        self.masters = [p.detach().float() for p in self.params] if self.mixed else self.params
        self.optimizer = torch.optim.Adam(self.masters, lr=options.lr, fused=True)

    def checked_weights(self) -> list[torch.Tensor]:
        if not self.mixed:
            return super().checked_weights()
        by_param = {id(p): m for p, m in zip(self.params, self.masters)}
        return [by_param[id(p)].detach().to("cpu", copy=True) for p in self.model.parameters()]

    def _step(self, batch: Batch) -> torch.Tensor:
        for param in self.params:
            param.grad = None
        loss = self._forward_backward(batch)
        start = self.recorder.mark()
        if self.mixed:
            for master, param in zip(self.masters, self.params):
                master.grad = param.grad.float()
            if self.loss_scale != 1.0:
                torch._foreach_div_([m.grad for m in self.masters], self.loss_scale)
        self.optimizer.step()
        if self.mixed:  # the low-precision weights the next forward reads
            with torch.no_grad():
                torch._foreach_copy_(self.params, self.masters)
        self.recorder.add("compute", "update", None, start, self.recorder.mark())
        return loss


class DeviceAdamForeach(Trainer):
    """The suite's earlier baseline, kept as a labelled row: torch.optim.Adam's default
    (multi-tensor foreach kernels on a GPU) applied to the weights in their own dtype, bf16
    Adam state included for a bf16 model. It takes no loss scale, so it is no fp16 recipe:
    unscaled, most of a decoder's fp16 gradients are subnormal (LARGEST_SCALED_GRADIENT)."""

    name = "device-adam-foreach"

    def __init__(self, model: nn.Module, loss: Loss, options: HybridOptions):
        super().__init__(model, loss, options)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=options.lr)

    def _step(self, batch: Batch) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._forward_backward(batch)
        start = self.recorder.mark()
        self.optimizer.step()
        self.recorder.add("compute", "update", None, start, self.recorder.mark())
        return loss
