"""The paired figures of one overlap cell, from its interleaved rounds (pure functions).

Input: per variant, the median step time of each round, and the timeline of each round's last
step (suite/bench_overlap.py measures them with ``measure_interleaved``). Output: every figure
the suite reports for the cell, each an ``impl.stats.Estimate`` (value and 95% bootstrap
interval over rounds, paired by round), and verdicts where a figure compares two variants.
The formulas are ``impl.metrics``'s; nothing here defines a metric of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from impl import metrics, stats
from impl.rows.kinds import COMPARISON, PAIRED, REFERENCE, STEP
from impl.timeline import Timeline

COMPUTE_ONLY, COMM_ONLY = "compute-only", "comm-only"
DDP, DDP_DEFAULT = "ddp", "ddp-25mb"
REFERENCES = (COMPUTE_ONLY, COMM_ONLY)
# The figures are named as the comparison row declares them (its references, REFERENCE), and a
# strategy's as its step row does, which copies them (suite/bench_overlap.py).
CELL, FIGURE = COMPARISON.names, STEP.names


def _median(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(x, axis=axis)


def _overlap_efficiency(sequential, step, compute, comm, axis=-1):
    limit = metrics.limit_ms(_median(compute, axis), _median(comm, axis))
    return metrics.efficiency(_median(sequential, axis), _median(step, axis), limit)


def _bound_efficiency(sequential, step, bound, axis=-1):
    return metrics.efficiency(_median(sequential, axis), _median(step, axis),
                              _median(bound, axis))


def _limit(compute, comm, axis=-1):
    return metrics.limit_ms(_median(compute, axis), _median(comm, axis))


def schedule_bounds(compute_only: Sequence[Timeline], comm_only: Sequence[Timeline],
                    update_in_overlap: bool = False) -> list[float]:
    """Per round: ``metrics.schedule_bound_ms`` from that round's compute-only and comm-only
    steps."""
    return [metrics.schedule_bound_ms(c.ready_ms(), m.comm_ms(), c.backward_end_ms(),
                                      c.update_ms(), update_in_overlap)
            for c, m in zip(compute_only, comm_only)]


def updates_in_overlap(name: str) -> bool:
    """Whether variant ``name`` runs with the update inside the overlap (its own bound)."""
    return name.endswith("+update")


def versus(candidate: Sequence[float], reference: Sequence[float]) -> dict:
    """candidate against reference: speedup (reference / candidate), difference, verdict."""
    difference = stats.difference(candidate, reference)
    return {PAIRED.speedup: stats.ratio(reference, candidate).to_json(),
            PAIRED.difference_ms: difference.to_json(), PAIRED.verdict: stats.verdict(difference)}


def strategy_figures(name: str, round_ms: dict[str, list[float]],
                     timelines: dict[str, list[Timeline]], sequential: str,
                     bound_ms: list[float] | None, same_chunking: bool = True) -> dict:
    """Every figure of one strategy of the cell (a variant that is not a reference).

    Efficiencies compare the strategy with references at the cell's K chunks, so they are
    given only where the strategy really communicates in K pieces (``same_chunking``): DDP
    buckets whole parameters and may make fewer buckets than K.
    """
    step, sequential_ms = round_ms[name], round_ms[sequential]
    figures = {FIGURE.step_ms: stats.median(step).to_json(),
               "vs_sequential": versus(step, sequential_ms)}
    for peer in (DDP, DDP_DEFAULT):
        if peer in round_ms and peer != name:
            figures[f"vs_{peer.replace('-', '_')}"] = versus(step, round_ms[peer])
    own = timelines[name]
    hidden = [t.hidden_comm_fraction() for t in own]
    figures[FIGURE.hidden_comm_fraction] = (stats.median(hidden).to_json()
                                            if all(h is not None for h in hidden) else None)
    if COMM_ONLY in round_ms and same_chunking:  # overlap figures are defined
        compute, comm = round_ms[COMPUTE_ONLY], round_ms[COMM_ONLY]
        figures[FIGURE.overlap_efficiency] = stats.estimate(
            _overlap_efficiency, sequential_ms, step, compute, comm).to_json()
        if bound_ms is not None:
            figures[FIGURE.bound_efficiency] = stats.estimate(
                _bound_efficiency, sequential_ms, step, bound_ms).to_json()
    parts = [t.lost_time_vs(c) for t, c in zip(own, timelines[COMPUTE_ONLY])]
    lost = {part: stats.median([p[part] for p in parts]).to_json()
            for part in metrics.LOST_TIME_PARTS}
    lost["parts_sum_ms"] = stats.median([sum(p.values()) for p in parts]).to_json()
    lost["gap_ms"] = stats.difference(step, round_ms[COMPUTE_ONLY]).to_json()
    figures["lost_time"] = lost
    return figures


def cell_figures(round_ms: dict[str, list[float]], timelines: dict[str, list[Timeline]],
                 sequential: str, strategies: Sequence[str],
                 other_chunking: Sequence[str] = ()) -> dict:
    """References and per-strategy figures of a cell.

    ``round_ms[v]``: per round, the median step time of variant v; ``timelines[v]``: per round,
    its last step's timeline. ``sequential`` names the no-overlap reference (``sequential`` or
    ``mpi-sequential``); ``strategies`` the variants compared against the references;
    ``other_chunking`` those that do not communicate in the cell's K pieces (no efficiencies).
    """
    compute = round_ms[COMPUTE_ONLY]
    references = {REFERENCE.compute_only_ms: stats.median(compute).to_json(),
                  REFERENCE.sequential_ms: stats.median(round_ms[sequential]).to_json(),
                  REFERENCE.sequential_vs_compute_only: versus(round_ms[sequential], compute)}
    bound_ms = bound_update_ms = None
    if COMM_ONLY in round_ms:
        comm = round_ms[COMM_ONLY]
        bound_ms = schedule_bounds(timelines[COMPUTE_ONLY], timelines[COMM_ONLY])
        references.update({
            REFERENCE.comm_only_ms: stats.median(comm).to_json(),
            REFERENCE.limit_ms: stats.estimate(_limit, compute, comm).to_json(),
            REFERENCE.bound_ms: stats.median(bound_ms).to_json(),
            REFERENCE.compute_to_comm: stats.ratio(compute, comm).to_json()})
        if any(updates_in_overlap(name) for name in strategies):
            bound_update_ms = schedule_bounds(timelines[COMPUTE_ONLY], timelines[COMM_ONLY],
                                              update_in_overlap=True)
            references[REFERENCE.bound_update_in_overlap_ms] = stats.median(
                bound_update_ms).to_json()
    return {CELL.references: references, CELL.bound_ms_rounds: bound_ms,
            CELL.strategies: {name: strategy_figures(
                name, round_ms, timelines, sequential,
                bound_update_ms if updates_in_overlap(name) else bound_ms,
                name not in other_chunking)
                for name in strategies}}


def median_round(round_ms: Sequence[float]) -> int:
    """The round whose step time is the median one: the representative step to draw."""
    order = np.argsort(round_ms, kind="stable")
    return int(order[(len(order) - 1) // 2])
