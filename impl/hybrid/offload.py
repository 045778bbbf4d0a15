"""The fine-grained CPU–GPU hybrid (ZeRO-Offload style): the GPU computes, the CPU updates.

Each parameter's gradient leaves the GPU the moment backward has produced it: a
post-accumulate-grad hook records an event on the compute stream, a side stream copies the
gradient into pinned host memory after that event, and the threads of a host pool run Adam on
the parameter's fp32 master copy and copy the result back on a second side stream, while the
GPU goes on with the rest of backward. Adam is elementwise, so the master copy is cut into
pieces of at most PIECE_ELEMENTS, each with its own torch.optim.Adam and its own task: a few
large layers still keep every thread busy, and the result is the same as one Adam per tensor.
The step ends when every update has been issued; the compute stream then waits for the copies
back, so the next forward reads the updated weights without a host-side sync.

``OffloadAfterBackward`` is the same without overlap: the whole backward first, then the same
copies and the same host Adam. On a CPU-only machine both run with the model on the CPU (host
copies instead of device copies): the correctness tests' configuration.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor

import torch
from torch import nn

from impl.hybrid.base import HybridOptions, Loss, Trainer
from impl.workloads import Batch

PIECE_ELEMENTS = 1 << 20  # 4 MiB of fp32 per host Adam task


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
        self.host_grads = [torch.empty(p.numel(), dtype=p.dtype, pin_memory=pin)
                           for p in self.params]
        self.host_weights = [torch.empty(p.numel(), dtype=p.dtype, pin_memory=pin)
                             for p in self.params]
        # Parameter i's pieces: element spans, each with an fp32 master slice and its Adam.
        self.pieces = [[(start, min(start + PIECE_ELEMENTS, p.numel()))
                        for start in range(0, p.numel(), PIECE_ELEMENTS)] for p in self.params]
        self.master = [[p.detach().reshape(-1)[a:b].to("cpu", torch.float32, copy=True)
                        for a, b in spans] for p, spans in zip(self.params, self.pieces)]
        self.optimizers = [[torch.optim.Adam([m], lr=options.lr) for m in masters]
                           for masters in self.master]
        self.pool = ThreadPoolExecutor(options.threads(), thread_name_prefix="cpu-adam")
        self.copy_out = torch.cuda.Stream(self.device) if self.cuda else None
        self.copy_in = torch.cuda.Stream(self.device) if self.cuda else None
        self.hooks = [p.register_post_accumulate_grad_hook(self._gradient_ready)
                      for p in self.params] if self.overlap else []
        self.pending: list[Future] = []

    def _step(self, batch: Batch) -> torch.Tensor:
        self.pending = []
        loss = self._forward_backward(batch)
        if not self.overlap:
            for param in self.params:
                self._gradient_ready(param)
        for future in self.pending:  # the host waits for Adam; errors of a thread surface here
            future.result()
        if self.cuda:
            torch.cuda.current_stream(self.device).wait_stream(self.copy_in)
        return loss

    def _gradient_ready(self, param: torch.Tensor) -> None:
        index, grad = self.index[id(param)], param.grad
        if self.cuda:
            # Recorded after the kernels that produced this gradient and last read this weight.
            produced = torch.cuda.Event()
            produced.record()
            self.copy_out.wait_event(produced)
            start = self.recorder.mark(self.copy_out)
            with torch.cuda.stream(self.copy_out):
                self.host_grads[index].copy_(grad.reshape(-1), non_blocking=True)
            copied = self.recorder.mark(self.copy_out)
            grad.record_stream(self.copy_out)  # freed below, still read by the side stream
            self.recorder.add("comm", f"to host p{index}", index, start, copied)
        else:
            produced = copied = None
            self.host_grads[index].copy_(grad.reshape(-1))
        param.grad = None  # the device copy of the gradient is not needed again
        self.pending += [self.pool.submit(self._update, index, piece, produced, copied)
                         for piece in range(len(self.pieces[index]))]

    @torch.no_grad()
    def _update(self, index: int, piece: int, produced: torch.cuda.Event | None,
                copied: torch.cuda.Event | None) -> None:
        started = time.perf_counter()
        if copied is not None:
            copied.synchronize()  # this thread waits for its own gradient only
        start, end = self.pieces[index][piece]
        master = self.master[index][piece]
        master.grad = self.host_grads[index][start:end].to(torch.float32)
        self.optimizers[index][piece].step()
        self.host_weights[index][start:end].copy_(master)
        self.recorder.add("host", f"adam p{index}[{start}:{end}]", index, started,
                          time.perf_counter())
        target = self.params[index].detach().view(-1)[start:end]
        if self.cuda:
            self.copy_in.wait_event(produced)  # the weight's last reader in backward has run
            begin = self.recorder.mark(self.copy_in)
            with torch.cuda.stream(self.copy_in):
                target.copy_(self.host_weights[index][start:end], non_blocking=True)
            self.recorder.add("comm", f"to device p{index}[{start}:{end}]", index, begin,
                              self.recorder.mark(self.copy_in))
        else:
            target.copy_(self.host_weights[index][start:end])

    def close(self) -> None:
        for hook in self.hooks:
            hook.remove()
        self.hooks.clear()
        self.pool.shutdown(wait=True)


class OffloadAfterBackward(OffloadOverlap):
    name = "offload-after-backward"
    overlap = False
