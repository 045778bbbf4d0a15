"""The coarse-grained CPU–GPU hybrid: two workers, each with the whole model, each training on
its own share of every batch, their gradients averaged over gloo every step.

One process per worker (the GPU worker and a CPU worker with its threads), joined by a gloo
group. Worker r takes rows [start_r, start_r + n_r) of the batch of N rows and scales its loss
(a mean over its rows) by n_r / N, so the sum of the workers' gradients, one all-reduce, is the
whole batch's mean gradient: the average weighted by share. Both then apply the same Adam
update to the same gradient. The shares are set by ``balanced_shares`` from measured compute
times, so both workers finish their forward and backward together.

    torchrun --nproc-per-node 2 ...   with OVERLAP_BACKEND=gloo: rank 0 takes the GPU if there
                                      is one, rank 1 is the CPU worker
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn

from impl import capabilities
from impl.hybrid.base import HybridOptions, Loss, Trainer
from impl.rows.study_records import BALANCE, BALANCE_PASS
from impl.timeline import Timeline
from impl.workloads import Batch


def residual_imbalance(a_ms: float, b_ms: float) -> float:
    """|t_a − t_b| / max(t_a, t_b) of two workers' compute times: 0 when both finish together."""
    return abs(a_ms - b_ms) / max(a_ms, b_ms)


def balanced_shares(rows: Sequence[int], compute_ms: Sequence[float], total: int) -> list[int]:
    """Rows per worker so that all finish together: n_r ∝ measured rate rows_r / time_r.

    Each worker keeps at least one row; the rounding remainder goes to the fastest worker.
    """
    if len(rows) != len(compute_ms) or not rows:
        raise ValueError(f"one measured time per worker: rows={list(rows)}, "
                         f"compute_ms={list(compute_ms)}")
    if any(r < 1 for r in rows) or any(t <= 0 for t in compute_ms):
        raise ValueError(f"rows={list(rows)} and compute_ms={list(compute_ms)} must be positive")
    if total < len(rows):
        raise ValueError(f"a batch of {total} rows cannot be shared by {len(rows)} workers")
    rates = [r / t for r, t in zip(rows, compute_ms)]
    shares = [max(1, round(total * rate / sum(rates))) for rate in rates]
    fastest = max(range(len(rates)), key=rates.__getitem__)
    shares[fastest] += total - sum(shares)
    if shares[fastest] < 1:
        raise ValueError(f"cannot share {total} rows at rates {rates}")
    return shares


def split_decision(rows: Sequence[int], compute_ms: Sequence[float], exchange_ms: float,
                   total: int) -> dict:
    """Whether sharing a batch of ``total`` rows beats worker 0 (the GPU where there is one)
    alone, from measured
    rates: worker r did rows[r] rows in compute_ms[r] (rate ρ_r), the exchange took
    ``exchange_ms``.

    - GPU alone: total / ρ_0;
    - balanced split: total / Σρ + exchange (every worker finishes together, then they sum);
    - the split helps iff (GPU alone) / exchange > Σρ / (Σρ − ρ_0): the crossover ratio of the
      GPU's compute to the gradient exchange, above which a CPU worker starts to help (a CPU
      at 1% of the GPU's rate needs compute 101 times the exchange).

    Returns both predicted steps, the crossover, the measured ratio, the choice ("split" or
    "gpu-alone") and why, in words with the numbers.
    """
    if len(rows) != len(compute_ms) or len(rows) < 2:
        raise ValueError(f"a split needs two workers or more: rows={list(rows)}, "
                         f"compute_ms={list(compute_ms)}")
    if any(r < 1 for r in rows) or any(t <= 0 for t in compute_ms) or exchange_ms <= 0:
        raise ValueError(f"rows={list(rows)}, compute_ms={list(compute_ms)} and "
                         f"exchange_ms={exchange_ms} must be positive")
    rates = [r / t for r, t in zip(rows, compute_ms)]
    gpu_alone = total / rates[0]
    split = total / sum(rates) + exchange_ms
    crossover = sum(rates) / (sum(rates) - rates[0])
    ratio = gpu_alone / exchange_ms
    # Compute grows with the rows and the exchange does not: at these rates the split pays
    # from this batch on.
    crossover_rows = math.ceil(total * crossover / ratio)
    choice = "split" if split < gpu_alone else "gpu-alone"
    because = (f"worker 0 alone computes the {total} rows in {gpu_alone:.3g} ms; shared, they "
               f"take {total / sum(rates):.3g} ms plus {exchange_ms:.3g} ms of gradient "
               f"exchange = {split:.3g} ms. Another worker helps only where worker 0's compute "
               f"is over {crossover:.3g}× the exchange; here it is {ratio:.3g}× (at these rates "
               f"from about {crossover_rows} rows a batch)")
    return {"choice": choice, "gpu_alone_ms": gpu_alone, "split_ms": split,
            "exchange_ms": exchange_ms, "rates_rows_per_ms": rates,
            "crossover_compute_to_exchange": crossover, "compute_to_exchange": ratio,
            "crossover_rows": crossover_rows,
            "reason": f"{'split' if choice == 'split' else 'worker 0 alone'}: {because}"}


