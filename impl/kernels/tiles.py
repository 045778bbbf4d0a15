"""v7's choices per shape, from small measured models (pure, torch-free): the tile width
and the split-K factor (a wave model with one measured rate per tile) and which operands
are copied onto rows of whole 128-byte lines.

v7 (gemm_v7.cu) is persistent: min(tiles, SMs) CTAs share the 128 × BN output tiles, so
its time is about

    waves(BN) · 128 · BN · k / rate(BN),   waves(BN) = ceil(tiles(BN) / SMs)

where tiles(BN) = ceil(m / 128) · ceil(n / BN) and rate(BN) is what one SM sustains on a
tile of that width once the pipeline is full. ``choose_block_n`` picks the width with the
smaller estimate; ties go to the wider tile, which reads fewer operand bytes per FLOP.

Split-K into S parts makes S · tiles(BN) work units of ceil(slices / S) slices each, and
adds the partial sums' traffic: each unit writes its 128 × BN tile in fp32 and a second
kernel reads them back, 8 · S · m · n bytes more than the unsplit kernel moves, costed at
HBM bandwidth (the roofline's ridge point turns bytes into slice times). A split cannot
make the GEMM faster than reading its operands once from HBM, so the compute term has
that memory roof as its floor. The width is chosen first, unsplit (``choose_block_n``),
and the split for it after (``choose_splits``): in the first sweep with split-K
(results/h100x1/gemm-sweep-20261125T1636Z.json) a joint choice took the 256-wide tile
split 2-4 ways on three shapes where the 128-wide one, split or not, was 8-10% faster, and
split m = 128 (memory-bound) at a loss of 11%. This order and the floor were set after
that sweep, from it: on each of its 140 rows they pick a configuration it timed, within
0.5% of the fastest it timed there; a later sweep tests them as the plan.
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

#: Per-SM throughput of each tile width relative to the 256-wide tile (1.0): the rate that
#: makes the wave model reproduce v7's measured time ratio with each width forced, median
#: over the 124 rows of the first sweep (results/h100x1/gemm-sweep-20261125T1551Z-*.json,
#: one H100 SXM; quartiles 0.74 and 0.85). Later sweeps and the held-out family test it.
TILE_RATES: Mapping[int, float] = MappingProxyType({256: 1.0, 128: 0.79})

#: TMA reads a row in 128-byte boxes; where rows do not start on 128-byte lines (a stride
#: not a multiple of 64 elements), v7 ran at 0.51-0.79 of cuBLAS on the ragged family of
#: the first sweep (median 0.56) against about 0.90 on aligned shapes of the same size, so
#: about 1 - 0.56 / 0.90 = 0.4 of its time is what copying the operands onto aligned rows
#: can win.
LINE_ELEMENTS = 64
LINE_PAD_GAIN = 0.4

#: Split-K bounds: each part keeps at least MIN_SPLIT_SLICES 64-deep slices, as many as the
#: shared-memory ring holds (4 or 6), so a part's pipeline fills before it drains.
MAX_SPLITS = 16
MIN_SPLIT_SLICES = 4
#: FLOP of one 128 × 256 × 64 slice: the wave model's unit of work on one SM.
SLICE_FLOP = 2 * BLOCK_M * 256 * BLOCK_K


def tiles(m: int, n: int, block_n: int) -> int:
    """Output tiles of 128 × ``block_n`` covering an m × n result."""
    return math.ceil(m / BLOCK_M) * math.ceil(n / block_n)


def stream_k_tiles(tile_count: int, slices: int, sms: int) -> int:
    """The tiles v7 shares out stream-K (gemm_v7.cu): those of the last, partial wave (all of
    them where there are fewer than SMs), 0 where the waves are whole or the partial wave
    has fewer slices than there are SMs to share them."""
    partial = tile_count % sms
    return partial if partial * slices >= sms else 0


def estimated_time(m: int, n: int, k: int, block_n: int, sms: int,
                   rates: Mapping[int, float] = TILE_RATES, splits: int = 1,
                   ridge_flop_per_byte: float = 0.0, stream_k: bool = False) -> float:
    """The wave model's time, in units of one 256-wide tile's 64-deep slice on one SM.
    With a ridge point, at least the operands' bytes at HBM bandwidth, and with
    ``splits`` > 1 or ``stream_k``, plus the partial sums' bytes; without one, the compute
    term alone.

    Stream-K: the whole waves as before, then the last partial wave's sk tiles · slices
    shared evenly by the SMs, each SM's share at least its A and B boxes' bytes at its part
    of HBM bandwidth: SMs that share a tile work on it at different depths of K, so they
    share no operand reads in L2 (the raster order's reuse is lost); every SM's run ends
    inside a tile, so about sk + SMs partial 128 × BN tiles are written in fp32 and read
    back by the sum. Without the HBM term the model chose stream-K on 24 of the first
    stream-K sweep's rows and lost up to 0.27 of cuBLAS (70b_mlp_down_2048t, 448 slices);
    with it, it ranks that sweep's measured stream-K / plain ratios in order
    (results/h100x1/logs/gemm-sweep-20261125T1832Z.json)."""
    if sms < 1:
        raise ValueError(f"sms must be at least 1; got {sms}")
    if block_n not in rates:
        raise ValueError(f"block_n {block_n} has no measured rate; known: "
                         f"{', '.join(map(str, sorted(rates)))}")
    if not 1 <= splits <= MAX_SPLITS:
        raise ValueError(f"splits must be in [1, {MAX_SPLITS}]; got {splits}")
    if stream_k and splits > 1:
        raise ValueError(f"stream-K runs unsplit; got splits {splits}")
    count = tiles(m, n, block_n)
    slices = max(1, math.ceil(k / BLOCK_K))
    slice_cost = (block_n / 256) / rates[block_n]
    # bytes / bandwidth over one slice's time on one SM (SLICE_FLOP / (peak / sms)).
    per_byte = ridge_flop_per_byte / (SLICE_FLOP * sms)
    operands = 2 * (m * k + k * n + m * n) * per_byte  # 16-bit A, B and C, once each
    shared = stream_k_tiles(count, slices, sms) if stream_k else 0
    if shared:
        unshared_bytes = 2 * (BLOCK_M + block_n) * BLOCK_K * shared * slices
        compute = (count - shared) // sms * slices * slice_cost + max(
            math.ceil(shared * slices / sms) * slice_cost, unshared_bytes * per_byte)
        partials = 8 * BLOCK_M * block_n * (shared + sms) * per_byte
    else:
        compute = math.ceil(count * splits / sms) * math.ceil(slices / splits) * slice_cost
        partials = 8 * splits * m * n * per_byte if splits > 1 else 0.0
    return max(compute, operands) + partials


def split_candidates(k: int) -> range:
    """Split factors that keep every part at least MIN_SPLIT_SLICES slices deep."""
    slices = max(1, math.ceil(k / BLOCK_K))
    return range(1, max(1, min(MAX_SPLITS, slices // MIN_SPLIT_SLICES)) + 1)


def choose_splits(m: int, n: int, k: int, block_n: int, sms: int,
                  ridge_flop_per_byte: float | None,
                  rates: Mapping[int, float] = TILE_RATES) -> int:
    """The split-K factor v7 runs at tile width ``block_n`` (1: no split). Without a ridge
    point (a device with no peaks row) the partials' cost is unknown, so v7 does not split."""
    if ridge_flop_per_byte is None:
        return 1
    return min(split_candidates(k), key=lambda splits: estimated_time(
        m, n, k, block_n, sms, rates, splits, ridge_flop_per_byte))


def chooses_stream_k(m: int, n: int, k: int, block_n: int, splits: int, sms: int,
                     ridge_flop_per_byte: float | None,
                     rates: Mapping[int, float] = TILE_RATES) -> bool:
    """Whether v7 shares its last partial wave stream-K rather than run ``splits`` (the
    split-K choice) at width ``block_n``: where the model finds it faster. Without a ridge
    point the partials' cost is unknown, so v7 does not."""
    if ridge_flop_per_byte is None or stream_k_tiles(
            tiles(m, n, block_n), max(1, math.ceil(k / BLOCK_K)), sms) == 0:
        return False
    return estimated_time(m, n, k, block_n, sms, rates, 1, ridge_flop_per_byte,
                          stream_k=True) < estimated_time(m, n, k, block_n, sms, rates, splits,
                                                          ridge_flop_per_byte)


def choose_block_n(m: int, n: int, k: int, sms: int,
                   rates: Mapping[int, float] = TILE_RATES) -> int:
    """The tile width v7 runs for an m × n × k GEMM on a GPU of ``sms`` multiprocessors
    (the unsplit wave model; ``choose_splits`` then splits K for this width)."""
    for name, value in (("m", m), ("n", n), ("k", k)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0; got {value}")
    return min(sorted(rates, reverse=True),
               key=lambda width: estimated_time(m, n, k, width, sms, rates))


def copies_onto_lines(m: int, n: int, k: int, block_n: int,
                      ridge_flop_per_byte: float) -> tuple[bool, bool]:
    """Whether v7 should copy A, and B, onto rows of whole 128-byte lines, each on its own.

    An operand whose rows do not start on lines (A's where k, B's where n is not a multiple
    of ``LINE_ELEMENTS``) is copied where the copy (each element read and written once, 2
    bytes each way) costs less than its misaligned reads: ``LINE_PAD_GAIN`` of the GEMM's
    compute time, shared between the operands as their bytes in each 64-deep slice are (A's
    BLOCK_M rows, B's ``block_n`` columns). With ridge = peak / bandwidth of the device,
    copy_bytes / bw < gain · share · 2mnk / peak reads copy_bytes · ridge < gain · share ·
    2mnk. The gain was measured with both operands misaligned (the ragged family of the first
    sweep), where the shares add up to it; how it splits between them is this model's
    assumption, which the sweep tests with both copied (``v7_lines``) and neither
    (``v7_rows8``) beside the plan's choice.
    """
    work = LINE_PAD_GAIN * 2 * m * n * k
    share_a = BLOCK_M / (BLOCK_M + block_n)
    copy_a = k % LINE_ELEMENTS != 0 and 4 * m * k * ridge_flop_per_byte < share_a * work
    copy_b = n % LINE_ELEMENTS != 0 and 4 * k * n * ridge_flop_per_byte < (1 - share_a) * work
    return copy_a, copy_b
