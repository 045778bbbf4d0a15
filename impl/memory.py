"""What an interleaved cell holds on the GPU, planned before it builds anything, and the one
set of weights and gradients its variants share.

A cell used to build one model per variant and keep them all: at K = 20 the knob variants
make 16 copies of weights and gradients, and a 1.3-billion-parameter bf16 decoder no longer
fit 141 GB (a rank aborted). Now every variant runs on aliases of one set of weights
(``alias_model``: its own Parameter objects, hooks and ``.grad``, the shared storage),
restored from a pristine copy before each variant's segment of a round, so all variants still
run the same steps from the same state in the same shuffled rounds; and every strategy whose
flat gradient buffer is plain memory takes the same one (``impl.gradients.shared_buffers``).
What a variant holds beyond that (``own_bytes``): DDP its buckets, copy-engine its symmetric
buffer and scratch, an NCCL knob its communicator.

The plan (``plan_cell``), in bytes:

    timed = weights + pristine copy (on the GPU where it fits, else pinned host memory)
            + gradients + Σ own_bytes(variant) + activations
    check = weights + max over compared of max(gradients, own_bytes) + activations
            (one candidate being trained; sequential's trained weights wait in host memory)
    needs = max(timed, check) + reserve;   fits when needs ≤ has

``activations`` is measured from one compute-only step; ``has`` is the GPU's free memory
(torch.cuda.mem_get_info) plus what the allocator holds unused; ``reserve`` covers cuBLAS and
NCCL workspaces and fragmentation. A cell that does not fit is skipped with ``plan.line()``.
"""

from __future__ import annotations

import gc
from dataclasses import asdict, dataclass, field, replace

import torch
from torch import nn

from impl.chunking import ALIGN_ELEMENTS
from impl.gradients import FlatGradients
from impl.strategies.knobs import first_chunk_elements, variant_strategy
from impl.workloads import Batch, WorkloadConfig, build_model

GIB = 2**30
RESERVE_BYTES = 2 * GIB  # cuBLAS and NCCL workspaces, the CUDA context's growth
RESERVE_SHARE = 0.05  # of the GPU's memory: the caching allocator's fragmentation
# An NCCL communicator of its own (the knobs nccl_max_ctas, comm_priority): its channel
# buffers (NCCL_BUFFSIZE 4 MiB per channel, each direction, per peer) and proxy state.
COMMUNICATOR_BYTES = GIB // 2


def alias_model(model: nn.Module, workload: WorkloadConfig) -> nn.Module:
    """A model of ``workload`` whose parameters are new Parameter objects over ``model``'s
    storage: its own autograd leaves (hooks, ``.grad``), the same weights."""
    alias = build_model(workload, torch.device("meta"))
    alias.load_state_dict(model.state_dict(), assign=True)
    return alias


class Pristine:
    """A cell's one set of weights (``model``) and a copy of them to restore before each
    variant's segment: on the GPU, or in pinned host memory (a host-to-device copy of the
    weights per segment) where the GPU has no room for it."""

    def __init__(self, model: nn.Module, on_device: bool):
        self.model = model
        self.params = list(model.parameters())
        with torch.no_grad():
            if on_device or self.params[0].device.type != "cuda":
                self.copy = [p.detach().clone() for p in self.params]
            else:
                self.copy = [p.detach().to("cpu").pin_memory() for p in self.params]

    @torch.no_grad()
    def restore(self) -> None:
        torch._foreach_copy_(self.params, self.copy, non_blocking=True)


