"""The pipeline study's metrics: definitions (quoted by the report) and formulas, once.

The benchmark's ``extra_info`` and the report's pipeline section iterate over PIPELINE_FIELDS,
so they cannot disagree on names, units or meaning.
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.metrics import Field
from impl.pipeline.plans import check_counts

PIPELINE_FIELDS: tuple[Field, ...] = (
    Field("step_ms", "ms", "Median time of one pipeline step (every micro-batch's forward and "
          "backward, the messages between stages, the SGD update): per round the slowest "
          "stage's median step, then the median over rounds.", False),
    Field("samples_per_s", "1/s", "Samples per second through the pipeline: batch / step "
          "time.", True),
    Field("bubble_fraction", "", "bubble = (step − busy) / step, averaged over the stages: busy "
          "is the union of a stage's compute intervals in its timeline (forwards, backwards, "
          "recomputes, update), step the pipeline's step time, so a stage that finishes early "
          "idles until the slowest one is done.", False),
    Field("bubble_theory", "", "(p − 1) / (m + p − 1) for p stages and m micro-batches: the idle "
          "share of GPipe and 1F1B when every stage's forward and backward take the same time "
          "and messages take none.", False),
    Field("peak_memory_mib", "MiB", "Memory one step adds on each stage: "
          "torch.cuda.max_memory_allocated during a step run after the timed rounds, minus "
          "the memory allocated before it (activations kept for backward, gradients, message "
          "buffers); n/a on CPU.", False),
    Field("max_abs_err_vs_single", "", "Largest absolute weight difference to the same training "
          "on one device (whole batch, same SGD step) after the check's steps, over all "
          "stages.", False),
)


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
