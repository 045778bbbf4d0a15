"""The pipeline study's metrics: formulas, and the fields the report quotes (defined with
the pipeline row, impl/rows/kinds.py).

The benchmark's ``extra_info`` and the report's pipeline section iterate over PIPELINE_FIELDS,
so they cannot disagree on names, units or meaning.
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.pipeline.plans import check_counts
from impl.rows.declare import Field
from impl.rows.kinds import PIPELINE

_FIELD = PIPELINE.field
PIPELINE_FIELDS: tuple[Field, ...] = (
    _FIELD.step_ms, _FIELD.samples_per_s, _FIELD.bubble_fraction, _FIELD.bubble_theory,
    _FIELD.peak_memory_mib,
    _FIELD.max_abs_err_vs_single)  # defined with the pipeline row (impl/rows/kinds.py)


def bubble_fraction(step_ms: float, busy_ms: float) -> float:
    """bubble = (step − busy) / step: the share of the pipeline's step a stage is idle."""
    return (step_ms - busy_ms) / step_ms


def mean_bubble(step_ms: float, busy_ms_per_stage: Sequence[float]) -> float:
    """The stages' bubbles averaged: 1 − mean(busy) / step."""
    return sum(bubble_fraction(step_ms, busy) for busy in busy_ms_per_stage) / len(
        busy_ms_per_stage)


def bubble_theory(stages: int, microbatches: int) -> float:
    """(p − 1) / (m + p − 1): GPipe's and 1F1B's idle share with equal stages, free messages."""
    check_counts(stages, microbatches)
    return (stages - 1) / (microbatches + stages - 1)
