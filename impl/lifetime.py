"""No process of a launch outlives it: Linux process-lifetime settings (prctl).

- ``end_with_parent()``: a launched rank is killed when the process that started it ends
  (PR_SET_PDEATHSIG). torchrun's agent (or mpirun) stops its workers when one of them fails,
  but when the agent itself is killed (SIGKILL, the out-of-memory killer) nobody is left to
  stop them: they would run the pass to its end, holding their GPUs and writing files.
- ``adopt_orphans()``: the suite's launcher becomes the parent of every process of a pass
  whose own parent ended (PR_SET_CHILD_SUBREAPER), so that it can still find them, and end
  them, when the pass is over (suite/launch.py).

Both are Linux only; elsewhere they do nothing and return False.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(option, value, 0, 0, 0) == 0


def end_with_parent(signum: int = signal.SIGKILL) -> bool:
    """Have the kernel send ``signum`` to this process when its parent ends.

    SIGKILL: nothing is left to save once the launch is gone (rank 0's results file is
    checkpointed whole after every benchmark). If the parent ended between reading its pid
    and arming, the process has already been handed to another one: it ends now.
    """
    parent = os.getppid()
    if not _prctl(PR_SET_PDEATHSIG, int(signum)):
        return False
    if os.getppid() != parent:
        os.kill(os.getpid(), signum)
    return True


def adopt_orphans() -> bool:
    """Make this process the parent of its descendants' orphans (it must reap them)."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)
