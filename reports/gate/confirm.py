"""Confirmation by interleaved re-run: baseline code and candidate code measured side by side.

Two result files made hours apart differ by the machine's drift as well as by the code, and
no test on their rounds can tell the two apart. So where the files say a benchmark may be
slower (reports/gate/spread.py, ``is_suspect``), ``python -m reports.gate ... --confirm``
runs those benchmarks again, on this machine, now:

- the baseline's code from a git revision (default: the commit recorded in the baseline
  file, ``machine_info.overlap.git_commit``; ``--baseline-rev REV``), checked out with
  ``git worktree add --detach`` in a temporary folder that is removed afterwards, or from an
  installed copy or checkout (``--baseline-tree PATH``); the candidate's code from the working
  tree (``--candidate-tree PATH``, default the repository of the current folder);
- in blocks, each a fresh process running only the suspect benchmark ids, alternating
  B C C B B C C B ...: block pair i runs the baseline first when i is even and the candidate
  first when it is odd, so a slow drift of the machine favours neither side;
- each block runs the ids the way the baseline file was made: through the suite's launcher
  (``python -m suite.run`` with the recorded launcher arguments, ``--results-dir`` in a
  temporary folder and ``-k`` naming the ids) when the file records a launcher command,
  otherwise ``python -m pytest`` with the ids (pytest-benchmark's ``fullname`` is the node id)
  and the recorded suite options (``--suite-mode``, ``--workloads``, ``--chunks``, ...).

Decision (``decide_paired``): block value = the fastest round of a benchmark in that block
(``block_value``); pair i's throughput ratio q_i = baseline block value / candidate block value,
and

    paired ratio = exp(20%-trimmed mean over block pairs of ln q_i)

with its 95% bootstrap interval over the pairs (impl/stats.py, scipy, resampled by pair).
The mean of logs uses every pair (a median of eight ratios wastes most of them); trimming
the highest and lowest fifth keeps one block that a neighbour's burst hit from deciding it.
The fastest round, not the median: other work on the machine only ever adds time to a round,
so the fastest is the round it touched least (timeit's reasoning). On the 2-core CPU machine
a neighbour's burst can hold a whole 2-second block (block medians of 33 ms beside 45-48 ms
in one pair). Over 19 CPU trial pairs judged on block medians, the median standard error of
the mean log ratio was 0.030; the same blocks' fastest rounds gave 0.016
(results/cpu-2core/logs/gate-trials-block-median-blocks.csv). The price: a change that
slows only some rounds and leaves the fastest alone is cleared by the re-run.
The re-run says REGRESSED only when the whole interval lies below 1 - threshold, i.e. the
interval of the throughput loss lies entirely above the threshold; otherwise the benchmark is
cleared. Where the interval reaches across the threshold, that benchmark alone gets more block
pairs, as many again each time, up to EXTEND_TO times the first count (``--confirm-max-
blocks``), and the decision is made on all of them. The threshold here is the configured
minimum (``--threshold`` or the group's ``--group-threshold``), not the noise-aware one: the
drift between runs that the noise-aware threshold allows for is what the interleaving removes,
and what drift remains within the re-run widens the interval.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.stats import trim_mean

from impl import stats
from impl.profiles import PROFILES
from impl.rows.files import ResultsError, find_result_files, load_results, round_times
from impl.rows.gate_records import RERUN
from impl.rows.kinds import STEP
from impl.strategy_records import needs_mpi

# The benchmarks' rows: a step row's strategy may need mpirun; every kind of row with an
# interconnect profile names it as a step row does.
ROW = STEP.names
# An inconclusive re-run grows by its first count of block pairs at a time, up to this many times
# its first length: a 10% slowdown against a 5% threshold needs the interval's half-width
# under about 4%, which eight block pairs on a noisy machine often miss.
EXTEND_TO = 3
RULE = ("where the files allow a loss above the minimum threshold once the recorded drift is "
        "allowed for, baseline and candidate code run again, interleaved in blocks (B C C B "
        "...) on one machine; paired ratio = exp(20%-trimmed mean over block pairs of "
        "ln(baseline block's fastest round / candidate block's fastest round)), 95% bootstrap "
        "interval by pair; regressed only when the interval of the loss lies entirely above the "
        f"minimum threshold; where it reaches across, more block pairs, up to {EXTEND_TO}x the "
        "first count")
SIDES = ("baseline", "candidate")
# The suite's options (conftest.py) that shape its parametrisation and rounds.
GRID_OPTIONS = ("--suite-mode", "--workloads", "--strategies", "--chunks", "--world-sizes",
                "--sampler-period-ms")
DEFAULT_BLOCKS = 8  # per side; even, so that each side runs first in half of the pairs
# What pytest's -k accepts as one name (_pytest/mark/expression.py); a benchmark whose name
# has anything else cannot be selected this way and is left unconfirmed.
KEYWORD_NAME = re.compile(r"(\w|:|\+|-|\.|\[|\]|\\|/)+")


class ConfirmError(Exception):
    """The re-run could not be made (git, a failing block): one line, exit status 2."""


# --- the decision: pure ------------------------------------------------------------------------


TRIM = 0.2  # fraction cut from each end of the sorted log ratios


BLOCK_VALUE = "fastest round"  # what block_value takes, as the trials record it


def default_max_blocks(blocks: int) -> int:
    """Blocks per side an inconclusive re-run may grow to when no cap is given."""
    return EXTEND_TO * blocks


def block_value(round_s: Sequence[float]) -> float:
    """A block's value: its fastest round (seconds), the one other work touched least."""
    return float(min(round_s))