def own_bytes(variant: str, chunks: int, world_size: int, meta: nn.Module,
              workload_name: str) -> int:
    """What ``variant`` holds beyond the shared weights and gradient buffer (module
    docstring). ``meta``: the workload's model on the meta device."""
    strategy, options = variant_strategy(variant, chunks)
    element = next(meta.parameters()).element_size()
    gradients = sum(p.numel() for p in meta.parameters()) * element
    extra = COMMUNICATOR_BYTES if (options.nccl_max_ctas is not None
                                   or options.comm_priority == "high") and world_size > 1 else 0
    if strategy == "ddp":
        return gradients + extra  # its buckets; the gradients are views into them
    if strategy == "copy-engine" and world_size > 1:
        first = first_chunk_elements(options.first_chunk_mb, element)
        bounds = FlatGradients(meta, chunks, workload_name, options.chunk_split, first).bounds
        for param in meta.parameters():
            param.grad = None
        largest = max(b - a for a, b in zip(bounds, bounds[1:]))
        scratch = (world_size - 1) * (-(-largest // world_size) + ALIGN_ELEMENTS) * element
        return gradients + scratch + extra  # a symmetric buffer of its own, and scratch
    return extra


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes of each part of a cell on one GPU, and whether it fits (module docstring)."""

    parts: dict[str, int]  # the timed phase: weights, pristine copy, gradients, variants...
    check: int  # the check phase's peak
    has: int
    total: int
    pristine_on: str  # "device" or "host"
    variants: int
    per_variant: dict[str, int] = field(default_factory=dict)  # own_bytes, by variant
    note: str = ""  # why the plan could not be completed (one step ran out of memory)

    @property
    def timed(self) -> int:
        return sum(self.parts.values())

    @property
    def reserve(self) -> int:
        return max(RESERVE_BYTES, round(RESERVE_SHARE * self.total))

    @property
    def needs(self) -> int:
        return max(self.timed, self.check) + self.reserve

    @property
    def fits(self) -> bool:
        return self.needs <= self.has and not self.note

    def line(self) -> str:
        """The one line a cell that does not fit is skipped with."""
        parts = ", ".join([f"{name} {value / GIB:.1f}" for name, value in self.parts.items()
                           if value] + ["pristine copy on the host"] * (self.pristine_on == "host"))
        return (f"needs {self.needs / GIB:.1f} GiB on each GPU (timed rounds "
                f"{self.timed / GIB:.1f}: {parts}; check {self.check / GIB:.1f}; reserve "
                f"{self.reserve / GIB:.1f}) and the GPU has {self.has / GIB:.1f} GiB free of "
                f"{self.total / GIB:.1f}{'; ' + self.note if self.note else ''}")

    def to_json(self) -> dict:
        return {**asdict(self), "timed": self.timed, "needs": self.needs,
                "reserve": self.reserve, "fits": self.fits}


def plan_cell(weights: int, gradients: int, per_variant: dict[str, int], compared: list[str],
              activations: int, has: int, total: int) -> MemoryPlan:
    """The plan of a cell whose variants (``per_variant``: their own_bytes) share one set of
    weights and one gradient buffer; the pristine copy goes to the host when the GPU lacks room
    for it."""
    own = sum(per_variant.values())
    # A candidate of the check trains with gradients of its own (DDP's buckets and
    # copy-engine's symmetric buffer are its gradients); sequential's result is on the host.
    check = weights + max((max(gradients, per_variant[n]) for n in compared),
                          default=gradients) + activations
    parts = {"weights": weights, "pristine copy": weights, "gradients": gradients,
             "variants' own buffers": own, "activations": activations}
    plan = MemoryPlan(parts, check, has, total, "device", len(per_variant), dict(per_variant))
    if plan.fits:
        return plan
    return MemoryPlan({**parts, "pristine copy": 0}, check, has, total, "host",
                      len(per_variant), dict(per_variant))


def copies_bytes(weights: int, gradients: int, per_variant: dict[str, int],
                 activations: int) -> int:
    """What the same cell needed with a model and gradients of its own per variant (before
    the variants shared them): for comparison in the plan's tests and the README."""
    return sum(weights + gradients + own for own in per_variant.values()) + activations


def step_activations(workload: WorkloadConfig, device: torch.device, batch: Batch) -> int:
    """Bytes one compute-only step adds at its peak (saved activations, autograd's temporaries),
    measured on a model and gradient buffer built for it and freed after."""
    from impl.strategies import StrategyOptions, build_strategy

    runner = build_strategy("sequential", build_model(workload, device), workload, None,
                            StrategyOptions(check_finite=False))
    try:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        runner.step(batch)
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    finally:
        runner.close()
        del runner
        release()


def release() -> None:
    """Free what dropped objects still hold (reference cycles), and the allocator's cache."""
    gc.collect()
    torch.cuda.empty_cache()


def gpu_has(device: torch.device) -> tuple[int, int]:
    """(bytes this process can still use on the GPU, the GPU's total)."""
    free, total = torch.cuda.mem_get_info(device)
    unused = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return free + unused, total


def plan_for_cell(workload: WorkloadConfig, variants: list[str], compared: list[str],
                  chunks: int, world_size: int, device: torch.device,
                  batch: Batch) -> MemoryPlan:
    """The plan of one cell on this GPU: sizes from the model on the meta device; activations
    measured from one step, but only when everything else fits."""
    release()
    meta = build_model(workload, torch.device("meta"))
    weights = sum(p.numel() * p.element_size() for p in meta.parameters())
    per_variant = {v: own_bytes(v, chunks, world_size, meta, workload.name) for v in variants}
    has, total = gpu_has(device)
    plan = plan_cell(weights, weights, per_variant, compared, 0, has, total)
    if not plan.fits:
        return plan
    try:
        activations = step_activations(workload, device, batch)
    except torch.cuda.OutOfMemoryError:
        release()
        return replace(plan, note="one compute-only step ran out of memory")
    return plan_cell(weights, weights, per_variant, compared, activations, *gpu_has(device))


def agreed(plan: MemoryPlan, group, device: torch.device) -> MemoryPlan:
    """``plan``, or, where another rank of ``group`` cannot fit the cell, the same plan marked
    so: every rank skips it together (none runs collectives the others never join, none
    aborts)."""
    import torch.distributed as dist

    fits = torch.tensor(float(plan.fits), device=device)
    if group is not None and dist.get_world_size(group) > 1:
        dist.all_reduce(fits, op=dist.ReduceOp.MIN, group=group)
    if plan.fits and not fits.item():
        return replace(plan, note="another rank's GPU cannot fit it")
    return plan
