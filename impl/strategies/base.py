"""The one contract every strategy fills.

Built from (model, workload config, process group, options); ``step(batch)`` does forward,
backward, the averaging of gradients across the group's ranks, and the SGD update, and leaves
``timeline`` describing what ran when in that step. ``group=None`` means no communication
(the compute-only measurement); a group of one rank communicates nothing either.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
import torch.distributed as dist
from torch import nn

from impl.finite import FiniteCheck
from impl.gradients import FlatGradients, zeros
from impl.strategies.knobs import check_carveout, cublas_carveout, first_chunk_elements
from impl.strategies.options import StrategyOptions
from impl.strategy_records import OVERLAPPING
from impl.timeline import TimedSteps, Timeline, TimelineRecorder
from impl.workloads import Batch, WorkloadConfig, check_batch, loss_fn


class Strategy(TimedSteps, ABC):
    name: str = ""
    #: What the overlap benchmark (suite/bench_overlap.py) does with it. OVERLAPPING: measured
    #: in every cell, against the references; REFERENCE: what the others are measured against
    #: (sequential); PEER: the baseline users would pick (DDP, measured beside the others);
    #: SIMULATION: never measured beside real strategies (suite/bench_synthetic.py has it).
    role: str = OVERLAPPING
    #: True where it runs only under mpirun (the launcher's MPI pass measures it).
    needs_mpi: bool = False
    #: False for the labelled sleep-based model, whose numbers never join real tables.
    real: bool = True
    #: True where the timeline mixes host readings with CUDA events (see impl/timeline.py).
    host_marks: bool = False
    #: True where each chunk can be updated on the communication side (``update_in_overlap``).
    supports_update_in_overlap: bool = False

    def __init__(self, model: nn.Module, workload: WorkloadConfig,
                 group: dist.ProcessGroup | None, options: StrategyOptions):
        self.model, self.workload, self.group, self.options = model, workload, group, options
        self.world_size = dist.get_world_size(group) if group is not None else 1
        self.device = next(model.parameters()).device
        self.recorder = TimelineRecorder(self.device, host_marks=self.host_marks)
        self.timeline = Timeline()
        self.steps_done = 0
        check_carveout(options, self.device)
        if options.update_in_overlap and not self.supports_update_in_overlap:
            raise ValueError(f"update_in_overlap: strategy {self.name!r} cannot update chunks "
                             "while it communicates; use chunked or threaded")
        if options.update_in_overlap and options.check_finite:
            raise ValueError("update_in_overlap updates each chunk before the step's "
                             "non-finite check could veto it: set check_finite=False")
        if self.world_size == 1:
            self.recorder.notes.append("world size 1: no communication (all-reduce is a no-op)")

    @property
    def communicates(self) -> bool:
        return self.world_size > 1

    def check(self, batch: Batch) -> None:
        check_batch(self.workload, batch)

    def step(self, batch: Batch) -> None:
        with cublas_carveout(self.options):
            super().step(batch)

    @abstractmethod
    def _step(self, batch: Batch) -> None: ...

    def close(self) -> None:
        """Release threads and hooks; the strategy cannot step afterwards."""

    def _forward_backward(self, batch: Batch, module: nn.Module | None = None) -> None:
        start = self.recorder.mark()
        outputs = (module or self.model)(batch.inputs)
        loss = loss_fn(self.workload, outputs, batch.targets)
        forward_end = self.recorder.mark()
        self.recorder.add("compute", "forward", None, start, forward_end)
        self._backward_start = forward_end
        loss.backward()

    @torch.no_grad()
    def _sgd_update(self, grad_scale: float) -> None:
        """w -= lr · grad_scale · g. Gradients hold the sum over ranks, so grad_scale is
        1/world_size: the averaging is folded into the update instead of an extra pass."""
        start = self.recorder.mark()
        params = [p for p in self.model.parameters() if p.grad is not None]
        torch._foreach_add_(params, [p.grad for p in params], alpha=-self.options.lr * grad_scale)
        self.recorder.add("compute", "update", None, start, self.recorder.mark())


class ChunkedGradientStrategy(Strategy):
    """Shared plumbing of the strategies that all-reduce K chunks of one flat buffer."""

    def __init__(self, model, workload, group, options):
        super().__init__(model, workload, group, options)
        first = first_chunk_elements(options.first_chunk_mb,
                                     next(model.parameters()).element_size())
        self.flat = FlatGradients(model, options.chunks, workload.name, options.chunk_split,
                                  first, self._allocate_gradients)
        self.finite = FiniteCheck(model, self.flat.params, group) if options.check_finite else None
        self.flat.on_chunk_ready(self._record_ready, self.finite.record if self.finite else None)

    def _allocate_gradients(self, numel: int, dtype: torch.dtype,
                            device: torch.device) -> torch.Tensor:
        """The zeroed flat gradient buffer; strategies whose peers read it override this."""
        return zeros(numel, dtype, device)

    def _record_ready(self, chunk: int) -> None:
        ready = self.recorder.mark()
        self.recorder.add("compute", f"backward c{chunk}", chunk, self._backward_start, ready)
        self._backward_start = ready
        self._chunk_ready(chunk, ready)

    def _chunk_ready(self, chunk: int, ready) -> None:
        """Called during backward once ``chunk`` is final; overlapping strategies launch here."""

    def _step(self, batch: Batch) -> None:
        self.flat.zero_()
        if self.finite is not None:
            self.finite.reset()
        self._forward_backward(batch)
        if unfinished := self.flat.unfinished_chunks():
            raise RuntimeError(f"chunks {unfinished} never became ready: some parameters of "
                               f"workload {self.workload.name!r} got no gradient")
        self._communicate()
        if self.finite is not None:
            self.finite.verify(self.steps_done)
        if not self.options.update_in_overlap:
            self._sgd_update(1.0 / self.world_size)

    @torch.no_grad()
    def _update_chunk(self, chunk: int) -> None:
        """The SGD update of one chunk's parameters (its summed gradients, averaged here)."""
        params, grads = self.flat.chunk_slices[chunk]
        torch._foreach_add_(params, grads, alpha=-self.options.lr / self.world_size)

    @abstractmethod
    def _communicate(self) -> None:
        """After backward: make sure every chunk is summed over the group."""

    def communicate_only(self) -> None:
        """The comm-only reference: every chunk communicated the way this strategy does it,
        all ready at once, with no forward, backward or update (the timeline records it)."""
        self.recorder.begin()
        ready = self.recorder.mark()
        for chunk in range(len(self.flat.chunks)):
            self._chunk_ready(chunk, ready)
        self._communicate()

    def close(self) -> None:
        self.flat.remove_hooks()
