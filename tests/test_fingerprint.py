"""The commit a result records: HEAD in a checkout; in a copy whose .git is not the source's
(a tree shipped to a cluster or a lent machine), the commit it states, checked against the
files by their tree hash."""

from __future__ import annotations

import subprocess

import pytest

from impl import fingerprint, settings


def git(folder, *args) -> str:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def source(tmp_path, monkeypatch):
    """A repository with one commit; the test runs in it."""
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.org")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text("out/\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "one")
    monkeypatch.chdir(tmp_path)
    fingerprint.working_tree_hash.cache_clear()
    yield tmp_path
    fingerprint.working_tree_hash.cache_clear()


def test_head_and_its_status_in_a_checkout(source, monkeypatch):
    monkeypatch.delenv("OVERLAP_GIT_COMMIT", raising=False)
    assert fingerprint.git_state() == (git(source, "rev-parse", "HEAD"), False)
    (source / "code.py").write_text("x = 2\n")
    assert fingerprint.git_state() == (git(source, "rev-parse", "HEAD"), True)


def test_a_stated_commit_is_checked_against_the_files(source, monkeypatch):
    stated = "a" * 40  # another commit's, as a copy with a stale .git would state it
    tree = git(source, "rev-parse", "HEAD^{tree}")
    monkeypatch.setenv("OVERLAP_GIT_COMMIT", stated)
    monkeypatch.setenv("OVERLAP_GIT_TREE", tree)
    (source / "out").mkdir()
    (source / "out" / "result.json").write_text("{}")  # ignored files do not count
    assert fingerprint.git_state() == (stated, False)
    fingerprint.working_tree_hash.cache_clear()
    (source / "new.py").write_text("y = 1\n")  # an untracked file git does not ignore does
    assert fingerprint.git_state() == (stated, True)
    monkeypatch.delenv("OVERLAP_GIT_TREE")
    assert fingerprint.git_state() == (stated, None)  # no tree given: dirty unknown


def test_the_code_hash_leaves_the_results_out(source, monkeypatch, capsys):
    # A copy that leaves the committed runs behind (a lent machine's size limit) states the
    # same code; a change to the code does not hide there.
    monkeypatch.delenv("OVERLAP_GIT_COMMIT", raising=False)
    (source / "results").mkdir()
    (source / "results" / "run.json").write_text("{}")
    git(source, "add", "-A")
    git(source, "commit", "-qm", "a run")
    assert fingerprint.main() == 0
    printed = capsys.readouterr().out.split()
    stated = dict(setting.split("=") for setting in printed)
    assert stated["OVERLAP_GIT_COMMIT"] == git(source, "rev-parse", "HEAD")
    assert stated["OVERLAP_GIT_TREE"] == git(source, "rev-parse", "HEAD~1^{tree}")
    monkeypatch.setenv("OVERLAP_GIT_COMMIT", stated["OVERLAP_GIT_COMMIT"])
    monkeypatch.setenv("OVERLAP_GIT_TREE", stated["OVERLAP_GIT_TREE"])
    (source / "results" / "run.json").unlink()
    fingerprint.working_tree_hash.cache_clear()
    assert fingerprint.git_state() == (stated["OVERLAP_GIT_COMMIT"], False)
    (source / "code.py").write_text("x = 3\n")
    fingerprint.working_tree_hash.cache_clear()
    assert fingerprint.git_state() == (stated["OVERLAP_GIT_COMMIT"], True)


def test_no_settings_from_a_changed_checkout(source, monkeypatch, capsys):
    monkeypatch.delenv("OVERLAP_GIT_COMMIT", raising=False)
    (source / "code.py").write_text("x = 2\n")
    assert fingerprint.main() == 2
    assert capsys.readouterr().out == (
        "impl.fingerprint: the checkout is not a clean git checkout (git status shows changes, "
        "or git is missing): commit or stash first\n")


@pytest.mark.parametrize("name", ["OVERLAP_GIT_COMMIT", "OVERLAP_GIT_TREE"])
def test_a_stated_hash_must_be_one(name):
    with pytest.raises(ValueError) as error:
        settings.check_setting(name, "HEAD")
    assert str(error.value) == f"{name}='HEAD' is not allowed; use 40 hexadecimal digits"
