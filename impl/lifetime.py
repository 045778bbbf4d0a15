"""No process of a launch outlives it: Linux process-lifetime settings (prctl).

- ``end_with_parent()``: a launched rank is killed when the process that started it ends
  (PR_SET_PDEATHSIG). torchrun's agent (or mpirun) stops its workers when one of them fails,
  but when the agent itself is killed (SIGKILL, the out-of-memory killer) nobody is left to
  stop them: they would run the pass to its end, holding their GPUs and writing files.
- ``adopt_orphans()``: the suite's launcher becomes the parent of every process of a pass
  whose own parent ended (PR_SET_CHILD_SUBREAPER), so that it can still find them, and end
  them, when the pass is over (suite/launch.py). The pass's own process (torchrun, mpirun)
  ends with the launcher (``end_with_parent`` between fork and exec), and its ranks with it:
  a launcher killed by SIGKILL leaves nothing running either.

Both are Linux only; elsewhere they do nothing and return False.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, loaded once (before any fork: ``end_with_parent`` may run in a child
    between fork and exec, where loading a library could wait on a lock forever)."""
    return ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _prctl(option: int, value: int) -> bool:
    libc = _libc()
    return libc is not None and libc.prctl(option, value, 0, 0, 0) == 0


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
