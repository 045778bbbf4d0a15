"""The terminal summary of a run: one block per overlap cell, intervals and verdicts, ≤ 120 columns.

It reads the comparison rows of the results document (bench_overlap.py), so the numbers are
the ones the report and the JSON hold: medians over rounds with the half-width of their 95%
bootstrap interval, and verdicts only where the interval of the difference excludes zero.
"""

from __future__ import annotations

from impl.rows.gate_records import ESTIMATED
from impl.rows.kinds import COMPARISON, PAIRED, REFERENCE, STEP
from impl.stats import MIN_ROUNDS, NO_DIFFERENCE

WIDTH = 120
COLUMNS = (("strategy", 18), ("step ms", 14), ("× sequential", 14), ("eff. limit", 14),
           ("eff. bound", 14), ("hidden", 6), ("vs ddp", 7), ("vs ddp-25mb", 11))
VERDICTS = {"faster": "faster", "slower": "slower", NO_DIFFERENCE: "n.s."}
# A comparison row's fields, its references' and a strategy's figures (named as the step rows
# that copy them) as the declaration names them.
CELL, FIGURE = COMPARISON.names, STEP.names
LEGEND = """\
step ms: median step time over rounds ± half-width of its 95% bootstrap interval (rounds of every
  variant interleaved, order shuffled per round). × sequential: speedup over sequential at the
  same K. eff. limit = (sequential − step)/(sequential − max(compute, comm)); eff. bound: the same
  against the schedule bound (perfect overlap of this chunking, zero interference). hidden:
  fraction of communication time overlapped by compute. vs ddp / vs ddp-25mb: faster or slower
  than DDP with K-matched buckets / 25 MB buckets; n.s. = no significant difference (the interval
  of the difference includes 0). * outside [0, 1]: slower than sequential (< 0), or better than
  the limit's assumptions (> 1). n/a: undefined (no headroom, other chunking, or no
  communication)."""


def _number(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:.0f}"


def with_interval(estimate: dict | None, flag_outside_unit: bool = False) -> str:
    """'12.3 ±0.41'; the value alone with too few rounds for an interval; 'n/a' where the
    figure, or its interval, is undefined (some resamples had no headroom)."""
    if not estimate or estimate.get(ESTIMATED.value) is None:
        return "n/a"
    value = estimate[ESTIMATED.value]
    low, high = estimate.get(ESTIMATED.low), estimate.get(ESTIMATED.high)
    if low is None or high is None:
        if estimate.get(ESTIMATED.rounds, 0) >= MIN_ROUNDS:
            return "n/a"
        text = _number(value)
    else:
        text = f"{_number(value)} ±{_number((high - low) / 2, 2)}"
    if flag_outside_unit and not 0 <= value <= 1:
        text += " *"
    return text


def _row(cells: list[str]) -> str:
    return " ".join(cell.ljust(width)[:width] if i == 0 else cell.rjust(width)
                    for i, (cell, (_, width)) in enumerate(zip(cells, COLUMNS))).rstrip()


def cell_block(info: dict) -> list[str]:
    refs = info[CELL.references]
    head = (f"{info[CELL.workload]} · K={info[CELL.chunks]} · {info[CELL.world_size]} rank(s) · "
            f"{info[CELL.profile]}")
    references = f"  ms: compute-only {with_interval(refs.get(REFERENCE.compute_only_ms))}"
    if refs.get(REFERENCE.comm_only_ms):
        references += (f" · comm-only {with_interval(refs[REFERENCE.comm_only_ms])} · sequential "
                       f"{with_interval(refs[REFERENCE.sequential_ms])} · bound "
                       f"{with_interval(refs.get(REFERENCE.bound_ms))}")
    else:
        verdict = VERDICTS[refs[REFERENCE.sequential_vs_compute_only][PAIRED.verdict]]
        references += (f" · sequential {with_interval(refs[REFERENCE.sequential_ms])} "
                       f"({verdict} against compute-only)")
    lines = [head[:WIDTH], references[:WIDTH], _row([name for name, _ in COLUMNS])]
    for name, figures in info[CELL.strategies].items():
        versus = [VERDICTS[figures[k][PAIRED.verdict]] if k in figures else "–"
                  for k in ("vs_ddp", "vs_ddp_25mb")]
        hidden = figures.get(FIGURE.hidden_comm_fraction)
        lines.append(_row([
            name, with_interval(figures[FIGURE.step_ms]),
            with_interval(figures["vs_sequential"]["speedup"]),
            with_interval(figures.get(FIGURE.overlap_efficiency), flag_outside_unit=True),
            with_interval(figures.get(FIGURE.bound_efficiency), flag_outside_unit=True),
            "n/a" if hidden is None else f"{hidden['value']:.2f}", *versus]))
    return lines


def summary_table(document: dict) -> str:
    """Every comparison row of ``document`` as a block, then the legend."""
    blocks = [cell_block(b["extra_info"]) for b in document["benchmarks"]
              if COMPARISON.holds(b.get("extra_info", {}))]
    if not blocks:
        return "(no overlap comparisons in this run)"
    return "\n\n".join("\n".join(block) for block in blocks) + "\n\n" + LEGEND
