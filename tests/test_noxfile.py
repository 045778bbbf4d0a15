"""noxfile.py's link from a session's virtualenv to the packages of the Python running nox.

A virtualenv made from inside another one sees only the base interpreter's packages; the
sessions run LINK_FOLDERS so that the torch of nox's virtualenv is theirs (README, Setup).
"""

from __future__ import annotations

import importlib.util
import subprocess
import venv
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("nox", reason="nox is not installed (pip install nox)")
spec = importlib.util.spec_from_file_location("noxfile", ROOT / "noxfile.py")
noxfile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(noxfile)


def run(python: Path, code: str, *args: str) -> str:
    result = subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_bare_virtualenv_sees_torch_only_through_the_link(tmp_path):
    venv.create(tmp_path / "session", with_pip=False)  # no --system-site-packages
    python = tmp_path / "session" / "bin" / "python"
    assert run(python, noxfile.FIND_TORCH) == "False\n"

    torch_site = str(Path(torch.__file__).parent.parent)
    run(python, noxfile.LINK_FOLDERS, torch_site)
    assert run(python, noxfile.FIND_TORCH) == "True\n"
    assert run(python, "import torch; print(torch.__file__)") == f"{torch.__file__}\n"

    run(python, noxfile.LINK_FOLDERS)  # rerun without folders: the link is gone again
    assert run(python, noxfile.FIND_TORCH) == "False\n"

