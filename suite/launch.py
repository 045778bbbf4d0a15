"""Launch the suite's passes so that Ctrl-C, `timeout` or a CI cancel stops all of them.

Each pass (torchrun or mpirun and their workers) starts in a session of its own, so a Ctrl-C
at the terminal reaches only the launcher, which then stops the pass deliberately, each
process of it once:

1. SIGKILL to the pass's own process (torchrun, mpirun) and SIGTERM to every other process of
   the pass. The launcher reports the stop itself; torchrun would answer SIGTERM with its
   SignalException traceback. torchrun starts every worker in a session of its own, so the
   pass's processes are found as descendants, not as a process group. Workers have no SIGTERM
   handler and end at once; the results file rank 0 checkpointed after its last finished
   benchmark stays whole (impl/atomic.py).
2. After GRACE_S, or at a second signal, SIGKILL to every process of the pass still there.

A pass that stalls (suite/pass_watch.py: past its deadline, or a rank left running after
another ended) is ended the same way, after each of its ranks has dumped every thread's stack
into its stacks file (hangs.STACKS_SIGNAL; a stopped rank is continued to take it).

No further pass starts after a stop. And no process outlives its pass: the launcher adopts
the orphans of its passes (impl/lifetime.py), so when a pass's own process ends, stopped or
killed from outside (the workers also end with their parent, conftest.py), whatever of the
pass is still running gets SIGTERM, then SIGKILL after GRACE_S. Processes are found through
/proc (Linux).

    launcher = Launcher()
    with launcher.handling_signals():
        code = launcher.run(["torchrun", ...], env)
    if launcher.stop_signal: ...  # what stopped the run, e.g. signal.SIGINT
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from impl.lifetime import adopt_orphans, end_with_parent
from suite import pipes
from suite.pass_watch import PassWatch
from suite.rank_start import LAUNCHER_ENV

GRACE_S = 5.0  # between SIGTERM and SIGKILL: workers end in well under a second on SIGTERM
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
POLL_S = 0.2
END_WITH_PARENT_S = 1.0  # workers killed with their parent are gone in milliseconds

# Open MPI's --tag-output marks each piece of a rank's output "[job,rank]<stdout>:". A pass
# launched with it shows rank 0 only, as torchrun's --local-ranks-filter=0 does; the other
# ranks' last lines are shown if the pass fails.
TAG_OUTPUT = "--tag-output"
RANK_TAG = re.compile(r"\[\d+,(\d+)\]<(std(?:out|err|diag))>:")
OTHER_RANKS_KEPT = 40


def split_by_rank(line: str) -> list[tuple[int | None, str, str]]:
    """(rank, stream, text) pieces of one line of tagged output; rank None: mpirun's own."""
    parts = RANK_TAG.split(line)  # [untagged, rank, stream, text, rank, stream, text, ...]
    pieces = [(None, "mpirun", parts[0])] if parts[0] else []
    return pieces + [(int(rank), stream, text)
                     for rank, stream, text in zip(parts[1::3], parts[2::3], parts[3::3])]


def show_rank_zero(stream, others: deque) -> None:
    """Copies the tagged output of a pass to this process's stdout: rank 0's and mpirun's own
    text, untagged; the other ranks' lines go to ``others`` (the last OTHER_RANKS_KEPT).

    Open MPI forwards a rank's stdout and stderr as pieces, and a line of one stream can arrive
    split around a piece of the other: each stream's pieces are joined into whole lines."""
    pending: dict[tuple[int | None, str], str] = {}

    def emit(rank: int | None, text: str) -> None:
        if rank in (None, 0):
            if text.strip("\n"):
                sys.stdout.write(text if text.endswith("\n") else text + "\n")
                sys.stdout.flush()
        elif text.strip():
            others.append(text.rstrip("\n"))

    for line in stream:
        for rank, name, text in split_by_rank(line):
            whole, _, rest = (pending.pop((rank, name), "") + text).rpartition("\n")
            if whole:
                emit(rank, whole + "\n")
            if rest:
                pending[rank, name] = rest
    for (rank, _), rest in pending.items():
        emit(rank, rest)


