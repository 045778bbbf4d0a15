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

A process group with options is a group of its own, and making one is collective over the
whole launched world, members or not: with a bound device NCCL splits the new communicator
from the world's, and every rank of the world must take part in the split. A cell of w ranks
inside a larger world runs on its members only while the others wait in a barrier, so the
groups the named variants need are made once per world size, on every rank, before any cell
runs (``make_variant_groups``, called by impl/dist.py), and a strategy only looks them up.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from impl.chunking import first_chunk_elements
from impl.gradients import FlatGradients
from impl.strategies.options import StrategyOptions
from impl.strategy_records import VARIANTS

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


@dataclass(frozen=True)
class GroupOptions:
    """The NCCL options that give a strategy's collectives a process group of their own."""

    high_priority: bool = False
    max_ctas: int | None = None

    @classmethod
    def of(cls, options) -> GroupOptions | None:
        """The options ``StrategyOptions`` asks for, or None where the plain group serves."""
        if options.comm_priority != "high" and options.nccl_max_ctas is None:
            return None
        return cls(options.comm_priority == "high", options.nccl_max_ctas)

    def nccl(self):
        nccl_options = dist.ProcessGroupNCCL.Options()
        nccl_options.is_high_priority_stream = self.high_priority
        if self.max_ctas is not None:
            nccl_options.config.max_ctas = self.max_ctas
        return nccl_options


# Groups with options, by (ranks, options). Made on every rank in the same order.
_GROUPS: dict[tuple[tuple[int, ...], GroupOptions], dist.ProcessGroup | None] = {}


def make_group(ranks: list[int], options: GroupOptions) -> dist.ProcessGroup | None:
    """The group of ``ranks`` with ``options``, made now if it is not made yet. Every rank of
    the launched world must call this, in the same order (None on ranks outside ``ranks``).
    NCCL takes the options; gloo makes a plain group (the knobs are refused there before any
    strategy asks), so the same path runs on the CPU."""
    key = (tuple(ranks), options)
    if key not in _GROUPS:
        backend = dist.get_backend()
        pg_options = options.nccl() if backend == "nccl" else None
        _GROUPS[key] = dist.new_group(list(ranks), backend=backend, pg_options=pg_options)
    return _GROUPS[key]


def variant_group_options() -> tuple[GroupOptions, ...]:
    """The options of every named variant that needs a group of its own (VARIANTS)."""
    found = (GroupOptions.of(variant_strategy(name, 1)[1]) for name in VARIANTS)
    return tuple(dict.fromkeys(options for options in found if options is not None))


def make_variant_groups(sizes: list[int]) -> None:
    """The groups of ranks [0, size) with every named variant's options, for every size: on
    every rank, before any cell runs (impl/dist.py)."""
    for size in sizes:
        for options in variant_group_options():
            make_group(list(range(size)), options)


def options_group(group: dist.ProcessGroup, options: GroupOptions) -> dist.ProcessGroup:
    """``group``'s ranks with ``options``: the group made before the cells, or one made now
    when ``group`` spans the whole world (every rank is here to take part). A subgroup whose
    options were not made up front is an error, not a wait for ranks that will never come."""
    ranks = dist.get_process_group_ranks(group)
    if (made := _GROUPS.get((tuple(ranks), options))) is not None:
        return made
    if len(ranks) == dist.get_world_size():
        return make_group(ranks, options)
    raise ValueError(f"{options} for ranks {ranks} of a world of {dist.get_world_size()}: "
                     "a subgroup with NCCL options must be made on every rank before the "
                     "cells run (impl.strategies.knobs.make_group)")


def communication_group(group: dist.ProcessGroup | None, options) -> dist.ProcessGroup | None:
    """``group`` itself, or the group of its ranks with the NCCL options the knobs ask for."""
    backend = dist.get_backend(group) if group is not None else None
    check_nccl_knobs(options, backend)
    wanted = GroupOptions.of(options)
    if group is None or wanted is None:
        return group
    return options_group(group, wanted)


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


def variant_strategy(name: str, chunks: int, check_finite: bool = False):
    """(strategy name, StrategyOptions) of a plain strategy or a named variant."""
    strategy, fields = VARIANTS.get(name, (name, {}))
    fields = {"check_finite": check_finite, **fields}
    if fields.get("update_in_overlap"):
        fields["check_finite"] = False  # the update happens before the check could veto it
    return strategy, StrategyOptions(chunks=chunks, **fields)


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
