"""What the machine folders hold beside the runs the chapters read, and how old their code is.

The chapters read the strongest run of each machine (reports/results.py); the front page also
needs the rest of the folders: every result file (run-to-run agreement, reports/
reproducibility.py), the benchmark logs in ``<folder>/logs/`` (why a study has no GPU result,
reports/runlogs.py), the gate's trials (``<folder>/gate-trials*.json``) and, for provenance,
how many commits changed a strategy's code since a run's commit (git, in this checkout).

    archive = scan([], loaded)   # every file under results/, reusing the ones already loaded
    archive.logs[0].ended, archive.changes_since("09676a9d…", ("impl/strategies/chunked.py",))
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from impl.rows.files import ResultsFile, find_result_files, load_results
from reports.gate import trial_rates
from reports.runlogs import BenchLog, is_bench_log, read_log

ROOT = Path(__file__).resolve().parent.parent  # the checkout whose code "current" means
DEFAULT_RESULTS = "results"


@dataclass
class Archive:
    """Every result file, bench log and gate trials file of the folders a report reads."""

    files: list[ResultsFile] = field(default_factory=list)
    logs: list[BenchLog] = field(default_factory=list)
    trials: list[tuple[str, dict]] = field(default_factory=list)  # (path, document)
    trial_notes: list[str] = field(default_factory=list)  # trials files left out, and why
    root: Path = ROOT
    _changes: dict = field(default_factory=dict)

    def label_of_log(self, log: BenchLog) -> str:
        """A log's machine label: the folder its logs/ folder is in (results/<label>/logs)."""
        return Path(log.path).parent.parent.name

    def gpu_labels(self) -> set[str]:
        """Machine labels whose result files record GPUs."""
        return {f.label for f in self.files if f.fingerprint.get("gpu_names")}

    def changes_since(self, commit: str | None, paths: Sequence[str]) -> int | None:
        """How many commits of this checkout changed ``paths`` after ``commit``, plus one if
        the working tree differs from HEAD there; None when the commit is unknown here."""
        if not commit or not all(c in "0123456789abcdef" for c in commit.lower()):
            return None
        key = (commit, tuple(paths))
        if key not in self._changes:
            self._changes[key] = _git_changes(self.root, commit, paths)
        return self._changes[key]


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _git_changes(root: Path, commit: str, paths: Sequence[str]) -> int | None:
    counted = _git(root, "rev-list", "--count", f"{commit}..HEAD", "--", *paths)
    if counted is None:  # not a git checkout, or the run's commit is not in its history
        return None
    status = _git(root, "status", "--porcelain", "--", *paths)
    return int(counted.strip()) + (1 if status else 0)


def folders_of(files: Sequence[ResultsFile]) -> list[Path]:
    """The machine folders the files live in (results/<label>/), each once."""
    return list(dict.fromkeys(f.path.parent for f in files))


def read_logs(folders: Sequence[Path]) -> list[BenchLog]:
    """Every benchmark log in the folders' ``logs/`` (other logs, such as test runs', are
    left out), oldest name first."""
    found = []
    for folder in folders:
        for path in sorted((folder / "logs").glob("*.log")):
            text = path.read_text(encoding="utf-8", errors="replace")
            if is_bench_log(text):
                found.append(read_log(text, str(path)))
    return found


def scan(paths: Sequence[str], loaded: Sequence[ResultsFile] = ()) -> Archive:
    """The archive of the result files ``paths`` name (default: every file under results/),
    with the logs and trials of their folders. Files already ``loaded`` are not read again."""
    known = {f.path.resolve(): f for f in loaded}
    named = find_result_files(paths) if paths else (
        find_result_files(DEFAULT_RESULTS) if Path(DEFAULT_RESULTS).is_dir() else [])
    files = [known.get(p.resolve()) or load_results(p) for p in named]
    folders = folders_of([*files, *loaded])
    trials, notes = trial_rates.load_trials(
        [p for folder in folders for p in sorted(folder.glob(trial_rates.TRIALS_PATTERN))])
    return Archive(files, read_logs(folders), trials, notes)