def paired_throughput_ratio(baseline: np.ndarray, candidate: np.ndarray,
                            axis: int = -1) -> np.ndarray:
    """exp(TRIM-trimmed mean over block pairs i of ln(baseline_i / candidate_i)), from the
    block values (``block_value``): below 1 the candidate is slower."""
    return np.exp(trim_mean(np.log(baseline / candidate), TRIM, axis=axis))


@dataclass(frozen=True)
class Confirmation:
    """The re-run's verdict for one benchmark; ``verdict`` None when it was not re-measured."""

    verdict: str | None  # "regressed", "unchanged" or None
    reason: str
    ratio: stats.Estimate | None  # paired ratio with its 95% interval
    threshold: float
    baseline_block_s: list[float | None] = field(default_factory=list)
    candidate_block_s: list[float | None] = field(default_factory=list)

    @property
    def outcome(self) -> str | None:
        """"regressed", "cleared" (the loss interval lies below the threshold),
        "inconclusive" (it reaches across the threshold), or None (not re-measured)."""
        if self.verdict != "unchanged":
            return self.verdict
        high_enough = self.ratio is not None and self.ratio.low is not None
        return "cleared" if high_enough and self.ratio.low > 1 - self.threshold else (
            "inconclusive")

    def to_json(self) -> dict:
        return {RERUN.verdict: self.verdict, RERUN.outcome: self.outcome,
                RERUN.reason: self.reason, RERUN.threshold: self.threshold,
                RERUN.ratio: self.ratio.to_json() if self.ratio else None,
                RERUN.baseline_block_s: self.baseline_block_s,
                RERUN.candidate_block_s: self.candidate_block_s}


def decide_paired(baseline_block_s: Sequence[float | None],
                  candidate_block_s: Sequence[float | None], threshold: float) -> Confirmation:
    """REGRESSED when the 95% interval of the paired ratio lies below 1 - threshold."""
    base, cand = list(baseline_block_s), list(candidate_block_s)
    missing = sum(v is None for v in base + cand)
    if missing:
        return Confirmation(None, f"not re-measured: missing from {missing} of "
                            f"{len(base) + len(cand)} blocks", None, threshold, base, cand)
    ratio = stats.estimate(paired_throughput_ratio, base, cand)
    if ratio.low is None or ratio.high is None:
        return Confirmation("unchanged", f"re-run of {len(base)} block pairs gives no interval",
                            ratio, threshold, base, cand)
    loss = (1 - ratio.high, 1 - ratio.low)
    interval = f"throughput loss {1 - ratio.value:.1%} [{loss[0]:.1%} to {loss[1]:.1%}]"
    if ratio.high < 1 - threshold:
        verdict, why = "regressed", f"lies above the {threshold:.0%} threshold"
    elif ratio.low > 1 - threshold:
        verdict, why = "unchanged", f"lies below the {threshold:.0%} threshold: cleared"
    else:
        # Not shown to be above the threshold, which is all a regression needs; but not shown
        # to be below it either: the re-run was too noisy to tell.
        verdict, why = "unchanged", (f"does not lie above the {threshold:.0%} threshold "
                                     "(inconclusive: it reaches across it)")
    return Confirmation(verdict, f"re-run, {len(base)} interleaved block pairs: {interval} "
                        f"{why}", ratio, threshold, base, cand)


def schedule(blocks: int) -> list[str]:
    """The side of each block: pairs alternate which side goes first (B C, C B, B C, ...)."""
    if blocks < 2 or blocks % 2:
        raise ValueError(f"blocks per side must be an even number >= 2, got {blocks}")
    order = []
    for pair in range(blocks):
        order += list(SIDES) if pair % 2 == 0 else list(reversed(SIDES))
    return order


# --- from a benchmark id to a command -----------------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """How the baseline file was run: the launcher's arguments, or none for plain pytest."""

    launcher_args: tuple[str, ...] | None  # python -m suite.run arguments before "--"
    pytest_args: tuple[str, ...] = ()  # the launcher's arguments after "--"; or, for plain
    # pytest, the recorded suite options (grid_options)


