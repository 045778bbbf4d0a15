"""Which benchmarks the re-run measures, and with which code: the comparison's suspects, grouped
by the baseline file they came from, run by reports/gate/confirm.py with the baseline's code
(``--baseline-tree``, or a temporary checkout of the recorded or given revision) beside the
candidate's.
"""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from impl.rows.files import ResultsFile, newest
from reports.gate import confirm as gate_confirm
from reports.gate.comparison import Comparison
from reports.gate.confirm import Confirmation, ConfirmError
from reports.gate.loading import by_fullname


def _git_head(tree: Path) -> str | None:
    result = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def confirm_suspects(comparison: Comparison, base_files: Sequence[ResultsFile],
                     cand_files: Sequence[ResultsFile], args: argparse.Namespace,
                     notes: list[str], log: list[str]) -> Comparison:
    """Re-measure the suspect rows interleaved (reports/gate/confirm.py), per baseline file
    they came from; the comparison with each re-run's verdict attached."""
    origin = by_fullname(base_files)
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
