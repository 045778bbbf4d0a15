"""The files of one launcher run: its name, scratch folder and the results it keeps.

Every pass writes its own results file into the run's scratch folder (conftest.py writes it
whole after every benchmark); the launcher merges them into ``<name>.json``. Nothing finished
is lost on the way: where the merged file cannot be written (a full disk), each pass's file is
kept beside the runs instead, as ``<name>-<pass>.json``, itself a whole results file.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from impl.atomic import write_json_atomic

LAUNCHER_FILE = "launcher"  # in a scratch folder: "<pid> <start time>" of its launcher


def run_name(workdir: Path) -> tuple[str, Path]:
    """A name no other run has, and its scratch folder for the passes' files.

    The folder is made atomically (mkdtemp), so two runs started in the same second, even on a
    shared file system, get different names: ``<UTC time>-<its random suffix>``.
    """
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    scratch = Path(tempfile.mkdtemp(prefix=f".{stamp}-", suffix=".run", dir=workdir))
    return scratch.name.removeprefix(".").removesuffix(".run"), scratch


@dataclass
class RunFolders:
    """The run's name, its scratch folder for the passes' files, and the folders it made."""

    workdir: Path
    name: str
    scratch: Path
    made: list[Path]  # deepest first: removed at the end if nothing was written in them

    @classmethod
    def make(cls, workdir: Path) -> RunFolders:
        made = [folder for folder in (workdir, *workdir.parents) if not folder.exists()]
        workdir.mkdir(parents=True, exist_ok=True)
        name, scratch = run_name(workdir)
        # Whose folder this is: one whose launcher has ended is a leftover (``leftovers``).
        mark_owner(scratch / LAUNCHER_FILE, f"{os.getpid()} {process_start(os.getpid())}")
        return cls(workdir, name, scratch, made)

    def finish(self, outputs: list[Path | None], written: bool) -> None:
        """Remove the scratch folder; what it holds is kept unless the merged file was
        written; then the folders this run made, if they stayed empty."""
        if not written:
            keep_pass_files(outputs, self.workdir, self.name)
        for output in filter(None, outputs):  # hang records a full disk sent elsewhere
            kept = fallback_path(output)
            for record in kept.parent.glob(f"{kept.name}.hang-rank*.json"):
                record.unlink(missing_ok=True)
        shutil.rmtree(self.scratch, ignore_errors=True)
        for folder in self.made:
            with contextlib.suppress(OSError):  # not empty, or already gone
                folder.rmdir()


def mark_owner(path: Path, owner: str) -> None:
    """``owner`` ("<pid> <start time>") in ``path``; on a full disk, as the target of a
    symbolic link there (a short target needs no data block on tmpfs or ext4). Where neither
    can be made, one line: the run goes on without it."""
    try:
        path.write_text(owner)
        return
    except OSError as error:
        path.unlink(missing_ok=True)  # the empty file the failed write left
        problem = error
    try:
        os.symlink(owner, path)
    except OSError:
        print(f"[suite] cannot write {path}: {problem}; the run goes on (a run started in "
              "this folder before it ends may take its scratch folder for a killed run's)",
              file=sys.stderr, flush=True)


def read_owner(path: Path) -> str:
    """What ``mark_owner`` wrote, "" when there is nothing to read."""
    try:
        return os.readlink(path) if path.is_symlink() else path.read_text()
    except OSError:
        return ""


def fallback_path(results_json: str | Path) -> Path:
    """Where a pass keeps its results when their own folder has no room (conftest.py): the
    temporary folder (often another disk), under a name the launcher can find again."""
    results = Path(results_json)
    stem = results.name.removesuffix(".tmp").removesuffix(".json")
    return Path(tempfile.gettempdir(), f"overlap-results-{results.parent.name.lstrip('.')}-"
                                       f"{stem}.json")


def kept_elsewhere(outputs: list[Path | None]) -> list[Path]:
    """The passes' results that went to the temporary folder (``fallback_path``)."""
    return [path for output in outputs if output is not None
            and (path := fallback_path(output)).exists()]