def colour_env() -> dict[str, str]:
    """pytest colours its output only where the launcher's own stdout is a terminal: Open MPI
    gives each rank a pseudo-terminal, so a rank would colour a log file too."""
    return {} if sys.stdout.isatty() else {"PY_COLORS": "0"}


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone, or not ours to read
        return None
    fields = text[text.rindex(")") + 2:].split()  # the name in parentheses may hold spaces
    if fields[0] == "Z":  # a zombie has ended; only its parent's wait is missing
        return None
    return int(fields[1]), int(fields[19])


def process_tree(root: int) -> dict[int, int]:
    """``root`` and all its descendants alive now: pid -> start time (tells reused pids apart)."""
    children: dict[int, list[int]] = {}
    started: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))):
            children.setdefault(stat[0], []).append(int(entry.name))
            started[int(entry.name)] = stat[1]
    tree, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in started and pid not in tree:
            tree[pid] = started[pid]
            todo += children.get(pid, [])
    return tree


def signal_processes(processes: dict[int, int], signum: int) -> None:
    """Send ``signum`` to each process still alive with the same start time."""
    for pid, started in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[1] == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)


def descendants() -> dict[int, int]:
    """Every live descendant of this process (with the orphans it adopted): pid -> start."""
    tree = process_tree(os.getpid())
    tree.pop(os.getpid(), None)
    return tree


