"""Sessions: tests, bench, report, gate, lint.

Every session reuses the machine's torch (CPU or CUDA build) through
--system-site-packages and never installs another one: pyproject.toml does not list torch.
"""

from __future__ import annotations

import importlib.util

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
VENV = {"venv_params": ["--system-site-packages"]}


def _require_torch(session: nox.Session) -> None:
    # The session's virtualenv sees this interpreter's site-packages, so its torch is ours.
    if importlib.util.find_spec("torch") is None:
        session.error("torch is not installed: run `pip install torch==2.13.0` (CPU) or "
                      "install your CUDA build first, then retry")


def _install(session: nox.Session, extras: str = "") -> None:
    _require_torch(session)
    session.install("-e", f".{extras}")


@nox.session(**VENV)
def tests(session: nox.Session) -> None:
    """The test suite (CPU; GPU tests skip with a reason): nox -s tests [-- pytest args]."""
    _install(session, "[test]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(**VENV)
def bench(session: nox.Session) -> None:
    """The benchmark suite: nox -s bench [-- --quick|--full] [-- pytest args such as -k]."""
    _install(session)
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
    session.run("python", "-m", "reports.gate", *session.posargs, success_codes=[0])


@nox.session(**VENV)
def lint(session: nox.Session) -> None:
    _install(session, "[test]")
    session.run("ruff", "check", ".")
