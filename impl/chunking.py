"""Where a flat buffer of parameters is cut into K chunks: pure, torch-free (the cost model
reads it without torch; impl/gradients.py cuts the real buffer with it)."""

from __future__ import annotations

ALIGN_ELEMENTS = 64  # chunk boundaries on multiples of 64 elements keep slices 128-byte aligned
MAX_CHUNKS = 256

SPLITS = ("bytes", "layers")


def chunk_bounds(spans: list[tuple[int, int]], chunks: int, split: str = "bytes",
                 first_chunk_elements: int | None = None) -> list[int]:
    """The K + 1 element offsets that cut a buffer of parameters laid out as ``spans``.

    ``bytes``: equal chunks on ALIGN_ELEMENTS boundaries; with ``first_chunk_elements`` the first
    chunk has that size (aligned) and the other K − 1 share the rest equally. ``layers``: K
    groups of consecutive parameters, equal in count, cut only between parameters.
    """
    if split not in SPLITS:
        raise ValueError(f"chunk split {split!r}: choose one of {', '.join(SPLITS)}")
    total = spans[-1][1]
    if split == "layers":
        if chunks > len(spans):
            raise ValueError(f"chunks={chunks} with split 'layers' needs at least {chunks} "
                             f"parameter tensors; the model has {len(spans)}")
        return [spans[round(i * len(spans) / chunks)][0] for i in range(chunks)] + [total]
    start, parts = 0, chunks
    bounds = []
    if first_chunk_elements is not None and chunks > 1:
        first = max(ALIGN_ELEMENTS, round(first_chunk_elements / ALIGN_ELEMENTS) * ALIGN_ELEMENTS)
        bounds, start, parts = [0], min(first, total), chunks - 1
    rest = total - start
    bounds += [start + round(i * rest / parts / ALIGN_ELEMENTS) * ALIGN_ELEMENTS
               for i in range(parts)]
    return [*bounds, total]


def first_chunk_elements(first_chunk_mb: float | None, element_size: int) -> int | None:
    """The first chunk's size in elements of the gradient buffer (``first_chunk_mb`` MiB)."""
    return None if first_chunk_mb is None else round(first_chunk_mb * 2**20 / element_size)
