"""Throughput regression gate: baseline results against candidate results, pass or fail.

    python -m reports.gate results/baselines/h200x4.json results/h200x4
    nox -s gate -- results/baselines/cpu-2core.json results/cpu-2core --threshold 0.05
    python -m reports.gate BASELINE CANDIDATE --group-threshold 'allreduce*=0.10' --alpha 0.01
    python -m reports.gate --update-baseline results/h200x4/20261121T2200.json

BASELINE and CANDIDATE are result files or folders (a folder's files are merged by benchmark
``fullname``; where a name appears twice on one side the newest file's benchmark is used).
Every benchmark present on both sides is compared; those on one side only are listed.

Decision rule (``decide``), per benchmark, on the raw per-round times ``stats.data``:

- The work of one round is the same for the same benchmark id, so the throughput ratio is
  ``median(baseline round time) / median(candidate round time)``: below 1 is slower.
- REGRESSED when throughput fell by more than the threshold (default 5%, ``--threshold``;
  ``--group-threshold PATTERN=FRACTION`` for pytest-benchmark groups matched with fnmatch, the
  first matching pattern wins) AND a one-sided Mann-Whitney U test says the candidate's
  per-round throughputs are lower with p < alpha (default 0.01, ``--alpha``).
  IMPROVED is the mirror image. Anything else is UNCHANGED.
- Why a rank test: round times are skewed (a floor set by the hardware, a long right tail)
  and have outliers (a page fault, a noisy neighbour, a straggling rank), so a t-test's
  normality assumption does not hold and one slow round could decide it; Mann-Whitney only
  uses the order of rounds. Why a threshold as well: with hundreds of rounds a 0.5% change is
  "significant" yet is noise from clocks, thermals or the co-tenants of a shared node, so the
  size of the change must also pass the threshold (on the ratio of medians, robust itself).
- With fewer than ``--min-rounds`` (5) rounds on either side the test cannot be significant:
  the verdict is "unchanged (too few rounds)", never a failure on significance alone. The same
  holds for files saved without ``--benchmark-save-data``.
- Effect size: a 95% percentile-bootstrap confidence interval of the ratio of medians
  (2000 resamples of each side, fixed seed so reruns print the same numbers). It is reported,
  not used to decide.

What the test cannot see: it compares the rounds of two runs as if they came from one
distribution, so a shift of a whole run (other jobs on the machine, a noisy VM neighbour, a
clock change) is "significant" like a real change, and only the threshold guards against it.
Set the threshold above the machine's run-to-run drift: on the 2-core CPU VM, reruns of
unchanged code moved the median by up to 11% (results/cpu-2core/gate-trials.json, made by
reports/gate_trials.py), so 5% there flags about one unchanged pair in ten.

Files from different machines are refused (exit 2) unless ``--force``: GPU models, driver,
launched world size, backend and interconnect profile must agree with the newest baseline
file's (CPU model and core count too when there is no GPU; pytest-benchmark's CPU fields for
files without a fingerprint). In a folder, files of another machine (an older driver, say)
are left out with a note; the gate refuses only when a side has no comparable file left.

Output: a table on stdout and a Markdown summary (``--summary``, default
reports/out/gate-summary.md, also appended to ``$GITHUB_STEP_SUMMARY`` when set).
Exit status: 0 nothing regressed, 1 something regressed, 2 bad arguments or input files.

Baselines (results/baselines/<label>.json) are written only by ``--update-baseline``, never as
a side effect of a comparison.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import mannwhitneyu

from reports.results import ResultsError, ResultsFile, find_result_files, load_results, newest
from reports.results import round_times as saved_round_times

DEFAULT_SUMMARY = Path("reports/out/gate-summary.md")
BASELINES_DIR = Path("results/baselines")
VERDICTS = ("regressed", "improved", "unchanged")
CI_LEVEL = 0.95
# Shown beside the ratio when a benchmark recorded them: a number people know for that kind.
THROUGHPUT_FIELDS = ("samples_per_s", "busbw_gbps")
# machine_info["overlap"] fields that must agree; the CPU ones only where neither side has a GPU.
MACHINE_FIELDS = ("gpu_names", "driver", "world_size", "backend", "profile")
CPU_MACHINE_FIELDS = ("cpu_model", "cpu_cores")
# What pytest-benchmark itself writes, for files without the suite's fingerprint.
PLAIN_MACHINE_FIELDS = (("cpu", "brand_raw"), ("cpu", "count"), ("machine",), ("system",))
LABEL_PATTERN = r"[A-Za-z0-9._-]+"


class GateError(Exception):
    """A usage or input problem: printed as one line, exit status 2."""


# --- decision: pure functions, round data in, verdict out ------------------------------------


@dataclass(frozen=True)
class Rule:
    threshold: float = 0.05  # relative throughput change that matters
    alpha: float = 0.01  # one-sided Mann-Whitney U significance level
    min_rounds: int = 5  # per side; fewer can never be significant
    resamples: int = 2000  # bootstrap resamples for the confidence interval
    seed: int = 0


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


def bootstrap_ratio_ci(baseline: Sequence[float], candidate: Sequence[float],
                       level: float = CI_LEVEL, resamples: int = 2000,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of ``throughput_ratio``, each side resampled on its own."""
    rng = np.random.default_rng(seed)
    base, cand = np.asarray(baseline, float), np.asarray(candidate, float)
    ratios = []
    # Batches keep memory bounded when a benchmark saved many thousands of rounds.
    batch = max(1, 4_000_000 // max(len(base), len(cand)))
    for start in range(0, resamples, batch):
        count = min(batch, resamples - start)
        base_medians = np.median(rng.choice(base, (count, len(base))), axis=1)
        cand_medians = np.median(rng.choice(cand, (count, len(cand))), axis=1)
        ratios.append(base_medians / cand_medians)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(np.concatenate(ratios), [tail, 100 - tail])
    return float(low), float(high)


def _one_sided_p(candidate_rate: np.ndarray, baseline_rate: np.ndarray, alternative: str) -> float:
    p = mannwhitneyu(candidate_rate, baseline_rate, alternative=alternative).pvalue
    return 1.0 if np.isnan(p) else float(p)  # all rounds tied: no evidence either way


def decide(baseline: Sequence[float], candidate: Sequence[float], rule: Rule = Rule()) -> Decision:
    """The verdict for one benchmark from its per-round times (seconds) on each side."""
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
    ci = bootstrap_ratio_ci(baseline, candidate, CI_LEVEL, rule.resamples, rule.seed)
    p = p_slower if change < 0 else p_faster
    size = (f"{abs(change):.1%} {'slower' if change < 0 else 'faster'}"
            if abs(change) >= 0.0005 else "no change")
    if abs(change) <= rule.threshold:
        verdict, reason = "unchanged", f"{size}, within the {rule.threshold:.0%} threshold"
    elif p >= rule.alpha:
        verdict, reason = "unchanged", f"{size} but not significant (p={p:.2g} >= {rule.alpha})"
    else:
        verdict = "regressed" if change < 0 else "improved"
        reason = f"{size} (> {rule.threshold:.0%}), p={p:.2g} < {rule.alpha}"
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


@dataclass(frozen=True)
class Row:
    fullname: str
    name: str
    group: str | None
    baseline_median_s: float
    candidate_median_s: float
    decision: Decision
    baseline_metric: tuple[str, float] | None  # (THROUGHPUT_FIELDS entry, value)
    candidate_metric: tuple[str, float] | None


@dataclass(frozen=True)
class Comparison:
    rows: list[Row]
    only_baseline: list[str]
    only_candidate: list[str]

    def count(self, verdict: str) -> int:
        return sum(row.decision.verdict == verdict for row in self.rows)

    @property
    def regressed(self) -> bool:
        return self.count("regressed") > 0


def _metric(benchmark: dict) -> tuple[str, float] | None:
    extra = benchmark["extra_info"]
    for field in THROUGHPUT_FIELDS:
        if isinstance(extra.get(field), (int, float)):
            return field, float(extra[field])
    return None


def compare(baseline: dict[str, dict], candidate: dict[str, dict], rule: Rule = Rule(),
            group_thresholds: Sequence[tuple[str, float]] = ()) -> Comparison:
    """Compare benchmarks (pytest-benchmark dicts keyed by fullname) present on both sides."""
    rows = []
    for fullname in sorted(baseline.keys() & candidate.keys()):
        base, cand = baseline[fullname], candidate[fullname]
        group = cand.get("group") or base.get("group")
        group_rule = Rule(threshold_for(group, rule.threshold, group_thresholds), rule.alpha,
                          rule.min_rounds, rule.resamples, rule.seed)
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
                        _metric(base), _metric(cand)))
    return Comparison(rows, sorted(baseline.keys() - candidate.keys()),
                      sorted(candidate.keys() - baseline.keys()))


