"""Tensor-parallel linear layers and the MLP block they make, forward and backward written once.

The study's layer, split over the p ranks of a process group (rank i holds W_i):

- column-parallel Linear: W = [W_1 … W_p] split by columns, Y_i = X·W_i (outputs gathered on
  request); backward dW_i = Xᵀ·dY_i and dX = Σ_i dY_i·W_iᵀ, whose sum is an all-reduce;
- row-parallel Linear: W split by rows, X split by columns (X_i), Y = Σ_i X_i·W_i, the partial
  products summed by an all-reduce; backward dX_i = dY·W_iᵀ, dW_i = X_iᵀ·dY;
- the MLP block Y = GELU(X·W1)·W2: column-parallel W1, GELU on each rank's columns,
  row-parallel W2. One collective forward (all-reduce of Y) and one backward (of dX).
  In the sequence-parallel form X and Y are sharded by tokens: the column layer all-gathers X
  before its GEMM and the row layer reduce-scatters after its GEMM (and the reverse in
  backward), the form PyTorch's fused all-gather-matmul / matmul-reduce-scatter ops take.

Every collective and GEMM goes through a schedule (impl/tensor_parallel/schedules.py:
sync, overlapped, fused) with a GEMM backend (torch, or this project's v3/v5/v6 kernels).
Checked against the single-device block by torch autograd in fp64 (CPU) or fp32 (GPU) before
anything is timed:

    python -m pytest tests/test_tensor_parallel.py          # CPU, gloo, 1/2/4 ranks
    python -m pytest suite/bench_tp.py                      # one GPU (world size 1)
    torchrun --nproc-per-node 4 --local-ranks-filter 0 -m pytest suite/bench_tp.py
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from enum import Enum, auto

import torch
import torch.distributed as dist
import torch.nn.functional as F

from impl.rows.kinds import TENSOR_PARALLEL
from impl.tensor_parallel.schedules import Schedule
from impl.timeline import Timeline
from impl.workloads import DTYPES


@dataclass(frozen=True)
class TpMlpConfig:
    """The MLP block X[tokens×hidden] → GELU(X·W1[hidden×ffn])·W2[ffn×hidden].

    ``sequence_parallel``: X and Y sharded by tokens (all-gather / reduce-scatter) instead of
    replicated (all-reduce). ``pieces_per_peer``: the overlapped schedule splits each peer's
    rows into this many pieces.
    """

    name: str
    tokens: int
    hidden: int
    ffn: int
    dtype: str = "fp32"
    sequence_parallel: bool = True
    pieces_per_peer: int = 1

    def __post_init__(self) -> None:
        # Every size of the block is an int field (tokens, hidden, ffn, pieces_per_peer); the
        # annotations are strings here (from __future__ import annotations).
        for size in (f.name for f in fields(self) if f.type == "int"):
            value = getattr(self, size)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{self.name}: {size}={value!r}; choose an integer ≥ 1")
        if self.dtype not in DTYPES:
            raise ValueError(f"{self.name}: dtype={self.dtype!r}; choose one of "
                             f"{', '.join(DTYPES)}")

    def scaled(self, world_size: int, scaling: str) -> TpMlpConfig:
        """Strong scaling keeps the layer; weak scaling keeps each rank's share (ffn grows)."""
        check_world(world_size)
        if scaling not in SCALINGS:
            raise ValueError(f"unknown scaling {scaling!r}; choose one of {', '.join(SCALINGS)}")
        return replace(self, ffn=self.ffn * world_size) if scaling == "weak" else self

    def check(self, world_size: int) -> None:
        """ValueError naming the shape that does not split over ``world_size`` ranks."""
        check_world(world_size)
        pieces = world_size * self.pieces_per_peer
        if self.ffn % world_size:
            raise ValueError(f"{self.name}: ffn {self.ffn} does not split over {world_size} "
                             "ranks")
        if self.tokens % pieces:
            raise ValueError(f"{self.name}: tokens {self.tokens} is not a multiple of world "
                             f"size {world_size} × pieces per peer {self.pieces_per_peer}")


