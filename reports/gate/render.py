"""The gate's verdicts as text: the terminal table, the Markdown summary (every cell
HTML-escaped: file names and benchmark ids are untrusted) and the one line stating the rule.
"""

from __future__ import annotations

import html
import os
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path

from impl.atomic import write_bytes_atomic
from reports.gate.comparison import Comparison, Row
from reports.gate.rules import CI_LEVEL, VERDICTS, Rule, percent

# The headers the table's code finds its cells by, each spelt once.
VERDICT, THROUGHPUT, WHY = "verdict", "throughput", "why"
COLUMNS = ("benchmark", "baseline", "candidate", "ratio", "95% CI", "p", "threshold",
           "re-run ratio [95% CI]", VERDICT, THROUGHPUT, WHY)
# The terminal shows the short columns; a row's long texts (the full name where it was
# shortened, the verdict's source, the throughput metric, the reason) follow it, wrapped.
TERMINAL_WIDTH = 120
TERMINAL_COLUMNS = ("benchmark", "baseline", "candidate", "ratio", "95% CI", "p", "threshold",
                    "re-run [95% CI]", VERDICT)


def format_seconds(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def _metric_text(row: Row) -> str:
    if row.baseline_metric is None or row.candidate_metric is None:
        return ""
    field, base = row.baseline_metric
    return f"{field} {base:.4g} -> {row.candidate_metric[1]:.4g}"


def _rerun_text(row: Row) -> str:
    ratio = row.confirmation.ratio if row.confirmation else None
    if ratio is None or ratio.value is None:
        return "-"
    if ratio.low is None or ratio.high is None:
        return f"{ratio.value:.3f}"
    return f"{ratio.value:.3f} [{ratio.low:.3f}-{ratio.high:.3f}]"


def table_rows(comparison: Comparison) -> list[tuple[str, ...]]:
    """One tuple of COLUMNS per row: regressed first, then improved, then unchanged."""
    names = [row.name for row in comparison.rows]
    order = {verdict: index for index, verdict in enumerate(VERDICTS)}
    lines = []
    for row in sorted(comparison.rows, key=lambda r: (order[r.verdict], r.fullname)):
        decision = row.decision
        label = row.name if names.count(row.name) == 1 else row.fullname
        ci = f"{decision.ci[0]:.3f}-{decision.ci[1]:.3f}" if decision.ci else "-"
        p = f"{decision.p_value:.2g}" if decision.p_value is not None else "-"
        lines.append((label, format_seconds(row.baseline_median_s),
                      format_seconds(row.candidate_median_s), f"{decision.ratio:.3f}", ci, p,
                      percent(decision.threshold), _rerun_text(row), row.verdict_text,
                      _metric_text(row), row.reason))
    return lines


def rule_text(rule: Rule, group_thresholds: Sequence[tuple[str, float]],
              spread_source: str | None = None, confirmed: bool = False) -> str:
    overrides = "".join(f", {pattern}: {value:.0%}" for pattern, value in group_thresholds)
    spread = (f"the run-to-run spread recorded in {spread_source}" if spread_source
              else "no recorded run-to-run spread")
    text = (f"files only: regressed/improved when throughput (ratio of median round times) "
            f"changes by more than the group's threshold, max(minimum {percent(rule.threshold)}"
            f"{overrides}, 1 - exp(-spread)) with {spread}, and a one-sided Mann-Whitney U test "
            f"on the per-round times gives p < {rule.alpha} (at least {rule.min_rounds} rounds "
            f"per side); CI: {CI_LEVEL:.0%} bootstrap interval of the ratio; a files-only "
            "regression is UNCONFIRMED (exit 3): only a regression that a re-run confirms "
            "fails the gate")
    if confirmed:
        text += ("; re-run: benchmarks whose ratio is below (1 - minimum) * exp(spread) "
                 "measured again, baseline and candidate code interleaved in blocks, regressed "
                 f"only when the {CI_LEVEL:.0%} interval of the paired loss lies above the "
                 "minimum")
    return text


def headline(comparison: Comparison) -> str:
    status = comparison.status
    counts = ", ".join(f"{comparison.count(v)} {v}" for v in VERDICTS)
    unconfirmed = comparison.unconfirmed
    note = (f"; {unconfirmed} of the regressions unconfirmed (files only: --confirm re-measures)"
            if unconfirmed else "")
    return f"Throughput gate: {status} ({counts}{note})"


def shortened(name: str, width: int) -> str:
    """``name`` cut in the middle to ``width`` characters: both ends tell benchmarks apart."""
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return f"{name[:head]}…{name[len(name) - (width - 1 - head):]}"


def _terminal_table(comparison: Comparison) -> list[str]:
    full = table_rows(comparison)
    named = COLUMNS.index("benchmark")
    verdict = COLUMNS.index(VERDICT)
    short = [(*row[:verdict], row[verdict].split(" (")[0]) for row in full]
    widths = [max(len(row[i]) for row in [TERMINAL_COLUMNS, *short])
              for i in range(len(TERMINAL_COLUMNS))]
    gaps = 2 * (len(widths) - 1)
    widths[named] = max(len(TERMINAL_COLUMNS[named]),
                        min(widths[named], TERMINAL_WIDTH - gaps - sum(widths[1:])))
    lines = []
    for row, cells in zip([None, *full], [TERMINAL_COLUMNS, *short]):
        cells = (shortened(cells[named], widths[named]), *cells[1:])
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
        if row is None:
            continue
        details = [row[named]] if len(row[named]) > widths[named] else []
        details += [text for column in (VERDICT, THROUGHPUT, WHY)
                    if (text := row[COLUMNS.index(column)]) and text != cells[verdict]]
        if details:
            lines += textwrap.wrap("; ".join(details), TERMINAL_WIDTH, initial_indent="    ",
                                   subsequent_indent="    ", break_on_hyphens=False)
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def render_text(comparison: Comparison, rule_line: str) -> str:
    """The terminal's view, every line within TERMINAL_WIDTH columns but the names listed
    only on one side (the Markdown summary holds every cell whole)."""
    lines = _terminal_table(comparison)
    for title, names in (("only in baseline", comparison.only_baseline),
                         ("only in candidate", comparison.only_candidate)):
        lines += [f"{title}: {name}" for name in names]
    lines += ["", *textwrap.wrap(f"rule: {rule_line}", TERMINAL_WIDTH, break_on_hyphens=False),
              *textwrap.wrap(headline(comparison), TERMINAL_WIDTH)]
    return "\n".join(lines)


MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~#])")


def markdown_text(text: str) -> str:
    """Untrusted text (file names, benchmark ids, reasons) for a Markdown summary: HTML
    escaped, Markdown punctuation backslash-escaped, on one line. Quotes stay as they are:
    outside an attribute they are harmless, and an entity such as &#x27; would have its "#"
    escaped too and show as written."""
    escaped = html.escape(" ".join(str(text).split()), quote=False)
    return MARKDOWN_SPECIAL.sub(r"\\\1", escaped)


def render_markdown(comparison: Comparison, rule_line: str, baseline: Sequence[str],
                    candidate: Sequence[str], notes: Sequence[str] = ()) -> str:
    lines = [f"## {markdown_text(headline(comparison))}", "",
             f"Baseline: {', '.join(markdown_text(p) for p in baseline)}; "
             f"candidate: {', '.join(markdown_text(p) for p in candidate)}.", "",
             f"Rule: {markdown_text(rule_line)}.", ""]
    lines += [f"> {markdown_text(note)}" for note in notes] + ([""] if notes else [])
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    verdict = COLUMNS.index(VERDICT)
    for row in table_rows(comparison):
        cells = [markdown_text(cell) for cell in row]
        if row[verdict].startswith("regressed"):
            cells[verdict] = f"**{cells[verdict]}**"
        lines.append("| " + " | ".join(cells) + " |")
    for title, names in (("Only in baseline", comparison.only_baseline),
                         ("Only in candidate", comparison.only_candidate)):
        if names:
            lines += ["", f"### {title} ({len(names)})", ""]
            lines += [f"- {markdown_text(n)}" for n in names]
    return "\n".join(lines) + "\n"


def write_summary(markdown: str, path: Path) -> None:
    write_bytes_atomic(path, markdown.encode())
    if step_summary := os.environ.get("GITHUB_STEP_SUMMARY"):
        # The runner's own file, read when the step ends: appended to (one write), not
        # replaced, as GitHub documents.
        with open(step_summary, "a", encoding="utf-8") as summary:
            summary.write(markdown)