def write_merged(path: Path, merged: dict | None) -> Path | None:
    """The merged results file, written whole; None when there is none or it cannot be
    written (a full disk: one line, and main() keeps each pass's own file instead)."""
    if merged is None:
        return None
    try:
        return write_json_atomic(path, merged)
    except OSError as error:
        print(f"[suite] error: cannot write {path}: {error}", file=sys.stderr, flush=True)
        return None


def keep_pass_files(outputs: list[Path | None], workdir: Path, name: str) -> list[Path]:
    """Each pass's results file, moved out of the scratch folder to ``<name>-<pass>.json``
    beside the runs (a rename: it needs no room on a full disk). Each is a whole results file
    (conftest.py writes it atomically, marked partial where its pass stopped early)."""
    kept = []
    for output in outputs:
        if output is None or not output.exists():
            continue
        target = workdir / f"{name}-{output.name.removesuffix('.json.tmp')}.json"
        try:
            output.replace(target)
        except OSError as error:
            print(f"[suite] error: cannot keep {output} as {target}: {error}",
                  file=sys.stderr, flush=True)
            continue
        kept.append(target)
    if kept:
        print(f"[suite] kept what the passes finished, one whole file per pass: "
              f"{', '.join(map(str, kept))}", file=sys.stderr, flush=True)
    return kept


def process_start(pid: int) -> str:
    """A process's start time in clock ticks (tells a reused pid apart), "" if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text[text.rindex(")") + 2:].split()[19]


def leftovers(workdir: Path) -> list[Path]:
    """Scratch folders of runs whose launcher ended without merging them (SIGKILL, a crash, a
    lost machine): its process is gone, or the folder does not say whose it is."""
    found = []
    for scratch in sorted(workdir.glob(".*.run")):
        pid, _, started = read_owner(scratch / LAUNCHER_FILE).partition(" ")
        if not (pid.isdigit() and started and process_start(int(pid)) == started):
            found.append(scratch)
    return found


def pass_record_path(output: Path) -> Path:
    """Beside a pass's results file (``nvlink.json.tmp``), what launched it and how it ended
    (``nvlink.pass.json``): a run recovered after its launcher ended keeps both."""
    return output.with_name(output.name.removesuffix(".json.tmp") + ".pass.json")


def write_pass_record(output: Path, record: dict) -> None:
    # A full disk: the run goes on; a recovery then lacks the record.
    with contextlib.suppress(OSError):
        write_json_atomic(pass_record_path(output), record)


def read_pass_record(output: Path) -> dict:
    try:
        return json.loads(pass_record_path(output).read_text())
    except (OSError, ValueError):
        return {}


def recover(workdir: Path, merge) -> list[str]:
    """Each leftover scratch folder's pass files merged into ``<its run's name>.json``
    (``merge(documents, name)`` builds the document, marked partial), the folder removed; a
    file that cannot be read is named and its folder kept. One line per folder."""
    lines = []
    for scratch in leftovers(workdir):
        name = scratch.name.removeprefix(".").removesuffix(".run")
        documents, unreadable = [], []
        for path in sorted(scratch.glob("*.json.tmp")):
            try:
                documents.append((path, json.loads(path.read_text())))
            except (OSError, ValueError) as error:
                unreadable.append(f"{path} ({error})")
        if unreadable:
            lines.append(f"[suite] cannot recover {scratch}: {'; '.join(unreadable)}; left as "
                         "it is")
            continue
        if not documents:
            shutil.rmtree(scratch, ignore_errors=True)
            lines.append(f"[suite] removed {scratch}: an earlier run's, with no results in it")
            continue
        try:
            target = write_json_atomic(workdir / f"{name}.json", merge(documents, name))
        except OSError as error:  # a full disk: the pass files stay where they are
            lines.append(f"[suite] cannot recover {scratch}: cannot write {name}.json: "
                         f"{error}; left as it is")
            continue
        shutil.rmtree(scratch, ignore_errors=True)
        count = sum(len(document["benchmarks"]) for _, document in documents)
        lines.append(f"[suite] recovered {count} benchmarks that an earlier run finished and "
                     f"never merged (its launcher ended first): wrote {target}, marked partial")
    return lines
