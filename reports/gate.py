"""Throughput regression gate: baseline results against candidate results, pass or fail.

    python -m reports.gate results/baselines/h200x4.json results/h200x4 --confirm
    nox -s gate -- results/baselines/cpu-2core.json results/cpu-2core --threshold 0.05
    python -m reports.gate BASELINE CANDIDATE --group-threshold 'allreduce*=0.10' --alpha 0.01
    python -m reports.gate --update-baseline results/h200x4/20261121T2200.json \
        results/h200x4/20261121T2230.json results/h200x4/20261121T2300.json

BASELINE and CANDIDATE are result files or folders (a folder's files are merged by benchmark
``fullname``; where a name appears twice on one side the newest file's benchmark is used).
Every benchmark present on both sides is compared; those on one side only are listed.

Files-only rule (``decide``), per benchmark, on the raw per-round times ``stats.data``:

- The work of one round is the same for the same benchmark id, so the throughput ratio is
  ``r = median(baseline round time) / median(candidate round time)``: below 1 is slower.
- Each group's threshold is noise-aware (reports/gate_spread.py): max(minimum, 1 -
  exp(-spread)), where spread is the 95th percentile of |ln(ratio of medians)| between runs of
  unchanged code on this machine, recorded in the baseline by ``--update-baseline RUN RUN
  ...``. The minimum is ``--threshold`` (default 5%) or the group's ``--group-threshold
  PATTERN=FRACTION`` (fnmatch on the pytest-benchmark group, first match wins). Without a
  recorded spread the threshold is the minimum.
- REGRESSED when throughput fell by more than the threshold (1 - r > threshold) AND a
  one-sided Mann-Whitney U test says the candidate's per-round throughputs are lower with
  p < alpha (default 0.01, ``--alpha``). IMPROVED is the mirror image. Anything else is
  UNCHANGED.
- Why a rank test: round times are skewed (a floor set by the hardware, a long right tail)
  and have outliers, so a t-test's normality assumption does not hold and one slow round could
  decide it; Mann-Whitney only uses the order of rounds. It compares the rounds of two runs as
  if they came from one distribution, so a shift of a whole run (other jobs on the machine, a
  clock change) is "significant" like a real change: the threshold, above the recorded drift,
  is what guards against that.
- With fewer than ``--min-rounds`` (5) rounds on either side the test cannot be significant:
  the verdict is "unchanged (too few rounds)". The same holds for files saved without
  ``--benchmark-save-data``.
- Effect size: the 95% bootstrap interval of r (impl/stats.py, scipy; each side resampled on
  its own). It is reported, not used to decide.

Confirmation (``--confirm``, reports/gate_confirm.py): every benchmark whose files-only ratio
may hide a loss above the minimum once the recorded drift is allowed for (r < (1 - minimum) *
exp(spread)) is measured again, baseline code and candidate code interleaved in blocks on
this machine, and the paired re-run decides it: regressed only when the 95% interval of its
throughput loss lies entirely above the minimum threshold.

Verdicts without a re-run are marked: "regressed (unconfirmed: files only)".

Exit status: 0 nothing regressed; 1 a regression the interleaved re-run confirmed (also where
the files alone said unchanged); 3 UNCONFIRMED: the files say slower and no re-run measured it
(no ``--confirm``, or a benchmark a block cannot select); 2 bad arguments, input files that
cannot be compared (other machine, other suite mode: ``--force`` to compare anyway), or a
re-run that could not be made.

Why files alone never fail the gate: they cannot keep a false-alarm rate. Two files of
unchanged code differ by the machine's drift, which no test on their rounds sees, and a suite
file holds hundreds of benchmarks, so some always cross any per-benchmark threshold: 11 of
12 back-to-back unchanged quick pairs and 12 of 12 default pairs on the 2-core machine had
files-only "regressions" (the README's throughput gate section measures it over whole quick
suites). The re-run removes the drift by interleaving; reports/gate_trials.py measures its
false alarms. CI (bench.yml, through ``nox -s gate``) reads 3 as a warning.

Output: a table on stdout, a Markdown summary (``--summary``, default
reports/out/gate-summary.md, also appended to ``$GITHUB_STEP_SUMMARY`` when set; every cell
HTML-escaped), optionally the verdicts as JSON (``--json``), and the re-run's block output
(``--confirm-log``). Every file the gate writes is written whole (impl/atomic.py).

Files from different machines are refused (exit 2) unless ``--force``: GPU models, driver,
launched world size, backend and interconnect profile must agree with the newest baseline
file's (CPU model and core count too when there is no GPU; pytest-benchmark's CPU fields for
files without a fingerprint), and so must the suite mode (``suite.mode``: quick, default and
full runs use other rounds and sizes). In a folder, files that differ are left out with a
note; the gate refuses only when a side has no comparable file left.

Baselines (results/baselines/<label>.json) are written only by ``--update-baseline``, never as
a side effect of a comparison.
"""

