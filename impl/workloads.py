"""Workloads: their configs (frozen dataclasses), models built from a seed, batches made on device.

The named presets of every study are in impl/presets.py. Every rank builds identical initial
weights (same seed) and draws its own batch (seed, rank, step), as in data-parallel training.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class SeedLayerConfig:
    """The course study's layer: y = x·W, grad_w = xᵀ·grad_out, SGD."""

    name: str
    rows: int = 1024
    features: int = 512
    dtype: str = "fp32"
    kernel: str = "cublas"  # "cublas" (torch), "seed" or a GEMM version: impl/kernels/autograd.py
    kind: str = "seed_layer"

    @property
    def batch(self) -> int:
        return self.rows


@dataclass(frozen=True)
class MLPConfig:
    """A stack of Linear(width, width, bias=False) + GELU."""

    name: str
    width: int
    depth: int
    batch: int
    dtype: str = "fp32"
    extra_compute: float = 0.0  # fraction of the forward recomputed: real work for gate tests
    kind: str = "mlp"


@dataclass(frozen=True)
class GPTConfig:
    """A small decoder-only transformer (pre-LayerNorm, causal attention, GELU MLP)."""

    name: str
    layers: int
    heads: int
    width: int
    context: int
    batch: int
    vocab: int = 10000
    dtype: str = "fp32"
    dropout: float = 0.0  # after attention, the MLP and the embeddings (the pipeline study: 0.2)
    kind: str = "gpt"


WorkloadConfig = SeedLayerConfig | MLPConfig | GPTConfig


def describe(config: WorkloadConfig) -> dict:
    return asdict(config)


class SeedLayer(nn.Module):
    def __init__(self, config: SeedLayerConfig):
        super().__init__()
        self.kernel = config.kernel
        self.weight = nn.Parameter(torch.randn(config.features, config.features)
                                   / math.sqrt(config.features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel == "cublas":
            return x @ self.weight
        from impl.kernels.autograd import kernel_matmul  # compiled on first use, GPU only

        return kernel_matmul(x, self.weight, self.kernel)


class MLP(nn.Module):
    def __init__(self, config: MLPConfig):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Linear(config.width, config.width, bias=False) for _ in range(config.depth))
        for layer in self.layers:  # He init: activations keep their scale through the stack
            nn.init.normal_(layer.weight, std=math.sqrt(2.0 / config.width))
        self.extra_compute = config.extra_compute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.gelu(layer(x))
        return with_extra_compute(x, self.layers, self.extra_compute)


def with_extra_compute(x: torch.Tensor, layers: nn.ModuleList, extra_compute: float
                       ) -> torch.Tensor:
    """``x`` after real extra work for the gate's slowdown test (MLPConfig.extra_compute):
    extra_compute · len(layers) · rows more rows through the first of ``layers`` (forward and
    backward), added with weight zero so the weights stay exactly those of the plain model.
    A pipeline stage does its share with its own layers, so the stages together do the
    model's."""
    if extra_compute <= 0:
        return x
    rows = max(1, round(extra_compute * len(layers) * x.shape[0]))
    extra = layers[0](x.repeat(math.ceil(rows / x.shape[0]), 1)[:rows])
    return x + 0.0 * extra.sum()


def dropout(config: GPTConfig) -> nn.Module:
    """Dropout where the preset asks for it; no module call at all where it does not."""
    return nn.Dropout(config.dropout) if config.dropout > 0 else nn.Identity()


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.heads = config.heads
        self.norm1 = nn.LayerNorm(config.width)
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.proj = nn.Linear(config.width, config.width)
        self.norm2 = nn.LayerNorm(config.width)
        self.fc = nn.Linear(config.width, 4 * config.width)
        self.out = nn.Linear(4 * config.width, config.width)
        self.drop = dropout(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(attended.transpose(1, 2).reshape(batch, length, width)))
        return x + self.drop(self.out(F.gelu(self.fc(self.norm2(x)))))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.tokens = nn.Embedding(config.vocab, config.width)
        self.positions = nn.Embedding(config.context, config.width)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = nn.LayerNorm(config.width)
        self.head = nn.Linear(config.width, config.vocab, bias=False)
        self.drop = dropout(config)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.drop(self.tokens(tokens) + self.positions(positions))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build_model(config: WorkloadConfig, device: torch.device, seed: int = 0) -> nn.Module:
    """Identical weights on every rank for the same seed."""
    devices = [device] if device.type == "cuda" else []
    # Built on the device itself: initialising 805M parameters on the CPU takes seconds.
    with torch.random.fork_rng(devices=devices), torch.device(device):
        torch.manual_seed(seed)
        model = {"seed_layer": SeedLayer, "mlp": MLP, "gpt": GPT}[config.kind](config)
    return model.to(dtype=DTYPES[config.dtype])


@dataclass
class Batch:
    inputs: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:
        return self.inputs.shape[0]


def make_batch(config: WorkloadConfig, device: torch.device, seed: int = 0, rank: int = 0,
               step: int = 0) -> Batch:
    """This rank's synthetic batch for ``step``, generated on ``device`` (no host copies)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed * 1_000_003 + rank * 10_007 + step)
    dtype = DTYPES[config.dtype]
    if config.kind == "gpt":
        shape = (config.batch, config.context + 1)
        tokens = torch.randint(config.vocab, shape, generator=generator, device=device)
        return Batch(tokens[:, :-1], tokens[:, 1:])
    width = config.features if config.kind == "seed_layer" else config.width
    inputs = torch.randn(config.batch, width, generator=generator, device=device, dtype=dtype)
    targets = torch.randn(config.batch, width, generator=generator, device=device, dtype=dtype)
    return Batch(inputs, targets)


def loss_fn(config: WorkloadConfig, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy for the transformer; 0.5·mean squared error (summed over features) else."""
    if config.kind == "gpt":
        return F.cross_entropy(outputs.flatten(0, 1).float(), targets.flatten())
    return 0.5 * (outputs - targets).float().pow(2).sum() / outputs.shape[0]


def check_batch(config: WorkloadConfig, batch: Batch) -> None:
    """Raise ValueError naming the shape when ``batch`` does not fit ``config``."""
    if config.kind == "gpt":
        expected = (config.batch, config.context)
    else:
        width = config.features if config.kind == "seed_layer" else config.width
        expected = (config.batch, width)
    if tuple(batch.inputs.shape) != expected or batch.targets.shape[0] != expected[0]:
        raise ValueError(f"batch of shape {tuple(batch.inputs.shape)} does not fit workload "
                         f"{config.name!r}: expected inputs of shape {expected}")