class CoarseHybrid(Trainer):
    name = "coarse-hybrid"

    def __init__(self, model: nn.Module, loss: Loss, options: HybridOptions,
                 group: dist.ProcessGroup, shares: Sequence[int]):
        super().__init__(model, loss, options)
        self.group = group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        if len(shares) != self.world:
            raise ValueError(f"shares={list(shares)}: one share per worker of the "
                             f"{self.world}-rank group")
        self.set_shares(shares)
        self.params = [p for p in model.parameters() if p.requires_grad]
        # Every gradient, then the share-weighted loss: one all-reduce sums both.
        self.host_grads = torch.zeros(sum(p.numel() for p in self.params) + 1,
                                      dtype=torch.float32, pin_memory=self.device.type == "cuda")
        self.optimizer = torch.optim.Adam(self.params, lr=options.lr)
        self.compute_ms: list[float] = []  # per step: this worker's forward and backward
        self.exchange_ms: list[float] = []  # per step: the gradient all-reduce

    def set_shares(self, shares: Sequence[int]) -> None:
        if any(n < 1 for n in shares):
            raise ValueError(f"shares={list(shares)}: every worker needs at least one row")
        self.shares = list(shares)
        self.start = sum(self.shares[:self.rank])

    def _step(self, batch: Batch) -> torch.Tensor:
        total = len(batch)
        if total != sum(self.shares):
            raise ValueError(f"a batch of {total} rows, but the shares {self.shares} add up to "
                             f"{sum(self.shares)}")
        rows = slice(self.start, self.start + self.shares[self.rank])
        mine = Batch(batch.inputs[rows], batch.targets[rows])
        self.optimizer.zero_grad(set_to_none=True)
        weight = self.shares[self.rank] / total
        # Checked after the exchange: both workers see the same summed loss and stop together
        # (a worker stopping alone would leave the other waiting in the all-reduce).
        loss = self._forward_backward(mine, scale=weight, check_loss=False)
        whole_batch_loss = self._exchange(loss * weight)
        self.require_finite(whole_batch_loss)
        start = self.recorder.mark()
        self.optimizer.step()
        self.recorder.add("compute", "update", None, start, self.recorder.mark())
        return whole_batch_loss

    @torch.no_grad()
    def _exchange(self, weighted_loss: torch.Tensor) -> torch.Tensor:
        """Sum the workers' gradients and weighted losses over gloo (through host memory for the
        GPU worker); returns the whole batch's loss."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # CPU-GPU sync: the compute time ends here
        compute_end = self.recorder.mark()
        offset = 0
        for param in self.params:
            size = param.numel()
            self.host_grads[offset:offset + size].copy_(param.grad.reshape(-1))
            offset += size
        self.host_grads[-1] = weighted_loss
        dist.all_reduce(self.host_grads, group=self.group)
        offset = 0
        for param in self.params:
            size = param.numel()
            param.grad.copy_(self.host_grads[offset:offset + size].view_as(param))
            offset += size
        self.recorder.add("comm", "gradient all-reduce (gloo)", None, compute_end,
                          self.recorder.mark())
        return self.host_grads[-1].clone()

    def finish_timeline(self) -> Timeline:
        """Also keeps the step's compute time (its forward and backward), for balancing."""
        timeline = super().finish_timeline()
        compute = [i for i in timeline.intervals if i.label in ("forward", "backward")]
        self.compute_ms.append(max(i.end_ms for i in compute) - min(i.start_ms for i in compute))
        self.exchange_ms.append(sum(i.end_ms - i.start_ms for i in timeline.intervals
                                    if i.lane == "comm"))
        return timeline


