"""The GEMM sweep: the shape families the kernels are held to against cuBLAS (torch-free).

Families (docs/gemm.md says why each is there):

- ``square``: 1024 to 16384;
- ``transformer``: the four GEMMs of a layer's forward pass, tokens × out × in, for the
  widths of three model classes (Llama-3.2-1B, Llama-3-8B, Llama-3-70B: hidden size,
  grouped-query QKV width, MLP width) at 2048, 8192 and 16384 tokens;
- ``small_k``: k ≤ 1024 (the epilogue and pipeline fill weigh most);
- ``skinny_m``: m ≤ 512 (too few 128-row tiles to fill the GPU);
- ``ragged``: off every tile size (128, 256, 64) but 16-byte strides;
- ``unaligned``: k or n not a multiple of 8, so TMA cannot read the operands in place;
- ``held_out``: sizes drawn log-uniform in [256, 16384] (half rounded to multiples of 8)
  after v7's measured constants (impl/kernels/tiles.py) were fitted, to test that its
  choices carry over to shapes nobody picked;
- ``held_out_2``: 8 more, drawn the same way after the stream-K rule and the store and
  padding changes were fixed (commit 91227f0's tiles.py), so the first held-out family,
  which those changes were looked at on, no longer counts as unseen;
- ``fresh``: 8 more drawn the same way in every default and full run, with a seed of that
  run (``SEED_VARIABLE``, which suite.run sets and each row records): shapes no list in the
  repository holds, so no change can have been tuned on them.

The full mode runs every shape (about 20 s per dtype on one H100, after the kernel build);
the default mode the held-out families whole and a seeded sample of two shapes of every other
family (``default_sample``), which keeps the run within its budget (docs/budget.md); quick
runs ``QUICK_SHAPES``.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

FAMILIES = ("square", "transformer", "small_k", "skinny_m", "ragged", "unaligned", "held_out",
            "held_out_2", "fresh")
FRESH = "fresh"
FRESH_COUNT = 8
# The fresh family's seed: set by suite.run for every pass of a run (each rank draws the same
# shapes); without it, the UTC date (YYYYMMDD), so a hand run draws the day's shapes.
SEED_VARIABLE = "OVERLAP_SWEEP_SEED"


@dataclass(frozen=True)
class SweepShape:
    """C[m×n] = A[m×k]·B[k×n]; ``name`` is the pytest id and the report's row label."""

    name: str
    family: str
    m: int
    n: int
    k: int


@dataclass(frozen=True)
class ModelWidths:
    """One model class: hidden size, fused QKV output (grouped-query), MLP width."""

    name: str
    hidden: int
    qkv: int
    mlp: int


MODEL_WIDTHS = (
    ModelWidths("1b", hidden=2048, qkv=2048 + 2 * 512, mlp=8192),
    ModelWidths("8b", hidden=4096, qkv=4096 + 2 * 1024, mlp=14336),
    ModelWidths("70b", hidden=8192, qkv=8192 + 2 * 1024, mlp=28672),
)
TOKENS = (2048, 8192, 16384)


def transformer_shapes() -> list[SweepShape]:
    shapes = []
    for model in MODEL_WIDTHS:
        for tokens in TOKENS:
            layer = (("qkv", model.qkv, model.hidden), ("attn_out", model.hidden, model.hidden),
                     ("mlp_up", model.mlp, model.hidden), ("mlp_down", model.hidden, model.mlp))
            for name, n, k in layer:
                shapes.append(SweepShape(f"{model.name}_{name}_{tokens}t", "transformer",
                                         tokens, n, k))
    return shapes


