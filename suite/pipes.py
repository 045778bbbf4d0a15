"""Output to a pipe whose reader has gone (`python -m suite.run ... | head`): the run goes on.

coreutils stay quiet on a closed pipe; so does the launcher, and it does not stop: the
benchmarks go on to their end, what they measure is written, and the last line says where.

- ``guard()`` wraps the launcher's stdout and stderr. The first write that finds one closed
  (BrokenPipeError: Python ignores SIGPIPE) points its file descriptor at os.devnull, so
  nothing later fails or prints a traceback; a closed stdout is said in one line on stderr.
- While stdout or stderr is a pipe, Launcher.run (suite/launch.py) gives the pass pipes of
  its own and copies their lines (``copy_lines``): no rank or torchrun ever writes into the
  user's pipe, so none of them meets it closed.
- ``last_line(text)``: where the results are, on stdout, and on stderr too once stdout has
  closed, so that it is the last line that can still be written.

    pipes.guard()
    ...
    pipes.last_line(f"[suite] wrote {target}")
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
from typing import IO


def is_pipe(fd: int) -> bool:
    """Whether ``fd`` is a pipe or a socket: a reader that may go away before the run ends."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class Guarded:
    """A text stream whose reader may go away: the first write or flush that finds it gone
    points ``fd`` at os.devnull and calls ``on_closed`` once; every later write goes nowhere."""

    def __init__(self, stream: IO[str], fd: int, on_closed=None):
        self._stream, self._fd, self._on_closed = stream, fd, on_closed
        self._lock = threading.Lock()
        self.closed_pipe = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._closed()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed()

    def _closed(self) -> None:
        with self._lock:
            if self.closed_pipe:
                return
            self.closed_pipe = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._fd)
            os.close(devnull)
            with contextlib.suppress(OSError):  # what the failed write left in the buffer
                self._stream.flush()
        if self._on_closed is not None:
            self._on_closed()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _stdout_closed() -> None:
    print("[suite] stdout was closed (its reader ended, as `| head` does): the run goes on "
          "without it and says where its results are on stderr", file=sys.stderr, flush=True)


def guard() -> None:
    """Wrap sys.stdout and sys.stderr (module docstring); once is enough."""
    if not isinstance(sys.stdout, Guarded):
        sys.stdout = Guarded(sys.stdout, sys.stdout.fileno(), _stdout_closed)
    if not isinstance(sys.stderr, Guarded):
        sys.stderr = Guarded(sys.stderr, sys.stderr.fileno())


def stdout_closed() -> bool:
    return isinstance(sys.stdout, Guarded) and sys.stdout.closed_pipe


def last_line(text: str) -> None:
    """``text`` on stdout, and on stderr as well where stdout has closed (module docstring)."""
    print(text, flush=True)
    if stdout_closed():
        print(text, file=sys.stderr, flush=True)


def copy_lines(source: IO[str], target_name: str) -> None:
    """Copy a pass's output, line by line, to this process's ``sys.stdout`` or ``sys.stderr``
    (looked up for each line: ``guard`` may wrap them), to the end of ``source``."""
    for line in source:
        target = getattr(sys, target_name)
        target.write(line)
        target.flush()
