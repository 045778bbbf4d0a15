"""The GPU knobs of the overlapping strategies, in one place (``StrategyOptions`` fields).

- ``comm_priority="high"``: NCCL's internal streams at high priority (a process group created
  with ``ProcessGroupNCCL.Options.is_high_priority_stream``) and the strategy's own
  communication stream at the highest priority CUDA offers, so the scheduler prefers
  communication kernels over queued compute;
- ``nccl_max_ctas``: NCCL's CTA cap (``ProcessGroupNCCL.Options.config.max_ctas``): fewer SMs
  for communication, at the cost of all-reduce bandwidth;
- ``cublas_sm_carveout``: SMs kept free of cuBLAS matrix products during the step
  (``torch._C._set_sm_carveout_experimental``), for communication kernels to run on.

Each knob only exists with NCCL on a GPU; asking for one elsewhere is an error naming it.
Process groups with options are collective to create: only the group's members call
``new_group`` (``use_local_synchronization``), in the same order on every member.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
from torch import nn

from impl.gradients import FlatGradients
from impl.strategies.options import StrategyOptions

HIGHEST_PRIORITY = -100  # CUDA maps it to the highest priority the device offers


def check_nccl_knobs(options, backend: str | None) -> None:
    """ValueError naming the first NCCL knob that cannot apply to ``backend``."""
    if options.comm_priority not in ("normal", "high"):
        raise ValueError(f"comm_priority={options.comm_priority!r}: choose 'normal' or 'high'")
    wanted = [name for name, on in (("comm_priority='high'", options.comm_priority == "high"),
                                    ("nccl_max_ctas", options.nccl_max_ctas is not None)) if on]
    if wanted and backend != "nccl":
        raise ValueError(f"{wanted[0]} is an NCCL knob; this group runs "
                         f"{backend or 'no communication'}")
    if options.nccl_max_ctas is not None and not 1 <= options.nccl_max_ctas <= 64:
        raise ValueError(f"nccl_max_ctas={options.nccl_max_ctas}: choose 1 to 64")


def check_carveout(options, device: torch.device) -> None:
    carveout = options.cublas_sm_carveout
    if carveout is None:
        return
    if device.type != "cuda":
        raise ValueError("cublas_sm_carveout is a GPU knob (cuBLAS); this strategy runs on "
                         f"{device.type}")
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    if not 1 <= carveout < sms:
        raise ValueError(f"cublas_sm_carveout={carveout}: choose 1 to {sms - 1} SMs")


def communication_stream(device: torch.device, options) -> torch.cuda.Stream | None:
    if device.type != "cuda":
        return None
    priority = HIGHEST_PRIORITY if options.comm_priority == "high" else 0
    return torch.cuda.Stream(device, priority=priority)


def communication_group(group: dist.ProcessGroup | None, options) -> dist.ProcessGroup | None:
    """``group`` itself, or a copy of it with the NCCL options the knobs ask for."""
    backend = dist.get_backend(group) if group is not None else None
    check_nccl_knobs(options, backend)
    if group is None or (options.nccl_max_ctas is None and options.comm_priority != "high"):
        return group
    nccl_options = dist.ProcessGroupNCCL.Options()
    nccl_options.is_high_priority_stream = options.comm_priority == "high"
    if options.nccl_max_ctas is not None:
        nccl_options.config.max_ctas = options.nccl_max_ctas
    return dist.new_group(dist.get_process_group_ranks(group), backend="nccl",
                          pg_options=nccl_options, use_local_synchronization=True)


@contextlib.contextmanager
def cublas_carveout(options):
    """cuBLAS leaves ``options.cublas_sm_carveout`` SMs free inside the block (then restores)."""
    if options.cublas_sm_carveout is None:
        yield
        return
    previous = torch._C._get_sm_carveout_experimental()
    torch._C._set_sm_carveout_experimental(options.cublas_sm_carveout)
    try:
        yield
    finally:
        torch._C._set_sm_carveout_experimental(previous)


# Named variants of the strategies: a strategy and the options that differ from its defaults.
# The benchmark measures them side by side with the plain strategies in the same rounds.
VARIANTS: dict[str, tuple[str, dict]] = {
    "ddp-25mb": ("ddp", {"ddp_bucket_mb": 25.0}),  # DDP's default bucket cap
    "chunked+update": ("chunked", {"update_in_overlap": True, "check_finite": False}),
    "threaded+update": ("threaded", {"update_in_overlap": True, "check_finite": False}),
    "chunked+layers": ("chunked", {"chunk_split": "layers"}),
    "chunked+first1mb": ("chunked", {"first_chunk_mb": 1.0}),
    "chunked+priority": ("chunked", {"comm_priority": "high"}),
    "chunked+ctas8": ("chunked", {"nccl_max_ctas": 8}),
    "chunked+carveout32": ("chunked", {"cublas_sm_carveout": 32}),
    "copy-engine+update": ("copy-engine", {"update_in_overlap": True, "check_finite": False}),
}
GPU_VARIANTS = ("chunked+priority", "chunked+ctas8", "chunked+carveout32", "copy-engine+update")


def variant_strategy(name: str, chunks: int, check_finite: bool = False):
    """(strategy name, StrategyOptions) of a plain strategy or a named variant."""
    strategy, fields = VARIANTS.get(name, (name, {}))
    fields = {"check_finite": check_finite, **fields}
    if fields.get("update_in_overlap"):
        fields["check_finite"] = False  # the update happens before the check could veto it
    return strategy, StrategyOptions(chunks=chunks, **fields)


def first_chunk_elements(first_chunk_mb: float | None, element_size: int) -> int | None:
    """The first chunk's size in elements of the gradient buffer (``first_chunk_mb`` MiB)."""
    return None if first_chunk_mb is None else round(first_chunk_mb * 2**20 / element_size)


def chunking_problem(name: str, chunks: int, model: nn.Module, workload_name: str) -> str | None:
    """Why the chunking of a strategy or named variant cannot cut ``model`` into ``chunks``
    (too few parameter tensors for equal layers, a first chunk as large as the model...), or
    None. A model on the meta device will do: nothing is allocated."""
    _, options = variant_strategy(name, chunks)
    first = first_chunk_elements(options.first_chunk_mb, next(model.parameters()).element_size())
    try:
        FlatGradients(model, chunks, workload_name, options.chunk_split, first)
    except ValueError as error:
        return f"{name} at K={chunks}: {error}"
    finally:
        for param in model.parameters():
            param.grad = None
    return None
