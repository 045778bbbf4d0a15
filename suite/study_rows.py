"""What the pipeline and hybrid benchmarks put in their rows: one comparison, one shape.

A comparison of two variants measured in the same rounds (suite/harness.py,
``measure_interleaved``) keeps both per-round series and three figures with their 95%
intervals (impl/stats.py): the median paired difference candidate − reference in ms, the
speedup reference / candidate, and the verdict, given only when the difference's interval
excludes zero.
"""

from __future__ import annotations

from collections.abc import Sequence

from impl import stats
from impl.rows.kinds import PAIRED


def comparison(candidate: str, reference: str, candidate_ms: Sequence[float],
               reference_ms: Sequence[float]) -> dict:
    """candidate vs reference from per-round step times (ms), paired by round."""
    difference = stats.difference(candidate_ms, reference_ms)
    return {
        "candidate": candidate, "reference": reference,
        "candidate_round_ms": list(candidate_ms), "reference_round_ms": list(reference_ms),
        # the figures of a paired comparison, as impl.comparisons.versus names them
        PAIRED.difference_ms: difference.to_json(),
        PAIRED.speedup: stats.ratio(reference_ms, candidate_ms).to_json(),
        PAIRED.verdict: stats.verdict(difference),
    }


def round_seconds(round_ms: Sequence[float]) -> list[float]:
    """Per-round step times in seconds: what ``record_round_times`` gives pytest-benchmark."""
    return [ms / 1e3 for ms in round_ms]
