"""What the study sections share: rows of one kind, a value with its interval as text, and
the comparison rows (candidate against reference, measured in the same rounds) as one table.

    table = comparison_table(rows, "hybrid_comparison", "tab-id", "The hybrids against ...")
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.rows.gate_records import ESTIMATED
from impl.rows.kinds import COMPARISONS, HYBRID_COMPARISON, PAIRED, PIPELINE_COMPARISON
from reports.format import Column, Placement, fmt, make_table, text_column

# The comparison rows' fields that name their setting: row[PIPES.stages].
PIPES, HYBRIDS = PIPELINE_COMPARISON.names, HYBRID_COMPARISON.names


def of_kind(rows: Sequence[dict], kind: str) -> list[dict]:
    return [r for r in rows if r.get("kind") == kind]


def interval_text(estimate: dict | None, unit: str = "") -> str:
    """"−3.96 ms [−8.03, 0.665]": the value and its 95% interval (n/a where undefined)."""
    if not estimate or estimate.get(ESTIMATED.value) is None:
        return "n/a"
    low, high = estimate.get(ESTIMATED.low), estimate.get(ESTIMATED.high)
    bounds = f" [{fmt(low)}, {fmt(high)}]" if low is not None and high is not None else ""
    return f"{fmt(estimate[ESTIMATED.value])}{f' {unit}' if unit else ''}{bounds}"


def comparison_rows(rows: Sequence[dict], kind: str) -> list[dict]:
    """Every candidate-vs-reference pair of the comparison rows of ``kind``, flattened."""
    table = []
    for row in of_kind(rows, kind):
        setting = (f"{row[PIPES.workload]}, p={row[PIPES.stages]}, m={row[PIPES.microbatches]}"
                   if kind == PIPELINE_COMPARISON.name
                   else f"{row.get(HYBRIDS.study, '')}, {row[HYBRIDS.workload]}")
        for pair in row.get(COMPARISONS.name) or []:  # the field the comparison kinds share
            table.append({"machine": row["machine"], "setting": setting,
                          "pair": f"{pair['candidate']} vs {pair['reference']}",
                          "difference": interval_text(pair.get(PAIRED.difference_ms), "ms"),
                          "speedup": interval_text(pair.get(PAIRED.speedup), "×"),
                          PAIRED.verdict: pair.get(PAIRED.verdict),
                          ESTIMATED.rounds: (pair.get(PAIRED.difference_ms) or {}).get(
                              ESTIMATED.rounds)})
    return table


COMPARISON_COLUMNS = (
    text_column("machine", "machine"), text_column("setting", "setting"),
    text_column("pair", "candidate vs reference"),
    text_column("difference", "difference [95% CI]"), text_column("speedup", "speedup [95% CI]"),
    text_column(PAIRED.verdict), Column(ESTIMATED.rounds, "rounds"),
)


def comparison_table(rows: Sequence[dict], kind: str, table_id: str, what: str,
                     placement: Placement | None = None):
    """The comparisons of ``kind`` as one table, or None when there are none."""
    compared = comparison_rows(rows, kind)
    if not compared:
        return None
    return make_table(table_id, f"{what}, measured in the same rounds: median paired "
                      "difference of step times and speedup (reference / candidate) with 95% "
                      "bootstrap intervals; a verdict only where the difference's interval "
                      "excludes zero.", COMPARISON_COLUMNS, compared, placement=placement)
