"""Baselines (results/baselines/<label>.json): the newest of several runs of one commit, with
the run-to-run spread measured over all of them (reports/gate/spread.py). Written only by
``python -m reports.gate --update-baseline RUN RUN ...``, never as a side effect of a
comparison, and written whole (impl/atomic.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from impl.atomic import write_json_atomic
from impl.rows.files import ResultsFile, find_result_files, load_results, newest
from impl.settings import LABEL_PATTERN
from reports.gate.loading import (
    GateError,
    describe_mismatches,
    machine_mismatches,
    merge_benchmarks,
    mode_mismatch,
)
from reports.gate.rules import percent
from reports.gate.spread import (
    SPREAD_KEY,
    GroupSpread,
    measure_spread,
    noise_aware_threshold,
    spread_record,
)

BASELINES_DIR = Path("results/baselines")


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


def print_baseline(target: Path, source: ResultsFile, spreads: Mapping[str, GroupSpread],
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