from __future__ import annotations

import argparse
import fnmatch
import html
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.stats import mannwhitneyu

from impl import stats
from impl.atomic import write_bytes_atomic, write_json_atomic
from impl.settings import LABEL_PATTERN
from reports import gate_confirm
from reports.gate_confirm import Confirmation, ConfirmError
from reports.gate_spread import (
    SPREAD_KEY,
    GroupSpread,
    is_suspect,
    measure_spread,
    noise_aware_threshold,
    recorded_spread,
    spread_record,
)
from reports.results import ResultsError, ResultsFile, find_result_files, load_results, newest
from reports.results import round_times as saved_round_times

DEFAULT_SUMMARY = Path("reports/out/gate-summary.md")
# How the files the gate writes begin: it replaces only such files (check_outputs).
SUMMARY_HEADER = "## Throughput gate: "
JSON_HEADER = '{\n "baseline": '
CONFIRM_LOG_HEADER = "# reports.gate --confirm: the output of the re-run's blocks"
DEFAULT_CONFIRM_LOG = Path("reports/out/gate-confirm.log")
BASELINES_DIR = Path("results/baselines")
VERDICTS = ("regressed", "improved", "unchanged")
EXIT_STATUS = {"PASS": 0, "FAIL": 1, "UNCONFIRMED": 3}  # 2: bad input, or no re-run possible
CI_LEVEL = stats.CONFIDENCE
# Shown beside the ratio when a benchmark recorded them: a number people know for that kind.
THROUGHPUT_FIELDS = ("samples_per_s", "busbw_gbps")
# machine_info["overlap"] fields that must agree; the CPU ones only where neither side has a GPU.
MACHINE_FIELDS = ("gpu_names", "driver", "world_size", "backend", "profile")
CPU_MACHINE_FIELDS = ("cpu_model", "cpu_cores")
# What pytest-benchmark itself writes, for files without the suite's fingerprint.
PLAIN_MACHINE_FIELDS = (("cpu", "brand_raw"), ("cpu", "count"), ("machine",), ("system",))


class GateError(Exception):
    """A usage or input problem: printed as one line, exit status 2."""


# --- decision: pure functions, round data in, verdict out ------------------------------------


@dataclass(frozen=True)
class Rule:
    threshold: float = 0.05  # relative throughput change that matters (the minimum)
    alpha: float = 0.01  # one-sided Mann-Whitney U significance level
    min_rounds: int = 5  # per side; fewer can never be significant


@dataclass(frozen=True)
class Decision:
    verdict: str  # one of VERDICTS
    reason: str
    ratio: float  # candidate throughput / baseline throughput
    ci: tuple[float, float] | None  # CI_LEVEL bootstrap interval of ratio
    p_slower: float | None  # one-sided p: candidate throughput lower
    p_faster: float | None  # one-sided p: candidate throughput higher
    threshold: float

    @property
    def p_value(self) -> float | None:
        """The p-value in the direction the medians moved."""
        return self.p_slower if self.ratio < 1 else self.p_faster


