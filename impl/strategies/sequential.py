"""Sequential: forward, the whole backward, then the all-reduce of every chunk, then update.

No overlap: the baseline of every comparison, and on one GPU the CUDA baseline of the course
study's phase 1. Chunks are all-reduced one after another with blocking calls, so with K > 1
it is the sequential reference at the same chunking as the overlapped strategies.
"""

from __future__ import annotations

import torch.distributed as dist

from impl.strategies.base import ChunkedGradientStrategy
from impl.strategy_records import REFERENCE


class SequentialStrategy(ChunkedGradientStrategy):
    name = "sequential"
    role = REFERENCE

    def _communicate(self) -> None:
        if not self.communicates:
            return
        for index, chunk in enumerate(self.flat.chunks):
            start = self.recorder.mark()
            dist.all_reduce(chunk, group=self.group)  # blocks the stream (NCCL) or the CPU
            self.recorder.add("comm", f"all-reduce c{index}", index, start, self.recorder.mark())
