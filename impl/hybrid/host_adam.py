"""Adam on the host for the fine-grained hybrid: fp32 master weights cut into pieces, updated by
torch's CPU Adam in a worker that uses the cores without oversubscribing them.

fp32 Adam reads the weight, gradient, first and second moment and writes three of them back:
about 28 bytes per parameter (``ADAM_BYTES_PER_PARAMETER``), so its speed is bounded by the
machine's memory bandwidth, not its arithmetic. Two choices decide how close it gets:

- the implementation: ``fused`` (one vectorised kernel per call, ``torch.optim.Adam(fused=True)``
  on CPU tensors since PyTorch 2.4), ``foreach`` (a handful of multi-tensor ops, each one pass
  over memory) or ``single`` (the per-tensor loop, a dozen passes);
- the threads: ``intra-op`` gives one worker thread all the threads of torch's intra-op pool,
  so each piece's update is spread over the cores; ``pool`` runs one single-threaded update per
  thread of a pool of that size; ``grouped`` runs one update per group of at most
  ``GROUP_THREADS`` threads, several pieces at once. Each worker sets its own intra-op thread
  count when it starts, so a pool of T threads never opens T × T OpenMP threads.

On one H200 host (16 Xeon cores, 15 threads; ``results/h200x1/20261124T223058Z-xf3pyrls.json``,
``test_host_adam``) the fused update ran at 117 GB/s counted at 28 bytes per parameter with
intra-op threads and 128 GB/s as a pool, foreach at 49–50 and the per-tensor loop at 35. The
trainers use fused with intra-op threads all the same: a pool updates the last gradient's few
pieces one thread each, and that update is the tail of the step nothing hides (the pool's
single-threaded pieces of 4M elements take about ten times as long). On a 64-core H200 host
(63 threads; ``results/h200x4/20261128T092211Z-gsmuozbb.json``) one worker of 63 threads ran at
0.64-0.66 of the in-place bandwidth measured in the same rounds and the pool at 0.99-1.00: a
16 MiB piece is too little work to spread over 63 threads. The trainers use ``grouped``: one
worker of every thread where there are at most ``GROUP_THREADS`` (the 16-core host's layout),
several pieces at once on larger hosts, each still spread over a group of threads.

Pieces are views of one master tensor per parameter (pinned where CUDA is present, so the
updated weights go to the device straight from it). Adam is elementwise, so updating piece by
piece gives the same result as one update per tensor while letting the first pieces of a large
gradient be updated before its last pieces have arrived.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import torch
from torch.optim.adam import adam

ADAM_BYTES_PER_PARAMETER = 28  # fp32: read w, g, m, v (16 bytes); write w, m, v (12 bytes)
# 16 MiB of fp32 per piece: each call costs tens of microseconds of Python and wakes the
# intra-op threads, so pieces of 1 MiB elements ran at half the rate of one call over 16 of
# them (one H200 host); 4 pieces per 4096² layer still let a layer's update start before its
# whole gradient has landed.
PIECE_ELEMENTS = 1 << 22
ADAM_IMPLEMENTATIONS = {"fused": {"fused": True, "foreach": False},
                        "foreach": {"fused": False, "foreach": True},
                        "single": {"fused": False, "foreach": False}}
THREAD_LAYOUTS = ("intra-op", "pool", "grouped")
# The largest group of threads one grouped worker spreads a piece over: the 16-core host's
# one worker of 15 threads ran at 0.91 of its pool's rate, the 64-core host's of 63 at 0.65.
GROUP_THREADS = 16


def check_host_adam(implementation: str, layout: str, threads: int) -> None:
    if implementation not in ADAM_IMPLEMENTATIONS:
        raise ValueError(f"host Adam implementation {implementation!r}: choose one of "
                         f"{', '.join(ADAM_IMPLEMENTATIONS)}")
    if layout not in THREAD_LAYOUTS:
        raise ValueError(f"host Adam thread layout {layout!r}: choose one of "
                         f"{', '.join(THREAD_LAYOUTS)}")
    if threads < 1:
        raise ValueError(f"host Adam threads={threads}: choose an integer ≥ 1")


def piece_spans(numel: int, piece: int = 0) -> list[tuple[int, int]]:
    """[start, end) element spans of at most ``piece`` (default PIECE_ELEMENTS) elements."""
    piece = piece or PIECE_ELEMENTS
    return [(start, min(start + piece, numel)) for start in range(0, numel, piece)]


def thread_split(layout: str, threads: int) -> tuple[int, int]:
    """(workers, intra-op threads per worker) of ``layout`` on ``threads`` threads."""
    if layout == "intra-op":
        return 1, threads
    if layout == "pool":
        return threads, 1
    workers = max(1, round(threads / GROUP_THREADS))
    return workers, threads // workers


class HostAdam:
    """fp32 master copies of ``params`` on the host and Adam's state, piece by piece.

    ``update`` calls torch's functional Adam (``torch.optim.adam.adam``, what
    ``torch.optim.Adam.step`` calls, without the optimiser's per-call bookkeeping) on one
    piece; its defaults are torch.optim.Adam's (betas 0.9, 0.999, eps 1e-8, no weight decay).
    """

    def __init__(self, params: list[torch.Tensor], lr: float, implementation: str = "fused",
                 layout: str = "intra-op", threads: int = 1, pinned: bool = False,
                 grad_scale: float = 1.0):
        check_host_adam(implementation, layout, threads)
        self.lr, self.implementation = lr, implementation
        # What every gradient given to update() is multiplied by (a loss scale): divided out
        # in fp32, by the fused kernel itself or in the thread's fp32 copy of the gradient.
        self.grad_scale = grad_scale
        self.unscale = {"grad_scale": torch.tensor(grad_scale)} if (
            grad_scale != 1.0 and implementation == "fused") else {}
        self.spans = [piece_spans(p.numel()) for p in params]
        self.master = []
        for param in params:
            master = torch.empty(param.numel(), dtype=torch.float32, pin_memory=pinned)
            self.master.append(master.copy_(param.detach().reshape(-1)))
        # Per piece: the master's view (updates land in the master), the moments and the step.
        self.pieces = [[master[a:b] for a, b in spans]
                       for master, spans in zip(self.master, self.spans)]
        self.moments = [[(torch.zeros(b - a), torch.zeros(b - a)) for a, b in spans]
                        for spans in self.spans]
        self.steps = [[torch.tensor(0.0) for _ in spans] for spans in self.spans]
        workers, per_worker = thread_split(layout, threads)
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="host-adam",
                                       initializer=torch.set_num_threads, initargs=(per_worker,))
        # Per worker thread, one fp32 piece for low-precision gradients: a fresh 16 MiB tensor
        # per piece would be page-faulted in on every call, at a fraction of memory bandwidth.
        self.scratch = threading.local()

    def submit(self, task: Callable[..., None], *args) -> Future:
        return self.pool.submit(task, *args)

    def _as_fp32(self, grad: torch.Tensor) -> torch.Tensor:
        """``grad`` in fp32: itself, or cast into this thread's scratch piece (the cast is one
        vectorised pass spread over the thread's intra-op threads)."""
        if grad.dtype == torch.float32:
            return grad
        buffer = getattr(self.scratch, "buffer", None)
        if buffer is None or buffer.numel() < grad.numel():
            buffer = self.scratch.buffer = torch.empty(max(grad.numel(), PIECE_ELEMENTS))
        return buffer[:grad.numel()].copy_(grad)

    @torch.no_grad()
    def update(self, index: int, piece: int, grad: torch.Tensor) -> torch.Tensor:
        """Adam on piece ``piece`` of parameter ``index`` with ``grad`` (any float dtype);
        returns the piece's updated fp32 master weights (a view)."""
        master = self.pieces[index][piece]
        if grad.numel() != master.numel():  # the fused kernel reads as many as the master has
            raise ValueError(f"host Adam: gradient of {grad.numel()} elements for piece {piece} "
                             f"of parameter {index}, which has {master.numel()}")
        exp_avg, exp_avg_sq = self.moments[index][piece]
        if self.grad_scale == 1.0:
            grad = self._as_fp32(grad)
        else:  # unscaled in place below, so never the caller's own tensor
            grad = grad.clone() if grad.dtype == torch.float32 else self._as_fp32(grad)
            if not self.unscale:
                grad.div_(self.grad_scale)
        adam([master], [grad], [exp_avg], [exp_avg_sq], [],
             [self.steps[index][piece]], **ADAM_IMPLEMENTATIONS[self.implementation],
             amsgrad=False, beta1=0.9, beta2=0.999, lr=self.lr, weight_decay=0.0, eps=1e-8,
             maximize=False, **self.unscale)
        return master

    def close(self) -> None:
        self.pool.shutdown(wait=True)
