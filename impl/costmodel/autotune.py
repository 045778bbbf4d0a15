"""Choosing K: predict the chunked strategy's step at each K with the cost model, then recommend.

The model is impl/costmodel/'s, the one every strategy's prediction uses; its three measured
inputs are taken on the machine it advises:

- the fabric: the α–β fit (``fit_fabric``) on the comm-only time of the whole gradient buffer
  cut into each candidate K (K·α + β·bytes), so it sees back-to-back launches as the strategy
  makes them;
- the compute: when each gradient becomes final, from one compute-only step cut into the
  finest chunks (``ReadyProfile``): chunk c of a K-way cut is ready when its last element is;
- the interference: by how much backward slows while an all-reduce runs beside it
  (``interference_rate``, suite/bench_interference.py's slowdown − 1).

``predict_step_ms`` runs the model's schedule (impl/costmodel/schedule.py) for the chunked
strategy at K. Horovod tunes its fusion buffer by Bayesian optimisation over measured runs;
DDP has no tuner; this model needs one compute-only step, one all-reduce sweep and one
interference figure, and its predictions are measured against the real steps
(suite/bench_autotune.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from impl import metrics
from impl.costmodel.compute import ReadyProfile, equal_chunk_ends
from impl.costmodel.fabric import Fabric, fit_fabric
from impl.costmodel.schedule import Plan, simulate
from impl.costmodel.variant_plans import collectives
from impl.rows.predictions import TUNED

__all__ = ["Fabric", "ReadyProfile", "equal_chunk_ends", "fit_fabric", "predict_step_ms",
           "recommend"]


def predict_step_ms(profile: ReadyProfile, fabric: Fabric, chunks: int,
                    interference_rate: float = 0.0) -> dict:
    """Predicted step time of the chunked strategy at K = ``chunks``, with backward running
    (1 + ``interference_rate``) times slower while an all-reduce runs beside it, and the
    schedule bound (no interference) beside it."""
    planned = collectives(profile, equal_chunk_ends(profile.total_elements, chunks), fabric)
    outcome = simulate(profile, Plan(planned, slowdown=1.0 + interference_rate))
    bound = metrics.schedule_bound_ms([c.ready_ms for c in planned],
                                      [c.duration_ms for c in planned],
                                      profile.backward_end_ms, profile.update_ms)
    return {TUNED.chunks: chunks, TUNED.predicted_ms: outcome.step_ms, TUNED.bound_ms: bound,
            TUNED.comm_ms: sum(c.duration_ms for c in planned),
            TUNED.overlapped_comm_ms: outcome.comm_ms - outcome.exposed_comm_ms}


def recommend(predictions: Sequence[dict]) -> dict:
    """The prediction with the smallest step; ties go to the smaller K (fewer launches)."""
    return min(predictions, key=lambda p: (round(p[TUNED.predicted_ms], 9), p[TUNED.chunks]))
