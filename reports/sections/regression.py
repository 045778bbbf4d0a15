"""Regression against a baseline (template sections/regression.html.j2): the gate's verdicts on
the loaded results against a baseline file (``--baseline``), by the gate's own rule and code
(reports/gate/), and the gate's measured error rates from its committed trials.
"""

from __future__ import annotations

from reports.format import Column, fmt, make_table, text_column
from reports.view import View

REGRESSION_COLUMNS = (text_column("benchmark", "benchmark"),
                      Column("baseline_ms", "baseline", "ms"),
                      Column("candidate_ms", "candidate", "ms"), Column("ratio", "throughput ×"),
                      text_column("ci", "95% CI", nowrap=True),
                      text_column("threshold", "threshold", nowrap=True),
                      text_column("verdict", "verdict"), text_column("reason", "why"))


TRIAL_COLUMNS = (text_column("machine", "machine"), text_column("target", "benchmarks"),
                 text_column("slowdown", "injected slowdown (measured)"),
                 text_column("false_alarms", "false alarms, gate"),
                 text_column("files_false_alarms", "false alarms, files only"),
                 text_column("detections", "detections, gate"),
                 text_column("files_detections", "detections, files only"),
                 Column("blocks", "re-run blocks per side"),
                 text_column("block_value", "re-run block value"),
                 text_column("load", "1-min load, median (range)"))


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
    table_rows = [{**row, "ci": f"{fmt(row['ci'][0])}–{fmt(row['ci'][1])}" if row["ci"] else None}
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
        table.append({"benchmark": row.name, "group": row.group,
                      "baseline_ms": row.baseline_median_s * 1e3,
                      "candidate_ms": row.candidate_median_s * 1e3,
                      "ratio": decision.ratio, "ci": decision.ci,
                      "threshold": percent(decision.threshold),
                      "p_value": decision.p_value, "verdict": row.verdict_text,
                      "reason": row.reason})
    order = {"regressed": 0, "improved": 1, "unchanged": 2}
    return sorted(table, key=lambda r: (order.get(r["verdict"].split()[0], 3), r["benchmark"]))
