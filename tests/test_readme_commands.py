"""Every command of the README and of docs/launching.md runs as written after the README's
Setup: each is run here, or skipped with the reason written beside it below."""

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

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/launching.md")

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
}
# The rest run: a second each --help, seconds the one-process quick bench; the hybrid's two
# gloo processes and the mpirun launch take about half a minute each (marked slow).
SLOW = ("OVERLAP_BACKEND=gloo torchrun", "mpirun")


def commands(page: str) -> list[str]:
    """The commands of a page's bash blocks: continuation lines joined, comments cut."""
    text = (ROOT / page).read_text()
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if command := " ".join(re.sub(r"\s#.*", "", line).split()):
                found.append(command)
    return found


EVERY = [(page, command) for page in PAGES for command in commands(page)]
CASES = [pytest.param(page, command, id=command[:60],
                      marks=[pytest.mark.slow] if command.startswith(SLOW) else [])
         for page, command in EVERY]


def reason_not_run(command: str) -> str | None:
    return next((why for start, why in NOT_RUN.items() if command.startswith(start)), None)


def test_the_pages_have_the_commands_this_test_knows():
    assert len(EVERY) >= 15
    run = [c for _, c in EVERY if reason_not_run(c) is None]
    assert "python -m suite.run --help" in run
    assert any(c.startswith("OVERLAP_BACKEND=gloo torchrun") for c in run)


def as_run_here(command: str, results: Path) -> tuple[list[str], dict[str, str]]:
    """The command with this venv's Python for `python`, and a results file in tmp."""
    words = shlex.split(command.replace("r.json", str(results)))
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
    words, env = as_run_here(command, tmp_path / "r.json")
    result = subprocess.run(words, cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, f"{page}: {command}\n{result.stdout[-2000:]}{result.stderr}"
    if "--results-json" in command:
        assert (tmp_path / "r.json").is_file()