# --- input ----------------------------------------------------------------------------------


def load_side(path: str | Path, side: str) -> list[ResultsFile]:
    """The validated result files of one side (a file, or every result file of a folder)."""
    files = [load_results(found) for found in find_result_files(path)]
    if not files:
        raise GateError(f"{side} {path}: no result files there")
    return files


def merge_benchmarks(files: Sequence[ResultsFile]) -> dict[str, dict]:
    """Benchmarks by fullname; where a fullname is in several files, the newest file's wins."""
    benchmarks: dict[str, dict] = {}
    for results in sorted(files, key=lambda f: (f.sort_time, f.path.name)):
        benchmarks.update((b["fullname"], b) for b in results.benchmarks)
    return benchmarks


def describe_mismatches(mismatches: list[tuple[str, object, object]]) -> str:
    return "; ".join(f"{field} {a!r} vs {b!r}" for field, a, b in mismatches)


def comparable_files(baseline: list[ResultsFile], candidate: list[ResultsFile],
                     force: bool = False) -> tuple[list[ResultsFile], list[ResultsFile],
                                                   list[str]]:
    """The files of each side measured on the same machine as the newest baseline file.

    Files of a folder from another machine (say, before a driver update) are left out with a
    note; a side left with no file raises GateError naming the differing fields. ``force``
    keeps every file, with a note for each difference.
    """
    reference = newest(baseline)
    kept: dict[str, list[ResultsFile]] = {"baseline": [], "candidate": []}
    notes, refusals = [], {}
    for side, files in (("baseline", baseline), ("candidate", candidate)):
        for results in files:
            found = machine_mismatches(reference.machine_info, results.machine_info)
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
                refusals.setdefault(side, problem)
        if not kept[side]:
            raise GateError(f"refusing to compare results of different machines: "
                            f"{refusals[side]} (--force to compare anyway)")
    return kept["baseline"], kept["candidate"], notes


