"""Copy-engine: each chunk all-reduced through symmetric memory, the bytes moved by copy engines.

NCCL's all-reduce runs as kernels on the SMs that backward needs (a bf16 GEMM stream slows by
~13% beside it on 2 H200; docs/ANCHORS.md), while device-to-device copies from a peer's memory
run on the copy engines and slow the same GEMMs by ~3%. So the flat gradient buffer lives in
symmetric memory (every rank's buffer mapped into every peer, ``torch.distributed.
_symmetric_memory``), and each chunk is all-reduced as a reduce-scatter then an all-gather
made of copies, on a communication stream, the moment the chunk is ready:

1. barrier: every rank's chunk is final;
2. pull: from each peer, its gradients for the piece of the chunk this rank owns (a copy from
   the peer's buffer: copy engine), into a scratch buffer;
3. add: this rank's piece += the pulled pieces (one elementwise kernel: the only SM work);
4. barrier: every owned piece is reduced;
5. pull: each peer's reduced piece into this rank's buffer (copy engine).

A final barrier at the end of the step keeps every peer from changing its buffer while a pull
may still read it. Signalling is symmetric memory's barrier (a small kernel per barrier).
NVLink multicast is never used (it stays off everywhere: impl/profiles.py). Sums of more than
two ranks are formed in a fixed rank order on every rank, so all ranks hold the same values.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from impl import capabilities
from impl.chunking import ALIGN_ELEMENTS
from impl.profiles import recorded_profile
from impl.strategies.base import ChunkedGradientStrategy
from impl.strategies.knobs import communication_stream


def pieces(start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """[start, end) cut into ``parts`` contiguous pieces on ALIGN_ELEMENTS boundaries."""
    cuts = [start + round(i * (end - start) / parts / ALIGN_ELEMENTS) * ALIGN_ELEMENTS
            for i in range(parts)]
    cuts = [min(max(c, start), end) for c in cuts]
    return list(zip(cuts, [*cuts[1:], end]))


class CopyEngineStrategy(ChunkedGradientStrategy):
    name = "copy-engine"
    supports_update_in_overlap = True

    def __init__(self, model, workload, group, options):
        backend = dist.get_backend(group) if group is not None else "none"
        world = dist.get_world_size(group) if group is not None else 1
        profile = recorded_profile(backend)
        if world > 1 and (reason := capabilities.missing_copy_engine(backend, profile, world)
                          or capabilities.missing_whole_world(world, dist.get_world_size())):
            raise ValueError(f"copy-engine at {world} ranks: {reason}")
        super().__init__(model, workload, group, options)
        self.comm_stream = communication_stream(self.device, options)
        if not self.communicates:
            return
        from torch.distributed import _symmetric_memory as symm_mem

        self.handle = symm_mem.rendezvous(self.flat.buffer, group)
        self.rank = dist.get_rank(group)
        self.peers = [r for r in range(self.world_size) if r != self.rank]
        # Per chunk, the piece each rank owns (reduces): fixed by the chunking, cut once here.
        self.owned = [pieces(a, b, self.world_size)
                      for a, b in zip(self.flat.bounds, self.flat.bounds[1:])]
        largest = max(b - a for a, b in zip(self.flat.bounds, self.flat.bounds[1:]))
        piece = -(-largest // self.world_size) + ALIGN_ELEMENTS
        self.scratch = torch.empty((self.world_size - 1, piece), dtype=self.flat.buffer.dtype,
                                   device=self.device)

    def _allocate_gradients(self, numel, dtype, device):
        if self.world_size == 1:
            return super()._allocate_gradients(numel, dtype, device)
        from torch.distributed import _symmetric_memory as symm_mem

        return symm_mem.empty(numel, dtype=dtype, device=device).zero_()

    def _peer(self, rank: int, start: int, end: int) -> torch.Tensor:
        """Elements [start, end) of rank ``rank``'s buffer, mapped into this GPU."""
        return self.handle.get_buffer(rank, (end - start,), self.flat.buffer.dtype, start)

    def _all_reduce_chunk(self, chunk: int) -> None:
        owned, peers = self.owned[chunk], self.peers
        mine_start, mine_end = owned[self.rank]
        length = mine_end - mine_start
        self.handle.barrier(channel=0)
        if length:
            for slot, peer in enumerate(peers):
                self.scratch[slot, :length].copy_(self._peer(peer, mine_start, mine_end))
            mine = self.flat.buffer[mine_start:mine_end]
            # Sum in rank order on every rank: the same additions, the same rounding. The sum
            # builds up in place in the first term: this rank's piece on rank 0, elsewhere the
            # scratch row pulled from rank 0, which is not read again.
            ordered = [mine if r == self.rank else self.scratch[peers.index(r), :length]
                       for r in range(self.world_size)]
            total = ordered[0]
            for term in ordered[1:]:
                total.add_(term)
            if total is not mine:
                mine.copy_(total)
        self.handle.barrier(channel=0)
        for peer in peers:
            start, end = owned[peer]
            if end > start:
                self.flat.buffer[start:end].copy_(self._peer(peer, start, end))

    def _chunk_ready(self, chunk: int, ready) -> None:
        if not self.communicates:
            if self.options.update_in_overlap:
                self._update_chunk(chunk)
            return
        with torch.cuda.stream(self.comm_stream):
            self.comm_stream.wait_event(ready)  # the chunk's gradients are computed
            start = self.recorder.mark(self.comm_stream)
            self._all_reduce_chunk(chunk)
            end = self.recorder.mark(self.comm_stream)
            if self.options.update_in_overlap:
                self._update_chunk(chunk)
                self.recorder.add("compute", f"update c{chunk}", chunk, end,
                                  self.recorder.mark(self.comm_stream))
        self.recorder.add("comm", f"copy all-reduce c{chunk}", chunk, start, end)

    def _communicate(self) -> None:
        if not self.communicates:
            return
        with torch.cuda.stream(self.comm_stream):
            self.handle.barrier(channel=0)  # no peer still pulls from this rank's buffer
        torch.cuda.current_stream(self.device).wait_stream(self.comm_stream)