def balance(trainer: CoarseHybrid, batch: Batch, steps: int = 5, passes: int = 3) -> dict:
    """Time ``steps`` steps at the current shares, set shares from the measured rates; again,
    ``passes`` times in all, or until the shares stop changing.

    A worker's time is not proportional to its rows (a GPU's barely grows at small shares), so
    one pass from even shares can leave a large imbalance; each pass measures where the last
    one landed. Then ``split_decision`` says whether the split beats the GPU alone at all,
    counting the gradient exchange the shares leave out. One step first, untimed, per pass:
    it pays the first-use costs (allocations, kernel loading) that would make a worker look
    slower than it is. Every worker of the group must call it (all-gathers). Returns the shares
    and times before the first pass, the final shares, each pass's shares and measured times,
    and the decision.
    """
    history = []
    for _ in range(passes):
        before = list(trainer.shares)
        for _ in range(steps + 1):
            trainer.step(batch)
            trainer.finish_timeline()
        mine = statistics.median(trainer.compute_ms[-steps:])
        measured: list[float] = [0.0] * trainer.world
        dist.all_gather_object(measured, mine, group=trainer.group)
        history.append({BALANCE_PASS.shares: before, BALANCE_PASS.compute_ms: measured})
        after = balanced_shares(before, measured, len(batch))
        trainer.set_shares(after)
        if after == before:
            break
    # The decision reads the last pass: its shares, times and the slowest worker's exchange
    # (the exchange ends when the last worker's gradients are in).
    exchanges: list[float] = [0.0] * trainer.world
    dist.all_gather_object(exchanges, statistics.median(trainer.exchange_ms[-steps:]),
                           group=trainer.group)
    first, last = history[0], history[-1]
    return {BALANCE.shares_before: first[BALANCE_PASS.shares],
            BALANCE.compute_ms_before: first[BALANCE_PASS.compute_ms],
            BALANCE.shares: list(trainer.shares), BALANCE.passes: history,
            BALANCE.decision: split_decision(last[BALANCE_PASS.shares],
                                             last[BALANCE_PASS.compute_ms], max(exchanges),
                                             len(batch))}


def worker_device(rank: int) -> torch.device:
    """Rank 0 is the GPU worker where a GPU is visible; every other rank is a CPU worker."""
    if rank == 0 and capabilities.gpu_count() > 0:
        return torch.device("cuda", 0)
    return torch.device("cpu")


def even_shares(total: int, workers: int) -> list[int]:
    return [total // workers + (r < total % workers) for r in range(workers)]


def cpu_worker_threads(world: int) -> int:
    """Host threads of a CPU worker: every core but one per GPU worker beside it, or an even
    split of the cores between CPU workers on a machine without a GPU."""
    cores = os.cpu_count() or 1
    if capabilities.gpu_count() > 0:
        return max(1, cores - 1)
    return max(1, cores // world)
