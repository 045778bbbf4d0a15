"""The fine-grained CPU–GPU hybrid (ZeRO-Offload style): the GPU computes, the CPU updates.

Each parameter's gradient leaves the GPU the moment backward has produced it: a
post-accumulate-grad hook records an event on the compute stream and a side stream copies the
gradient into pinned host memory piece by piece (host_adam.PIECE_ELEMENTS), one event per
piece. Host Adam (host_adam.py) updates each piece as soon as its copy has landed, and the
piece's new weights go back to the GPU on a second side stream straight from the pinned fp32
master, while the GPU goes on with the rest of backward. The step ends when every update has
been issued; the compute stream then waits for the copies back, so the next forward reads the
updated weights without a host-side sync. What cannot be hidden is the tail: the update of the
last gradient backward produces (the first layer's), which the next forward needs first.

``OffloadOverlapDelayed`` is the one-step delayed parameter update (DPU, ZeRO-Offload §5):
the update of step t's gradient is copied to the GPU during step t + 1's backward, once that
step has last read the weight, so host Adam has a whole step to run and no tail is exposed.
It is a different algorithm (the weights of step t + 1 do not hold step t's update), checked
against the same training with every update applied one step late (``update_delay = 1``).

Mixed precision (bf16 or fp16 weights and gradients on the GPU, ZeRO-Offload's mode): the
master, m and v stay fp32 on the host and each value is cast once each way, on the side
``HybridOptions.cast`` names. On the host (the default), the copies carry the low-precision
values and host Adam's thread casts each gradient piece into a reused fp32 piece before the
update and each updated piece into a pinned staging piece after it, spread over its intra-op
threads (impl/hybrid/host_casts.py times these casts). On the device, the copy stream casts the
gradient to fp32 before its copy, and the copy-back stream casts each fp32 master piece after
it lands.

``OffloadAfterBackward`` is the overlapped one without overlap: the whole backward first, then
the same copies and the same host Adam. On a CPU-only machine all of them run with the model
on the CPU (host copies instead of device copies): the correctness tests' configuration.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future

import torch
from torch import nn

from impl.hybrid.base import HybridOptions, Loss, Trainer
from impl.hybrid.host_adam import HostAdam
from impl.workloads import Batch


class OffloadOverlap(Trainer):
    name = "offload-overlap"
    overlap = True

    def __init__(self, model: nn.Module, loss: Loss, options: HybridOptions):
        self.cuda = next(model.parameters()).device.type == "cuda"
        self.host_marks = self.cuda  # host Adam intervals beside CUDA events
        super().__init__(model, loss, options)
        # Reverse registration order: the order backward finishes the gradients.
        self.params = [p for p in reversed(list(model.parameters())) if p.requires_grad]
        self.index = {id(p): i for i, p in enumerate(self.params)}
        pin = self.cuda  # pinned memory needs CUDA; it is what lets the copies run async
        # Low-precision (bf16, fp16) parameters meet the fp32 master through a cast on one side
        # of the copies (``HybridOptions.cast``): on the host, in host Adam's threads, so the
        # copies carry 2 bytes a value; or on the GPU, so they carry 4.
        self.cast_on_device = self.cuda and options.cast == "device"
        self.host_grads = [torch.empty(p.numel(), pin_memory=pin,
                                       dtype=torch.float32 if self.cast_on_device else p.dtype)
                           for p in self.params]
        self.adam = HostAdam(self.params, options.lr, options.host_adam, options.host_layout,
                             options.threads(), pinned=pin)
        # The updated weights in the parameter's dtype, cast from the master by host Adam's
        # thread right after each piece's update; None where the master itself is copied.
        self.staging = [None if p.dtype == torch.float32 or self.cast_on_device else
                        torch.empty(p.numel(), dtype=p.dtype, pin_memory=pin)
                        for p in self.params]
        self.copy_out = torch.cuda.Stream(self.device) if self.cuda else None
        self.copy_in = torch.cuda.Stream(self.device) if self.cuda else None
        # Per piece, the copy back that last read its master: the next update must wait for it.
        self.copied_in: list[list[torch.cuda.Event | None]] = [
            [None] * len(spans) for spans in self.adam.spans]
        self.hooks = [p.register_post_accumulate_grad_hook(self._gradient_ready)
                      for p in self.params] if self.overlap else []
        self.pending: dict[int, list[Future]] = {}  # per parameter: updates not waited for

    def _step(self, batch: Batch) -> torch.Tensor:
        loss = self._forward_backward(batch)
        if not self.overlap:
            for param in self.params:
                self._gradient_ready(param)
        if not self.update_delay:
            self.drain()  # the host waits for Adam; errors of its threads surface here
        if self.cuda:
            torch.cuda.current_stream(self.device).wait_stream(self.copy_in)
        return loss

    def drain(self) -> None:
        for futures in self.pending.values():
            for future in futures:
                future.result()

    def _gradient_ready(self, param: torch.Tensor) -> None:
        index, grad = self.index[id(param)], param.grad.detach().reshape(-1)
        produced = None
        if self.cuda:
            # Recorded after the kernels that produced this gradient and last read this weight.
            produced = torch.cuda.Event()
            produced.record()
        if self.update_delay:
            self._apply_previous_update(index, produced)
        copied = self._copy_to_host(index, grad, produced)
        param.grad = None  # the device copy of the gradient is not needed again
        record = self.recorder.sink()  # this step's, even where its Adam ends in the next
        self.pending[index] = [self.adam.submit(self._update, index, piece, event, produced,
                                                record) for piece, event in enumerate(copied)]

    def _copy_to_host(self, index: int, grad: torch.Tensor,
                      produced: torch.cuda.Event | None) -> list[torch.cuda.Event | None]:
        """The gradient into pinned host memory, piece by piece; one event per piece."""
        spans, host = self.adam.spans[index], self.host_grads[index]
        if not self.cuda:
            host.copy_(grad)
            return [None] * len(spans)
        self.copy_out.wait_event(produced)
        start, events = self.recorder.mark(self.copy_out), []
        with torch.cuda.stream(self.copy_out):
            values = grad  # what the copies read: the gradient, or it cast to fp32 here
            if self.cast_on_device and grad.dtype != torch.float32:
                values = grad.float()  # allocated on this stream: freed after its last copy
            for a, b in spans:
                host[a:b].copy_(values[a:b], non_blocking=True)
                events.append(self.recorder.mark(self.copy_out))
        grad.record_stream(self.copy_out)  # freed by the caller, still read by the side stream
        self.recorder.add("comm", f"to host p{index}", index, start, events[-1])
        return events

    @torch.no_grad()
    def _update(self, index: int, piece: int, copied: torch.cuda.Event | None,
                produced: torch.cuda.Event | None, record: Callable) -> None:
        if copied is not None:
            copied.synchronize()  # this piece's gradient has landed
        if (last_read := self.copied_in[index][piece]) is not None:
            last_read.synchronize()  # the previous copy back has read this master piece
        started = time.perf_counter()  # Adam's own time, after the waits
        start, end = self.adam.spans[index][piece]
        master = self.adam.update(index, piece, self.host_grads[index][start:end])
        if (staging := self.staging[index]) is not None:
            staging[start:end].copy_(master)  # the previous copy back has read it (above)
        record("host", f"adam p{index}[{start}:{end}]", index, started, time.perf_counter())
        if not self.update_delay:
            self._copy_to_device(index, piece, produced, record)

    def _apply_previous_update(self, index: int, produced: torch.cuda.Event | None) -> None:
        """The delayed update: the previous step's Adam of this parameter, to the device."""
        for future in self.pending.pop(index, []):
            future.result()
        if self.steps_done:  # step 0 has no previous gradient
            for piece in range(len(self.adam.spans[index])):
                self._copy_to_device(index, piece, produced)

    def _copy_to_device(self, index: int, piece: int, produced: torch.cuda.Event | None,
                        record: Callable | None = None) -> None:
        start, end = self.adam.spans[index][piece]
        staging = self.staging[index]
        source = self.adam.pieces[index][piece] if staging is None else staging[start:end]
        target = self.params[index].detach().view(-1)[start:end]
        if not self.cuda:
            target.copy_(source)
            return
        self.copy_in.wait_event(produced)  # the weight's last reader in backward has run
        begin = self.recorder.mark(self.copy_in)
        with torch.cuda.stream(self.copy_in):
            if source.dtype == target.dtype:
                target.copy_(source, non_blocking=True)
            else:  # the fp32 master to the GPU, cast there (cast_on_device)
                target.copy_(source.to(target.device, non_blocking=True))
        self.copied_in[index][piece] = done = self.recorder.mark(self.copy_in)
        (record or self.recorder.add)("comm", f"to device p{index}[{start}:{end}]", index,
                                      begin, done)

    def last_gradients(self) -> list[torch.Tensor]:
        if self.cuda:
            torch.cuda.synchronize(self.device)
        by_param = {id(p): self.host_grads[i] for i, p in enumerate(self.params)}
        return [by_param[id(p)].view_as(p).to(torch.float32, copy=True)
                for p in self.model.parameters()]

    def checked_weights(self) -> list[torch.Tensor]:
        if self.update_delay:  # its master is a step ahead of the weights: check the weights
            return super().checked_weights()
        if self.cuda:
            torch.cuda.synchronize(self.device)
        by_param = {id(p): self.adam.master[i] for i, p in enumerate(self.params)}
        return [by_param[id(p)].view_as(p).clone() for p in self.model.parameters()]

    def close(self) -> None:
        self.drain()
        for hook in self.hooks:
            hook.remove()
        self.hooks.clear()
        self.adam.close()


class OffloadAfterBackward(OffloadOverlap):
    name = "offload-after-backward"
    overlap = False


class OffloadOverlapDelayed(OffloadOverlap):
    name = "offload-overlap-dpu"
    update_delay = 1