# --- output ---------------------------------------------------------------------------------

COLUMNS = ("benchmark", "baseline", "candidate", "ratio", "95% CI", "p", "verdict", "throughput",
           "why")


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


def table_rows(comparison: Comparison) -> list[tuple[str, ...]]:
    """One tuple of COLUMNS per row: regressed first, then improved, then unchanged."""
    names = [row.name for row in comparison.rows]
    order = {verdict: index for index, verdict in enumerate(VERDICTS)}
    lines = []
    for row in sorted(comparison.rows, key=lambda r: (order[r.decision.verdict], r.fullname)):
        decision = row.decision
        label = row.name if names.count(row.name) == 1 else row.fullname
        ci = f"{decision.ci[0]:.3f}-{decision.ci[1]:.3f}" if decision.ci else "-"
        p = f"{decision.p_value:.2g}" if decision.p_value is not None else "-"
        lines.append((label, format_seconds(row.baseline_median_s),
                      format_seconds(row.candidate_median_s), f"{decision.ratio:.3f}", ci, p,
                      decision.verdict, _metric_text(row), decision.reason))
    return lines


def rule_text(rule: Rule, group_thresholds: Sequence[tuple[str, float]]) -> str:
    overrides = "".join(f", {pattern}: {value:.0%}" for pattern, value in group_thresholds)
    return (f"regressed/improved when throughput (ratio of median round times) changes by more "
            f"than {rule.threshold:.0%}{overrides} and a one-sided Mann-Whitney U test on the "
            f"per-round times gives p < {rule.alpha} (at least {rule.min_rounds} rounds per "
            f"side); CI: {CI_LEVEL:.0%} bootstrap interval of the ratio")


