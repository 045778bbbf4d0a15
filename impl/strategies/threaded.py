"""Threaded: a communication thread all-reduces chunks while the main thread computes backward.

The course study's phase 2 (OpenMP sections) with real work: autograd hooks put each ready
chunk on a queue; the communication thread takes it, waits until its gradients really exist
(on GPU: the chunk's ready event), runs a blocking all-reduce, and takes the next. The main
thread joins the queue before the update. With ``update_in_overlap`` the communication
thread also updates each chunk's parameters right after its all-reduce.
"""

from __future__ import annotations

import queue
import threading

import torch
import torch.distributed as dist

from impl.strategies.base import ChunkedGradientStrategy
from impl.strategies.knobs import communication_group, communication_stream


class ThreadedStrategy(ChunkedGradientStrategy):
    name = "threaded"
    supports_update_in_overlap = True

    def __init__(self, model, workload, group, options):
        super().__init__(model, workload, group, options)
        self.comm_stream = communication_stream(self.device, options)
        self.comm_group = communication_group(group, options)
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="overlap-comm", daemon=True)
        self._thread.start()

    def _chunk_ready(self, chunk: int, ready) -> None:
        if self.communicates or self.options.update_in_overlap:
            self._queue.put((chunk, ready))

    def _serve(self) -> None:
        if self.comm_stream is not None:
            torch.cuda.set_device(self.device)
        while (item := self._queue.get()) is not None:
            try:
                if self._error is None:  # after a failure, drain so the main thread wakes up
                    self._all_reduce(*item)
            except BaseException as error:  # handed to the main thread, which re-raises it
                self._error = error
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _all_reduce(self, chunk: int, ready) -> None:
        tensor, label = self.flat.chunks[chunk], f"all-reduce c{chunk}"
        if self.comm_stream is None:
            start = self.recorder.mark()
            if self.communicates:
                dist.all_reduce(tensor, group=self.comm_group)
                self.recorder.add("comm", label, chunk, start, self.recorder.mark())
            self._update_after(chunk, None)
            return
        ready.synchronize()  # the CPU thread blocks until backward has produced the chunk
        with torch.cuda.stream(self.comm_stream):
            start = self.recorder.mark(self.comm_stream)
            if self.communicates:
                dist.all_reduce(tensor, group=self.comm_group)
            end = self.recorder.mark(self.comm_stream)
            self._update_after(chunk, self.comm_stream)
        end.synchronize()  # a blocking all-reduce, as in the study's communication section
        if self.communicates:
            self.recorder.add("comm", label, chunk, start, end)

    def _update_after(self, chunk: int, stream) -> None:
        if self.options.update_in_overlap:
            start = self.recorder.mark(stream)
            self._update_chunk(chunk)
            self.recorder.add("compute", f"update c{chunk}", chunk, start,
                              self.recorder.mark(stream))

    def _communicate(self) -> None:
        self._queue.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise RuntimeError(f"communication thread failed: {error}") from error
        if self.comm_stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.comm_stream)

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        super().close()
