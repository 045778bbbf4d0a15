"""Flat buckets for the offload: consecutive small tensors moved and updated as one.

The offload pays, per unit it moves, a copy each way (and its events) and a host Adam call,
whatever the unit's size. Per tensor, a model of many small tensors pays those fixed costs more
often than it moves bytes: the bf16 GPT decoder ``gpt_small_bf16`` has 149 tensors, 111 of them
under 1M values, and its host Adam ran at 37 GB/s against 99.5 GB/s over large pieces (one
H100, docs/hybrid.md). ZeRO-Offload flattens parameters into contiguous buffers for this
reason, and DDP groups gradients into buckets for the same one on the network.

``bucket_layout`` groups the tensors, in the order backward finishes their gradients (reverse
registration order, as DDP's buckets), into buckets of at most ``cap`` values: a tensor joins
the open bucket while the bucket stays within the cap and holds its dtype, else it opens the
next one; a tensor larger than the cap is a bucket of its own (split into host Adam's pieces as
before). A bucket is launched when its last member's gradient is ready: one packed gradient,
one copy to the host per piece, one host Adam call per piece, one copy back per piece.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from impl.hybrid.host_adam import PIECE_ELEMENTS, piece_spans

# A bucket as large as one of host Adam's pieces (4M values: 8 MiB in bf16, 16 MiB in fp32,
# the order of DDP's 25 MiB): a bucket of small tensors then costs one call and one copy each
# way, like one piece of a large tensor, so it runs at the rate the bounds measure over such
# pieces (impl/hybrid/bounds.py: 99.5 GB/s for host Adam, 53 GB/s for pinned copies on one
# H100). Larger buckets pay the fixed costs less often but lengthen the overlapped offload's
# tail, the last bucket's host work after backward: 4M bf16 values cost 1.5 ms at those rates
# (28 / 99.5 + 2 / 53.5 + 2 / 52.8 ns a value), 4.5% of gpt_small_bf16's 33.6 ms GPU step; 16M
# would cost 18%.
BUCKET_ELEMENTS = PIECE_ELEMENTS


def check_bucket_elements(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"hybrid bucket_elements={value!r}: choose an integer ≥ 1 (values a "
                         "bucket holds; 1 moves every tensor on its own)")


def bucket_layout(sizes: Sequence[int], kinds: Sequence[Hashable], cap: int) -> list[list[int]]:
    """Buckets of tensor indices, in the order given (the order the gradients become ready):
    consecutive tensors of one kind (dtype) while their values sum to at most ``cap``; a tensor
    over ``cap`` alone."""
    check_bucket_elements(cap)
    if len(sizes) != len(kinds):
        raise ValueError(f"{len(sizes)} tensor sizes but {len(kinds)} dtypes")
    buckets: list[list[int]] = []
    held, kind = 0, None
    for index, (size, this_kind) in enumerate(zip(sizes, kinds)):
        if not buckets or held + size > cap or this_kind != kind:
            buckets.append([])
            held, kind = 0, this_kind
        buckets[-1].append(index)
        held += size
    return buckets


def calls_per_step(bucket_sizes: Sequence[int]) -> dict[str, int]:
    """What the offload pays per step for buckets of ``bucket_sizes`` values: one launch per
    bucket, and a host Adam call and a copy each way per piece of it (host_adam.piece_spans)."""
    pieces = sum(len(piece_spans(size)) for size in bucket_sizes)
    return {"buckets": len(bucket_sizes), "host_adam_calls": pieces, "copies_to_host": pieces,
            "copies_to_device": pieces}
