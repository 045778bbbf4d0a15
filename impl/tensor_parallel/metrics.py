"""The tensor-parallel study's metrics: each definition (the report quotes ``TP_FIELDS``) and its
formula, once, and the figures of one interleaved measurement (suite/bench_tp.py).

A cell of the study is one preset and one GEMM backend; its variants run in the same rounds
(suite/harness.py, ``measure_interleaved``): the block on 1 rank, and for each larger world size
the strong- and weak-scaling block under each schedule. Every figure that combines variants is a
bootstrap over rounds paired by round (impl/stats.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from impl import stats
from impl.metrics import covered_ms, exposed_comm_ms, hidden_comm_fraction
from impl.rows.declare import Field
from impl.rows.kinds import TENSOR_PARALLEL
from impl.stats import Estimate
from impl.timeline import Timeline

# The figures below are named as the tensor-parallel row declares them (impl/rows/kinds.py).
ROW, FIELD = TENSOR_PARALLEL.names, TENSOR_PARALLEL.field
TP_FIELDS: tuple[Field, ...] = (
    FIELD.step_ms, FIELD.tflops, FIELD.tflops_per_gpu, FIELD.comm_fraction,
    FIELD.hidden_comm_fraction, FIELD.overlap_speedup, FIELD.speedup_vs_fused,
    FIELD.scaling_efficiency, FIELD.max_rel_err)  # defined with the row


def layer_flops(tokens: int, hidden: int, ffn: int) -> int:
    """FLOP of one step of the block: 12·tokens·hidden·ffn (six GEMMs of 2·tokens·hidden·ffn)."""
    return 12 * tokens * hidden * ffn


def comm_fraction(exposed_ms: float, step_ms: float) -> float:
    """Exposed communication / step time."""
    return exposed_ms / step_ms


def scaling_efficiency(t1_ms, tp_ms, world_size: int, scaling: str):
    """Strong: T(1) / (p·T(p)); weak: T(1) / T(p). Works on numbers and numpy arrays."""
    if scaling == "strong":
        return t1_ms / (world_size * tp_ms)
    if scaling == "weak":
        return t1_ms / tp_ms
    raise ValueError(f"scaling efficiency is defined for 'strong' or 'weak', not {scaling!r}")


def timeline_figures(timeline: Timeline) -> dict:
    """Per step: comm, exposed comm and compute time, the hidden fraction, and the time of each
    GEMM (its pieces summed) by label."""
    compute, comm = timeline.lane("compute"), timeline.lane("comm")
    gemm_ms: dict[str, float] = {}
    for interval in timeline.intervals:
        if interval.lane == "compute":
            gemm_ms[interval.label] = (gemm_ms.get(interval.label, 0.0)
                                       + interval.end_ms - interval.start_ms)
    return {"comm_ms": covered_ms(comm), "exposed_comm_ms": exposed_comm_ms(compute, comm),
            "compute_ms": covered_ms(compute),
            ROW.hidden_comm_fraction: hidden_comm_fraction(compute, comm), ROW.gemm_ms: gemm_ms}


@dataclass(frozen=True)
class TpVariant:
    """One side of a cell: ``scaling`` "single" (the 1-rank block), "strong" or "weak"."""

    scaling: str
    schedule: str
    world_size: int

    @property
    def name(self) -> str:
        return f"{self.scaling}-{self.schedule}-w{self.world_size}"


SINGLE = TpVariant("single", "sync", 1)


def _median_of(values: Sequence[float | None]) -> Estimate:
    present = [v for v in values if v is not None]
    return stats.median(present) if len(present) == len(values) else Estimate(None, None, None, 0)


def variant_figures(measurement, variant: TpVariant, flops: int, measured: set[str]) -> dict:
    """Every figure of ``variant`` from an interleaved ``measurement`` (suite/harness.py) of a
    cell; ``measured`` names the cell's variants, for the paired comparisons."""
    name = variant.name
    step = measurement.round_ms(name)
    extras = measurement.extras[name]
    last_step = [steps[-1] for steps in measurement.step_ms[name]]  # the step each timeline saw
    fraction = [comm_fraction(e["exposed_comm_ms"], ms) if e else None
                for e, ms in zip(extras, last_step)]
    if variant.schedule == "fused" or not extras:
        fraction = [None] * len(step)
    rate = lambda t, axis=-1: flops / np.median(t, axis=axis) / 1e9  # FLOP/ms -> TFLOP/s
    figures = {
        ROW.step_ms: stats.median(step),
        ROW.tflops: stats.estimate(rate, step),
        ROW.tflops_per_gpu: stats.estimate(lambda t, axis=-1: rate(t, axis) / variant.world_size,
                                           step),
        ROW.comm_fraction: _median_of(fraction),
        ROW.hidden_comm_fraction: _median_of([e.get(ROW.hidden_comm_fraction) if e else None
                                              for e in extras]),
    }
    verdicts = {}
    for key, other in ((ROW.overlap_speedup, "sync"), (ROW.speedup_vs_fused, "fused")):
        peer = TpVariant(variant.scaling, other, variant.world_size).name
        if other == variant.schedule or peer not in measured or variant.world_size == 1:
            figures[key] = Estimate(None, None, None, 0)
            continue
        peer_step = measurement.round_ms(peer)
        figures[key] = stats.ratio(peer_step, step)
        verdicts[key] = stats.verdict(stats.difference(step, peer_step))
    if variant.world_size > 1 and SINGLE.name in measured:
        single = measurement.round_ms(SINGLE.name)
        figures[ROW.scaling_efficiency] = stats.estimate(
            lambda a, b, axis=-1: scaling_efficiency(np.median(a, axis=axis),
                                                     np.median(b, axis=axis),
                                                     variant.world_size, variant.scaling),
            single, step)
    else:
        figures[ROW.scaling_efficiency] = Estimate(None, None, None, 0)
    gemm_ms = {label: float(np.median([e[ROW.gemm_ms].get(label, 0.0) for e in extras]))
               for label in (extras[-1][ROW.gemm_ms] if extras else {})}
    return {ROW.estimates: {k: v.to_json() for k, v in figures.items()}, ROW.verdicts: verdicts,
            ROW.gemm_ms: gemm_ms}
