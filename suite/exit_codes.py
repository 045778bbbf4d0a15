"""What ``python -m suite.run`` exits with, and how a pass's own exit status maps onto it.

One table, quoted in docs/failures.md (tests/test_exit_codes.py checks the two agree):

    0        every selected benchmark ran
    1        a benchmark failed, or a pass failed or could not write all it measured
    2        bad input: an argument, a variable or a folder, refused before anything launched
    3        a hang: a benchmark passed its deadline, or the launcher ended a stalled pass;
             what finished is kept, the file is marked partial
    130      stopped by Ctrl-C (SIGINT), what finished kept
    143      stopped by SIGTERM (timeout, a CI cancel), what finished kept
    129      stopped by SIGHUP (the terminal closed), what finished kept
    128 + N  a pass was killed by signal N from outside, not by the launcher (137: SIGKILL,
             often the out-of-memory killer); what finished is kept

Where several apply, the first of: a stop signal, a hang, a pass killed from outside, a
failure.

torchrun exits 1 for any failed rank (a failed benchmark, a rank that died, a rank its
watchdog stopped with watchdog.HANG_EXIT); mpirun exits with the failing rank's own status
(HANG_EXIT = 86 for a hang); a pass the launcher ended itself, because it stalled, shows as
killed by SIGKILL. None of these is passed through: a pass with a hang, a stall or HANG_EXIT
is a hang (3), and anything else that is not success is a failure (1); only a pass killed by
a signal that the launcher did not send is 128 + N, as a shell would report it.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

from suite.watchdog import HANG_EXIT

ALL_RAN = 0
BENCHMARK_FAILED = 1
BAD_INPUT = 2
HANG = 3
SIGNALLED = 128  # + the signal's number: a stop signal to the launcher

# (status as documented, what it says): the table of the module docstring and of
# docs/failures.md.
TABLE = (
    (str(ALL_RAN), "every selected benchmark ran"),
    (str(BENCHMARK_FAILED), "a benchmark failed, or a pass failed or could not write all it "
                            "measured"),
    (str(BAD_INPUT), "bad input: an argument, a variable or a folder, refused before anything "
                     "launched"),
    (str(HANG), "a hang: a benchmark passed its deadline, or the launcher ended a stalled "
                "pass; what finished is kept, marked partial"),
    (str(SIGNALLED + signal.SIGINT), "stopped by Ctrl-C (SIGINT); what finished is kept"),
    (str(SIGNALLED + signal.SIGTERM), "stopped by SIGTERM (timeout, a CI cancel); what "
                                      "finished is kept"),
    (str(SIGNALLED + signal.SIGHUP), "stopped by SIGHUP (the terminal closed); what finished "
                                     "is kept"),
    (f"{SIGNALLED} + N", "a pass was killed by signal N from outside, not by the launcher "
                         "(137: SIGKILL, often the out-of-memory killer); what finished is "
                         "kept"),
)

PASS_OK = (0, 5)  # pytest's 5: the pass selected nothing (resumed after its last benchmark)


def pass_status(code: int | None, hung: bool) -> int:
    """One pass's status in the table: ``code`` as Popen gives it (negative: killed by that
    signal; None: never started), ``hung``: a hang was found in it or the launcher ended it
    as stalled."""
    if hung or code == HANG_EXIT:
        return HANG
    if code is None or code in PASS_OK:
        return ALL_RAN
    if code < 0:  # a signal the launcher did not send: as a shell reports it
        return SIGNALLED - code
    return BENCHMARK_FAILED


def run_status(statuses: Sequence[int], stop_signal: int | None = None,
               incomplete: bool = False) -> int:
    """The run's status from its passes' (``pass_status``): a stop signal first, then a
    hang, then a pass killed from outside, then a failure; ``incomplete``: what the passes
    measured was not all written."""
    if stop_signal is not None:
        return SIGNALLED + int(stop_signal)
    if HANG in statuses:
        return HANG
    if killed := [status for status in statuses if status > SIGNALLED]:
        return killed[0]
    if BENCHMARK_FAILED in statuses or incomplete:
        return BENCHMARK_FAILED
    return ALL_RAN
