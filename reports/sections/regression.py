"""Regression against a baseline (template sections/regression.html.j2): the gate's verdicts on
the loaded results against a baseline file (``--baseline``), by the gate's own rule and code
(reports/gate/), and the gate's measured error rates from its committed trials.
"""

from __future__ import annotations

from impl.rows.gate_records import REGRESSION, TRIAL_RATE
from reports.format import Column, fmt, make_table, text_column
from reports.view import View

REGRESSION_COLUMNS = (text_column(REGRESSION.benchmark, "benchmark"),
                      Column(REGRESSION.baseline_ms, "baseline", "ms"),
                      Column(REGRESSION.candidate_ms, "candidate", "ms"),
                      Column(REGRESSION.ratio, "throughput ×"),
                      text_column(REGRESSION.ci, "95% CI", nowrap=True),
                      text_column(REGRESSION.threshold, "threshold", nowrap=True),
                      text_column(REGRESSION.verdict, "verdict"),
                      text_column(REGRESSION.reason, "why"))


TRIAL_COLUMNS = (text_column(TRIAL_RATE.machine, "machine"),
                 text_column(TRIAL_RATE.target, "benchmarks"),
                 text_column(TRIAL_RATE.slowdown, "injected slowdown (measured)"),
                 text_column(TRIAL_RATE.false_alarms, "false alarms, gate"),
                 text_column(TRIAL_RATE.files_false_alarms, "false alarms, files only"),
                 text_column(TRIAL_RATE.detections, "detections, gate"),
                 text_column(TRIAL_RATE.files_detections, "detections, files only"),
                 Column(TRIAL_RATE.blocks, "re-run blocks per side"),
                 text_column(TRIAL_RATE.block_value, "re-run block value"),
                 text_column(TRIAL_RATE.load, "1-min load, median (range)"))


def section_regression(view: View) -> dict:
    """The verdicts against ``view.baseline``, and the gate's error rates; ``empty`` without a
    baseline."""
    baseline = view.baseline
    # The gate's rules and statistics, not a second copy: imported here so that a report
    # without a baseline or trials does not need SciPy.
    from impl.rows.files import load_results
    from reports.gate import confirm, rules, spread, trial_rates
    from reports.gate.comparison import compare
    from reports.gate.loading import baseline_spreads
    from reports.gate.render import rule_text

    documents, trial_notes = trial_rates.load_trials(trial_rates.find_trials())
    trials = trial_rates.trial_rates(documents)
    context = {
        "empty": baseline is None, "given": baseline is not None, "threshold_rule": spread.RULE,
        "confirm_rule": confirm.RULE, "trial_notes": trial_notes,
        "trials": make_table("tab-gate-trials", "The gate's error rates as measured by "
                             "reports/gate/trials.py (results/<machine>/gate-trials*.json): "
                             "pairs of unchanged runs and pairs with real extra compute, each "
                             "judged files only and with the interleaved re-run. Rates with "
                             "their 95% Clopper-Pearson intervals.", TRIAL_COLUMNS, trials)
        if trials else None}
    if baseline is None:
        return context
    spreads, spread_source = baseline_spreads([load_results(baseline.path)])
    rule = rules.Rule()
    comparison = compare(baseline.benchmarks, baseline.candidate, rule, spreads=spreads)
    table_rows = [{**row, REGRESSION.ci: (f"{fmt(row[REGRESSION.ci][0])}–"
                                          f"{fmt(row[REGRESSION.ci][1])}"
                                          if row[REGRESSION.ci] else None)}
                  for row in regression_rows(comparison)]
    return {**context, "path": baseline.path, "label": baseline.label,
            "counts": {v: comparison.count(v) for v in ("regressed", "improved", "unchanged")},
            "only_baseline": len(comparison.only_baseline),
            "only_candidate": len(comparison.only_candidate),
            "notes": baseline.notes,
            "rule": rule_text(rule, (), spread_source),
            "table": make_table("tab-regression", f"Per-benchmark comparison of the candidate "
                                f"results of {baseline.label} against {baseline.path} "
                                f"(reports/gate/rules.py's files-only rule; the report re-runs "
                                f"nothing, so a regression here is unconfirmed). Throughput × "
                                f"is baseline median round time / candidate median round "
                                f"time.", REGRESSION_COLUMNS, table_rows)}


def regression_rows(comparison) -> list[dict]:
    """reports.gate's Comparison as table rows (the decision itself is the gate's); the
    verdict says where it comes from ("regressed (unconfirmed: files only)")."""
    from reports.gate.rules import percent

    table = []
    for row in comparison.rows:
        decision = row.decision
        table.append({REGRESSION.benchmark: row.name, REGRESSION.group: row.group,
                      REGRESSION.baseline_ms: row.baseline_median_s * 1e3,
                      REGRESSION.candidate_ms: row.candidate_median_s * 1e3,
                      REGRESSION.ratio: decision.ratio, REGRESSION.ci: decision.ci,
                      REGRESSION.threshold: percent(decision.threshold),
                      REGRESSION.p_value: decision.p_value,
                      REGRESSION.verdict: row.verdict_text, REGRESSION.reason: row.reason})
    order = {"regressed": 0, "improved": 1, "unchanged": 2}
    return sorted(table, key=lambda r: (order.get(r[REGRESSION.verdict].split()[0], 3),
                                        r[REGRESSION.benchmark]))