def throughput_ratio(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """median(baseline round time) / median(candidate round time): below 1 is slower."""
    return float(np.median(baseline) / np.median(candidate))


def ratio_interval(baseline: Sequence[float],
                   candidate: Sequence[float]) -> tuple[float, float] | None:
    """The 95% bootstrap interval of ``throughput_ratio``, each side resampled on its own."""
    estimate = stats.ratio_unpaired(baseline, candidate)
    if estimate.low is None or estimate.high is None:
        return None
    return estimate.low, estimate.high


def percent(fraction: float) -> str:
    """0.05 -> "5%", 0.0834 -> "8.3%"."""
    return f"{fraction:.1%}".replace(".0%", "%")


def _one_sided_p(candidate_rate: np.ndarray, baseline_rate: np.ndarray, alternative: str) -> float:
    p = mannwhitneyu(candidate_rate, baseline_rate, alternative=alternative).pvalue
    return 1.0 if np.isnan(p) else float(p)  # all rounds tied: no evidence either way


def decide(baseline: Sequence[float], candidate: Sequence[float], rule: Rule = Rule()) -> Decision:
    """The files-only verdict for one benchmark from its per-round times (seconds) on each
    side; ``rule.threshold`` is the benchmark's threshold (noise-aware where one is known)."""
    ratio = throughput_ratio(baseline, candidate)
    change = ratio - 1
    if min(len(baseline), len(candidate)) < rule.min_rounds:
        return Decision("unchanged", f"too few rounds ({len(baseline)} and {len(candidate)}; "
                        f"the test needs {rule.min_rounds} per side)", ratio, None, None, None,
                        rule.threshold)
    # Per-round throughput is 1 / round time (the work per round cancels in every comparison).
    base_rate = 1 / np.asarray(baseline, float)
    cand_rate = 1 / np.asarray(candidate, float)
    p_slower = _one_sided_p(cand_rate, base_rate, "less")
    p_faster = _one_sided_p(cand_rate, base_rate, "greater")
    ci = ratio_interval(baseline, candidate)
    p = p_slower if change < 0 else p_faster
    size = (f"{abs(change):.1%} {'slower' if change < 0 else 'faster'}"
            if abs(change) >= 0.0005 else "no change")
    if abs(change) <= rule.threshold:
        verdict, reason = "unchanged", f"{size}, within the {percent(rule.threshold)} threshold"
    elif p >= rule.alpha:
        verdict, reason = "unchanged", f"{size} but not significant (p={p:.2g} >= {rule.alpha})"
    else:
        verdict = "regressed" if change < 0 else "improved"
        reason = f"{size} (> {percent(rule.threshold)}), p={p:.2g} < {rule.alpha}"
    return Decision(verdict, reason, ratio, ci, p_slower, p_faster, rule.threshold)


def threshold_for(group: str | None, default: float,
                  overrides: Sequence[tuple[str, float]] = ()) -> float:
    """The first override whose fnmatch pattern matches ``group`` ("" when it has none)."""
    for pattern, threshold in overrides:
        if fnmatch.fnmatchcase(group or "", pattern):
            return threshold
    return default


def machine_identity(machine_info: dict, plain: bool = False,
                     with_cpu: bool = False) -> dict[str, object]:
    """The fields that make two results comparable, from ``machine_info``.

    ``plain`` uses only what pytest-benchmark writes (for files without a fingerprint);
    ``with_cpu`` adds the CPU model and core count (for runs without GPUs).
    """
    overlap = machine_info.get("overlap")
    if plain or not overlap:
        identity = {}
        for keys in PLAIN_MACHINE_FIELDS:
            value: object = machine_info
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            identity[".".join(keys)] = value
        return identity
    fields = MACHINE_FIELDS + (CPU_MACHINE_FIELDS if with_cpu else ())
    return {field: overlap.get(field) for field in fields}


def machine_mismatches(baseline_info: dict, candidate_info: dict) -> list[tuple[str, object,
                                                                                 object]]:
    """(field, baseline value, candidate value) for every field that differs."""
    base_overlap, cand_overlap = baseline_info.get("overlap"), candidate_info.get("overlap")
    plain = not (base_overlap and cand_overlap)
    # The host CPU matters only where it does the work: when neither side used a GPU.
    with_cpu = not plain and not base_overlap.get("gpu_names") and not cand_overlap.get(
        "gpu_names")
    base = machine_identity(baseline_info, plain, with_cpu)
    cand = machine_identity(candidate_info, plain, with_cpu)
    return [(field, base.get(field), cand.get(field))
            for field in dict.fromkeys([*base, *cand]) if base.get(field) != cand.get(field)]


def suite_mode(results: ResultsFile) -> str | None:
    """``suite.mode`` (quick, default, full) of a suite run; None for plain pytest files."""
    suite = results.data.get("suite")
    return suite.get("mode") if isinstance(suite, dict) else None


def mode_mismatch(baseline: ResultsFile, candidate: ResultsFile) -> list[tuple[str, object,
                                                                              object]]:
    """[("suite.mode", a, b)] when both files record a different mode, else []."""
    a, b = suite_mode(baseline), suite_mode(candidate)
    return [("suite.mode", a, b)] if a is not None and b is not None and a != b else []


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
        return {"fullname": self.fullname, "group": self.group, "verdict": self.verdict,
                "verdict_text": self.verdict_text, "files_verdict": decision.verdict,
                "ratio": decision.ratio, "ci": decision.ci, "p_value": decision.p_value,
                "threshold": decision.threshold, "minimum": self.minimum,
                "spread": self.spread.log_ratio_p95 if self.spread else None,
                "suspect": self.suspect, "reason": self.reason,
                "baseline_median_s": self.baseline_median_s,
                "candidate_median_s": self.candidate_median_s,
                "confirmation": self.confirmation.to_json() if self.confirmation else None}


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
        return {"verdicts": {v: self.count(v) for v in VERDICTS},
                "unconfirmed_regressions": self.unconfirmed, "regressed": self.regressed,
                "status": self.status, "exit_status": EXIT_STATUS[self.status],
                "rows": [row.to_json() for row in self.rows],
                "only_baseline": self.only_baseline, "only_candidate": self.only_candidate}


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


# --- input ----------------------------------------------------------------------------------


def load_side(path: str | Path, side: str) -> list[ResultsFile]:
    """The validated result files of one side (a file, or every result file of a folder)."""
    files = [load_results(found) for found in find_result_files(path)]
    if not files:
        raise GateError(f"{side} {path}: no result files there")
    return files


def _by_fullname(files: Sequence[ResultsFile]) -> dict[str, tuple[ResultsFile, dict]]:
    """Each fullname's newest (file, benchmark)."""
    found: dict[str, tuple[ResultsFile, dict]] = {}
    for results in sorted(files, key=lambda f: (f.sort_time, f.path.name)):
        found.update((b["fullname"], (results, b)) for b in results.benchmarks)
    return found


def merge_benchmarks(files: Sequence[ResultsFile]) -> dict[str, dict]:
    """Benchmarks by fullname; where a fullname is in several files, the newest file's wins."""
    return {name: benchmark for name, (_, benchmark) in _by_fullname(files).items()}


def describe_mismatches(mismatches: list[tuple[str, object, object]]) -> str:
    return "; ".join(f"{field} {a!r} vs {b!r}" for field, a, b in mismatches)


def comparable_files(baseline: list[ResultsFile], candidate: list[ResultsFile],
                     force: bool = False) -> tuple[list[ResultsFile], list[ResultsFile],
                                                   list[str]]:
    """The files of each side measured on the same machine, in the same suite mode, as the
    newest baseline file.

    Files of a folder from another machine (say, before a driver update) or of another mode
    are left out with a note; a side left with no file raises GateError naming the differing
    fields. ``force`` keeps every file, with a note for each difference.
    """
    reference = newest(baseline)
    kept: dict[str, list[ResultsFile]] = {"baseline": [], "candidate": []}
    notes, refusals = [], {}
    for side, files in (("baseline", baseline), ("candidate", candidate)):
        for results in files:
            machine = machine_mismatches(reference.machine_info, results.machine_info)
            found = machine + mode_mismatch(reference, results)
            if not found:
                kept[side].append(results)
                continue
            problem = (f"baseline {reference.path} vs {side} {results.path} differ in "
                       + describe_mismatches(found))
            if force:
                kept[side].append(results)
                notes.append(f"compared anyway (--force): {problem}")
            else:
                notes.append(f"left out {results.path}: {problem}")
                what = ("results of different machines" if machine
                        else "runs of different suite modes (other rounds and sizes)")
                refusals.setdefault(side, f"refusing to compare {what}: {problem}")
        if not kept[side]:
            raise GateError(f"{refusals[side]} (--force to compare anyway)")
    return kept["baseline"], kept["candidate"], notes


def baseline_spreads(files: Sequence[ResultsFile]) -> tuple[dict[str, GroupSpread], str | None]:
    """The spread recorded in the newest baseline file that has one, and that file's path."""
    recorded = [f for f in files if SPREAD_KEY in f.data]
    if not recorded:
        return {}, None
    source = newest(recorded)
    try:
        return recorded_spread(source.data, str(source.path)), str(source.path)
    except ValueError as error:
        raise GateError(str(error)) from None


# --- output ---------------------------------------------------------------------------------

COLUMNS = ("benchmark", "baseline", "candidate", "ratio", "95% CI", "p", "threshold",
           "re-run ratio [95% CI]", "verdict", "throughput", "why")


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
            "regression is UNCONFIRMED (exit 3): only one a re-run confirms fails the gate")
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


