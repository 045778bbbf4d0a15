"""What a strategy's step costs beyond the schedule, fitted on the other cells only.

The schedule (impl/costmodel/schedule.py) sees collectives, compute and the interference
row's slowdown; the measured overlapped steps also pay what no input times: the host's
launch of each collective and its event wait on the compute stream, compute slowed beside
communication more than the interference row's GEMM, DDP's autograd hooks and bucket
division on the compute stream (DDP at K = 1, one bucket, is 2–3 ms over sequential on
GPT-small). The model is optimistic for every overlapped variant in every GPU cell by about
1 ms before this term.

Per strategy, the overhead is the median residual (measured − predicted step, ms) of that
strategy in the *other* cells that share its causes, added to the cell's predicted step: the
GPU model (the host's launches and the kernels' slowdown are the GPU's and its driver's) and
the world size (NCCL's channels and the copy-engine's peers grow with it), never the machine
label: one cell measured 12.92 and 12.89 ms on two machines of the same GPU, yet was predicted
7.0% and 14.6% slow under overheads fitted per label. With no other cell of the same GPU
model and world size, the GPU model's cells at any world size; with none, no overhead.

A knob variant (chunked+update, copy-engine+update, chunked+first1mb)
takes its strategy's: the host's launches and hooks are the strategy's, and what the knob
changes is in the schedule (the update shares beside backward: impl/costmodel/lanes.py);
fitted on the variant's own other cells instead (one, at K = 20 of the other workload), the
overhead carried that workload's residual across, 2 to 5 ms off. The overhead is a cost: a
median below zero (the model already pessimistic on the other cells) adds none. The checked
cell never enters its own overhead (``calibrated``; tests/costmodel/test_overhead.py pins it).
Sequential is not calibrated: nothing overlaps, and it is the reference of the overlap
efficiency. The residuals are those of cells whose inputs came from their own run, under
every split and for predictions beyond the cells alike (heldout.OVERHEAD_SPLIT says why).
A per-collective term (constant + cost · collectives, Theil–Sen) was tried and predicted the
held-out cells worse: with 3 to 19 other cells of 2 workloads its slope follows the workload,
not the collective count.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace

from impl import metrics
from impl.costmodel import variant_plans

SEQUENTIAL = variant_plans.AFTER_BACKWARD  # the references: not calibrated (module docstring)


def overhead_ms(residuals: Sequence[float]) -> float:
    """The overhead that the other cells' residuals (ms) give: their median, never below 0
    (a cost beyond the schedule cannot make a step faster: where the model is already
    pessimistic on the other cells, none is added); 0 without any."""
    return max(0.0, statistics.median(residuals)) if residuals else 0.0


def residuals_by_cause(checks: Sequence, check, cell_of: Callable[[object], tuple],
                       cause_of: Callable[[object], tuple]) -> list[float]:
    """The residuals (ms) of ``check``'s strategy in the other cells of its GPU model and
    world size, else of its GPU model at any world size (module docstring)."""
    strategy = variant_plans.variant(check.variant)[0]
    others = [c for c in checks if c.variant == strategy and cell_of(c) != cell_of(check)]
    device, world = cause_of(check)
    same = [c for c in others if cause_of(c) == (device, world)] or \
        [c for c in others if cause_of(c)[0] == device]
    return [c.measured_ms - c.predicted_ms for c in same]


def calibrated(checks: Sequence, cell_of: Callable[[object], tuple],
               cause_of: Callable[[object], tuple], fitted_on: Sequence | None = None) -> list:
    """Every check (accuracy.Check) with its strategy's overhead, fitted on the other cells of
    its causes (``cause_of(check)``: its GPU model and world size), added to its predicted
    step and to the model without interference, and its predicted efficiency recomputed
    against the cell's sequential prediction. ``cell_of(check)`` names a check's cell: a
    cell's checks never enter its own overhead. ``fitted_on``: the checks whose residuals
    give the overheads (heldout.OVERHEAD_SPLIT's, inputs from each cell's own run); default
    ``checks`` themselves."""
    sequential = {cell_of(c): c for c in checks if c.variant in SEQUENTIAL
                  and c.predicted_ms is not None}
    usable = [c for c in checks if c.predicted_ms is not None and c.variant not in SEQUENTIAL]
    residual_checks = usable if fitted_on is None else [
        c for c in fitted_on if c.predicted_ms is not None and c.variant not in SEQUENTIAL]
    adjusted = {}
    for check in usable:
        extra = overhead_ms(residuals_by_cause(residual_checks, check, cell_of, cause_of))
        reference = sequential.get(cell_of(check))
        efficiency = check.predicted_efficiency
        if efficiency is not None and reference is not None and check.limit_ms is not None:
            efficiency = metrics.overlap_efficiency(
                reference.predicted_ms, check.predicted_ms + extra, check.limit_ms)
        adjusted[id(check)] = replace(
            check, predicted_ms=check.predicted_ms + extra, overhead_ms=extra,
            calm_ms=None if check.calm_ms is None else check.calm_ms + extra,
            predicted_efficiency=efficiency)
    return [adjusted.get(id(c), c) for c in checks]


def overhead_for(overheads: dict[tuple, float], device: str | None, world: int,
                 variant: str) -> float:
    """A prediction's overhead: its GPU model's at its world size, else at any world size,
    else none (a GPU model no cell was measured on)."""
    return overheads.get((device, world, variant), overheads.get((device, variant), 0.0))
