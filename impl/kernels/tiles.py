"""v7's tile width per shape: a wave model with one measured rate per tile (pure, torch-free).

v7 (gemm_v7.cu) is persistent: min(tiles, SMs) CTAs share the 128 × BN output tiles, so
its time is about

    waves(BN) · 128 · BN · k_padded / rate(BN),   waves(BN) = ceil(tiles(BN) / SMs)

where tiles(BN) = ceil(m / 128) · ceil(n / BN) and rate(BN) is what one SM sustains on a
tile of that width once the pipeline is full. ``choose_block_n`` picks the width with the
smaller estimate; ties go to the wider tile, which reads fewer operand bytes per FLOP.
Nothing here names a shape: the only inputs are m, n, k, the SM count and ``TILE_RATES``,
measured on large squares where every width fills many waves (see docs/gemm.md), so the
choice carries over to shapes outside the sweep.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

BLOCK_M = 128
BLOCK_K = 64

#: Per-SM throughput of each tile width relative to the 256-wide tile (1.0), from the
#: ratio of v7's TFLOP/s with each width forced on squares of 8192 and 16384 (many waves,
#: so wave quantisation is small), median over bf16 and fp16, on one H100 SXM
#: (results/h100x1/gemm-sweep-*.json, ``tile_rates``).
TILE_RATES: Mapping[int, float] = MappingProxyType({256: 1.0, 128: 0.88})


def tiles(m: int, n: int, block_n: int) -> int:
    """Output tiles of 128 × ``block_n`` covering an m × n result."""
    return math.ceil(m / BLOCK_M) * math.ceil(n / block_n)


def estimated_time(m: int, n: int, k: int, block_n: int, sms: int,
                   rates: Mapping[int, float] = TILE_RATES) -> float:
    """The wave model's time, in units of one 256-wide tile's 64-deep slice on one SM."""
    if sms < 1:
        raise ValueError(f"sms must be at least 1; got {sms}")
    if block_n not in rates:
        raise ValueError(f"block_n {block_n} has no measured rate; known: "
                         f"{', '.join(map(str, sorted(rates)))}")
    waves = math.ceil(tiles(m, n, block_n) / sms)
    slices = max(1, math.ceil(k / BLOCK_K))
    return waves * slices * (block_n / 256) / rates[block_n]


def choose_block_n(m: int, n: int, k: int, sms: int,
                   rates: Mapping[int, float] = TILE_RATES) -> int:
    """The tile width v7 runs for an m × n × k GEMM on a GPU of ``sms`` multiprocessors."""
    for name, value in (("m", m), ("n", n), ("k", k)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0; got {value}")
    return min(sorted(rates, reverse=True),
               key=lambda width: estimated_time(m, n, k, width, sms, rates))