def render_text(comparison: Comparison, rule_line: str) -> str:
    rows = [COLUMNS, *table_rows(comparison)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    for title, names in (("only in baseline", comparison.only_baseline),
                         ("only in candidate", comparison.only_candidate)):
        lines += [f"{title}: {name}" for name in names]
    lines += ["", f"rule: {rule_line}", headline(comparison)]
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
    verdict = COLUMNS.index("verdict")
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


# --- baselines ------------------------------------------------------------------------------


def _run_record(results: ResultsFile) -> dict:
    created = results.created.isoformat(timespec="seconds") if results.created else None
    return {"path": str(results.path), "created": created,
            "git_commit": results.fingerprint.get("git_commit")}


def check_same_code(reference: ResultsFile, runs: Sequence[ResultsFile],
                    force: bool) -> list[str]:
    """Spread runs must be of one machine, mode and commit: GateError otherwise; notes for
    runs that record no commit (their code cannot be checked)."""
    notes = []
    commits = {}
    for results in runs:
        found = (machine_mismatches(reference.machine_info, results.machine_info)
                 + mode_mismatch(reference, results))
        if found and not force:
            raise GateError(f"{results.path}: not a run of the baseline's machine and mode "
                            f"({describe_mismatches(found)}); the spread needs runs of one "
                            "machine (--force to use it anyway)")
        commit = results.fingerprint.get("git_commit")
        if commit is None:
            notes.append(f"{results.path} records no git commit: cannot check it ran the "
                         "baseline's code")
        else:
            commits.setdefault(commit, results.path)
    if len(commits) > 1:
        listed = ", ".join(f"{path} at {commit[:12]}" for commit, path in commits.items())
        raise GateError(f"the spread needs runs of unchanged code, but the runs are of "
                        f"{len(commits)} commits: {listed}")
    return notes


def update_baseline(paths: Sequence[str | Path], baselines_dir: Path = BASELINES_DIR,
                    force: bool = False, spread_from: Sequence[str | Path] = ()
                    ) -> tuple[Path, ResultsFile, dict[str, GroupSpread], list[str]]:
    """Write ``baselines_dir/<label>.json`` atomically: the newest result file of ``paths``
    plus the run-to-run spread measured over every run of ``paths`` and ``spread_from`` (runs
    of the same code on the same machine).

    Returns the baseline's path, the result file it was made from, the spread per group and
    notes. A partial run is refused as the baseline unless ``force``.
    """
    files = [load_results(path) for path in find_result_files(paths)]
    if not files:
        raise GateError(f"{', '.join(map(str, paths))}: no result files there")
    chosen = newest(files)
    if chosen.partial and not force:
        raise GateError(f"{chosen.path}: a partial run (it stopped early); a baseline must be a "
                        "complete run (--force to use it anyway)")
    if not re.fullmatch(LABEL_PATTERN, chosen.label):
        raise GateError(f"{chosen.path}: label {chosen.label!r} cannot name a baseline file; "
                        f"labels match {LABEL_PATTERN}")
    extra = [load_results(path) for path in find_result_files(spread_from)] if spread_from else []
    runs = list({f.path.resolve(): f for f in [*files, *extra]}.values())
    notes = check_same_code(chosen, runs, force)
    spreads = measure_spread([merge_benchmarks([run]) for run in runs])
    document = {**chosen.data, SPREAD_KEY: spread_record(spreads, [_run_record(r) for r in runs])}
    target = baselines_dir / f"{chosen.label}.json"
    try:
        write_json_atomic(target, document)
    except ValueError as error:  # a non-finite number somewhere in the source file
        raise GateError(f"{chosen.path}: cannot be written as a baseline: {error}") from None
    return target, chosen, spreads, notes


# --- confirmation ---------------------------------------------------------------------------


def _git_head(tree: Path) -> str | None:
    result = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def confirm_suspects(comparison: Comparison, base_files: Sequence[ResultsFile],
                     cand_files: Sequence[ResultsFile], args: argparse.Namespace,
                     notes: list[str], log: list[str]) -> Comparison:
    """Re-measure the suspect rows interleaved (reports/gate_confirm.py), per baseline file
    they came from; the comparison with each re-run's verdict attached."""
    origin = _by_fullname(base_files)
    candidate_tree = Path(args.candidate_tree or gate_confirm.git_toplevel(Path.cwd())
                          or Path.cwd()).resolve()
    newest_candidate = newest(cand_files).fingerprint.get("git_commit")
    head = _git_head(candidate_tree)
    if newest_candidate and head and newest_candidate != head:
        notes.append(f"the candidate results were made at commit {newest_candidate[:12]}; the "
                     f"re-run measures the code of {candidate_tree} at {head[:12]}")
    by_file: dict[Path, list[dict]] = {}
    for row in comparison.suspects:
        by_file.setdefault(origin[row.fullname][0].path, []).append(origin[row.fullname][1])
    files = {f.path: f for f in base_files}
    minimums = {row.fullname: row.minimum for row in comparison.rows}
    confirmations: dict[str, Confirmation] = {}
    for path, benchmarks in by_file.items():
        results = files[path]
        recipe = gate_confirm.recipe_for(results.data, str(path))
        with ExitStack() as stack:
            baseline_tree = _baseline_tree(results, args, candidate_tree, notes, stack)
            print(f"confirm: {len(benchmarks)} benchmark(s) of {path}, {args.confirm_blocks} "
                  f"blocks per side, baseline code in {baseline_tree}, candidate code in "
                  f"{candidate_tree}", flush=True)
            confirmations.update(gate_confirm.confirm(
                benchmarks, recipe, {"baseline": baseline_tree, "candidate": candidate_tree},
                {"baseline": gate_confirm.block_env(baseline_tree, dict(args.baseline_env)),
                 "candidate": gate_confirm.block_env(candidate_tree, dict(args.candidate_env))},
                minimums, args.confirm_blocks, log,
                progress=lambda line: print(line, flush=True),
                max_blocks=args.confirm_max_blocks))
    return comparison.with_confirmations(confirmations)


def _baseline_tree(results: ResultsFile, args: argparse.Namespace, candidate_tree: Path,
                   notes: list[str], stack: ExitStack) -> Path:
    """The baseline's code: --baseline-tree, or a temporary checkout of the revision."""
    if args.baseline_tree:
        return Path(args.baseline_tree).resolve()
    revision = args.baseline_rev or results.fingerprint.get("git_commit")
    if not revision:
        raise ConfirmError(f"{results.path} records no git commit "
                           "(machine_info.overlap.git_commit): give --baseline-rev REV or "
                           "--baseline-tree PATH")
    if results.fingerprint.get("git_dirty") and not args.baseline_rev:
        notes.append(f"{results.path} was made from a tree with uncommitted changes; the re-run "
                     f"measures its commit {revision[:12]} as committed")
    repo = gate_confirm.git_toplevel(candidate_tree)
    if repo is None:
        raise ConfirmError(f"{candidate_tree} is not in a git repository, so revision "
                           f"{revision[:12]} cannot be checked out: give --baseline-tree PATH")
    return stack.enter_context(gate_confirm.checkout(revision, repo))


# --- command line ---------------------------------------------------------------------------


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in [0, 1), e.g. 0.05 for 5%")
    return value


def _alpha(text: str) -> float:
    value = _fraction(text)
    if value == 0:
        raise argparse.ArgumentTypeError("alpha must be in (0, 1), e.g. 0.01")
    return value


def _group_threshold(text: str) -> tuple[str, float]:
    pattern, sep, value = text.rpartition("=")
    if not sep or not pattern:
        raise argparse.ArgumentTypeError(f"{text!r}: expected GROUP=FRACTION, e.g. "
                                         "'allreduce*=0.10'")
    return pattern, _fraction(value)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 2:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 2")
    return int(text)


def _even_blocks(text: str) -> int:
    if not text.isdigit() or int(text) < 2 or int(text) % 2:
        raise argparse.ArgumentTypeError(f"{text!r} must be an even integer >= 2 (blocks per "
                                         "side; each side goes first in half of the pairs)")
    return int(text)


def _assignment(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=VALUE, e.g. "
                                         "NCCL_ALGO=Ring")
    return name, value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m reports.gate", description="Fail when candidate throughput regressed "
        "against the baseline (see the module docstring for the rule).")
    parser.add_argument("baseline", nargs="?", help="baseline result file or folder")
    parser.add_argument("candidate", nargs="?", help="candidate result file or folder")
    parser.add_argument("--threshold", type=_fraction, default=Rule.threshold,
                        help="minimum relative throughput change that counts (default 0.05); "
                             "a group's recorded spread can raise it")
    parser.add_argument("--group-threshold", type=_group_threshold, action="append",
                        default=[], metavar="GROUP=FRACTION",
                        help="minimum threshold for benchmark groups matching GROUP (fnmatch); "
                             "repeatable, first match wins")
    parser.add_argument("--alpha", type=_alpha, default=Rule.alpha,
                        help="significance level of the one-sided test (default 0.01)")
    parser.add_argument("--min-rounds", type=_positive_int, default=Rule.min_rounds,
                        help="rounds per side below which nothing is significant (default 5)")
    parser.add_argument("--force", action="store_true",
                        help="compare results of different machines or suite modes; accept a "
                             "partial baseline")
    parser.add_argument("--summary", type=Path, default=DEFAULT_SUMMARY,
                        help=f"Markdown summary to write (default {DEFAULT_SUMMARY})")
    parser.add_argument("--json", type=Path, default=None,
                        help="also write the verdicts, ratios and re-run blocks as JSON")
    confirm = parser.add_argument_group("confirmation by interleaved re-run")
    confirm.add_argument("--confirm", action="store_true",
                         help="re-measure suspect benchmarks, baseline code and candidate code "
                              "interleaved on this machine, and let that decide them")
    source = confirm.add_mutually_exclusive_group()
    source.add_argument("--baseline-rev", metavar="REV",
                        help="git revision of the baseline's code (default: the commit recorded "
                             "in the baseline file)")
    source.add_argument("--baseline-tree", metavar="PATH",
                        help="a checkout or installed copy of the baseline's code")
    confirm.add_argument("--candidate-tree", metavar="PATH",
                         help="the candidate's code (default: the repository of the current "
                              "folder)")
    confirm.add_argument("--confirm-blocks", type=_even_blocks,
                         default=gate_confirm.DEFAULT_BLOCKS, metavar="N",
                         help=f"blocks per side, even (default {gate_confirm.DEFAULT_BLOCKS})")
    confirm.add_argument("--confirm-max-blocks", type=_even_blocks, default=None, metavar="N",
                         help="blocks per side that an inconclusive re-run may grow to, as "
                              f"many again each time (default {gate_confirm.EXTEND_TO} x "
                              "--confirm-blocks)")
    confirm.add_argument("--baseline-env", type=_assignment, action="append", default=[],
                         metavar="NAME=VALUE", help="environment of the baseline's blocks only")
    confirm.add_argument("--candidate-env", type=_assignment, action="append", default=[],
                         metavar="NAME=VALUE",
                         help="environment of the candidate's blocks only (one code under two "
                              "settings, or a known slowdown to test the gate)")
    confirm.add_argument("--confirm-log", type=Path, default=DEFAULT_CONFIRM_LOG,
                         help=f"the blocks' output (default {DEFAULT_CONFIRM_LOG})")
    baselines = parser.add_argument_group("baselines")
    baselines.add_argument("--update-baseline", nargs="+", metavar="RUN",
                           help="write BASELINES_DIR/<label>.json from the newest RUN (files or "
                                "folders), with the run-to-run spread measured over all RUNs "
                                "(runs of one commit on this machine); compare nothing")
    baselines.add_argument("--spread-from", nargs="+", metavar="RUN", default=[],
                           help="more runs of the same code, for the spread only")
    baselines.add_argument("--baselines-dir", type=Path, default=BASELINES_DIR,
                           help=f"where --update-baseline writes (default {BASELINES_DIR})")
    args = parser.parse_args(argv)
    if args.update_baseline and (args.baseline or args.candidate):
        parser.error("--update-baseline takes RUN files or folders and no BASELINE CANDIDATE "
                     "pair")
    if args.spread_from and not args.update_baseline:
        parser.error("--spread-from goes with --update-baseline")
    if not args.update_baseline and not (args.baseline and args.candidate):
        parser.error("give BASELINE and CANDIDATE (files or folders), or --update-baseline "
                     "RUN [RUN ...]")
    if args.confirm_max_blocks is not None and args.confirm_max_blocks < args.confirm_blocks:
        parser.error(f"--confirm-max-blocks {args.confirm_max_blocks} is below --confirm-blocks "
                     f"{args.confirm_blocks}; use at least as many")
    return args