def _without_option(args: Sequence[str], option: str) -> list[str]:
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        elif not arg.startswith(option + "="):
            kept.append(arg)
    return kept


def grid_options(suite: dict) -> tuple[str, ...]:
    """The suite options of a plain pytest run recorded in ``suite.command`` (its words joined
    by spaces): they decide which ids exist and how many rounds run, so a block needs them to
    find the same node ids. Without a recorded command, the recorded mode."""
    words = str(suite.get("command") or "").split()
    kept = []
    for at, word in enumerate(words):
        name = word.split("=", 1)[0]
        if name in GRID_OPTIONS:
            kept += [word] if "=" in word else words[at:at + 2]
    if not kept and isinstance(suite.get("mode"), str):
        kept = ["--suite-mode", suite["mode"]]
    return tuple(kept)


def recipe_for(document: dict, where: str) -> Recipe:
    """The recipe of a results document: its recorded ``suite.launcher_command`` if any."""
    suite = document.get("suite") or {}
    launcher = suite.get("launcher_command")
    if not launcher:
        return Recipe(None, grid_options(suite))
    words = shlex.split(launcher)
    if words[1:3] != ["-m", "suite.run"]:
        raise ConfirmError(f"{where}: suite.launcher_command {launcher!r} is not "
                           "'python -m suite.run ...'; cannot re-run its benchmarks")
    args = words[3:]
    at = args.index("--") if "--" in args else len(args)
    return Recipe(tuple(_without_option(args[:at], "--results-dir")), tuple(args[at + 1:]))


def narrowed(recipe: Recipe, benchmarks: Sequence[dict]) -> Recipe:
    """The launcher's passes limited to what ``benchmarks`` need: only their interconnect
    profiles, and no mpirun pass unless one of them is an MPI strategy."""
    if recipe.launcher_args is None:
        return recipe
    args = list(recipe.launcher_args)
    infos = [b["extra_info"] for b in benchmarks]
    # Rows without a profile of their own (pipeline, hybrid, digits, synthetic) and gloo rows
    # keep every recorded pass: only NCCL profiles can narrow them.
    profiles = {info.get(ROW.profile) for info in infos}
    if profiles and profiles <= set(PROFILES):
        args = _without_option(args, "--profiles") + ["--profiles", ",".join(sorted(profiles))]
    if "--skip-mpi" not in args and not any(needs_mpi(i.get(ROW.strategy) or "") for i in infos):
        args.append("--skip-mpi")
    return Recipe(tuple(args), recipe.pytest_args)


def keyword_expression(fullnames: Sequence[str]) -> str | None:
    """A pytest ``-k`` expression selecting exactly these test names, or None if one of the
    names cannot be written in one (characters outside KEYWORD_NAME)."""
    names = [fullname.rsplit("::", 1)[-1] for fullname in fullnames]
    if not all(KEYWORD_NAME.fullmatch(n) and n not in ("and", "or", "not") for n in names):
        return None
    return " or ".join(dict.fromkeys(names))


def block_command(recipe: Recipe, fullnames: Sequence[str], out: Path) -> list[str]:
    """The command of one block; its results land under the folder ``out``."""
    if recipe.launcher_args is None:
        return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *fullnames,
                *recipe.pytest_args, f"--benchmark-json={out / 'block.json'}",
                "--benchmark-save-data"]
    expression = keyword_expression(fullnames)
    if expression is None:
        raise ConfirmError(f"cannot select {', '.join(fullnames)} with pytest -k (names may "
                           "hold only letters, digits and _ : + - . [ ] \\ /)")
    return [sys.executable, "-m", "suite.run", *recipe.launcher_args, "--results-dir", str(out),
            "--", *recipe.pytest_args, "-k", expression]


def selectable(fullname: str, recipe: Recipe) -> bool:
    """Whether a block can run this benchmark on its own."""
    return recipe.launcher_args is None or keyword_expression([fullname]) is not None


# --- running blocks -------------------------------------------------------------------------


def git_toplevel(folder: Path) -> Path | None:
    result = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
                            capture_output=True, text=True, check=False)
    return Path(result.stdout.strip()) if result.returncode == 0 else None


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=False)


@contextmanager
def checkout(revision: str, repo: Path) -> Iterator[Path]:
    """``revision`` of ``repo`` checked out in a temporary worktree, removed afterwards."""
    resolved = _git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if resolved.returncode != 0:
        raise ConfirmError(f"baseline revision {revision!r} is not a commit of {repo} (fetch it, "
                           "or give --baseline-rev or --baseline-tree)")
    with tempfile.TemporaryDirectory(prefix="gate-baseline-") as scratch:
        tree = Path(scratch) / "tree"
        added = _git(repo, "worktree", "add", "--detach", str(tree), resolved.stdout.strip())
        if added.returncode != 0:
            raise ConfirmError(f"git worktree add {revision} failed: "
                               f"{(added.stderr.strip().splitlines() or ['?'])[-1]}")
        try:
            yield tree
        finally:
            if _git(repo, "worktree", "remove", "--force", str(tree)).returncode != 0:
                shutil.rmtree(tree, ignore_errors=True)
                _git(repo, "worktree", "prune")  # drops the entry of the folder just removed