def headline(comparison: Comparison) -> str:
    status = "FAIL" if comparison.regressed else "PASS"
    counts = ", ".join(f"{comparison.count(v)} {v}" for v in VERDICTS)
    return f"Throughput gate: {status} ({counts})"


def render_text(comparison: Comparison, rule: Rule,
                group_thresholds: Sequence[tuple[str, float]] = ()) -> str:
    rows = [COLUMNS, *table_rows(comparison)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    for title, names in (("only in baseline", comparison.only_baseline),
                         ("only in candidate", comparison.only_candidate)):
        lines += [f"{title}: {name}" for name in names]
    lines += ["", f"rule: {rule_text(rule, group_thresholds)}", headline(comparison)]
    return "\n".join(lines)


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(comparison: Comparison, rule: Rule, baseline: Sequence[str],
                    candidate: Sequence[str], notes: Sequence[str] = (),
                    group_thresholds: Sequence[tuple[str, float]] = ()) -> str:
    lines = [f"## {headline(comparison)}", "",
             f"Baseline: {', '.join(f'`{p}`' for p in baseline)}; "
             f"candidate: {', '.join(f'`{p}`' for p in candidate)}.", "",
             f"Rule: {rule_text(rule, group_thresholds)}.", ""]
    lines += [f"> {note}" for note in notes] + ([""] if notes else [])
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in table_rows(comparison):
        cells = [_markdown_cell(cell) for cell in row]
        if row[COLUMNS.index("verdict")] == "regressed":
            cells[COLUMNS.index("verdict")] = "**regressed**"
        lines.append("| " + " | ".join(cells) + " |")
    for title, names in (("Only in baseline", comparison.only_baseline),
                         ("Only in candidate", comparison.only_candidate)):
        if names:
            lines += ["", f"### {title} ({len(names)})", ""] + [f"- `{n}`" for n in names]
    return "\n".join(lines) + "\n"


def write_summary(markdown: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown, encoding="utf-8")
    if step_summary := os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(step_summary, "a", encoding="utf-8") as summary:
            summary.write(markdown)


# --- baselines ------------------------------------------------------------------------------


def update_baseline(candidate: str | Path, baselines_dir: Path = BASELINES_DIR,
                    force: bool = False) -> tuple[Path, ResultsFile]:
    """Copy a result file to ``baselines_dir/<label>.json`` atomically.

    Returns the baseline's path and the result file it was copied from.

    A folder stands for its newest result file. A partial run is refused unless ``force``.
    """
    files = [load_results(path) for path in find_result_files(candidate)]
    if not files:
        raise GateError(f"{candidate}: no result files there")
    chosen = newest(files)
    if chosen.partial and not force:
        raise GateError(f"{chosen.path}: a partial run (it stopped early); a baseline must be a "
                        "complete run (--force to use it anyway)")
    if not re.fullmatch(LABEL_PATTERN, chosen.label):
        raise GateError(f"{chosen.path}: label {chosen.label!r} cannot name a baseline file; "
                        f"labels match {LABEL_PATTERN}")
    baselines_dir.mkdir(parents=True, exist_ok=True)
    target = baselines_dir / f"{chosen.label}.json"
    content = chosen.path.read_bytes()
    # Written beside the target then renamed: os.replace is atomic on one file system, so a
    # reader (or a crash) never sees a half-written baseline.
    handle, temporary = tempfile.mkstemp(dir=baselines_dir, prefix=f".{chosen.label}.",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(content)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return target, chosen


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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m reports.gate", description="Fail when candidate throughput regressed "
        "against the baseline (see the module docstring for the rule).")
    parser.add_argument("baseline", nargs="?", help="baseline result file or folder")
    parser.add_argument("candidate", nargs="?", help="candidate result file or folder")
    parser.add_argument("--threshold", type=_fraction, default=Rule.threshold,
                        help="relative throughput change that counts (default 0.05)")
    parser.add_argument("--group-threshold", type=_group_threshold, action="append",
                        default=[], metavar="GROUP=FRACTION",
                        help="threshold for benchmark groups matching GROUP (fnmatch); "
                             "repeatable, first match wins")
    parser.add_argument("--alpha", type=_alpha, default=Rule.alpha,
                        help="significance level of the one-sided test (default 0.01)")
    parser.add_argument("--min-rounds", type=_positive_int, default=Rule.min_rounds,
                        help="rounds per side below which nothing is significant (default 5)")
    parser.add_argument("--force", action="store_true",
                        help="compare results of different machines; accept a partial "
                             "baseline")
    parser.add_argument("--summary", type=Path, default=DEFAULT_SUMMARY,
                        help=f"Markdown summary to write (default {DEFAULT_SUMMARY})")
    parser.add_argument("--update-baseline", metavar="CANDIDATE",
                        help="copy CANDIDATE (its newest file) to BASELINES_DIR/<label>.json "
                             "and compare nothing")
    parser.add_argument("--baselines-dir", type=Path, default=BASELINES_DIR,
                        help=f"where --update-baseline writes (default {BASELINES_DIR})")
    args = parser.parse_args(argv)
    if args.update_baseline and (args.baseline or args.candidate):
        parser.error("--update-baseline takes one CANDIDATE and no BASELINE CANDIDATE pair")
    if not args.update_baseline and not (args.baseline and args.candidate):
        parser.error("give BASELINE and CANDIDATE (files or folders), or --update-baseline "
                     "CANDIDATE")
    return args


def run(args: argparse.Namespace) -> int:
    if args.update_baseline:
        target, source = update_baseline(args.update_baseline, args.baselines_dir, args.force)
        written = load_results(target)  # read back: the baseline on disk is a valid file
        print(f"wrote {target}: {len(written.benchmarks)} benchmarks of {written.label} "
              f"from {source.path}")
        return 0
    base_files, cand_files, notes = comparable_files(
        load_side(args.baseline, "baseline"), load_side(args.candidate, "candidate"), args.force)
    notes += [f"{f.path} is a partial run (it stopped early)"
              for f in (*base_files, *cand_files) if f.partial]
    baseline, candidate = merge_benchmarks(base_files), merge_benchmarks(cand_files)
    rule = Rule(args.threshold, args.alpha, args.min_rounds)
    comparison = compare(baseline, candidate, rule, args.group_threshold)
    if not comparison.rows:
        raise GateError(f"no benchmark is in both {args.baseline} and {args.candidate} "
                        f"({len(baseline)} and {len(candidate)} benchmarks): nothing to compare")
    for note in notes:
        print(f"note: {note}")
    print(render_text(comparison, rule, args.group_threshold))
    write_summary(render_markdown(comparison, rule, [args.baseline], [args.candidate], notes,
                                  args.group_threshold), args.summary)
    print(f"summary: {args.summary}")
    return 1 if comparison.regressed else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except (ResultsError, GateError, OSError) as error:  # OSError: summary or baseline unwritable
        print(f"gate: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
