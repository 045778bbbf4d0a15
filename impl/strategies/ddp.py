"""DDP: torch DistributedDataParallel, the peer users would pick.

Its bucket cap is derived from the same K as the other strategies (total gradient bytes / K),
so the peer is compared at equal chunking; ``ddp_bucket_mb`` sets it directly (25 is DDP's
default). DDP buckets whole parameters, so K above the number of parameter tensors gives it
fewer buckets than K: ``bucket_count`` reports how many it really made. Its per-bucket
communication is not observable from outside, so its timeline has no communication lane.
"""

from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel

from impl.finite import NonFiniteGradient
from impl.strategies.base import Strategy

DDP_DEFAULT_BUCKET_MB = 25.0


class DDPStrategy(Strategy):
    name = "ddp"

    def __init__(self, model, workload, group, options):
        super().__init__(model, workload, group, options)
        if group is None:
            raise ValueError("ddp needs a process group; use sequential for compute-only runs")
        grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        self.bucket_mb = options.ddp_bucket_mb or grad_bytes / options.chunks / 2**20
        self.ddp = DistributedDataParallel(
            model, device_ids=[self.device] if self.device.type == "cuda" else None,
            process_group=group, bucket_cap_mb=self.bucket_mb, gradient_as_bucket_view=True)
        self.recorder.notes.append("ddp: bucket all-reduces run inside DDP's reducer and are "
                                   "not observable; the backward interval includes them")

    @property
    def bucket_count(self) -> int:
        """Buckets DDP's reducer really uses (after its rebuild in the first iteration).

        Its logging data's ``bucket_sizes`` is the construction-time assignment, so the
        reducer's own buckets are counted; the zero tensors it returns are freed at once.
        """
        return len(self.ddp.reducer._get_zeros_like_grad_buckets())

    def _step(self, batch) -> None:
        for param in self.model.parameters():
            if param.grad is not None:
                param.grad.zero_()  # keep DDP's bucket views: never set grads to None
        self._forward_backward(batch, module=self.ddp)  # buckets are reduced inside backward
        self.recorder.add("compute", "backward + all-reduce (ddp)", None, self._backward_start,
                          self.recorder.mark())
        if self.options.check_finite:
            self._check_averaged_gradients()
        self._sgd_update(1.0)  # DDP already averaged the gradients

    def _check_averaged_gradients(self) -> None:
        """DDP averages inside backward, so only the averaged gradients can be checked."""
        bad = [name for name, p in self.model.named_parameters()
               if p.grad is not None and not torch.isfinite(p.grad).all()]
        if bad:
            raise NonFiniteGradient(
                f"step {self.steps_done} (counting from 0): non-finite gradients after DDP's "
                f"averaging in {', '.join(bad[:5])}; DDP does not show which rank produced "
                "them; the update was skipped on every rank")
