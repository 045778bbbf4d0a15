"""The GEMM sweep: the shape families the kernels are held to against cuBLAS (torch-free).

Families (docs/gemm.md says why each is there):

- ``square``: 1024 to 16384;
- ``transformer``: the four GEMMs of a layer's forward pass, tokens × out × in, for the
  widths of three model classes (Llama-3.2-1B, Llama-3-8B, Llama-3-70B: hidden size,
  grouped-query QKV width, MLP width) at 2048, 8192 and 16384 tokens;
- ``small_k``: k ≤ 1024 (the epilogue and pipeline fill weigh most);
- ``skinny_m``: m ≤ 512 (too few 128-row tiles to fill the GPU);
- ``ragged``: off every tile size (128, 256, 64) but 16-byte strides;
- ``unaligned``: k or n not a multiple of 8, so TMA cannot read the operands in place.

``--suite-mode full`` runs every shape; the default mode runs ``DEFAULT_SHAPES``, one or
more per family, chosen before any measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

FAMILIES = ("square", "transformer", "small_k", "skinny_m", "ragged", "unaligned")


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
    unaligned = [SweepShape(f"unaligned_{m}x{n}x{k}", "unaligned", m, n, k)
                 for m, n, k in ((4097, 4099, 4101), (1000, 1001, 999), (8191, 8191, 8191),
                                 (2048, 2048, 2047), (4096, 4097, 4096))]
    return (*squares, *transformer_shapes(), *small_k, *skinny, *ragged, *unaligned)


#: The default mode's subset (a few minutes on one H100 with both dtypes): each family, the
#: largest and smallest squares, and the 8B class's layer at 8192 tokens.
DEFAULT_SHAPES = (
    "square_2048", "square_8192",
    "8b_qkv_8192t", "8b_attn_out_8192t", "8b_mlp_up_8192t", "8b_mlp_down_8192t",
    "small_k_8192x8192x1024", "skinny_m_256x8192x8192", "ragged_3000x5000x2000",
    "unaligned_4097x4099x4101",
)


def shapes_for(mode: str) -> tuple[SweepShape, ...]:
    """The shapes ``--suite-mode mode`` runs: all in full, ``DEFAULT_SHAPES`` otherwise,
    only the first two of those in quick."""
    every = sweep_shapes()
    if mode == "full":
        return every
    chosen = DEFAULT_SHAPES if mode == "default" else DEFAULT_SHAPES[:2]
    by_name = {shape.name: shape for shape in every}
    return tuple(by_name[name] for name in chosen)
