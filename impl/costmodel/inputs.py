"""The model's inputs, read from the suite's result rows (``extra_info`` plus ``machine``).

Only what the model may use: the compute-only step (its timeline and its median time), the
comm-only times per K (the α–β fit), and the interference rows. The overlapped steps
themselves are what the model is validated against, never an input.

- ``compute_profile(row)``: a comparison row's compute-only timeline as a ReadyProfile;
- ``comm_fabrics(rows)``: per run, workload, world size, profile and library, the α–β fit of
  that workload's comm-only times at every K the rows hold (K·α + bytes·β);
- ``interference(rows, ...)``: the slowdown of the workload's dominant GEMM beside NCCL or
  gloo all-reduces and beside peer copies (suite/bench_interference.py), from the same
  machine, else from the same GPU model on the same fabric profile (named in ``source``);
  the one selection validation and prediction share.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from impl.costmodel.compute import (
    ReadyProfile,
    chunk_ends,
    known_workload,
    parameter_layout,
    profile_from_timeline,
)
from impl.costmodel.fabric import Fabric, fit_fabric
from impl.costmodel.variant_plans import Interference
from impl.rows.kinds import COMPARISON, INTERFERENCE, REFERENCE, SLOWDOWN, STEP, is_older_step

# A cell's row is a comparison row or (before interleaving) a step row: both declare the
# fields read from either (workload, chunks, world_size, profile, sequential_reference) alike.
CELL_ROW, STEP_ROW, INTERFERENCE_ROW = COMPARISON.names, STEP.names, INTERFERENCE.names


def value(estimate: dict | None) -> float | None:
    return None if not isinstance(estimate, dict) else estimate.get("value")


def run_name(row: dict) -> str:
    """What a message calls the run a row came from: its result file (``file``, which
    validate.load_rows gives each row), else its index (``run N``, rows read elsewhere)."""
    return row.get("file") or f"run {row.get('run')}"


def compute_profile(row: dict) -> ReadyProfile:
    """The compute-only step of a comparison row (or of any row holding a world-size-1
    ``compute-only`` or sequential timeline), cut at the row's K."""
    spans, element_size = parameter_layout(row[CELL_ROW.workload])
    timelines = row.get(CELL_ROW.timelines) or {}
    timeline = timelines.get("compute-only") or row.get(STEP_ROW.timeline)
    step = (value((row.get(CELL_ROW.references) or {}).get(REFERENCE.compute_only_ms))
            or row.get(STEP_ROW.step_ms))
    return profile_from_timeline(timeline, chunk_ends(spans, row[CELL_ROW.chunks]),
                                 element_size, step)


def fabric_key(row: dict) -> tuple:
    """Whose comm-only times share one fit: one run's cells of a workload, world size and
    profile, measured with the same library (MPI's cells have their own comm-only times)."""
    return (row.get("machine"), row.get("run"), row[CELL_ROW.workload], row[CELL_ROW.world_size],
            row.get(CELL_ROW.profile), row.get(CELL_ROW.sequential_reference))


def comm_fabrics(rows: Sequence[dict]) -> dict[tuple, tuple[Fabric, str]]:
    """Per fabric_key, the α–β fit of the comm-only times at every K (and what it used)."""
    points: dict[tuple, dict[int, float]] = defaultdict(dict)
    for row in rows:
        if row.get(CELL_ROW.world_size, 1) <= 1 or not known_workload(row.get(CELL_ROW.workload)):
            continue
        comm = None
        if COMPARISON.holds(row):
            comm = value((row.get(CELL_ROW.references) or {}).get(REFERENCE.comm_only_ms))
        elif is_older_step(row):
            comm = row.get(STEP_ROW.comm_only_ms)
        if comm:
            points[fabric_key(row)][row[CELL_ROW.chunks]] = comm
    fits = {}
    for key, by_k in points.items():
        spans, element_size = parameter_layout(key[2])
        total = spans[-1][1] * element_size
        ks = sorted(by_k)
        if len(ks) >= 2:
            fabric = fit_fabric(ks, [total] * len(ks), [by_k[k] for k in ks])
            how = f"fit on comm-only at K = {', '.join(map(str, ks))}"
        else:  # one chunk count cannot separate α from β: all of it is bandwidth
            fabric = Fabric(0.0, by_k[ks[0]] / total)
            how = f"comm-only at K = {ks[0]} only: α not separable, taken as 0"
        fits[key] = (fabric, f"α {fabric.alpha_ms * 1e3:.0f} µs, "
                             f"{fabric.bandwidth_gbps:.3g} GB/s algbw ({how})")
    return fits


def _ratios(row: dict) -> dict[str, float | None]:
    slowdown = row.get(INTERFERENCE_ROW.slowdown) or {}
    return {kind: value(entry.get(SLOWDOWN.ratio)) for kind, entry in slowdown.items()
            if isinstance(entry, dict)}


def interference(rows: Sequence[dict], workload: str, device: str | None, profile: str | None,
                 machine: str | None = None, exclude_run: object = None) -> Interference:
    """The one interference selection (validation and prediction both call it): the
    workload's interference rows on this fabric profile, from ``machine`` first, else from any
    machine with the same GPU model, newest run first, never from run ``exclude_run``.

    Only a row measured at 2 or more ranks has an all-reduce ratio: a one-rank row never
    stands in for it, however new. Without any, a one-rank row's memory-bound add kernel
    (what NCCL's reduction kernels are) stands in, and says so; with neither, none.
    """
    candidates = [r for r in rows if INTERFERENCE.holds(r)
                  and r.get(INTERFERENCE_ROW.workload) == workload
                  and r.get(INTERFERENCE_ROW.profile) == profile
                  and (r.get("run") != exclude_run or exclude_run is None)
                  and ((machine is not None and r.get("machine") == machine)
                       or (device is not None and r.get(INTERFERENCE_ROW.device) == device))]
    # Own machine before another of the same GPU model, then the newest run.
    candidates.sort(key=lambda r: (r.get("machine") == machine, r.get("run") or 0),
                    reverse=True)
    for kind, stand_in in (("all-reduce", None), ("add", "a memory-bound add standing in for "
                                                        "NCCL's reduction kernels")):
        for row in candidates:
            ratios = _ratios(row)
            if not ratios.get(kind):
                continue
            copy = ratios.get("copy")
            where = f"{row.get('machine')}, {run_name(row)}, {row.get('world_size')} rank" \
                    + ("s" if row.get(INTERFERENCE_ROW.world_size) != 1 else "") \
                    + ("" if row.get("machine") == machine else ", same GPU model")
            return Interference(
                max(1.0, ratios[kind]), max(1.0, copy or 1.0),
                f"{workload}'s dominant GEMM beside {stand_in or kind} ×{ratios[kind]:.3g}"
                + (f", beside peer copies ×{copy:.3g}" if copy else "") + f" ({where})")
    return Interference(source=f"no interference row for {workload} on {machine or device}"
                               " or its GPU model: compute assumed unslowed")
