"""One watchdog per rank: a benchmark past its deadline ends the pass with every rank's stack.

conftest.py arms it around each benchmark (setup, call, teardown with the all-ranks barrier)
and disarms it after. When the deadline (suite/deadline.py) passes, the watchdog thread

1. writes every thread's Python stack (faulthandler) to stderr, under one line naming the
   benchmark, its deadline and its expected time;
2. writes this rank's hang record beside the results file (``hangs.write_record``): the
   benchmark's id, the innermost frame of the main thread and the innermost one in this
   suite's code, the stacks as text (torchrun shows only rank 0's stderr), and the benchmarks
   measured together with it (its cell's other rows), which the next pass leaves out too;
3. waits up to GRACE_S for the other ranks' records (a rank that sees another rank's record
   stops at once, so all of them report while they are stuck), then on rank 0 rewrites the
   results file with what finished and the hang and marks its record ``STOPPED``;
4. ends the process with HANG_EXIT, on the other ranks once rank 0's record is marked (or
   GRACE_S has passed): torchrun kills every rank as soon as one exits.

A rank whose benchmark raised while the other ranks did not finish it (they wait in a
collective it never joins) stops the same way at once (``end_pass``, from conftest.py), its
record naming the error under ``failed``.

Where the main thread holds the GIL while it is stuck, no Python thread can run, so at the
deadline faulthandler's own timer (a C thread, outside the GIL) also dumps every thread's stack
into the rank's stacks file (``hangs.stacks_path``); the other ranks count that dump as the
rank's answer. On ``hangs.STACKS_SIGNAL``, which the launcher sends to a rank that stalls where
no deadline sees it (suite/pass_watch.py), the same C-level handler dumps into the rank's
``hangs.asked_path`` file. suite/run.py reads the records and dumps and starts a fresh pass
after the hung benchmark.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import math
import os
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from impl import studies
from impl.rows.gate_records import RANK_HANG
from suite import deadline, hangs

GRACE_S = 10.0  # for the other ranks' records, once the first rank has stopped
STOPPED = "stopped"  # in rank 0's record: the results are written, the other ranks may exit
BACKSTOP_S = 30.0  # after GRACE_S: torchrun's wait before it kills a rank that ignores SIGTERM
POLL_S = 1.0  # how often an armed watchdog looks for another rank's record
HANG_EXIT = 86  # the exit status of a rank stopped by its deadline
# How long a rank whose benchmark raised waits at its end for the others to finish it too.
# Ranks that went on are inside a collective the failed rank will never join: past this, the
# failed rank ends the pass as at a deadline, naming its error (conftest.py, ``end_pass``).
FAILED_WAIT_S = 15.0
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Deadline:
    seconds: float
    expected_s: float
    measured_with: tuple[str, ...] = ()  # later benchmarks measured together with it
    remaining: int = 0  # benchmarks after it and those
    # What this benchmark adds to the run: its measurement's expected time on the first row
    # of a measurement, nothing on the rows that read it (suite/budget.py sums these).
    own_s: float = 0.0
    study: str = ""  # what the run's plan counts it under (study_of, suite/budget.py)


def plan_deadlines(items: Sequence, mode: str, multiple: float,
                   floor_s: float) -> dict[str, Deadline]:
    """Every benchmark's deadline, by node id (suite/deadline.py). A module may define
    ``expected_seconds(item, mode)`` (None: the mode's default) and ``measurement_key(item)``:
    benchmarks of one key are measured together (a cell's rows), so a hang stops them all."""
    device = deadline.suite_device()
    benchmarks = [item for item in items if "benchmark" in getattr(item, "fixturenames", ())]
    keys = {}
    for item in benchmarks:
        key = getattr(item.module, "measurement_key", None)
        keys[item.nodeid] = (item.module.__name__, key(item)) if key else item.nodeid
    planned, measured = {}, set()
    for index, item in enumerate(items):
        if item.nodeid not in keys:
            continue
        estimate = getattr(item.module, "expected_seconds", None)
        expected = estimate(item, mode) if estimate else None
        if expected is None:
            expected = deadline.default_expected_s(mode, device)
        later = [i.nodeid for i in items[index + 1:]]
        together = tuple(n for n in later if keys.get(n) == keys[item.nodeid])
        first = keys[item.nodeid] not in measured
        measured.add(keys[item.nodeid])
        planned[item.nodeid] = Deadline(deadline.deadline_s(expected, multiple, floor_s),
                                        expected, together, len(later) - len(together),
                                        own_s=expected if first else 0.0,
                                        study=study_of(item))
    return planned


def study_of(item) -> str:
    """The study a benchmark measures, for the run's plan: its ``study`` marker, else the
    name of its module's study (impl/studies.py), else its module's name (a test's own
    benchmark)."""
    if marker := item.get_closest_marker("study"):
        return marker.args[0]
    study = studies.of_module(item.module.__name__)
    return study.name if study else item.module.__name__.rsplit(".", 1)[-1]


def pg_timeout_s(deadlines: dict[str, Deadline],
                 environ: Mapping[str, str] = os.environ) -> int | None:
    """The process-group timeout of a benchmark run: OVERLAP_PG_TIMEOUT_S where set (None:
    impl.dist reads it), else the longest deadline plus the watchdog's grace. A wait inside a
    benchmark is never longer than the benchmark, so no collective outlasts the deadline of the
    benchmark it is in by more than that grace, and a stuck one is always stopped by the
    watchdog first, with every rank's stack, not by the group's timeout (an error on one rank,
    or NCCL's abort)."""
    if environ.get("OVERLAP_PG_TIMEOUT_S") or not deadlines:
        return None
    return math.ceil(max(d.seconds for d in deadlines.values()) + GRACE_S + BACKSTOP_S)


@dataclass(frozen=True)
class Armed:
    benchmark: str
    deadline_s: float
    expected_s: float
    started: float  # time.monotonic()
    measured_with: tuple[str, ...]  # later benchmarks measured together with it
    remaining: int  # benchmarks after it that a fresh pass would run

    @property
    def due(self) -> float:
        return self.started + self.deadline_s


def frame_text(frame: traceback.FrameSummary) -> str:
    path = Path(frame.filename)
    if path.is_relative_to(ROOT):
        path = path.relative_to(ROOT)
    return f"{path}:{frame.lineno} in {frame.name}"


def main_thread_frames() -> list[traceback.FrameSummary]:
    frame = sys._current_frames().get(threading.main_thread().ident)
    return traceback.extract_stack(frame) if frame is not None else []


def where(frames: Sequence[traceback.FrameSummary]) -> dict[str, str]:
    """The innermost frame, and the innermost one in this suite's own code (impl/, suite/):
    a rank blocked in a collective is inside torch; the suite's frame says which call."""
    own = [f for f in frames if Path(f.filename).is_relative_to(ROOT)
           and "site-packages" not in f.filename]
    innermost = frame_text(frames[-1]) if frames else "unknown"
    return {RANK_HANG.frame: frame_text(own[-1]) if own else innermost,
            RANK_HANG.innermost: innermost}


def waiting_for_peers(frames: Sequence[traceback.FrameSummary]) -> bool:
    """Whether the main thread waits inside torch.distributed (a collective, a barrier): for
    the other ranks, not stuck on its own."""
    return bool(frames) and f"torch{os.sep}distributed{os.sep}" in frames[-1].filename


def all_stacks() -> str:
    """faulthandler's dump of every thread, as text (it writes only to a file descriptor)."""
    with tempfile.TemporaryFile("w+") as dump:
        faulthandler.dump_traceback(file=dump, all_threads=True)
        dump.seek(0)
        return dump.read()


class Watchdog:
    """Arm before a benchmark, disarm after. When it stops the process, ``uncapture()`` first
    gives it the real stderr (pytest captures a test's output), and ``on_stop(records)`` runs
    on rank 0 before the exit."""

    def __init__(self, rank: int, world_size: int, results_json: str | None,
                 on_stop: Callable[[list[dict]], None] | None = None,
                 uncapture: Callable[[], None] | None = None,
                 say: Callable[[str], None] | None = None):
        self.rank, self.world_size = rank, world_size
        self.on_stop, self.uncapture = on_stop, uncapture
        # One line to the log (conftest.py's ``uncaptured``: pytest captures a test's output).
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.base = Path(results_json) if results_json else None
        self.started = time.time()
        self._armed: Armed | None = None
        self._changed = threading.Condition()
        self._stopping = threading.Event()  # set by ``_stop``: the pass is ending here
        self._ending = threading.Event()  # set by ``end_pass``: stop now, not at the deadline
        self._failure: str | None = None  # the armed benchmark raised here: its error
        self._stacks_file = self._asked_file = None
        self._unwritable: set[Path] = set()  # files a write failed in, each said once
        if self.base is not None:
            for path in hangs.record_files(self.base):  # an earlier run's
                if path.name.endswith(f".hang-rank{rank}.json"):
                    path.unlink(missing_ok=True)
            hangs.done_path(self.base, rank).unlink(missing_ok=True)
            try:
                # Unbuffered: a header that a full disk refused leaves nothing pending.
                stacks = hangs.stacks_path(self.base, rank)
                self._stacks_file = open(stacks, "wb", buffering=0)  # noqa: SIM115
                self._asked_file = open(hangs.asked_path(self.base, rank), "w")  # noqa: SIM115
            except OSError as error:
                self._cannot_write(hangs.stacks_path(self.base, rank), error)
                self._stacks_file = self._asked_file = None
            else:
                # A C-level handler: it dumps even while the main thread holds the GIL.
                faulthandler.register(hangs.STACKS_SIGNAL, file=self._asked_file,
                                      all_threads=True)
                # Until the process ends, not the session: a rank can stall after its last
                # benchmark too (the launcher then asks for its stack, suite/pass_watch.py).
                atexit.register(self.close)
        threading.Thread(target=self._watch, name="overlap-deadline", daemon=True).start()

    def _cannot_write(self, path: Path, error: OSError) -> None:
        """A write beside the results failed (a full disk): one line the first time; the
        benchmarks go on, since none of these files is a measurement."""
        if path not in self._unwritable:
            self._unwritable.add(path)
            self.say(f"[deadline] rank {self.rank}: cannot write {path}: {error}; the "
                     "benchmarks go on (at a deadline every stack still goes to the log)")

    def arm(self, benchmark: str, deadline: Deadline) -> None:
        if self._stopping.is_set():
            # This rank is ending the pass (``_stop``): no benchmark may start meanwhile, or
            # ranks released from a hang (a stopped rank continued) run it while rank 0
            # writes the results, and it lands in the hung pass's file too.
            threading.Event().wait()
        armed = Armed(benchmark, deadline.seconds, deadline.expected_s, time.monotonic(),
                      deadline.measured_with, deadline.remaining)
        self._where(benchmark)
        # At the deadline, from a C thread: the stacks of a rank whose Python threads cannot
        # run (the main thread holds the GIL). No exit: the rank that waits for it ends the
        # pass (its watchdog), and the launcher ends what is left (suite/launch.py).
        faulthandler.dump_traceback_later(deadline.seconds, exit=False,
                                          file=self._stacks_file or sys.stderr)
        with self._changed:
            self._armed = armed
            self._changed.notify()

    def failed(self, error: str) -> None:
        """The armed benchmark raised on this rank: ``error`` goes into its record if the pass
        ends at it."""
        self._failure = error

    def end_pass(self) -> None:
        """Stop the pass now at the armed benchmark, as at its deadline: this rank's benchmark
        raised and the other ranks did not finish it (they wait inside a collective this rank
        will never join). Called from the main thread, which waits here for the exit; nothing
        happens where no benchmark is armed (no deadline: nothing would stop it)."""
        with self._changed:
            if self._armed is None:
                return
            self._ending.set()
            self._changed.notify()
        threading.Event().wait()

    def _where(self, position: str) -> None:
        """The stacks file's first line: where the rank is (a dump goes below it)."""
        if self._stacks_file is not None:
            try:
                self._stacks_file.seek(0)
                self._stacks_file.truncate()
                self._stacks_file.write(f"{hangs.STACKS_HEADER}{position}\n".encode())
            except OSError as error:
                self._cannot_write(hangs.stacks_path(self.base, self.rank), error)

    def finish(self) -> None:
        """The rank's session is over: no deadline left, and ``hangs.done_path`` says so to
        the launcher, for which a rank that then waits to exit (MPI's finalize waits for
        every rank) has ended its part; a rank that has not is stuck (suite/pass_watch.py)."""
        self.disarm()
        if self.base is not None:
            path = hangs.done_path(self.base, self.rank)
            try:
                path.touch()  # empty: a full disk has room for it where it has an inode
            except OSError as error:
                self._cannot_write(path, error)

    def close(self) -> None:
        """End of the process: no timer left, no stacks file beside the results (the
        launcher reads a dump it asks for at once, suite/pass_watch.py)."""
        self.disarm()
        if self._stacks_file is not None:
            faulthandler.unregister(hangs.STACKS_SIGNAL)
            self._stacks_file.close(), self._asked_file.close()
            self._stacks_file = None
            hangs.stacks_path(self.base, self.rank).unlink(missing_ok=True)
            hangs.asked_path(self.base, self.rank).unlink(missing_ok=True)

    def disarm(self) -> None:
        faulthandler.cancel_dump_traceback_later()
        if self._armed is not None:
            self._where(f"{hangs.AFTER}{self._armed.benchmark}")
        with self._changed:
            self._armed, self._failure = None, None
            self._changed.notify()

    def _watch(self) -> None:
        while True:
            with self._changed:
                while self._armed is None:
                    self._changed.wait()
                armed = self._armed
                self._changed.wait(timeout=max(0.0, min(POLL_S, armed.due - time.monotonic())))
                if self._armed is not armed:
                    continue
            if (time.monotonic() >= armed.due or self._ending.is_set()
                    or self._other_rank_stopped()):
                self._stop(armed)

    def _other_rank_stopped(self) -> bool:
        return self.base is not None and any(
            record["rank"] != self.rank for record in hangs.read_records(self.base, self.started))

    def _stop(self, armed: Armed) -> None:
        self._stopping.set()
        elapsed = time.monotonic() - armed.started
        # This rank's Python runs, so its record will answer: its C-level dump must not answer
        # for it meanwhile. The other ranks take a dump two polls old as all a rank can say
        # (``_wait_for_ranks``), then exit, and torchrun kills this rank: a record whose write
        # took longer (an fsync on a busy disk) was lost, and the rank named as not answering.
        faulthandler.cancel_dump_traceback_later()
        if self.base is not None:
            hangs.stacks_path(self.base, self.rank).unlink(missing_ok=True)
        if self.uncapture is not None:
            self.uncapture()
        if self._ending.is_set():
            why = (f"failed here after {elapsed:.0f} s ({self._failure}) and the other ranks "
                   f"did not finish it within {FAILED_WAIT_S:.0f} s")
        else:
            why = (f"has run {elapsed:.0f} s; its deadline is {armed.deadline_s:.0f} s "
                   f"(expected {armed.expected_s:.1f} s)")
        print(f"\n[deadline] rank {self.rank}: {armed.benchmark} {why}. Python stacks of every "
              "thread:", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        frames = main_thread_frames()
        record = {RANK_HANG.benchmark: armed.benchmark, RANK_HANG.rank: self.rank,
                  RANK_HANG.world_size: self.world_size, RANK_HANG.deadline_s: armed.deadline_s,
                  RANK_HANG.expected_s: armed.expected_s, RANK_HANG.elapsed_s: round(elapsed, 1),
                  **where(frames), RANK_HANG.measured_with: list(armed.measured_with),
                  RANK_HANG.remaining: armed.remaining, RANK_HANG.stacks: all_stacks(),
                  # A rank whose benchmark raised is the one the others wait for.
                  RANK_HANG.waiting: waiting_for_peers(frames) and self._failure is None,
                  **({RANK_HANG.failed: self._failure} if self._failure is not None else {})}
        if self.base is not None:
            try:
                hangs.write_record(self.base, record)
            except OSError as error:  # the stacks are in the log above all the same
                print(f"[deadline] rank {self.rank}: cannot write its hang record beside "
                      f"{self.base} nor in the temporary folder: {error}", file=sys.stderr,
                      flush=True)
            self.close()  # the record holds the stacks: no stacks file
            records = self._wait_for_ranks()
            if self.rank == 0:
                if self.on_stop is not None:
                    self.on_stop(records)
                self._say_stopped(record)
            else:
                # torchrun kills every rank once one exits: rank 0 must have written the
                # results first (on a busy disk that took seconds, and the pass's file was lost).
                self._wait_for_rank_0()
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(HANG_EXIT)

    def _say_stopped(self, record: dict) -> None:
        """Rank 0's record again, saying it has written what it writes at a hang."""
        with contextlib.suppress(OSError):  # the other ranks wait out GRACE_S instead
            hangs.write_record(self.base, {**record, STOPPED: True})

    def _wait_for_rank_0(self) -> None:
        """Until rank 0's record says it has stopped, up to GRACE_S; at once where rank 0 left
        no record (its Python could not run: nothing more will come from it)."""
        until = time.monotonic() + GRACE_S
        while time.monotonic() < until:
            first = next((r for r in hangs.read_records(self.base, self.started)
                          if r["rank"] == 0), None)
            if first is None or first.get(STOPPED):
                return
            time.sleep(0.2)

    def _wait_for_ranks(self) -> list[dict]:
        """Every rank's record, or up to GRACE_S for them; a rank whose C-level dump has been
        there for two polls (its Python threads cannot run, or its record would have replaced
        it) has answered all it can."""
        until = time.monotonic() + GRACE_S
        while True:
            records = hangs.read_records(self.base, self.started)
            answered = {r["rank"] for r in records} | set(hangs.backstop_dumps(
                self.base, older_than_s=2 * POLL_S))
            if len(answered) >= self.world_size or time.monotonic() > until:
                return records
            time.sleep(0.2)