SCALINGS = ("single", "strong", "weak")


def check_world(world_size: int) -> None:
    """ValueError naming ``world_size`` unless it is an integer ≥ 1 (ranks the block splits
    over): every function taking a world size checks it first."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world size {world_size!r}: choose an integer ≥ 1 (ranks)")

# --- the layers ---------------------------------------------------------------------------------


class ColumnParallelLinear(torch.autograd.Function):
    """Y_i = X·W_i (W_i: this rank's columns of W).

    X replicated, or sharded by tokens (``sequence_parallel``: all-gathered before the GEMM).
    ``gather_output``: Y = [Y_1 … Y_p] on every rank (replicated X only).
    Backward, dY_i this rank's columns of dY: dW_i = Xᵀ·dY_i; dX = Σ_i dY_i·W_iᵀ, summed by an
    all-reduce (replicated X) or a reduce-scatter (each rank keeps its tokens' rows of dX).
    """

    @staticmethod
    def forward(ctx, x, w, schedule: Schedule, name: str, sequence_parallel: bool,
                gather_output: bool):
        if sequence_parallel:
            x, y = schedule.all_gather_matmul(x, w, f"{name} fwd")
        elif gather_output:
            y = schedule.matmul_all_gather(x, w, f"{name} fwd")
        else:
            y = schedule.matmul(x, w, f"{name} fwd")
        ctx.save_for_backward(x, w)
        ctx.schedule, ctx.name, ctx.sequence_parallel = schedule, name, sequence_parallel
        ctx.gather_output = gather_output
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        schedule, name = ctx.schedule, ctx.name
        if ctx.gather_output:
            columns = w.shape[1]
            dy = dy[:, schedule.rank * columns:(schedule.rank + 1) * columns]
        sum_dx = (schedule.matmul_reduce_scatter if ctx.sequence_parallel
                  else schedule.matmul_all_reduce)
        dx = sum_dx(dy, w.t(), f"{name} dgrad")
        dw = schedule.matmul(x.t(), dy, f"{name} wgrad")
        return dx, dw, None, None, None, None


class RowParallelLinear(torch.autograd.Function):
    """Y = Σ_i X_i·W_i (W_i: this rank's rows of W; X_i: this rank's columns of X).

    The partial products are summed by an all-reduce, or (``sequence_parallel``) by a
    reduce-scatter that leaves each rank its tokens' rows of Y.
    Backward: dX_i = dY·W_iᵀ and dW_i = X_iᵀ·dY, dY all-gathered first in the
    sequence-parallel form.
    """

    @staticmethod
    def forward(ctx, x, w, schedule: Schedule, name: str, sequence_parallel: bool):
        sum_y = (schedule.matmul_reduce_scatter if sequence_parallel
                 else schedule.matmul_all_reduce)
        ctx.save_for_backward(x, w)
        ctx.schedule, ctx.name, ctx.sequence_parallel = schedule, name, sequence_parallel
        return sum_y(x, w, f"{name} fwd")

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        schedule, name = ctx.schedule, ctx.name
        if ctx.sequence_parallel:
            dy, dx = schedule.all_gather_matmul(dy, w.t(), f"{name} dgrad")
        else:
            dx = schedule.matmul(dy, w.t(), f"{name} dgrad")
        dw = schedule.matmul(x.t(), dy, f"{name} wgrad")
        return dx, dw, None, None, None


def column_parallel(x: torch.Tensor, w: torch.Tensor, schedule: Schedule, name: str = "W",
                    sequence_parallel: bool = False, gather_output: bool = False) -> torch.Tensor:
    if sequence_parallel and gather_output:
        raise ValueError("gather_output needs replicated X; the sequence-parallel form keeps "
                         "the output split by columns for a row-parallel layer")
    return ColumnParallelLinear.apply(x, w, schedule, name, sequence_parallel, gather_output)


def row_parallel(x: torch.Tensor, w: torch.Tensor, schedule: Schedule, name: str = "W",
                 sequence_parallel: bool = False) -> torch.Tensor:
    return RowParallelLinear.apply(x, w, schedule, name, sequence_parallel)


def tp_mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, schedule: Schedule,
           sequence_parallel: bool) -> torch.Tensor:
    """The MLP block: column-parallel W1, GELU on this rank's columns, row-parallel W2."""
    z = column_parallel(x, w1, schedule, "W1", sequence_parallel)
    return row_parallel(F.gelu(z), w2, schedule, "W2", sequence_parallel)


# --- one rank's block, its reference and its check -----------------------------------------------

class Split(Enum):
    """How a tensor of the block is split over the ranks."""

    TOKENS = auto()  # by token rows, sequence-parallel only (replicated otherwise)
    COLUMNS = auto()  # by columns of the weight
    ROWS = auto()  # by rows of the weight


#: How each tensor of the block is split.
_SPLIT = {"x": Split.TOKENS, "dx": Split.TOKENS, "y": Split.TOKENS, "dy": Split.TOKENS,
          "w1": Split.COLUMNS, "dw1": Split.COLUMNS, "w2": Split.ROWS, "dw2": Split.ROWS}


def shard(config: TpMlpConfig, world_size: int, rank: int, name: str,
          full: torch.Tensor) -> torch.Tensor:
    """Rank ``rank``'s part of the block's tensor ``name`` (inputs and outputs alike)."""
    check_world(world_size)
    split = _SPLIT[name]
    if split is Split.TOKENS and not config.sequence_parallel:
        return full
    if split is Split.COLUMNS:
        return full.tensor_split(world_size, dim=1)[rank].contiguous()
    return full.tensor_split(world_size, dim=0)[rank].contiguous()


def full_tensors(config: TpMlpConfig, device: torch.device, seed: int = 0) -> dict:
    """X, W1, W2 and dY of the whole block, identical on every rank: N(0, 1) inputs, weights
    N(0, 1/fan-in) so activations stay of order 1, rounded once to the block's dtype."""
    generator = torch.Generator(device=device).manual_seed(seed)
    draw = lambda rows, cols, scale: (torch.randn(rows, cols, device=device, generator=generator)
                                      * scale).to(DTYPES[config.dtype])
    t, h, f = config.tokens, config.hidden, config.ffn
    return {"x": draw(t, h, 1.0), "w1": draw(h, f, h ** -0.5), "w2": draw(f, h, f ** -0.5),
            "dy": draw(t, h, 1.0)}


class TpMlpRunner:
    """One rank's share of the block under one schedule; ``step()`` is forward + backward."""

    def __init__(self, config: TpMlpConfig, schedule: Schedule, seed: int = 0):
        config.check(schedule.world)
        self.config, self.schedule = config, schedule
        parts = {name: shard(config, schedule.world, schedule.rank, name, tensor)
                 for name, tensor in full_tensors(config, schedule.device, seed).items()}
        self.x, self.w1, self.w2 = (parts[n].requires_grad_() for n in ("x", "w1", "w2"))
        self.dy = parts["dy"]
        self.y: torch.Tensor | None = None

    def step(self) -> None:
        self.schedule.recorder.begin()
        for tensor in (self.x, self.w1, self.w2):
            tensor.grad = None
        y = tp_mlp(self.x, self.w1, self.w2, self.schedule, self.config.sequence_parallel)
        y.backward(self.dy)
        self.y = y.detach()

    def outputs(self) -> dict[str, torch.Tensor]:
        return {"y": self.y, "dx": self.x.grad, "dw1": self.w1.grad, "dw2": self.w2.grad}

    def timeline(self) -> Timeline:
        """The last step's intervals; synchronises, so call it outside timed regions."""
        if self.schedule.cuda:
            torch.cuda.synchronize(self.schedule.device)
        return self.schedule.recorder.resolve()


def reference_outputs(config: TpMlpConfig, device: torch.device, seed: int = 0) -> dict:
    """Y, dX, dW1, dW2 of the single-device block by torch autograd, from the same rounded
    tensors, in fp64 on CPU and fp32 (TF32 off) on GPU."""
    if torch.backends.cuda.matmul.allow_tf32:
        raise RuntimeError("the fp32 reference needs TF32 off (torch.backends.cuda.matmul."
                           "allow_tf32 is True)")
    wide = torch.float64 if device.type == "cpu" else torch.float32
    inputs = {name: t.to(wide).requires_grad_(name != "dy")
              for name, t in full_tensors(config, device, seed).items()}
    y = F.gelu(inputs["x"] @ inputs["w1"]) @ inputs["w2"]
    y.backward(inputs["dy"])
    return {"y": y.detach(), "dx": inputs["x"].grad, "dw1": inputs["w1"].grad,
            "dw2": inputs["w2"].grad}


def relative_errors(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> dict:
    """max |got − want| / max |want| per tensor (want: this rank's shard of the reference);
    infinite where ``got`` holds a NaN or an infinity (a comparison with NaN never fails)."""
    errors = {}
    for name in want:
        difference = (got[name].to(want[name].dtype) - want[name]).abs()
        finite = bool(torch.isfinite(difference).all())
        errors[name] = float(difference.max() / want[name].abs().max()) if finite else math.inf
    return errors


UNIT_ROUNDOFF = {"fp32": 2.0**-24, "bf16": 2.0**-8, "fp16": 2.0**-11}


def relative_tolerance(dtype: str, longest: int, world_size: int) -> float:
    """How far (max |error| / max |reference|) a correct block may be from the reference.

    u is the unit roundoff of ``dtype``, K = ``longest`` the longest reduction (for the block:
    the largest of tokens, hidden, ffn). Two kinds of error, both random in sign for these
    random inputs, so they add like a random walk and stay near u relative to the largest
    output (Higham & Mary 2019, probabilistic rounding error analysis):
    - rounding to the dtype, at most 5 + p times on any path to an output: Z, GELU(Z), dA, dZ,
      the output itself, one split-K partial in cuBLAS's reduced-precision reductions, and the
      p − 1 partial sums of the cross-rank reduction: (5 + p)·u;
    - fp32 accumulation in another order (pieces, ranks, BLAS blocking) in the up to 3 GEMMs
      on a path: 3·sqrt(K)·2^-24.
    The tolerance is twice their sum: 2·((5 + p)·u + 3·sqrt(K)·2^-24). A missing or misplaced
    piece, or a rank's missing contribution, is off by a sizeable fraction of max |reference|,
    far above it (bf16 at p = 2: 5.5%; fp32: about 1e-5).
    """
    return 2 * ((5 + world_size) * UNIT_ROUNDOFF[dtype] + 3 * math.sqrt(longest) * 2.0**-24)


def check_runner(runner: TpMlpRunner, reference: dict[str, torch.Tensor]) -> dict:
    """One step, then this rank's relative errors against its shard of ``reference``, the
    largest over the group's ranks (a rank that drifted cannot pass), and the tolerance."""
    runner.step()
    schedule, config = runner.schedule, runner.config
    want = {name: shard(config, schedule.world, schedule.rank, name, tensor)
            for name, tensor in reference.items()}
    errors = relative_errors(runner.outputs(), want)
    worst = torch.tensor(list(errors.values()), dtype=torch.float64, device=schedule.device)
    if schedule.world > 1:
        dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=schedule.group)
    errors = dict(zip(errors, worst.tolist()))
    # Its error and tolerance keys are the tensor-parallel row's fields they become.
    row = TENSOR_PARALLEL.names
    return {"errors": errors, row.max_rel_err: max(errors.values()),
            row.tolerance: relative_tolerance(config.dtype, max(config.tokens, config.hidden,
                                                              config.ffn), schedule.world)}


def gemm_shapes(config: TpMlpConfig, world_size: int) -> dict[str, tuple[int, int, int]]:
    """(m, n, k) of each GEMM one rank runs per step, by its timeline label (pieces together)."""
    check_world(world_size)
    t, h, f = config.tokens, config.hidden, config.ffn // world_size
    return {"W1 fwd": (t, f, h), "W1 dgrad": (t, h, f), "W1 wgrad": (h, f, t),
            "W2 fwd": (t, h, f), "W2 dgrad": (t, f, h), "W2 wgrad": (f, h, t)}
