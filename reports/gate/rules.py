"""The gate's files-only rule: per benchmark, baseline round times and candidate round times in,
a verdict out (``decide``). Pure functions; no file is read here.

Per benchmark, on the raw per-round times ``stats.data``:

- The work of one round is the same for the same benchmark id, so the throughput ratio is
  ``r = median(baseline round time) / median(candidate round time)``: below 1 is slower.
- Each group's threshold is noise-aware (reports/gate/spread.py): max(minimum, 1 -
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
- Its cost is bounded: of a side with more than MAX_ROUNDS rounds the rule reads an evenly
  spaced MAX_ROUNDS (every k-th round, in the order they ran), and the reason says so. The
  rank test and the bootstrap grow with the rounds they read (2,000,000 rounds took minutes);
  the committed runs save at most 100 rounds a benchmark.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import mannwhitneyu

from impl import stats

VERDICTS = ("regressed", "improved", "unchanged")
CI_LEVEL = stats.CONFIDENCE


MAX_ROUNDS = 5000  # per side and benchmark: what the rule reads at most (module docstring)


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


def rounds_read(times: Sequence[float]) -> Sequence[float]:
    """``times``, or an evenly spaced MAX_ROUNDS of them where there are more: every k-th
    round from the first, k = ceil(rounds / MAX_ROUNDS)."""
    return times if len(times) <= MAX_ROUNDS else times[::math.ceil(len(times) / MAX_ROUNDS)]


def sampled_note(baseline: Sequence[float], candidate: Sequence[float]) -> str:
    """"; read every 400th of 2,000,000 rounds (...)" for each side the rule subsamples."""
    notes = [f"every {math.ceil(len(times) / MAX_ROUNDS)}th of the {side}'s {len(times):,} "
             "rounds" for side, times in (("baseline", baseline), ("candidate", candidate))
             if len(times) > MAX_ROUNDS]
    return (f"; read {' and '.join(notes)} (the gate reads at most {MAX_ROUNDS:,} a side)"
            if notes else "")


def decide(baseline: Sequence[float], candidate: Sequence[float], rule: Rule = Rule()) -> Decision:
    """The files-only verdict for one benchmark from its per-round times (seconds) on each
    side; ``rule.threshold`` is the benchmark's threshold (noise-aware where one is known).
    At most MAX_ROUNDS rounds of each side are read (``rounds_read``)."""
    sampled = sampled_note(baseline, candidate)
    baseline, candidate = rounds_read(baseline), rounds_read(candidate)
    decision = _decide(baseline, candidate, rule)
    return replace(decision, reason=decision.reason + sampled) if sampled else decision


def _decide(baseline: Sequence[float], candidate: Sequence[float], rule: Rule) -> Decision:
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
