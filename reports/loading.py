"""The report's inputs: the result files named (or the newest of each machine), the runs they
describe, the folders' archive (logs, gate trials) and the baseline compared against.

Every file is read through impl/rows/files.py, which checks pytest-benchmark's part and each
row against its kind's declaration (impl/rows/kinds.py); a problem is a ResultsError naming
the file and the field, which the build prints as one line (exit status 2).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from impl.rows.files import ResultsFile, find_result_files, load_results
from reports import archive
from reports.captions import Run
from reports.gate.loading import Baseline
from reports.results import newest_per_machine
from reports.runlogs import hangs_of


class BuildError(Exception):
    """A problem the user can fix; printed as one line without a traceback."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


def load_inputs(paths: Sequence[str]) -> list[ResultsFile]:
    """Validated result files, oldest first (so newer rows win when merged)."""
    found = find_result_files(paths) if paths else newest_per_machine("results")
    if not found:
        raise BuildError(f"no result files in {' '.join(paths) if paths else 'results/'}")
    loaded = [load_results(path) for path in found]
    return sorted(loaded, key=lambda r: (r.sort_time, r.path.name))


def load_archive(paths: Sequence[str], inputs: Sequence[ResultsFile]) -> archive.Archive:
    """Every result file the paths name (default: all of results/), validated like the
    inputs, with the logs and gate trials of their folders (reports/archive.py)."""
    return archive.scan(paths, inputs)


def describe_run(index: int, results: ResultsFile) -> Run:
    suite = results.data.get("suite") or {}
    command = suite.get("command") or "pytest (no suite record)"
    launcher = suite.get("launcher_command") or command
    created = results.created.isoformat(timespec="seconds") if results.created else None
    passes = suite.get("passes") if isinstance(suite.get("passes"), list) else []
    kinds = Counter(str(b["extra_info"].get("kind")) for b in results.benchmarks)
    return Run(index, results.label, str(results.path), command, launcher, suite.get("mode"),
               results.partial, created, results.fingerprint,
               tuple(suite.get("failed_passes") or ()), suite.get("note"),
               tuple(p for p in passes if isinstance(p, dict)), tuple(sorted(kinds.items())),
               tuple(hangs_of(suite)))


def load_baseline(path: str, inputs: Sequence[ResultsFile]) -> Baseline:
    """The baseline file and the candidate benchmarks comparable with it, chosen by the gate's
    own rules (same machine label, then reports/gate/loading.py's comparable_files: same GPUs,
    driver, world size, backend and profile), so the report's table and the gate cannot
    disagree."""
    from reports.gate.loading import GateError, comparable_files, merge_benchmarks

    baseline = load_results(path)
    candidates = [r for r in inputs if r.label == baseline.label]
    if not candidates:
        loaded = ", ".join(sorted({r.label for r in inputs}))
        raise BuildError(f"{path}: baseline of machine {baseline.label!r}, but no loaded result "
                         f"file is of that machine (loaded: {loaded})")
    try:
        _, kept, notes = comparable_files([baseline], candidates)
    except GateError as error:
        raise BuildError(f"--baseline {path}: {error}") from None
    return Baseline(str(path), baseline.label, merge_benchmarks([baseline]),
                    merge_benchmarks(kept), notes)
