"""Chunked: each chunk's all-reduce starts asynchronously the moment its last gradient is ready.

On GPU the collective is issued from a dedicated communication stream that first waits on an
event recorded on the compute stream when the chunk became ready, so the all-reduce runs
while backward goes on; the update waits for the communication stream. On CPU (gloo) the
async work runs on gloo's own threads and a completion callback times it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from impl.strategies.base import ChunkedGradientStrategy
from impl.timeline import LateMark


class ChunkedStrategy(ChunkedGradientStrategy):
    name = "chunked"

    def __init__(self, model, workload, group, options):
        super().__init__(model, workload, group, options)
        self.comm_stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        self._in_flight: list = []  # gloo: futures completing after the end mark; nccl: works

    def _chunk_ready(self, chunk: int, ready) -> None:
        if not self.communicates:
            return
        label, tensor = f"all-reduce c{chunk}", self.flat.chunks[chunk]
        if self.comm_stream is None:
            start, end = self.recorder.mark(), LateMark()
            work = dist.all_reduce(tensor, group=self.group, async_op=True)
            # Wait on the chained future, not the work: its callback has then surely run.
            pending = work.get_future().then(end.set_now)
        else:
            with torch.cuda.stream(self.comm_stream):
                self.comm_stream.wait_event(ready)  # the chunk's gradients are computed
                start = self.recorder.mark(self.comm_stream)
                work = dist.all_reduce(tensor, group=self.group, async_op=True)
                work.wait()  # the comm stream waits for NCCL's stream; the CPU does not block
                end = self.recorder.mark(self.comm_stream)
            pending = work
        self.recorder.add("comm", label, chunk, start, end)
        self._in_flight.append(pending)

    def _communicate(self) -> None:
        if self.comm_stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.comm_stream)
        else:
            for pending in self._in_flight:
                pending.wait()
        self._in_flight.clear()
