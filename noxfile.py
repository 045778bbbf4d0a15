"""Sessions: tests, bench, report, gate, predict, lint.

Every session uses the torch (CPU or CUDA build) of the Python that runs nox and never
installs another one: pyproject.toml does not list torch. A session's virtualenv sees the
system's packages (--system-site-packages) and, when nox itself runs in a virtualenv (the
README's setup), that virtualenv's packages too, through a .pth file: a virtualenv made from
inside another one sees only the base interpreter's packages, not its parent's.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
VENV = {"venv_params": ["--system-site-packages"]}
TORCH_INSTALL = ("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu "
                 "(or your CUDA build of torch)")

# Run by a session's Python with folders as arguments: puts them on its sys.path for good, in a
# .pth file of its site-packages (rewritten on every run, so a reused virtualenv follows along).
LINK_FOLDERS = ("import pathlib, sys, sysconfig; "
                "pathlib.Path(sysconfig.get_paths()['purelib'], 'nox-python.pth')"
                ".write_text(''.join(folder + chr(10) for folder in sys.argv[1:]))")
# The gate's exit statuses that do not fail the session: 0 PASS and 3 UNCONFIRMED (regressions
# only the files show, which no re-run measured: the gate warns, see reports/gate/).
GATE_PASSES = [0, 3]
FIND_TORCH = "import importlib.util; print(importlib.util.find_spec('torch') is not None)"


def nox_site_packages() -> list[str]:
    """The site-packages of the virtualenv nox runs in; none for a system Python, whose
    packages --system-site-packages already shows."""
    if sys.prefix == sys.base_prefix:
        return []
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def _require_torch(session: nox.Session) -> None:
    session.run("python", "-c", LINK_FOLDERS, *nox_site_packages(), silent=True, log=False)
    if session.run("python", "-c", FIND_TORCH, silent=True, log=False).strip() != "True":
        session.error(f"torch is not installed where nox runs ({sys.executable}): "
                      f"{TORCH_INSTALL}, then retry (README, Setup)")


def _install(session: nox.Session, extras: str = "") -> None:
    _require_torch(session)
    session.install("-e", f".{extras}")


@nox.session(**VENV)
def tests(session: nox.Session) -> None:
    """The fast tier of the tests (CPU; GPU tests skip with a reason): nox -s tests [-- pytest
    args]; both tiers, as CI runs them: nox -s tests -- --all (tests/tiers.py)."""
    _install(session, "[test]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(**VENV)
def bench(session: nox.Session) -> None:
    """The benchmark suite: nox -s bench [-- --quick|--full] [-- pytest args such as -k]."""
    _install(session, "[studies]")
    session.run("python", "-m", "suite.run", *session.posargs)


@nox.session(**VENV)
def report(session: nox.Session) -> None:
    """HTML and PDF report in reports/out/: nox -s report [-- files or folders]."""
    _install(session)
    session.run("python", "-m", "reports.build", *session.posargs)


@nox.session(**VENV)
def gate(session: nox.Session) -> None:
    """Throughput regression gate: nox -s gate -- BASELINE CANDIDATE [options]."""
    _install(session)
    session.run("python", "-m", "reports.gate", *session.posargs, success_codes=GATE_PASSES)


@nox.session(**VENV)
def predict(session: nox.Session) -> None:
    """Predicted steps at 8 to 1024 GPUs: nox -s predict [-- RESULTS --fabric NAME]; with no
    arguments, the newest GPU run of results/ with its GPU's fabric file.

    Nothing to install: it reads files with numpy and torch (the link above) and runs from
    the checkout, so it answers in seconds."""
    _require_torch(session)
    session.run("python", "-m", "impl.costmodel.predict", *session.posargs,
                env={"PYTHONPATH": str(Path(__file__).resolve().parent)})


@nox.session(**VENV)
def lint(session: nox.Session) -> None:
    _install(session, "[test]")
    session.run("ruff", "check", ".")
