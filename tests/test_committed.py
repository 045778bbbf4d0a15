"""Tests read the result files the repository ships, never a user's own runs (tests/committed.py):
the copy holds what git tracks, the manifest is git's list, no test joins a path to the
checkout's results/, and, end to end, the tests that read results/ pass in a fresh clone where
a user's runs were left in results/ (issue 53: page 1 then led with the user's run)."""

from __future__ import annotations

import ast
import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reports.results import newest_per_machine
from tests import committed

ROOT = committed.ROOT
HAS_GIT = shutil.which("git") is not None and committed.git_tracked() is not None
# The test files that read results/ by folder or through a command's default inputs: where a
# user's run, read by mistake, changes an answer.
READERS = ("tests/report/test_front_page.py", "tests/costmodel/test_heldout.py",
           "tests/costmodel/test_overhead.py", "tests/costmodel/test_lanes.py",
           "tests/test_studies.py", "tests/test_rows.py", "tests/test_committed.py")


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder.parent).as_posix() for p in folder.rglob("*")
                  if p.is_file())


def test_the_copy_holds_the_tracked_files_and_nothing_else():
    names = committed.tracked()
    assert "results/cpu-2core/20261123T194800Z-_d1slign.json" in names
    assert files_under(committed.RESULTS) == names
    _, mismatch, errors = filecmp.cmpfiles(ROOT, committed.ROOT_COPY, names, shallow=False)
    assert (mismatch, errors) == ([], [])


@pytest.mark.skipif(not HAS_GIT, reason="not a git checkout (or no git): the manifest is the list")
def test_every_file_of_the_fixture_set_is_committed():
    missing = sorted(set(committed.manifest()) - set(committed.git_tracked()))
    assert missing == [], "tests/data/committed-results.txt lists files git does not track"


def test_without_git_the_manifest_is_the_list(monkeypatch, tmp_path):
    assert committed.git_tracked(tmp_path) is None  # no checkout here
    monkeypatch.setattr(committed, "git_tracked", lambda root=ROOT: None)
    assert committed.tracked() == committed.manifest()
    assert len(committed.manifest()) == len(set(committed.manifest())) > 100


@pytest.mark.skipif(shutil.which("git") is None, reason="git missing")
def test_a_users_untracked_run_is_not_copied(tmp_path):
    repo = tmp_path / "repo"
    (repo / "results" / "cpu-2core").mkdir(parents=True)
    (repo / "results" / "cpu-2core" / "20261123T194800Z-shipped.json").write_text("{}")

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})

    git("init", "-q")
    git("add", "results")
    git("commit", "-q", "-m", "one run")
    (repo / "results" / "cpu-2core" / "20270101T000000Z-users.json").write_text("{}")
    (repo / "results" / "baselines").mkdir()
    (repo / "results" / "baselines" / "cpu-2core.json").write_text("{}")
    names = committed.git_tracked(repo)
    assert names == ["results/cpu-2core/20261123T194800Z-shipped.json"]
    copy = committed.make_copy(tmp_path / "copy", names, repo)
    assert files_under(copy / "results") == names


def joins_to_the_checkouts_results(source: str) -> list[str]:
    """Expressions that join ROOT (or a path from __file__) to "results": the checkout's
    results/, as a user's runs leave it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                and isinstance(node.right, ast.Constant) and isinstance(node.right.value, str)
                and node.right.value.split("/")[0] == committed.FOLDER):
            left = ast.unparse(node.left)
            if "ROOT" in left or "__file__" in left:
                found.append(ast.unparse(node))
    return found


def test_no_test_reads_the_checkouts_results_folder():
    assert joins_to_the_checkouts_results('ROOT / "results" / "h200x2"') == [
        "ROOT / 'results'"]
    assert joins_to_the_checkouts_results('Path(__file__).parent / "results/cpu-2core"') == [
        "Path(__file__).parent / 'results/cpu-2core'"]
    assert joins_to_the_checkouts_results('tmp_path / "results"') == []
    found = {path.relative_to(ROOT).as_posix(): joins
             for path in sorted((ROOT / "tests").rglob("*.py"))
             if path.name != "committed.py"
             and (joins := joins_to_the_checkouts_results(path.read_text()))}
    assert found == {}, "read tests.committed.RESULTS instead"


def users_run(source: Path, target: Path, created: str) -> Path:
    """A run of the user's own, as `nox -s bench` leaves it: a committed run's rows, made
    later, under a name git does not track."""
    document = json.loads(source.read_text())
    document["suite"]["created"] = created
    document["datetime"] = created
    target.write_text(json.dumps(document))
    return target


@pytest.mark.slow
@pytest.mark.skipif(not HAS_GIT, reason="not a git checkout (or no git): nothing to clone")
def test_a_users_run_left_in_results_changes_no_test(tmp_path):
    """A fresh clone (with this checkout's edits), a user's runs left in its results/ (a CPU
    run, a 2× H200 run, a gate trials file), then the tests that read results/: all pass."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, text=True, check=True)
    shipped = set(committed.tracked())
    for name in filter(None, listed.stdout.split("\0")):
        if (name.startswith("results/") and name not in shipped) or not (ROOT / name).is_file():
            continue  # this checkout's own runs stay here, as a user's would
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, clone / name)
    results = clone / "results"
    cpu = users_run(results / "cpu-2core" / "20261123T194800Z-_d1slign.json",
                    results / "cpu-2core" / "20270102T030405Z-user0001.json",
                    "2027-01-02T03:04:05+00:00")
    gpu = users_run(results / "h200x2" / "20261123T094012Z.json",
                    results / "h200x2" / "20270102T040000Z-user0002.json",
                    "2027-01-02T04:00:00+00:00")
    shutil.copy2(results / "cpu-2core" / "gate-trials.json",
                 results / "cpu-2core" / "gate-trials-user.json")
    # The user's runs are what the report reads first: the case the tests must not see.
    assert {cpu, gpu} <= set(newest_per_machine(results))
    env = {**os.environ, "PYTHONPATH": str(clone)}
    runs = [[*READERS, "--deselect",
             "tests/test_committed.py::test_a_users_run_left_in_results_changes_no_test"],
            ["tests/test_readme_commands.py", "-k", "costmodel"]]
    for args in runs:
        done = subprocess.run([sys.executable, "-m", "pytest", "--all", "-q",
                               "-p", "no:cacheprovider", *args], cwd=clone, env=env,
                              capture_output=True, text=True, timeout=1200, check=False)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        assert " passed" in done.stdout.splitlines()[-1] and "failed" not in done.stdout
    assert cpu.is_file() and gpu.is_file()  # left as the user left them
