"""A comparison: every benchmark on both sides with its files-only decision (reports/gate/
rules.py) and, once measured, its re-run's (reports/gate/confirm.py), and the gate's status.

The status is FAIL where a re-run confirmed a regression, UNCONFIRMED where only the files
show one, else PASS; ``EXIT_STATUS`` maps it to the command's exit status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from impl.rows.files import round_times as saved_round_times
from impl.rows.gate_records import GATE, GATE_ROW
from impl.rows.kinds import ALLREDUCE, STEP
from reports.gate.confirm import Confirmation
from reports.gate.rules import VERDICTS, Decision, Rule, decide, threshold_for
from reports.gate.spread import GroupSpread, is_suspect, noise_aware_threshold

EXIT_STATUS = {"PASS": 0, "FAIL": 1, "UNCONFIRMED": 3}  # 2: bad input, or no re-run possible
# Shown beside the ratio when a benchmark recorded them: a number people know for that kind.
THROUGHPUT_FIELDS = (STEP.names.samples_per_s, ALLREDUCE.names.busbw_gbps)


@dataclass(frozen=True)
class Row:
    fullname: str
    name: str
    group: str | None
    baseline_median_s: float
    candidate_median_s: float
    decision: Decision  # files only
    baseline_metric: tuple[str, float] | None  # (THROUGHPUT_FIELDS entry, value)
    candidate_metric: tuple[str, float] | None
    minimum: float = Rule.threshold  # the configured threshold of its group
    spread: GroupSpread | None = None  # the group's recorded run-to-run spread
    suspect: bool = False  # the files allow a loss above the minimum: --confirm re-measures it
    confirmation: Confirmation | None = None

    @property
    def confirmed(self) -> bool:
        return self.confirmation is not None and self.confirmation.verdict is not None

    @property
    def verdict(self) -> str:
        """The gate's verdict: the re-run's where it re-measured the benchmark."""
        if not self.confirmed:
            return self.decision.verdict
        if self.confirmation.verdict == "regressed":
            return "regressed"
        return "improved" if self.decision.verdict == "improved" else "unchanged"

    @property
    def verdict_text(self) -> str:
        """The verdict with where it comes from: "regressed (unconfirmed: files only)"."""
        files = self.decision.verdict
        if self.confirmed:
            if self.verdict == files:
                return f"{files} (confirmed by re-run)"
            return f"{self.verdict} (re-run; files: {files})"
        if files != "regressed":
            return files
        if self.confirmation is not None:
            return "regressed (unconfirmed: not re-measured)"
        return "regressed (unconfirmed: files only)"

    @property
    def reason(self) -> str:
        if self.confirmation is None:
            return self.decision.reason
        return f"files: {self.decision.reason}; {self.confirmation.reason}"

    def to_json(self) -> dict:
        decision = self.decision
        return {GATE_ROW.fullname: self.fullname, GATE_ROW.group: self.group,
                GATE_ROW.verdict: self.verdict, GATE_ROW.verdict_text: self.verdict_text,
                GATE_ROW.files_verdict: decision.verdict, GATE_ROW.ratio: decision.ratio,
                GATE_ROW.ci: decision.ci, GATE_ROW.p_value: decision.p_value,
                GATE_ROW.threshold: decision.threshold, GATE_ROW.minimum: self.minimum,
                GATE_ROW.spread: self.spread.log_ratio_p95 if self.spread else None,
                GATE_ROW.suspect: self.suspect, GATE_ROW.reason: self.reason,
                GATE_ROW.baseline_median_s: self.baseline_median_s,
                GATE_ROW.candidate_median_s: self.candidate_median_s,
                GATE_ROW.confirmation: (self.confirmation.to_json() if self.confirmation
                                        else None)}


@dataclass(frozen=True)
class Comparison:
    rows: list[Row]
    only_baseline: list[str]
    only_candidate: list[str]

    def count(self, verdict: str) -> int:
        return sum(row.verdict == verdict for row in self.rows)

    @property
    def regressed(self) -> bool:
        return self.count("regressed") > 0

    @property
    def status(self) -> str:
        """FAIL (a regression a re-run confirmed), UNCONFIRMED (regressions the files alone
        show) or PASS; ``EXIT_STATUS`` maps it to the exit status."""
        if any(row.verdict == "regressed" and row.confirmed for row in self.rows):
            return "FAIL"
        return "UNCONFIRMED" if self.regressed else "PASS"

    @property
    def unconfirmed(self) -> int:
        """Regressions that no re-run measured."""
        return sum(row.verdict == "regressed" and not row.confirmed for row in self.rows)

    @property
    def suspects(self) -> list[Row]:
        return [row for row in self.rows if row.suspect]

    def with_confirmations(self, confirmations: Mapping[str, Confirmation]) -> Comparison:
        rows = [replace(row, confirmation=confirmations[row.fullname])
                if row.fullname in confirmations else row for row in self.rows]
        return Comparison(rows, self.only_baseline, self.only_candidate)

    def to_json(self) -> dict:
        return {GATE.verdicts: {v: self.count(v) for v in VERDICTS},
                GATE.unconfirmed_regressions: self.unconfirmed, GATE.regressed: self.regressed,
                GATE.status: self.status, GATE.exit_status: EXIT_STATUS[self.status],
                GATE.rows: [row.to_json() for row in self.rows],
                GATE.only_baseline: self.only_baseline, GATE.only_candidate: self.only_candidate}


def _metric(benchmark: dict) -> tuple[str, float] | None:
    extra = benchmark["extra_info"]
    for field in THROUGHPUT_FIELDS:
        if isinstance(extra.get(field), (int, float)):
            return field, float(extra[field])
    return None


def compare(baseline: dict[str, dict], candidate: dict[str, dict], rule: Rule = Rule(),
            group_thresholds: Sequence[tuple[str, float]] = (),
            spreads: Mapping[str, GroupSpread] | None = None) -> Comparison:
    """Compare benchmarks (pytest-benchmark dicts keyed by fullname) present on both sides,
    files only; ``spreads`` (by group) make the thresholds noise-aware."""
    spreads = spreads or {}
    rows = []
    for fullname in sorted(baseline.keys() & candidate.keys()):
        base, cand = baseline[fullname], candidate[fullname]
        group = cand.get("group") or base.get("group")
        minimum = threshold_for(group, rule.threshold, group_thresholds)
        spread = spreads.get(group or "")
        group_rule = replace(rule, threshold=noise_aware_threshold(minimum, spread))
        base_rounds, cand_rounds = saved_round_times(base), saved_round_times(cand)
        base_median, cand_median = base["stats"]["median"], cand["stats"]["median"]
        if base_rounds is None or cand_rounds is None:
            ratio = base_median / cand_median if cand_median > 0 else float("nan")
            decision = Decision("unchanged", "no per-round data (run pytest with "
                                "--benchmark-save-data)", ratio, None, None, None,
                                group_rule.threshold)
        else:
            decision = decide(base_rounds, cand_rounds, group_rule)
        rows.append(Row(fullname, cand["name"], group, base_median, cand_median, decision,
                        _metric(base), _metric(cand), minimum, spread,
                        is_suspect(decision.ratio, minimum, spread)))
    return Comparison(rows, sorted(baseline.keys() - candidate.keys()),
                      sorted(candidate.keys() - baseline.keys()))