def reap_orphans() -> None:
    """Collect the exit status of ended children (adopted orphans become zombies until then)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


class Launcher:
    """Runs one pass at a time; a stop signal ends the running pass and every later one."""

    def __init__(self) -> None:
        self.stop_signal: signal.Signals | None = None
        self._stopped_at = 0.0
        self._sent: int | None = None  # the strongest signal the current pass has had
        self._current: subprocess.Popen | None = None
        self.stalled: str | None = None  # why the last pass was ended as stalled
        self.stuck: list[int] = []  # and the ranks it named
        self._ending_at: float | None = None  # when a stalled pass had its SIGTERM

    @contextlib.contextmanager
    def handling_signals(self) -> Iterator[Launcher]:
        previous = {signum: signal.signal(signum, self._on_signal) for signum in STOP_SIGNALS}
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame) -> None:
        if self.stop_signal is None:
            self.stop_signal = signal.Signals(signum)
            self._stopped_at = time.monotonic()
            print(f"\n[suite] {self.stop_signal.name}: stopping the running pass (SIGKILL to "
                  f"what is left after {GRACE_S:g} s); no further pass starts", flush=True)
            self._signal_pass(signal.SIGTERM)
        else:  # a second Ctrl-C: do not wait for the grace period
            self._signal_pass(signal.SIGKILL)

    def _signal_pass(self, signum: int) -> None:
        if self._current is None:  # between passes (run() starts no other), or sweeping
            self._sent = signum
            return
        root = self._current.pid
        tree = descendants()
        signal_processes({pid: t for pid, t in tree.items() if pid == root}, signal.SIGKILL)
        signal_processes({pid: t for pid, t in tree.items() if pid != root}, signum)
        self._sent = signum

    def _escalate(self) -> None:
        """While stopping: SIGTERM if the pass has had none yet, SIGKILL after GRACE_S."""
        if self.stop_signal is None:
            return
        if self._sent is None:  # the stop came while the pass was being started
            self._signal_pass(signal.SIGTERM)
        elif self._sent != signal.SIGKILL and time.monotonic() - self._stopped_at > GRACE_S:
            print(f"[suite] the pass is still running {GRACE_S:g} s after SIGTERM: SIGKILL",
                  flush=True)
            self._signal_pass(signal.SIGKILL)

    def run(self, command: list[str], env: dict[str, str],
            watch: PassWatch | None = None) -> int | None:
        """Run ``command`` to its end and return its exit status; None if a stop came first.
        With ``watch``, a pass that stalls is ended with every rank's stack (``stalled``
        says why)."""
        if self.stop_signal is not None:
            return None
        adopt_orphans()
        self._sent, self.stalled, self.stuck, self._ending_at = None, None, [], None
        tagged = TAG_OUTPUT in command
        # Who launched the pass: a rank whose launcher is gone when it starts ends at once.
        env = {**env, LAUNCHER_ENV: f"{os.getpid()} {_stat(os.getpid())[1]}"}
        # Where the launcher writes into a pipe, the pass writes into pipes of its own, which
        # the launcher copies: no rank meets the user's pipe closed (suite/pipes.py).
        copied = {fd: not tagged and pipes.is_pipe(fd) for fd in (1, 2)}
        # The pass's own process ends with the launcher, and its ranks with it (conftest.py).
        self._current = subprocess.Popen(
            command, env={**env, **colour_env()} if tagged else env, start_new_session=True,
            preexec_fn=end_with_parent,
            stdout=subprocess.PIPE if tagged or copied[1] else None,
            stderr=subprocess.STDOUT if tagged else subprocess.PIPE if copied[2] else None,
            text=tagged or copied[1] or copied[2] or None,
            errors="replace" if tagged or copied[1] or copied[2] else None)
        others: deque = deque(maxlen=OTHER_RANKS_KEPT)
        readers = ([threading.Thread(target=show_rank_zero, args=(self._current.stdout, others),
                                     daemon=True)] if tagged else
                   [threading.Thread(target=pipes.copy_lines, args=(stream, name), daemon=True)
                    for stream, name in ((self._current.stdout, "stdout"),
                                         (self._current.stderr, "stderr"))
                    if stream is not None])
        for reader in readers:
            reader.start()
        try:
            while True:
                try:
                    code = self._current.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    self._escalate()
                    if watch is not None:
                        self._watch(watch)
        finally:
            self._current = None
            self._sweep()
            for reader in readers:  # a pipe closes when the pass's last process ends
                reader.join(timeout=GRACE_S)
        if others and code != 0:
            print(f"[suite] the other ranks' last {len(others)} lines:", *others, sep="\n",
                  flush=True)
        return code

    def _watch(self, watch: PassWatch) -> None:
        """End a stalled pass: every rank's stack, SIGTERM, SIGKILL after GRACE_S."""
        if self._ending_at is not None:
            if time.monotonic() - self._ending_at > GRACE_S:
                self._signal_pass(signal.SIGKILL)
            return
        if self.stop_signal is not None or (stall := watch.stalled(descendants())) is None:
            return
        self.stalled, self.stuck = stall[0], sorted(stall[1])
        print(f"[suite] the pass has stalled: {self.stalled}; taking the stacks of rank(s) "
              f"{', '.join(map(str, self.stuck))} and ending it", flush=True)
        watch.take_stacks(stall[1])
        self._ending_at = time.monotonic()
        self._signal_pass(signal.SIGTERM)

    def _sweep(self) -> None:
        """End whatever of the pass outlived its own process: SIGTERM, then SIGKILL after
        GRACE_S (at once after a second stop signal); reap the orphans adopted meanwhile."""
        # Workers end with their parent (impl/lifetime.py): a moment to do so unprompted.
        left = self._wait_for_end(END_WITH_PARENT_S)
        if not left:
            return
        if self.stop_signal is None:
            print(f"[suite] the pass ended and left {len(left)} of its processes running: "
                  "stopping them", flush=True)
        signal_processes(left, signal.SIGTERM)
        left = self._wait_for_end(GRACE_S)
        signal_processes(left, signal.SIGKILL)
        if left := self._wait_for_end(GRACE_S, hurry=False):  # not even SIGKILL ended them
            print(f"[suite] processes {sorted(left)} of the pass do not end", flush=True)

    def _wait_for_end(self, seconds: float, hurry: bool = True) -> dict[int, int]:
        """The pass's processes still alive after up to ``seconds`` (no wait after a second
        stop signal when ``hurry``), reaping those that ended."""
        deadline = time.monotonic() + seconds
        while True:
            reap_orphans()
            left = descendants()
            if (not left or time.monotonic() > deadline
                    or (hurry and self._sent == signal.SIGKILL)):
                return left
            time.sleep(0.05)

