"""Every command of the README and of every page of docs/ with a bash block runs as written
after the README's Setup: each is run here, or skipped with the reason written beside it below.
An argument in square brackets is optional (a usage line's notation) and left out. Every module
that a page's prose names (`python -m MODULE ...`) answers --help with its usage."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from impl import capabilities
from tests.committed import ROOT_COPY

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", *sorted(page.relative_to(ROOT).as_posix()
                              for page in (ROOT / "docs").glob("*.md")
                              if "```bash" in page.read_text()))

# Commands not run here, by how they start, and why.
NOT_RUN = {
    "SUDO=": "the Setup: installs system packages and a virtualenv (minutes; .ci/run does it)",
    "$SUDO apt-get": "the Setup: installs system packages",
    "python3 -m venv": "the Setup: the virtualenv this test runs in",
    "pip install": "the Setup: installs packages (minutes)",
    "nox -s": "a nox session makes its own virtualenv and runs for minutes; the module each "
              "runs answers its --help here, and tests/test_noxfile.py checks the sessions",
    "torchrun --nproc-per-node 4": "needs 4 GPUs",
    "torchrun --nnodes 2": "needs two nodes",
    "srun": "needs a Slurm cluster",
    "export ": "sets the shell's environment for the GPU launch after it",
    "python -m pytest tests/": "tests of the project's own suite: `nox -s tests` runs them",
}
WHOLE_SUITE = "python -m suite.run"  # exactly this: every benchmark, minutes to hours
# The rest run: --help in seconds, the launches and the cost model's commands for longer (their
# tier comes from their recorded durations: tests/tiers.py).
# Commands that read results/, by default or by name: they run in the copy of the committed
# results (tests/committed.py), never in results/ as a user's own runs have left it.
READS_RESULTS = ("python -m impl.costmodel",)


def commands(page: str) -> list[str]:
    """The commands of a page's bash blocks: continuation lines joined, comments cut."""
    text = (ROOT / page).read_text()
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command = re.sub(r"\s\[[^\]]*\]", "", re.sub(r"\s#.*", "", line))
            if command := " ".join(command.split()):
                found.append(command)
    return found


def prose_modules(page: str) -> set[str]:
    """The modules a page's inline code runs: `python -m MODULE ...`."""
    return set(re.findall(r"`python -m ([\w.]+)[^`]*`", (ROOT / page).read_text()))


PAGES_WITH_PROSE = ("README.md", *sorted(page.relative_to(ROOT).as_posix()
                                         for page in (ROOT / "docs").glob("*.md")))
EVERY = [(page, command) for page in PAGES for command in commands(page)]
CASES = [pytest.param(page, command, id=command[:60]) for page, command in EVERY]


def reason_not_run(command: str) -> str | None:
    if command == WHOLE_SUITE:
        return "the whole suite (minutes to hours); its --help runs here"
    return next((why for start, why in NOT_RUN.items() if command.startswith(start)), None)


def test_the_pages_have_the_commands_this_test_knows():
    assert len(EVERY) >= 15
    assert {"README.md", "docs/launching.md", "docs/costmodel.md", "docs/hybrid.md",
            "docs/tensor-parallel.md"} <= set(PAGES)
    run = [c for _, c in EVERY if reason_not_run(c) is None]
    assert "python -m suite.run --help" in run
    assert any(c.startswith("OVERLAP_BACKEND=gloo torchrun") for c in run)


def as_run_here(command: str, out: Path) -> tuple[list[str], dict[str, str]]:
    """The command with this venv's Python for `python`, and every JSON file it would write
    (one not in the repository) in tmp."""
    words = [str(out / word) if word.endswith(".json") and not (ROOT / word).exists()
             else word for word in shlex.split(command)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    if words[0] == "mpirun":
        if reason := capabilities.missing_mpi():
            pytest.skip(reason)
        if os.geteuid() == 0:  # docs/launching.md says to add these as root
            words[1:1] = ["--allow-run-as-root", "--oversubscribe"]
    venv_bin = Path(sys.executable).parent
    words = [sys.executable if w == "python" else w for w in words]
    if words[0] == "torchrun" and not shutil.which("torchrun"):
        words[0] = str(venv_bin / "torchrun")
    return words, env


@pytest.mark.parametrize(("page", "command"), CASES)
def test_each_command_runs_as_written(page, command, tmp_path):
    if reason := reason_not_run(command):
        pytest.skip(reason)
    words, env = as_run_here(command, tmp_path)
    cwd = ROOT_COPY if command.startswith(READS_RESULTS) or "results/" in command else ROOT
    result = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, f"{page}: {command}\n{result.stdout[-2000:]}{result.stderr}"
    if "--results-json" in command:
        assert (tmp_path / "r.json").is_file()


MODULES = sorted({module for page in PAGES_WITH_PROSE for module in prose_modules(page)})


@pytest.mark.parametrize("module", MODULES)
def test_each_module_the_prose_names_answers_help(module):
    """Exit 0 with argparse's help, or, for a module of positional arguments only, its usage
    line and exit 2 (a bad argument's status)."""
    result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                            text=True, timeout=120, check=False)
    said = result.stdout + result.stderr
    if result.returncode == 0:
        assert said.startswith("usage: "), said[-2000:]
    else:
        assert result.returncode == 2, said[-2000:]
        assert said.startswith(f"usage: python -m {module} "), said[-2000:]
