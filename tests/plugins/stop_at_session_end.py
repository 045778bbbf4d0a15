"""A pytest plugin for tests/hang_bench/finalize_benchmarks.py: rank 1 stops itself (SIGSTOP)
when its session finishes, after every benchmark and every barrier, before its session is
over (suite/pass_watch.py counts a rank whose session is over as ended)."""

from __future__ import annotations

import os
import signal


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK")) == "1":
        os.kill(os.getpid(), signal.SIGSTOP)
