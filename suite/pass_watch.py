"""Nothing in a pass waits without a limit: the launcher's watch over a running pass.

Each rank's watchdog (suite/watchdog.py) limits its benchmarks, but it cannot limit what no
Python thread of its own can see: a rank stopped (SIGSTOP) or stuck between benchmarks or
after the last one, while the others have ended and torchrun or mpirun waits for it. The
launcher (suite/launch.py) asks ``PassWatch.stalled()`` every poll; a stall ends the pass with
every rank's stack, keeping what finished (rank 0's results file is whole after every
benchmark). A pass has stalled when

- it has run past its own deadline, the sum of its benchmarks' deadlines (suite/deadline.py)
  plus START_MARGIN_S (torch's import, the process group, collection, the tests that are no
  benchmark) and END_MARGIN_S:

      pass deadline = Σ benchmark deadlines + START_MARGIN_S + END_MARGIN_S

- or a rank's watchdog has left a hang record and a rank without one is stopped (SIGSTOP:
  it can never answer, so waiting out the watchdogs' grace for it gains nothing);
- or one of its ranks has ended and another is still running END_MARGIN_S later
  (HANG_END_MARGIN_S where a rank's watchdog has left a hang record: the watchdogs have had
  their grace for the other ranks' records by then, so a rank still there is stuck;
  SESSION_END_MARGIN_S where rank 0 has finished its session and the rank still there has
  not, or is stopped: rank 0 is the last to finish, after writing the results).

A rank has ended when its process is gone or its session is over (hangs.done_path): under
mpirun a rank that has finished waits in MPI's finalize for the others, so its process stays;
it is not stuck, the rank it waits for is. The ranks named are those whose session is not
over; where every rank still running has finished its session but does not exit, the stopped
ones, else all of them.

``take_stacks`` then has each stuck rank dump every thread's stack into its stacks file
(hangs.STACKS_SIGNAL, the watchdog's C-level handler): a stopped rank is continued so that it
can, and is killed as soon as its dump is written.

The ranks are the pass's processes that carry a rank in their environment (RANK from torchrun,
OMPI_COMM_WORLD_RANK or PMI_RANK from MPI launchers), found through /proc (Linux).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from suite import hangs

START_MARGIN_S = 120.0  # 2 ranks of the loaded 2-core machine took 20-40 s to start a pass
END_MARGIN_S = 15.0  # rank 0 writes the results file after the others may have ended
HANG_END_MARGIN_S = 3.0  # torchrun and mpirun end the other ranks at once on a failure
# Every rank leaves the last benchmark's barrier together; rank 0 then writes the results and
# is the last to finish its session. A rank not done this long after it is stuck.
SESSION_END_MARGIN_S = 5.0
DUMP_S = 2.0  # for a rank's stack dump: faulthandler writes it in milliseconds
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


def pass_deadline_s(benchmark_deadlines_s: float) -> float:
    """The whole pass's deadline (module docstring)."""
    return benchmark_deadlines_s + START_MARGIN_S + END_MARGIN_S


def rank_of(pid: int) -> int | None:
    """The rank a process was launched as, from its environment; None for other processes."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # gone, or not ours to read
        return None
    variables = dict(entry.split(b"=", 1) for entry in environ if b"=" in entry)
    for name in RANK_VARIABLES:
        if (value := variables.get(name.encode(), b"")).isdigit():
            return int(value)
    return None


def state_of(pid: int) -> str:
    """The kernel's one-letter state of a process ("T": stopped), "" when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text[text.rindex(")") + 2:].split()[0]


def ranks_in(processes: dict[int, int]) -> dict[int, int]:
    """rank -> pid of the ranks among ``processes`` (pid -> start time): per rank the
    earliest-started process, not the helpers it started (they inherit its environment)."""
    ranks: dict[int, tuple[int, int]] = {}
    for pid, started in processes.items():
        rank = rank_of(pid)
        if rank is not None and (rank not in ranks or started < ranks[rank][1]):
            ranks[rank] = (pid, started)
    return {rank: pid for rank, (pid, _) in sorted(ranks.items())}


def stopped(pid: int) -> bool:
    return state_of(pid) == "T"  # "t" is a debugger's stop: not ours to end


def describe(ranks: dict[int, int]) -> str:
    """"rank 1 (pid 4242, stopped)" for each, joined."""
    parts = []
    for rank, pid in ranks.items():
        parts.append(f"rank {rank} (pid {pid}{', stopped' if stopped(pid) else ''})")
    return ", ".join(parts)


