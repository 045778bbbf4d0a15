"""The fine-grained CPU–GPU hybrid (ZeRO-Offload style): the GPU computes, the CPU updates.

The parameters are grouped into flat buckets (impl/hybrid/buckets.py): consecutive tensors in
the order backward finishes their gradients, up to ``HybridOptions.bucket_elements`` values a
bucket, a larger tensor in a bucket of its own. A bucket of several tensors keeps their
weights in one flat device buffer (the parameters become views of it, as ZeRO-Offload's
flattened parameters) and one flat fp32 master on the host, so its gradients leave in one
copy, one host Adam call updates it and one copy brings its weights back: the per-tensor
copies, events and Adam calls of a model of many small tensors go.

A post-accumulate-grad hook takes each gradient as backward produces it; when a bucket's last
member is ready, an event is recorded on the compute stream and a side stream packs the
members' gradients into one flat gradient (one torch.cat) and copies it into pinned host memory
piece by piece (host_adam.PIECE_ELEMENTS), one event per piece. Host Adam (host_adam.py)
updates each piece as soon as its copy has landed, and the piece's new weights go back to the
GPU on a second side stream straight from the pinned fp32 master, while the GPU goes on with
the rest of backward. The step ends when every update has been issued; the compute stream
then waits for the copies back, so the next forward reads the updated weights without a
host-side sync. What cannot be hidden is the tail: the update of the last bucket backward
completes (the one holding the first layer's weights), which the next forward needs first.

``OffloadOverlapDelayed`` is the one-step delayed parameter update (DPU, ZeRO-Offload §5):
the update of step t's gradient is copied to the GPU during step t + 1's backward, once that
step has last read the bucket's weights, so host Adam has a whole step to run and no tail is
exposed. It is a different algorithm (the weights of step t + 1 do not hold step t's update),
checked against the same training with every update applied one step late
(``update_delay = 1``).

Mixed precision (bf16 or fp16 weights and gradients on the GPU, ZeRO-Offload's mode): the
master, m and v stay fp32 on the host and each value is cast once each way, on the side
``HybridOptions.cast`` names. On the host, the copies carry the low-precision
values and host Adam's thread casts each gradient piece into a reused fp32 piece before the
update and each updated piece into a pinned staging piece after it, spread over its intra-op
threads (impl/hybrid/host_casts.py times these casts). On the device (the default), the copy
stream casts the packed gradient to fp32 before its copy, and the copy-back stream casts each
fp32 master piece after it lands: the copies carry twice the bytes, and host Adam's threads
only update.

With ``HybridOptions.hand_off`` the hook only records the event and hands the bucket to a
launching thread, which does the rest (the delayed update's wait for the previous Adam
included) while backward's thread goes on launching kernels; the step's end waits for it.

``OffloadAfterBackward`` is the overlapped one without overlap: the whole backward first, then
the same copies and the same host Adam. On a CPU-only machine all of them run with the model
on the CPU (host copies instead of device copies): the correctness tests' configuration.
``step_calls`` counts what the last step paid per bucket and per tensor.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import torch
from torch import nn

from impl.hybrid.base import CAST_ON_DEVICE, HybridOptions, Loss, Trainer
from impl.hybrid.buckets import bucket_layout
from impl.hybrid.host_adam import HostAdam
from impl.workloads import Batch


@torch.no_grad()
def flatten(members: list[nn.Parameter]) -> torch.Tensor:
    """One flat buffer holding ``members``' weights, each parameter made a view of its span
    (so one copy writes them all); a single tensor is its own flat view."""
    if len(members) == 1:
        return members[0].detach().view(-1)
    first = members[0]
    flat = torch.empty(sum(p.numel() for p in members), dtype=first.dtype, device=first.device)
    start = 0
    for param in members:
        end = start + param.numel()
        flat[start:end].copy_(param.detach().view(-1))
        param.data = flat[start:end].view_as(param)
        start = end
    return flat


class OffloadOverlap(Trainer):
    name = "offload-overlap"
    overlap = True
    scales_loss = True  # divided out by the cast on the GPU or by host Adam

    def __init__(self, model: nn.Module, loss: Loss, options: HybridOptions):
        self.cuda = next(model.parameters()).device.type == "cuda"
        self.host_marks = self.cuda  # host Adam intervals beside CUDA events
        super().__init__(model, loss, options)
        # Reverse registration order: the order backward finishes the gradients.
        self.params = [p for p in reversed(list(model.parameters())) if p.requires_grad]
        self.buckets = [[self.params[i] for i in members] for members in bucket_layout(
            [p.numel() for p in self.params], [p.dtype for p in self.params],
            options.bucket_elements)]
        self.flat = [flatten(members) for members in self.buckets]
        # Per parameter: its bucket, its slot there and its [start, end) in the flat buffers.
        self.place: dict[int, tuple[int, int, int, int]] = {}
        for bucket, members in enumerate(self.buckets):
            start = 0
            for slot, param in enumerate(members):
                self.place[id(param)] = (bucket, slot, start, start + param.numel())
                start += param.numel()
        pin = self.cuda  # pinned memory needs CUDA; it is what lets the copies run async
        # Low-precision (bf16, fp16) parameters meet the fp32 master through a cast on one side
        # of the copies (``HybridOptions.cast``): on the host, in host Adam's threads, so the
        # copies carry 2 bytes a value; or on the GPU, so they carry 4.
        self.cast_on_device = self.cuda and options.cast == CAST_ON_DEVICE
        self.host_grads = [torch.empty(flat.numel(), pin_memory=pin,
                                       dtype=torch.float32 if self.cast_on_device else flat.dtype)
                           for flat in self.flat]
        # The loss scale leaves with the gradients: divided out on the GPU by the cast there,
        # else by host Adam (its fused kernel's grad_scale); host_grads keep what they carry.
        self.host_grad_scale = 1.0 if self.cast_on_device else self.loss_scale
        self.adam = HostAdam(self.flat, options.lr, options.host_adam, options.host_layout,
                             options.threads(), pinned=pin, grad_scale=self.host_grad_scale)
        # The updated weights in the parameters' dtype, cast from the master by host Adam's
        # thread right after each piece's update; None where the master itself is copied.
        self.staging = [None if flat.dtype == torch.float32 or self.cast_on_device else
                        torch.empty(flat.numel(), dtype=flat.dtype, pin_memory=pin)
                        for flat in self.flat]
        self.copy_out = torch.cuda.Stream(self.device) if self.cuda else None
        self.copy_in = torch.cuda.Stream(self.device) if self.cuda else None
        # Per piece, the copy back that last read its master: the next update must wait for it.
        self.copied_in: list[list[torch.cuda.Event | None]] = [
            [None] * len(spans) for spans in self.adam.spans]
        # Per bucket, its members' gradients of this step, held until the last one is ready.
        self.ready: list[list[torch.Tensor | None]] = [[None] * len(m) for m in self.buckets]
        self.launched: set[int] = set()  # buckets launched this step
        self.hooks = [p.register_post_accumulate_grad_hook(self._gradient_ready)
                      for p in self.params] if self.overlap else []
        self.pending: dict[int, list[Future]] = {}  # per bucket: updates not waited for
        # HybridOptions.hand_off: one thread, so buckets launch in the order backward readies
        # them, as they do from the hooks; ``handed`` are this step's launches.
        self.launcher = ThreadPoolExecutor(1, thread_name_prefix="offload-launch") if (
            options.hand_off and self.overlap) else None
        self.handed: list[Future] = []
        self.step_calls: Counter[str] = Counter()  # what the last step paid (``_count``)
        self.counting = threading.Lock()  # copies back may be issued by host Adam's threads

    def _count(self, what: str, calls: int = 1) -> None:
        with self.counting:
            self.step_calls[what] += calls

    def _step(self, batch: Batch) -> torch.Tensor:
        self.step_calls, self.launched = Counter(), set()
        loss = self._forward_backward(batch)
        if not self.overlap:
            for param in self.params:
                if param.grad is not None:
                    self._gradient_ready(param)
        self._join_launches()
        self._require_every_gradient()
        if not self.update_delay:
            self.drain()  # the host waits for Adam; errors of its threads surface here
        if self.cuda:
            torch.cuda.current_stream(self.device).wait_stream(self.copy_in)
        return loss

    def _require_every_gradient(self) -> None:
        """A bucket launches when its last member's gradient is ready: a parameter backward
        did not reach would hold back its bucket's update without an error."""
        if len(self.launched) == len(self.buckets):
            return
        absent = [tuple(p.shape) for bucket, members in enumerate(self.buckets)
                  if bucket not in self.launched
                  for p, grad in zip(members, self.ready[bucket]) if grad is None]
        raise RuntimeError(f"{self.name}: step {self.steps_done} (counting from 0) left "
                           f"{len(absent)} parameter(s) without a gradient (shapes "
                           f"{absent[:3]}): the offload updates every trainable parameter each "
                           "step; set requires_grad=False on parameters the loss does not use")

    def _join_launches(self) -> None:
        """Wait until the launching thread has issued this step's copies and updates (the
        step's end orders the compute stream after them); its errors surface here."""
        handed, self.handed = self.handed, []
        for future in handed:
            future.result()

    def drain(self) -> None:
        self._join_launches()
        for futures in self.pending.values():
            for future in futures:
                future.result()

    def _gradient_ready(self, param: torch.Tensor) -> None:
        bucket, slot, _, _ = self.place[id(param)]
        self._count("gradient_hooks")
        self.ready[bucket][slot] = param.grad.detach().reshape(-1)
        param.grad = None  # held by the bucket until it is packed, then freed
        if any(grad is None for grad in self.ready[bucket]):
            return
        grads = self.ready[bucket]
        self.ready[bucket] = [None] * len(grads)
        self._launch(bucket, grads)

    def _launch(self, bucket: int, grads: list[torch.Tensor]) -> None:
        """The bucket's last gradient is ready: its copy to the host and its host Adam, issued
        here or (HybridOptions.hand_off) by the launching thread."""
        self.launched.add(bucket)
        self._count("buckets")
        produced = None
        if self.cuda:
            # Recorded after the kernels that produced these gradients and last read these
            # weights.
            produced = torch.cuda.Event()
            produced.record()
        record = self.recorder.sink()  # this step's, even where its Adam ends in the next
        if self.launcher is None:
            self._issue(bucket, grads, produced, record)
        else:
            self.handed.append(self.launcher.submit(self._issue, bucket, grads, produced,
                                                    record))

    def _issue(self, bucket: int, grads: list[torch.Tensor],
               produced: torch.cuda.Event | None, record: Callable) -> None:
        if self.update_delay:
            self._apply_previous_update(bucket, produced)
        copied = self._copy_to_host(bucket, grads, produced)
        self._count("host_adam_calls", len(copied))
        self.pending[bucket] = [self.adam.submit(self._update, bucket, piece, event, produced,
                                                 record) for piece, event in enumerate(copied)]

    def _copy_to_host(self, index: int, grads: list[torch.Tensor],
                      produced: torch.cuda.Event | None) -> list[torch.cuda.Event | None]:
        """The bucket's gradients packed into one flat gradient, into pinned host memory piece
        by piece; one event per piece."""
        spans, host = self.adam.spans[index], self.host_grads[index]
        self._count("copies_to_host", len(spans))
        if not self.cuda:
            torch.cat(grads, out=host)
            return [None] * len(spans)
        self.copy_out.wait_event(produced)
        start, events = self.recorder.mark(self.copy_out), []
        with torch.cuda.stream(self.copy_out):
            # Allocated on this stream, so freed after its last copy: the packed gradient (one
            # torch.cat; a lone tensor is read in place), cast to fp32 here where the GPU casts.
            values = grads[0] if len(grads) == 1 else torch.cat(grads)
            if self.cast_on_device and values.dtype != torch.float32:
                values = values.float()
                if self.loss_scale != 1.0:
                    values.div_(self.loss_scale)
            for a, b in spans:
                host[a:b].copy_(values[a:b], non_blocking=True)
                events.append(self.recorder.mark(self.copy_out))
        for grad in grads:
            grad.record_stream(self.copy_out)  # freed by the caller, still read by the side stream
        self.recorder.add("comm", f"to host b{index}", index, start, events[-1])
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
        record("host", f"adam b{index}[{start}:{end}]", index, started, time.perf_counter())
        if not self.update_delay:
            self._copy_to_device(index, piece, produced, record)

    def _apply_previous_update(self, index: int, produced: torch.cuda.Event | None) -> None:
        """The delayed update: the previous step's Adam of this bucket, to the device."""
        for future in self.pending.pop(index, []):
            future.result()
        if self.steps_done:  # step 0 has no previous gradient
            for piece in range(len(self.adam.spans[index])):
                self._copy_to_device(index, piece, produced)

    def _copy_to_device(self, index: int, piece: int, produced: torch.cuda.Event | None,
                        record: Callable | None = None) -> None:
        self._count("copies_to_device")
        start, end = self.adam.spans[index][piece]
        staging = self.staging[index]
        source = self.adam.pieces[index][piece] if staging is None else staging[start:end]
        target = self.flat[index][start:end]  # the bucket's weights, its parameters' storage
        if not self.cuda:
            target.copy_(source)
            return
        self.copy_in.wait_event(produced)  # the weights' last reader in backward has run
        begin = self.recorder.mark(self.copy_in)
        with torch.cuda.stream(self.copy_in):
            if source.dtype == target.dtype:
                target.copy_(source, non_blocking=True)
            else:  # the fp32 master to the GPU, cast there (cast_on_device)
                target.copy_(source.to(target.device, non_blocking=True))
        self.copied_in[index][piece] = done = self.recorder.mark(self.copy_in)
        (record or self.recorder.add)("comm", f"to device b{index}[{start}:{end}]", index,
                                      begin, done)

    def _per_parameter(self, flats: list[torch.Tensor]) -> list[torch.Tensor]:
        """Each parameter's span of ``flats`` (one flat tensor per bucket), shaped as the
        parameter, in ``model.parameters()`` order."""
        if self.cuda:
            torch.cuda.synchronize(self.device)
        views = []
        for param in self.model.parameters():
            bucket, _, start, end = self.place[id(param)]
            views.append(flats[bucket][start:end].view_as(param))
        return views

    def last_gradients(self) -> list[torch.Tensor]:
        return [g.to(torch.float32, copy=True).div_(self.host_grad_scale)
                for g in self._per_parameter(self.host_grads)]

    def checked_weights(self) -> list[torch.Tensor]:
        if self.update_delay:  # its master is a step ahead of the weights: check the weights
            return super().checked_weights()
        return [w.clone() for w in self._per_parameter(self.adam.master)]

    def close(self) -> None:
        self.drain()
        for hook in self.hooks:
            hook.remove()
        self.hooks.clear()
        if self.launcher is not None:
            self.launcher.shutdown()
        self.adam.close()


class OffloadAfterBackward(OffloadOverlap):
    name = "offload-after-backward"
    overlap = False


class OffloadOverlapDelayed(OffloadOverlap):
    name = "offload-overlap-dpu"
    update_delay = 1
