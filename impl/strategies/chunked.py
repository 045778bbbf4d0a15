"""Chunked: each chunk's all-reduce starts asynchronously the moment its last gradient is ready.

On GPU the collective is issued from a dedicated communication stream that first waits on an
event recorded on the compute stream when the chunk became ready, so the all-reduce runs
while backward goes on; the update waits for the communication stream. On CPU (gloo) the
async work runs on gloo's own threads and a completion callback times it.

With ``update_in_overlap`` each chunk's parameters are updated right after its all-reduce,
on the communication side (the communication stream, or gloo's completion callback), so the
update of every chunk but the last is hidden behind backward.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from impl.strategies.base import ChunkedGradientStrategy
from impl.strategies.knobs import communication_group, communication_stream
from impl.timeline import LateMark


class ChunkedStrategy(ChunkedGradientStrategy):
    name = "chunked"
    supports_update_in_overlap = True

    def __init__(self, model, workload, group, options):
        super().__init__(model, workload, group, options)
        self.comm_stream = communication_stream(self.device, options)
        self.comm_group = communication_group(group, options)
        self._in_flight: list = []  # gloo: futures completing after the end mark; nccl: works

    def _chunk_ready(self, chunk: int, ready) -> None:
        if not self.communicates:
            if self.options.update_in_overlap:  # nothing to wait for: update at once
                start = self.recorder.mark()
                self._update_chunk(chunk)
                self.recorder.add("compute", f"update c{chunk}", chunk, start,
                                  self.recorder.mark())
            return
        label, tensor = f"all-reduce c{chunk}", self.flat.chunks[chunk]
        if self.comm_stream is None:
            start, end = self.recorder.mark(), LateMark()
            work = dist.all_reduce(tensor, group=self.comm_group, async_op=True)
            # Wait on the chained future, not the work: its callback has then surely run.
            pending = work.get_future().then(lambda _: self._finished_on_host(chunk, end))
        else:
            with torch.cuda.stream(self.comm_stream):
                self.comm_stream.wait_event(ready)  # the chunk's gradients are computed
                start = self.recorder.mark(self.comm_stream)
                work = dist.all_reduce(tensor, group=self.comm_group, async_op=True)
                work.wait()  # the comm stream waits for NCCL's stream; the CPU does not block
                end = self.recorder.mark(self.comm_stream)
                if self.options.update_in_overlap:
                    self._update_chunk(chunk)
                    self.recorder.add("compute", f"update c{chunk}", chunk, end,
                                      self.recorder.mark(self.comm_stream))
            pending = work
        self.recorder.add("comm", label, chunk, start, end)
        self._in_flight.append(pending)

    def _finished_on_host(self, chunk: int, end: LateMark) -> None:
        """gloo's completion callback (on gloo's thread): the end mark, then the chunk's update."""
        end.set_now()
        if self.options.update_in_overlap:
            start = time.perf_counter()
            self._update_chunk(chunk)
            self.recorder.add("compute", f"update c{chunk}", chunk, start, time.perf_counter())

    def _communicate(self) -> None:
        if self.comm_stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.comm_stream)
        else:
            for pending in self._in_flight:
                pending.wait()
        self._in_flight.clear()