def block_env(tree: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """The gate's environment with ``tree`` first on PYTHONPATH (an installed copy of the
    package must not shadow the code being measured) and the side's own variables."""
    env = {key: value for key, value in os.environ.items() if key != "GITHUB_STEP_SUMMARY"}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    return {**env, **extra}


def run_block(command: Sequence[str], tree: Path, env: Mapping[str, str], out: Path,
              log: list[str], title: str) -> dict[str, list[float]]:
    """Run one block; the per-round times (seconds) of every benchmark it measured."""
    started = time.monotonic()
    result = subprocess.run(list(command), cwd=tree, env=dict(env), capture_output=True,
                            text=True, check=False)
    log += [f"### {title}: {shlex.join(command)} (in {tree}), exit {result.returncode} after "
            f"{time.monotonic() - started:.1f} s", result.stdout, result.stderr]
    if result.returncode != 0:
        last = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
        raise ConfirmError(f"{title} failed with exit {result.returncode}: {last}")
    measured: dict[str, list[float]] = {}
    try:
        for path in find_result_files(out):
            for benchmark in load_results(path).benchmarks:
                if times := round_times(benchmark):
                    measured[benchmark["fullname"]] = times
    except ResultsError as error:
        raise ConfirmError(f"{title}: {error}") from None
    return measured


def interleave(fullnames: Sequence[str], commands: Callable[[Path], list[str]],
               trees: Mapping[str, Path], envs: Mapping[str, Mapping[str, str]], blocks: int,
               log: list[str], progress: Callable[[str], None] = print
               ) -> dict[str, dict[str, list[float | None]]]:
    """Run the blocks in ``schedule(blocks)`` order; per side, per benchmark, each block's
    value (``block_value``; None where a block did not measure it)."""
    values: dict[str, dict[str, list[float | None]]] = {
        side: {name: [] for name in fullnames} for side in SIDES}
    order = schedule(blocks)
    with tempfile.TemporaryDirectory(prefix="gate-blocks-") as scratch:
        for index, side in enumerate(order):
            out = Path(scratch) / f"{index:02d}-{side}"
            out.mkdir()
            title = f"block {index + 1}/{len(order)} ({side})"
            started = time.monotonic()
            measured = run_block(commands(out), trees[side], envs[side], out, log, title)
            for name in fullnames:
                rounds = measured.get(name)
                values[side][name].append(block_value(rounds) if rounds else None)
            progress(f"confirm: {title} {time.monotonic() - started:.1f} s")
    return values


def confirm(benchmarks: Sequence[dict], recipe: Recipe, trees: Mapping[str, Path],
            envs: Mapping[str, Mapping[str, str]], thresholds: Mapping[str, float],
            blocks: int = DEFAULT_BLOCKS, log: list[str] | None = None,
            progress: Callable[[str], None] = print,
            max_blocks: int | None = None) -> dict[str, Confirmation]:
    """Re-measure ``benchmarks`` (baseline-side dicts) interleaved; a Confirmation for each,
    by fullname. ``thresholds`` holds each one's minimum threshold.

    A benchmark whose interval still reaches across its threshold gets ``blocks`` more block
    pairs, run for the inconclusive ones only, until it is decided or has ``max_blocks`` per
    side (default EXTEND_TO times ``blocks``)."""
    log = [] if log is None else log
    max_blocks = max_blocks or default_max_blocks(blocks)
    recipe = narrowed(recipe, benchmarks)
    runnable = [b["fullname"] for b in benchmarks if selectable(b["fullname"], recipe)]
    confirmations = {b["fullname"]: Confirmation(None, "not re-measured: its name cannot be "
                                                 "selected with pytest -k", None,
                                                 thresholds[b["fullname"]])
                     for b in benchmarks if b["fullname"] not in runnable}
    values: dict[str, dict[str, list[float | None]]] = {
        side: {name: [] for name in runnable} for side in SIDES}
    pending = runnable
    while pending:
        more = interleave(pending, lambda out, names=pending: block_command(recipe, names, out),
                          trees, envs, blocks, log, progress)
        for name in pending:
            for side in SIDES:
                values[side][name] += more[side][name]
            confirmations[name] = decide_paired(values["baseline"][name],
                                                values["candidate"][name], thresholds[name])
        pending = [name for name in pending if confirmations[name].outcome == "inconclusive"
                   and len(values["baseline"][name]) + blocks <= max_blocks]
    return confirmations
