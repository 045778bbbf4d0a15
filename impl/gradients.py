"""All gradients of a model in one flat buffer, split into K contiguous chunks.

Parameters are laid out in reverse registration order, which is the order backward produces
their gradients, and every ``param.grad`` is a view into the buffer (as DDP's
``gradient_as_bucket_view``): autograd accumulates in place and a chunk is all-reduced
without any copy. Chunks are element ranges, so K may exceed the number of parameter
tensors: one parameter can span several chunks, which then become ready together.

How the buffer is cut (``chunk_bounds``): ``bytes`` makes K chunks of equal size; ``layers``
cuts only between parameters, K groups of as many parameter tensors each; a first chunk of a
given size (DDP's 1 MB first bucket) lets the first all-reduce start as early as possible.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn

from impl.chunking import ALIGN_ELEMENTS, MAX_CHUNKS, chunk_bounds


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


_shared: list[dict] = []  # the open shared_buffers() scopes, innermost last


@contextlib.contextmanager
def shared_buffers():
    """Inside, every flat gradient buffer ``zeros`` makes of one size, dtype and device is the
    same tensor: the variants of an interleaved cell, which never step at the same time (each
    segment ends with a device sync and a barrier) and zero it at the start of every step, share
    it instead of holding a copy each (impl/memory.py)."""
    _shared.append({})
    try:
        yield
    finally:
        _shared.pop()


def zeros(numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zeroed flat buffer; inside ``shared_buffers()`` the scope's one buffer of that shape."""
    if not _shared:
        return torch.zeros(numel, dtype=dtype, device=device)
    key = (numel, dtype, torch.device(device))
    if key not in _shared[-1]:
        _shared[-1][key] = torch.zeros(numel, dtype=dtype, device=device)
    return _shared[-1][key].zero_()


class FlatGradients:
    def __init__(self, model: nn.Module, chunks: int, workload_name: str, split: str = "bytes",
                 first_chunk_elements: int | None = None,
                 allocate: Callable[[int, torch.dtype, torch.device], torch.Tensor] = zeros):
        """``allocate(numel, dtype, device)`` makes the zeroed flat buffer (symmetric memory
        for strategies whose peers read it directly)."""
        check_chunks(chunks, model, workload_name)
        self.params = [p for p in reversed(list(model.parameters())) if p.requires_grad]
        dtypes = {p.dtype for p in self.params}
        if len(dtypes) != 1:
            raise ValueError(f"workload {workload_name!r} mixes parameter dtypes {dtypes}; "
                             "one flat gradient buffer needs one dtype")
        total = sum(p.numel() for p in self.params)
        first = self.params[0]
        self.buffer = allocate(total, first.dtype, first.device)

        spans, offset = [], 0
        for param in self.params:
            param.grad = self.buffer[offset:offset + param.numel()].view_as(param)
            spans.append((offset, offset + param.numel()))
            offset += param.numel()

        self.bounds = chunk_bounds(spans, chunks, split, first_chunk_elements)
        if any(b <= a for a, b in zip(self.bounds, self.bounds[1:])):
            raise ValueError(f"chunks={chunks} leaves an empty chunk for workload "
                             f"{workload_name!r} with these chunk sizes: use fewer chunks")
        self.chunks = [self.buffer[a:b] for a, b in zip(self.bounds, self.bounds[1:])]
        # Per chunk, the slices of parameters and of gradients it covers, as the two lists
        # torch._foreach_add_ takes: what an update of that chunk alone touches (the update
        # inside the overlap, on the step's critical path, so grouped once here).
        self.chunk_slices: list[tuple[list[torch.Tensor], list[torch.Tensor]]] = []
        for a, b in zip(self.bounds, self.bounds[1:]):
            cut = [(max(a, s) - s, min(b, e) - s, param)
                   for param, (s, e) in zip(self.params, spans) if s < b and e > a]
            self.chunk_slices.append(([param.detach().view(-1)[i:j] for i, j, param in cut],
                                      [param.grad.view(-1)[i:j] for i, j, param in cut]))
        # chunks_of[i]: the chunks parameter i writes into; readiness counts per chunk.
        self.chunks_of = [
            [c for c, (a, b) in enumerate(zip(self.bounds, self.bounds[1:])) if s < b and e > a]
            for s, e in spans
        ]
        self.writers = [sum(c in owned for owned in self.chunks_of) for c in range(chunks)]
        self._pending: list[int] = []
        self._hooks: list = []

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