def _print_baseline(target: Path, source: ResultsFile, spreads: Mapping[str, GroupSpread],
                    notes: Sequence[str]) -> None:
    written = load_results(target)  # read back: the baseline on disk is a valid file
    runs = len(written.data[SPREAD_KEY]["runs"])
    for note in notes:
        print(f"note: {note}")
    print(f"wrote {target}: {len(written.benchmarks)} benchmarks of {written.label} from "
          f"{source.path}; run-to-run spread of {len(spreads)} group(s) over {runs} run(s)")
    for group, spread in spreads.items():
        print(f"  {group or '(no group)'}: spread {spread.log_ratio_p95:.4f} over {spread.pairs} "
              f"pairs -> threshold at least {percent(noise_aware_threshold(0.0, spread))}")
    if not spreads:
        print("  no spread: give several runs of unchanged code (--update-baseline RUN RUN "
              "...) for noise-aware thresholds; until then the gate uses the minimum threshold")


def check_outputs(args: argparse.Namespace) -> None:
    """GateError unless each output file is new, empty or one the gate wrote before: a
    mistyped ``--summary README.md`` must not replace the README."""
    outputs = (("--summary", args.summary, lambda text: text.startswith(SUMMARY_HEADER)),
               ("--json", args.json, lambda text: text.startswith(JSON_HEADER)),
               ("--confirm-log", args.confirm_log if args.confirm else None,
                lambda text: text.startswith(CONFIRM_LOG_HEADER)))
    for option, path, written_by_gate in outputs:
        if path is None or not path.is_file() or path.stat().st_size == 0:
            continue
        with open(path, encoding="utf-8", errors="replace") as existing:
            start = existing.read(200)
        if not written_by_gate(start):
            raise GateError(f"{option} {path}: the file exists and is not one the gate wrote; "
                            "choose another path or remove it")