@dataclass
class PassWatch:
    """The limits of one running pass; ``stalled()`` is asked with the pass's processes."""

    deadline_s: float
    results: Path | None  # the pass's results file: hang records are written beside it
    started: float = field(default_factory=time.monotonic)
    seen: dict[int, int] = field(default_factory=dict)  # rank -> pid, every rank seen so far
    first_end: float | None = None  # when the first rank ended
    taken: dict[int, tuple[str, str]] = field(default_factory=dict)  # rank -> (benchmark, dump)
    continued: set[int] = field(default_factory=set)  # stopped ranks continued for a dump

    def stalled(self, processes: dict[int, int]) -> tuple[str, dict[int, int]] | None:
        """(why, the stuck ranks: rank -> pid) once the pass has stalled, else None."""
        now = time.monotonic()
        running = ranks_in(processes)
        self.seen.update(running)
        over = {rank for rank in self.seen if self.results is not None
                and hangs.done_path(self.results, rank).exists()}
        unfinished = {rank: pid for rank, pid in running.items() if rank not in over}
        if now - self.started > self.deadline_s:
            return (f"the pass has run {now - self.started:.0f} s, past its deadline of "
                    f"{self.deadline_s:.0f} s (its benchmarks' deadlines plus "
                    f"{START_MARGIN_S:g} s to start and {END_MARGIN_S:g} s to end)",
                    unfinished or running)
        records = hangs.read_records(self.results) if self.results is not None else []
        answered = {record["rank"] for record in records}
        silent = {rank: pid for rank, pid in running.items()
                  if rank not in answered and stopped(pid)}
        if records and silent:
            return (f"rank(s) {', '.join(str(r['rank']) for r in records)} passed a deadline "
                    f"and {describe(silent)} cannot answer", silent)
        halted = {rank: pid for rank, pid in running.items() if stopped(pid)}
        stuck = unfinished or halted or running
        ended = sorted((set(self.seen) - set(running) | over) - set(stuck))
        if not ended or not stuck:
            return None
        self.first_end = self.first_end or now
        # Rank 0 done, and the others not done or stopped (not merely slow to exit): stuck.
        clear_cut = 0 in over and 0 not in stuck and bool(unfinished or halted)
        margin = (HANG_END_MARGIN_S if records else SESSION_END_MARGIN_S if clear_cut
                  else END_MARGIN_S)
        if now - self.first_end <= margin:
            return None
        gone = [rank for rank in ended if rank not in running]
        waiting = [rank for rank in ended if rank in running]  # sessions over: MPI's finalize
        what = ", ".join([*([f"rank(s) {', '.join(map(str, gone))} ended"] if gone else []),
                          *([f"rank(s) {', '.join(map(str, waiting))} finished (waiting to "
                             "exit)"] if waiting else [])])
        return (f"{what} {now - self.first_end:.0f} s ago and {describe(stuck)} did not",
                stuck)

    def take_stacks(self, ranks: dict[int, int]) -> None:
        """Each rank's stack (module docstring), with where it was (its stacks file's first
        line, read before it can move on); a rank continued for it is killed once its dump is
        written. The dump file is opened first: the rank removes it when it ends."""
        for rank, pid in ranks.items():
            if self.results is None:
                return
            was_stopped = stopped(pid)
            header = read_text(hangs.stacks_path(self.results, rank))
            position = header.partition("\n")[0].removeprefix(hangs.STACKS_HEADER) or "unknown"
            try:
                asked = open(hangs.asked_path(self.results, rank), errors="replace")  # noqa: SIM115
            except OSError:  # the rank has no watchdog yet, or is gone
                continue
            dump = ""
            with asked, contextlib.suppress(ProcessLookupError, PermissionError):
                asked.read()  # an earlier dump
                signal_main_thread(pid, hangs.STACKS_SIGNAL)
                if was_stopped:
                    os.kill(pid, signal.SIGCONT)  # the pending signal is handled first
                dump = wait_for_dump(asked)
                if was_stopped:
                    self.continued.add(rank)
                    os.kill(pid, signal.SIGKILL)
            if dump.strip():
                self.taken[rank] = (position, dump)


# tgkill(2) by machine: a signal to one thread of a process (Python has no call for it).
TGKILL = {"x86_64": 234, "aarch64": 131}


def signal_main_thread(pid: int, signum: int) -> None:
    """``signum`` to the main thread of ``pid`` (whose thread id is its pid). Sent to the
    process, a stopped one's signal would go to whichever thread wakes first on SIGCONT, and
    the main thread could move on before the dump shows where it was."""
    number = TGKILL.get(platform.machine())
    if number is None:
        os.kill(pid, signum)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, pid, pid, int(signum)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))  # ProcessLookupError for a process gone


def read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def wait_for_dump(stream) -> str:
    """What is written to ``stream`` until it has grown and stopped growing (at most DUMP_S)."""
    until, text = time.monotonic() + DUMP_S, ""
    while time.monotonic() < until:
        time.sleep(0.02)
        more = stream.read()
        if text and not more:
            break
        text += more
    return text
