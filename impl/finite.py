"""Non-finite gradients are caught before they are averaged into every rank's weights.

Each rank checks every gradient as autograd finalises it, before its chunk is communicated
(the check is enqueued ahead of the communication, so it sees this rank's own values). Before
the update the ranks exchange how many non-finite gradients each found; if any did, every rank
raises NonFiniteGradient naming the step, the ranks and the parameters, and no weight changes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


class NonFiniteGradient(FloatingPointError):
    pass


class FiniteCheck:
    def __init__(self, model: nn.Module, params: list[torch.Tensor],
                 group: dist.ProcessGroup | None):
        names = {id(p): name for name, p in model.named_parameters()}
        self.names = [names[id(p)] for p in params]
        self.group = group
        self.world_size = dist.get_world_size(group) if group is not None else 1
        self.rank = dist.get_rank(group) if group is not None else 0
        self.flags: list[tuple[int, torch.Tensor]] = []

    def reset(self) -> None:
        self.flags.clear()

    def record(self, index: int, param: torch.Tensor) -> None:
        """Enqueue (no sync) whether parameter ``index``'s gradient is all finite."""
        self.flags.append((index, torch.isfinite(param.grad).all()))

    def verify(self, step: int) -> None:
        """Raise NonFiniteGradient on every rank if any rank saw a non-finite gradient.

        A CPU-GPU sync point and, with several ranks, one tiny all-reduce.
        """
        if not self.flags:
            return
        finite = torch.stack([flag for _, flag in self.flags])
        counts = torch.zeros(self.world_size, dtype=torch.int64, device=finite.device)
        counts[self.rank] = (~finite).sum()
        if self.world_size > 1:
            dist.all_reduce(counts, group=self.group)
        per_rank = counts.tolist()
        if not any(per_rank):
            return
        local = [self.names[i] for (i, _), ok in zip(self.flags, finite.tolist()) if not ok]
        everyone = [local]
        if self.world_size > 1:
            everyone = [None] * self.world_size
            dist.all_gather_object(everyone, local, group=self.group)
        where = "; ".join(f"rank {r}: {', '.join(names[:5])}"
                          + (f" and {len(names) - 5} more" if len(names) > 5 else "")
                          for r, names in enumerate(everyone) if names)
        raise NonFiniteGradient(f"step {step} (counting from 0): non-finite gradients before "
                                f"averaging on {where}; the update was skipped on every rank")
