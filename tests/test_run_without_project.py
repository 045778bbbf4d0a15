"""Run by a Python that lacks the project's dependencies, the suite says so in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_bare_python_gets_one_line_not_a_traceback(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True)
    result = subprocess.run([str(tmp_path / "bare" / "bin" / "python"), "-m", "suite.run",
                             "--quick"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"[suite] {tmp_path / 'bare' / 'bin' / 'python'} lacks torch, numpy, ")
    assert line.endswith("(torch, then pip install -e '.[test,studies]') or run nox -s bench")