def sweep_shapes() -> tuple[SweepShape, ...]:
    """Every shape of the sweep, family by family."""
    squares = [SweepShape(f"square_{s}", "square", s, s, s) for s in (1024, 2048, 4096, 8192,
                                                                     16384)]
    small_k = [SweepShape(f"small_k_{m}x{n}x{k}", "small_k", m, n, k)
               for m, n, k in ((8192, 8192, 256), (8192, 8192, 512), (8192, 8192, 1024),
                               (4096, 4096, 512), (16384, 16384, 1024))]
    skinny = [SweepShape(f"skinny_m_{m}x{n}x{k}", "skinny_m", m, n, k)
              for m, n, k in ((64, 8192, 8192), (128, 8192, 8192), (256, 8192, 8192),
                              (512, 8192, 8192), (256, 28672, 8192), (512, 4096, 14336))]
    ragged = [SweepShape(f"ragged_{m}x{n}x{k}", "ragged", m, n, k)
              for m, n, k in ((3000, 5000, 2000), (1000, 1000, 1000), (4000, 6000, 5000),
                              (7000, 3000, 4040), (12000, 9000, 2600))]
    # 4095^3 last: the odd layer size on which v6 (its v5 fallback) ran at 0.29 of cuBLAS on
    # one H200; appended after the others, it leaves the default sample as it was.
    unaligned = [SweepShape(f"unaligned_{m}x{n}x{k}", "unaligned", m, n, k)
                 for m, n, k in ((4097, 4099, 4101), (1000, 1001, 999), (8191, 8191, 8191),
                                 (2048, 2048, 2047), (4096, 4097, 4096), (4095, 4095, 4095))]
    held_out = drawn("overlap-suite:gemm-held-out", "held_out", 8)
    held_out_2 = drawn("overlap-suite:gemm-held-out-2", "held_out_2", 8)
    return (*squares, *transformer_shapes(), *small_k, *skinny, *ragged, *unaligned, *held_out,
            *held_out_2)


def drawn(seed: str, family: str, count: int) -> list[SweepShape]:
    """``count`` shapes drawn with ``random.Random(seed)``: m, n and k each
    exp(uniform(ln 256, ln 16384)), n and k of every other draw (the first, third, ...)
    rounded down to a multiple of 8, so that half the shapes can be read in place."""
    draw, shapes = random.Random(seed), []
    for index in range(count):
        m, n, k = (int(math.exp(draw.uniform(math.log(256), math.log(16384))))
                   for _ in range(3))
        if index % 2 == 0:
            n, k = n // 8 * 8, k // 8 * 8
        shapes.append(SweepShape(f"{family}_{m}x{n}x{k}", family, m, n, k))
    return shapes


def fresh_shapes(seed: int) -> list[SweepShape]:
    """The fresh family of the run with ``seed``."""
    return drawn(f"overlap-suite:gemm-fresh:{seed}", FRESH, FRESH_COUNT)


def run_seed(environ: Mapping[str, str] = os.environ) -> int:
    """The fresh family's seed: ``SEED_VARIABLE``, else today's UTC date as YYYYMMDD;
    ValueError naming the value where it is not a whole number."""
    text = environ.get(SEED_VARIABLE)
    if text is None:
        return int(datetime.now(timezone.utc).strftime("%Y%m%d"))
    if not text.strip().isdigit():
        raise ValueError(f"{SEED_VARIABLE}={text!r}: allowed a whole number (the fresh GEMM "
                         "shapes' seed)")
    return int(text)


def seed_for_run(environ: Mapping[str, str] = os.environ) -> int:
    """The seed a run of the suite draws its fresh shapes with: ``SEED_VARIABLE`` where set
    (to draw a run's shapes again), else a new one."""
    if SEED_VARIABLE in environ:
        return run_seed(environ)
    return random.SystemRandom().randrange(1, 10**6)


#: The quick mode's subset: the smallest and the largest squares a layer has.
QUICK_SHAPES = ("square_2048", "square_8192")
#: The default mode's sample: every shape of the held-out families (drawn at random, never
#: tuned on) and this many of every other family, drawn with a seed of their own.
HELD_OUT_FAMILIES = ("held_out", "held_out_2", FRESH)
DEFAULT_PER_FAMILY = 2
DEFAULT_SEED = "overlap-suite:gemm-default-sample"


def default_sample(every: tuple[SweepShape, ...]) -> tuple[SweepShape, ...]:
    """The held-out families whole, and a seeded sample of the others, in sweep order."""
    draw = random.Random(DEFAULT_SEED)
    chosen = set()
    for family in FAMILIES:
        members = [shape.name for shape in every if shape.family == family]
        if family in HELD_OUT_FAMILIES:
            chosen.update(members)
        else:
            chosen.update(draw.sample(members, min(DEFAULT_PER_FAMILY, len(members))))
    return tuple(shape for shape in every if shape.name in chosen)


def shapes_for(mode: str, seed: int | None = None) -> tuple[SweepShape, ...]:
    """The shapes ``--suite-mode mode`` runs: every one and the fresh family (of ``seed``,
    by default ``run_seed()``) in full, the default sample and the fresh family in the
    default mode, ``QUICK_SHAPES`` in quick."""
    every = sweep_shapes()
    if mode == "quick":
        by_name = {shape.name: shape for shape in every}
        return tuple(by_name[name] for name in QUICK_SHAPES)
    fresh = fresh_shapes(run_seed() if seed is None else seed)
    return (*(every if mode == "full" else default_sample(every)), *fresh)
