"""All gradients of a model in one flat buffer, split into K contiguous chunks.

Parameters are laid out in reverse registration order, which is the order backward produces
their gradients, and every ``param.grad`` is a view into the buffer (as DDP's
``gradient_as_bucket_view``): autograd accumulates in place and a chunk is all-reduced
without any copy. Chunks are element ranges, so K may exceed the number of parameter
tensors: one parameter can span several chunks, which then become ready together.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

ALIGN_ELEMENTS = 64  # chunk boundaries on multiples of 64 elements keep slices 128-byte aligned
MAX_CHUNKS = 256


def max_chunks(model: nn.Module) -> int:
    """Largest valid K for ``model``: at most MAX_CHUNKS, at least ALIGN_ELEMENTS per chunk."""
    numel = sum(p.numel() for p in model.parameters())
    return max(1, min(MAX_CHUNKS, numel // ALIGN_ELEMENTS))


def check_chunks(chunks: object, model: nn.Module, workload_name: str) -> int:
    limit = max_chunks(model)
    if isinstance(chunks, bool) or not isinstance(chunks, int) or not 1 <= chunks <= limit:
        raise ValueError(f"chunks={chunks!r} is out of range for workload {workload_name!r}: "
                         f"choose an integer from 1 to {limit}")
    return chunks


class FlatGradients:
    def __init__(self, model: nn.Module, chunks: int, workload_name: str):
        check_chunks(chunks, model, workload_name)
        self.params = [p for p in reversed(list(model.parameters())) if p.requires_grad]
        dtypes = {p.dtype for p in self.params}
        if len(dtypes) != 1:
            raise ValueError(f"workload {workload_name!r} mixes parameter dtypes {dtypes}; "
                             "one flat gradient buffer needs one dtype")
        total = sum(p.numel() for p in self.params)
        first = self.params[0]
        self.buffer = torch.zeros(total, dtype=first.dtype, device=first.device)

        spans, offset = [], 0
        for param in self.params:
            param.grad = self.buffer[offset:offset + param.numel()].view_as(param)
            spans.append((offset, offset + param.numel()))
            offset += param.numel()

        aligned = [round(i * total / chunks / ALIGN_ELEMENTS) * ALIGN_ELEMENTS
                   for i in range(chunks)]
        self.bounds = [*aligned, total]
        self.chunks = [self.buffer[a:b] for a, b in zip(self.bounds, self.bounds[1:])]
        # chunks_of[i]: the chunks parameter i writes into; readiness counts per chunk.
        self.chunks_of = [
            [c for c, (a, b) in enumerate(zip(self.bounds, self.bounds[1:])) if s < b and e > a]
            for s, e in spans
        ]
        self.writers = [sum(c in owned for owned in self.chunks_of) for c in range(chunks)]
        self._pending: list[int] = []
        self._hooks: list = []

    @property
    def nbytes(self) -> int:
        return self.buffer.numel() * self.buffer.element_size()

    def chunk_bytes(self) -> list[int]:
        return [c.numel() * c.element_size() for c in self.chunks]

    def zero_(self) -> None:
        """Zero in place: ``param.grad`` must stay a view, so never set it to None."""
        self.buffer.zero_()
        self._pending = list(self.writers)

    def unfinished_chunks(self) -> list[int]:
        """Chunks still waiting for a gradient after backward: an unused parameter."""
        return [chunk for chunk, waiting in enumerate(self._pending) if waiting]

    def on_chunk_ready(self, callback: Callable[[int], None],
                       on_param: Callable[[int, torch.Tensor], None] | None = None) -> None:
        """Call ``callback(chunk)`` during backward once every gradient in the chunk is final.

        ``on_param(index, param)`` runs first for each parameter whose gradient is final, so
        whatever it enqueues is ordered before the chunk's communication.
        """
        for index, param in enumerate(self.params):
            self._hooks.append(param.register_post_accumulate_grad_hook(
                lambda param, index=index: self._accumulated(index, param, callback, on_param)))

    def _accumulated(self, index: int, param: torch.Tensor, callback: Callable[[int], None],
                     on_param: Callable[[int, torch.Tensor], None] | None) -> None:
        if on_param is not None:
            on_param(index, param)
        for chunk in self.chunks_of[index]:
            self._pending[chunk] -= 1
            if self._pending[chunk] == 0:
                callback(chunk)

    def remove_hooks(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()