def run(args: argparse.Namespace) -> int:
    if not args.update_baseline:
        check_outputs(args)
    if args.update_baseline:
        target, source, spreads, notes = update_baseline(
            args.update_baseline, args.baselines_dir, args.force, args.spread_from)
        _print_baseline(target, source, spreads, notes)
        return 0
    base_files, cand_files, notes = comparable_files(
        load_side(args.baseline, "baseline"), load_side(args.candidate, "candidate"), args.force)
    notes += [f"{f.path} is a partial run (it stopped early)"
              for f in (*base_files, *cand_files) if f.partial]
    baseline, candidate = merge_benchmarks(base_files), merge_benchmarks(cand_files)
    spreads, spread_source = baseline_spreads(base_files)
    rule = Rule(args.threshold, args.alpha, args.min_rounds)
    comparison = compare(baseline, candidate, rule, args.group_threshold, spreads)
    if not comparison.rows:
        raise GateError(f"no benchmark is in both {args.baseline} and {args.candidate} "
                        f"({len(baseline)} and {len(candidate)} benchmarks): nothing to compare")
    if args.confirm and comparison.suspects:
        log: list[str] = []
        try:
            comparison = confirm_suspects(comparison, base_files, cand_files, args, notes, log)
        finally:
            write_bytes_atomic(args.confirm_log, "\n".join([CONFIRM_LOG_HEADER, *log]).encode())
        notes.append(f"re-measured {len(comparison.suspects)} benchmark(s) interleaved; block "
                     f"output in {args.confirm_log}")
    elif args.confirm:
        notes.append("--confirm: no benchmark looked slower, nothing re-measured")
    for note in notes:
        print(f"note: {note}")
    rule_line = rule_text(rule, args.group_threshold, spread_source, args.confirm)
    print(render_text(comparison, rule_line))
    write_summary(render_markdown(comparison, rule_line, [args.baseline], [args.candidate],
                                  notes), args.summary)
    print(f"summary: {args.summary}")
    if args.json:
        write_json_atomic(args.json, {"baseline": args.baseline, "candidate": args.candidate,
                                      "rule": rule_line, "notes": notes,
                                      "confirm": args.confirm, **comparison.to_json()})
    if comparison.status == "UNCONFIRMED" and os.environ.get("GITHUB_ACTIONS") == "true":
        # The job goes on (nox -s gate accepts 3); the annotation says why nothing failed.
        print(f"::warning title=Throughput gate unconfirmed::{comparison.unconfirmed} "
              "benchmark(s) look slower in the files alone and no re-run measured them")
    return EXIT_STATUS[comparison.status]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except (ResultsError, GateError, ConfirmError, OSError) as error:
        # OSError: summary, log or baseline unwritable
        print(f"gate: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
