"""Throughput regression gate: baseline results against candidate results, pass or fail.

    python -m reports.gate results/baselines/h200x4.json results/h200x4 --confirm
    nox -s gate -- results/baselines/cpu-2core.json results/cpu-2core --threshold 0.05
    python -m reports.gate BASELINE CANDIDATE --group-threshold 'allreduce*=0.10' --alpha 0.01
    python -m reports.gate --update-baseline results/h200x4/20261121T2200.json \
        results/h200x4/20261121T2230.json results/h200x4/20261121T2300.json

BASELINE and CANDIDATE are result files or folders (a folder's files are merged by benchmark
``fullname``; where a name appears twice on one side the newest file's benchmark is used).
Every benchmark present on both sides is compared; those on one side only are listed.

Verdicts without a re-run are marked: "regressed (unconfirmed: files only)".

Exit status: 0 nothing regressed; 1 a regression the interleaved re-run confirmed (also where
the files alone said unchanged); 3 UNCONFIRMED: the files say slower and no re-run measured it
(no ``--confirm``, or a benchmark a block cannot select); 2 bad arguments, input files that
cannot be compared (other machine, other suite mode: ``--force`` to compare anyway), or a
re-run that could not be made.

Output: a table on stdout, a Markdown summary (``--summary``, default
reports/out/gate-summary.md, also appended to ``$GITHUB_STEP_SUMMARY`` when set; every cell
HTML-escaped), optionally the verdicts as JSON (``--json``), and the re-run's block output
(``--confirm-log``). Every file the gate writes is written whole (impl/atomic.py).

Files of another machine or suite mode are refused (exit 2) unless ``--force``
(reports/gate/loading.py).

The rule, files only: reports/gate/rules.py; the re-run: reports/gate/confirm.py; baselines:
reports/gate/baseline.py.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from impl.atomic import write_bytes_atomic, write_json_atomic
from impl.rows.files import ResultsError
from reports.gate import confirm as gate_confirm
from reports.gate.baseline import BASELINES_DIR, print_baseline, update_baseline
from reports.gate.comparison import EXIT_STATUS, compare
from reports.gate.confirm import ConfirmError
from reports.gate.loading import (
    GateError,
    baseline_spreads,
    comparable_files,
    load_side,
    merge_benchmarks,
)
from reports.gate.render import render_markdown, render_text, rule_text, write_summary
from reports.gate.rules import Rule
from reports.gate.suspects import confirm_suspects

DEFAULT_SUMMARY = Path("reports/out/gate-summary.md")
# How the files the gate writes begin: it replaces only such files (check_outputs).
SUMMARY_HEADER = "## Throughput gate: "
JSON_HEADER = '{\n "baseline": '
CONFIRM_LOG_HEADER = "# reports.gate --confirm: the output of the re-run's blocks"
DEFAULT_CONFIRM_LOG = Path("reports/out/gate-confirm.log")


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
        print_baseline(target, source, spreads, notes)
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
