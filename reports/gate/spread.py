"""Run-to-run spread of each benchmark group, and the noise-aware threshold made from it.

Two runs of unchanged code made at different times differ by more than their rounds say:
clocks, heat and the other jobs of a shared machine shift a whole run. A threshold below that
drift makes the gate cry wolf, so each group's threshold is derived from the drift measured
between runs of one commit on that machine, and stored with the baseline
(``python -m reports.gate --update-baseline RUN RUN ...``)::

    spread(group)    = the 95th percentile, over every pair of runs (i, j) of unchanged code and
                       every benchmark of the group in both, of |ln(median_i / median_j)|
    threshold(group) = max(minimum, 1 - exp(-spread(group)))

``minimum`` is ``--threshold`` (or the group's ``--group-threshold``); 1 - exp(-spread) is
the throughput loss that a drift of that size shows as. A file-to-file loss above it is larger
than 95% of the drifts seen between unchanged runs. ``median_i`` is a benchmark's median round
time in run i. With few runs the 95th percentile is close to the largest drift seen (with n
pairs, numpy's linear interpolation between the two largest).

The same spread decides which benchmarks the interleaved re-run (``--confirm``) re-measures:
those that *may* have lost more than the minimum once the drift is allowed for,

    suspect: throughput ratio r < (1 - minimum) * exp(spread(group))

(with no spread recorded: r < 1 - minimum).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

SPREAD_KEY = "gate_spread"  # top-level key of a baseline file written by --update-baseline
QUANTILE = 95
RULE = ("threshold(group) = max(minimum, 1 - exp(-spread)), spread = 95th percentile of "
        "|ln(median_i / median_j)| over pairs of runs of unchanged code")


@dataclass(frozen=True)
class GroupSpread:
    """The measured drift of one benchmark group between runs of unchanged code."""

    log_ratio_p95: float  # spread(group) above
    pairs: int  # (run pair, benchmark) values it was taken over
    benchmarks: int


def group_of(benchmark: dict) -> str:
    """The pytest-benchmark group, "" for benchmarks without one."""
    return benchmark.get("group") or ""


def measure_spread(runs: Sequence[Mapping[str, dict]]) -> dict[str, GroupSpread]:
    """Per group, the spread of medians between every two of ``runs`` (benchmarks by fullname,
    one mapping per run of the same code). Groups seen in fewer than two runs are absent."""
    drifts: dict[str, list[float]] = {}
    names: dict[str, set[str]] = {}
    for first, second in itertools.combinations(runs, 2):
        for fullname in first.keys() & second.keys():
            a, b = first[fullname]["stats"]["median"], second[fullname]["stats"]["median"]
            if a > 0 and b > 0:
                group = group_of(second[fullname])
                drifts.setdefault(group, []).append(abs(math.log(a / b)))
                names.setdefault(group, set()).add(fullname)
    return {group: GroupSpread(float(np.percentile(values, QUANTILE)), len(values),
                               len(names[group]))
            for group, values in sorted(drifts.items())}


def noise_aware_threshold(minimum: float, spread: GroupSpread | None) -> float:
    """max(minimum, 1 - exp(-spread)): the files-only threshold of a group."""
    if spread is None:
        return minimum
    return max(minimum, 1 - math.exp(-spread.log_ratio_p95))


def is_suspect(ratio: float, minimum: float, spread: GroupSpread | None) -> bool:
    """True when the throughput ratio, allowed the group's drift, may be below 1 - minimum."""
    allowance = spread.log_ratio_p95 if spread is not None else 0.0
    return ratio < (1 - minimum) * math.exp(allowance)


def spread_record(spreads: Mapping[str, GroupSpread], runs: Sequence[dict]) -> dict:
    """What --update-baseline stores under SPREAD_KEY: the rule, the runs, each group."""
    return {"rule": RULE, "quantile": QUANTILE / 100, "runs": list(runs),
            "groups": {group: asdict(spread) for group, spread in spreads.items()}}


def recorded_spread(document: dict, where: str) -> dict[str, GroupSpread]:
    """The spread stored in a baseline document ({} when it has none).

    A malformed record raises ValueError naming the field (``where`` names the file).
    """
    record = document.get(SPREAD_KEY)
    if record is None:
        return {}
    groups = record.get("groups") if isinstance(record, dict) else None
    if not isinstance(groups, dict):
        raise ValueError(f"{where}: {SPREAD_KEY}.groups is missing or not an object")
    spreads = {}
    for group, value in groups.items():
        field = f"{SPREAD_KEY}.groups[{group!r}]"
        if not isinstance(value, dict):
            raise ValueError(f"{where}: {field} is not an object")
        numbers = [value.get(key) for key in ("log_ratio_p95", "pairs", "benchmarks")]
        if (not all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers)
                or not math.isfinite(numbers[0]) or numbers[0] < 0 or numbers[1] < 1):
            raise ValueError(f"{where}: {field} = {value!r}; expected log_ratio_p95 >= 0, "
                             "pairs >= 1 and benchmarks")
        spreads[group] = GroupSpread(float(numbers[0]), int(numbers[1]), int(numbers[2]))
    return spreads
