"""A pytest plugin that every pass loads first (``-p suite.rank_start``, suite/run.py): a rank
ends with its launcher from its first second.

pytest imports a plugin named with ``-p`` before the plugins it finds installed (hypothesis,
pytest-benchmark) and before conftest.py, whose imports take torch's seconds, more on a
loaded machine. A rank whose launcher (torchrun's agent, mpirun) is killed meanwhile would
live through them, since only the kernel can tell it (impl/lifetime.py). conftest.py arms
the same at its import, for ranks launched without this plugin.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from impl.lifetime import end_with_parent

# Set in the ranks' environment by torchrun and by MPI launchers (Open MPI, PMI).
LAUNCHED_BY = ("TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
# "<pid> <start time>" of the suite's launcher (suite/launch.py), in every pass's environment.
LAUNCHER_ENV = "OVERLAP_LAUNCHER"


def arm() -> None:
    """In a rank a launcher started (not in suite/run.py's own collection): end with it.

    The kernel tells a rank that its parent ended only once the rank has asked; a parent
    (mpirun, torchrun's agent) killed before that, with the suite's launcher, leaves it
    nothing to notice: so a rank whose suite launcher is already gone ends at once."""
    if any(name in os.environ for name in LAUNCHED_BY) and "--collect-only" not in sys.argv:
        end_with_parent()
        if launcher_gone():
            os.kill(os.getpid(), signal.SIGKILL)


def launcher_gone(environ: dict[str, str] = os.environ) -> bool:
    """Whether the suite launcher named in LAUNCHER_ENV has ended (False where none is)."""
    pid, _, started = environ.get(LAUNCHER_ENV, "").partition(" ")
    if not pid.isdigit():
        return False
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone (or no /proc: not Linux, where nothing here is armed)
        return True
    fields = text[text.rindex(")") + 2:].split()
    return fields[0] == "Z" or fields[19] != started  # ended, or its pid reused


arm()
