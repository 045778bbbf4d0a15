"""The result files this repository ships, apart from any run a user left beside them.

`nox -s bench` writes the user's own runs into results/<label>/, and the report, the gate and
the cost model read every file there. A test that read results/ would then check the user's
run against figures of the committed ones and fail (issue 53). So no test reads results/: it
reads ``RESULTS``, a copy of the files git tracks under results/, made once a test process
(``ROOT_COPY`` holds it as ``results/``, for a command that reads its default ``results``
from the folder it runs in). A user's files, untracked, are not in the copy.

The files are those tests/data/committed-results.txt lists: the fixture set the tests' figures
were written against, every one of them tracked by git (tests/test_committed.py checks it). A
run committed later (a GPU session's) changes no test until it joins the set on purpose, with
the figures of the tests that read it; rewrite the list from git then:

    python -m tests.committed
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = "results"
MANIFEST = ROOT / "tests" / "data" / "committed-results.txt"


def git_tracked(root: Path = ROOT) -> list[str] | None:
    """The files git tracks under results/ (paths from the root, sorted); None where git or a
    checkout is missing."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", FOLDER],
                                capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        return None
    if listed.returncode != 0:
        return None
    return sorted(name for name in listed.stdout.split("\0") if name)


def manifest() -> list[str]:
    """The committed list: one path from the root a line."""
    return [line for line in MANIFEST.read_text().splitlines() if line]


def tracked() -> list[str]:
    """The fixture set: the manifest's list."""
    return manifest()


def make_copy(target: Path, names: list[str], root: Path = ROOT) -> Path:
    """``names`` (paths from ``root``) copied under ``target``; a name with no file is an
    error."""
    missing = [name for name in names if not (root / name).is_file()]
    if missing:
        raise FileNotFoundError(f"committed result files missing from {root}: "
                                f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    for name in names:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target / name)
    return target


@functools.cache
def root_copy() -> Path:
    """The copy, made on first use in this process and removed when it ends."""
    target = Path(tempfile.mkdtemp(prefix="overlap-committed-"))
    atexit.register(shutil.rmtree, target, ignore_errors=True)
    make_copy(target, tracked())
    (target / FOLDER).mkdir(exist_ok=True)
    return target


def __getattr__(name: str) -> Path:
    """``ROOT_COPY`` and ``RESULTS`` (its results/), made on first use: a pytest run that
    reads no result (a benchmark the tests launch) copies nothing."""
    if name == "ROOT_COPY":
        return root_copy()
    if name == "RESULTS":
        return root_copy() / FOLDER
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> int:
    """The manifest rewritten from git: every committed result joins the fixture set."""
    found = git_tracked()
    if found is None:
        print(f"error: git ls-files found no checkout at {ROOT}: the list is written from git")
        return 2
    MANIFEST.write_text("".join(f"{name}\n" for name in found))
    print(f"{MANIFEST.relative_to(ROOT)}: {len(found)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
