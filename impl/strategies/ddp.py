"""DDP: torch DistributedDataParallel, the peer users would pick.

Its bucket cap is derived from the same K as the other strategies (total gradient bytes / K),
so the peer is compared at equal chunking; ``ddp_bucket_mb`` sets it directly (25 is DDP's
default). DDP buckets whole parameters, so K above the number of parameter tensors gives it
fewer buckets than K: ``bucket_count`` reports how many it really made.

Its communication is observed through a comm hook that does exactly what DDP's default hook
does (divide the bucket by the world size, all-reduce it) and marks when each bucket's
all-reduce was launched and when it finished, so DDP's timeline has a communication lane like
every other strategy. Backward compute ends when the first parameter (the last gradient of
backward) is accumulated; what follows until backward returns is waiting for the last buckets.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from impl.finite import NonFiniteGradient
from impl.strategies.base import Strategy
from impl.strategies.knobs import communication_group
from impl.strategy_records import PEER
from impl.timeline import LateMark


class DDPStrategy(Strategy):
    name = "ddp"
    role = PEER

    def __init__(self, model, workload, group, options):
        super().__init__(model, workload, group, options)
        if group is None:
            raise ValueError("ddp needs a process group; use sequential for compute-only runs")
        grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        self.bucket_mb = options.ddp_bucket_mb or grad_bytes / options.chunks / 2**20
        self.comm_group = communication_group(group, options)
        self.ddp = DistributedDataParallel(
            model, device_ids=[self.device] if self.device.type == "cuda" else None,
            process_group=self.comm_group, bucket_cap_mb=self.bucket_mb,
            gradient_as_bucket_view=True)
        self.ddp.register_comm_hook(None, self._observed_all_reduce)
        # The first registered parameter's gradient is the last one backward produces.
        last = next(p for p in model.parameters() if p.requires_grad)
        self._hook = last.register_post_accumulate_grad_hook(self._backward_done)

    @property
    def bucket_count(self) -> int:
        """Buckets DDP's reducer really uses (after its rebuild in the first iteration).

        Its logging data's ``bucket_sizes`` is the construction-time assignment, so the
        reducer's own buckets are counted; the zero tensors it returns are freed at once.
        """
        return len(self.ddp.reducer._get_zeros_like_grad_buckets())

    # DDP checks a hook's annotations against the real types, which `from __future__ import
    # annotations` turns into strings: this hook carries none.
    def _observed_all_reduce(self, _state, bucket):
        """DDP's default allreduce hook (average = divide, then sum) with timeline marks."""
        tensor, index = bucket.buffer(), bucket.index()
        tensor.div_(self.world_size)
        start = self.recorder.mark()  # on the compute stream: the bucket's gradients are ready
        future = dist.all_reduce(tensor, group=self.comm_group, async_op=True).get_future()
        end = LateMark() if self.device.type != "cuda" else None

        def finished(done: torch.futures.Future) -> torch.Tensor:
            # CUDA futures run this with the current stream ordered after the all-reduce, so
            # an event recorded now marks its end; gloo runs it on completion, on its thread.
            if end is None:
                self.recorder.add("comm", f"all-reduce bucket {index}", index, start,
                                  self.recorder.mark())
            else:
                end.set_now()
            return done.value()[0]

        if end is not None:
            self.recorder.add("comm", f"all-reduce bucket {index}", index, start, end)
        return future.then(finished)

    def _backward_done(self, _param) -> None:
        self._backward_end = self.recorder.mark()

    def _step(self, batch) -> None:
        for param in self.model.parameters():
            if param.grad is not None:
                param.grad.zero_()  # keep DDP's bucket views: never set grads to None
        self._forward_backward(batch, module=self.ddp)  # buckets are reduced inside backward
        self.recorder.add("compute", "backward", None, self._backward_start, self._backward_end)
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

    def close(self) -> None:
        self._hook.remove()
