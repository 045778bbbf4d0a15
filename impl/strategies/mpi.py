"""MPI: mpi4py non-blocking Iallreduce per chunk on host buffers, waited before the update.

The course study's phase 3, run under mpirun/mpiexec (one process per rank):

    mpirun -n 2 python -m pytest tests/test_mpi.py

On CPU the host buffer is the flat gradient buffer itself (no copy). On GPU each ready chunk
is copied to pinned host memory on a copy stream and its Iallreduce starts once the copy has
landed; results are copied back before the update. A CUDA-aware MPI is used directly only
where the library says it is one. MPI has no bfloat16, so bf16 chunks travel as float32.
MPI makes progress inside MPI calls: the hooks poll outstanding requests with Test, which is
both the progress engine and how completion times are observed.
"""

from __future__ import annotations

import torch

from impl.strategies.base import ChunkedGradientStrategy
from impl.strategy_records import REFERENCE
from impl.timeline import LateMark


def mpi_world():
    from mpi4py import MPI  # imported late: only this strategy needs MPI

    return MPI


def cuda_aware(mpi) -> bool:
    query = getattr(mpi, "Query_cuda_support", None)
    return bool(query and query())


class MPIStrategy(ChunkedGradientStrategy):
    name = "mpi"
    needs_mpi = True
    overlap = True  # start each chunk's Iallreduce during backward
    host_marks = True  # MPI completion is seen on the host

    def __init__(self, model, workload, group, options):
        super().__init__(model, workload, group, options)
        self.MPI = mpi_world()
        self.comm = self.MPI.COMM_WORLD
        if group is not None and self.world_size != self.comm.Get_size():
            raise ValueError(f"mpi strategy runs over all {self.comm.Get_size()} MPI ranks; "
                             f"world size {self.world_size} was asked for")
        self.on_gpu = self.device.type == "cuda"
        self.direct = not self.on_gpu or (cuda_aware(self.MPI) and
                                          self.flat.buffer.dtype != torch.bfloat16)
        if self.direct:
            self.host = self.flat.chunks
        else:
            wire = torch.float32 if self.flat.buffer.dtype == torch.bfloat16 else None
            self.host = [torch.empty(c.shape, dtype=wire or c.dtype, pin_memory=True)
                         for c in self.flat.chunks]
            self.copy_stream = torch.cuda.Stream(self.device)
            self.recorder.notes.append("mpi: chunks staged through pinned host memory")
        self._copies: list[tuple[int, torch.cuda.Event]] = []
        self._requests: list[tuple[int, object, LateMark]] = []

    def wire_buffer(self, chunk: int):
        """What MPI reads and writes for ``chunk``: host memory, or device memory if CUDA-aware."""
        tensor = self.host[chunk]
        if self.on_gpu and self.direct:
            return tensor  # __cuda_array_interface__ for a CUDA-aware MPI
        return tensor.numpy()

    def _chunk_ready(self, chunk: int, ready) -> None:
        if self.overlap and self.communicates:
            self._stage(chunk, ready)
            self._progress()

    def _stage(self, chunk: int, ready) -> None:
        """Start the chunk's Iallreduce now (host memory) or once its copy to host landed."""
        if self.direct:
            if self.on_gpu:
                ready.synchronize()
            self._start(chunk)
        else:
            with torch.cuda.stream(self.copy_stream):
                self.copy_stream.wait_event(ready)
                self.host[chunk].copy_(self.flat.chunks[chunk], non_blocking=True)
                copied = torch.cuda.Event()
                copied.record(self.copy_stream)
            self._copies.append((chunk, copied))

    def _start(self, chunk: int) -> None:
        start, end = self.recorder.mark(), LateMark()
        request = self.comm.Iallreduce(self.MPI.IN_PLACE, self.wire_buffer(chunk), op=self.MPI.SUM)
        self.recorder.add("comm", f"Iallreduce c{chunk}", chunk, start, end)
        self._requests.append((chunk, request, end))

    def _progress(self) -> None:
        while self._copies and self._copies[0][1].query():
            self._start(self._copies.pop(0)[0])
        for _, request, end in self._requests:
            if end.value is None and request.Test():
                end.set_now()

    def _communicate(self) -> None:
        if not self.communicates:
            return
        if not self.overlap:
            ready = self.recorder.mark()
            for chunk in range(len(self.flat.chunks)):
                self._stage(chunk, ready)
        for chunk, copied in self._copies:
            copied.synchronize()
            self._start(chunk)
        self._copies.clear()
        for _, request, end in self._requests:
            if end.value is None:
                request.Wait()
                end.set_now()
        # A request complete here may still owe a peer data that only this rank's MPI
        # progress pushes out (large messages); without this barrier a rank that moves on to
        # other work can leave its peer waiting forever.
        self.comm.Barrier()
        if not self.direct:
            for chunk, _, _ in self._requests:
                self.flat.chunks[chunk].copy_(self.host[chunk], non_blocking=True)
        self._requests.clear()


class MPISequentialStrategy(MPIStrategy):
    """The MPI reference: every Iallreduce starts after the whole backward (no overlap)."""

    name = "mpi-sequential"
    role = REFERENCE
    overlap = False
