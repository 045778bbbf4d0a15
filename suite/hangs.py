"""Hang records: what each rank's watchdog (suite/watchdog.py) leaves beside the results file
when a benchmark passes its deadline, and what the launcher makes of them.

    <results>.hang-rank<r>.json   rank r's record: benchmark, deadline, frames, stacks
    <results>.stacks-rank<r>.txt  faulthandler's own dump, where no Python thread could run
    <results>.asked-rank<r>.txt   its dump on STACKS_SIGNAL, which the launcher reads at once
    <results>.done-rank<r>        empty: rank r's session is over (it may still wait to exit)

A record that its folder has no room for (a full disk) is written beside the pass's fallback
results file in the temporary folder instead (suite/run_files.py), and read from there too.

The results file names every hang under ``suite.hangs``, one entry per hung benchmark:

    {"benchmark": "suite/bench_pipeline.py::test_pipeline[mlp_tiny-p2-m1-gpipe]",
     "deadline_s": 60.0, "expected_s": 0.4, "measured_with": [...],
     "ranks": {"0": {"frame": "impl/pipeline/schedules.py:86 in _post_group",
                     "innermost": ".../torch/distributed/distributed_c10d.py:2875 in wait"},
               "1": {"frame": "impl/dist.py:133 in barrier", "innermost": "...",
                     "benchmark": "the id, where this rank was in another benchmark"}}}

A rank whose benchmark raised while the others went on (they then wait in a collective it
never joins) ends the pass FAILED_WAIT_S after, and its entry has ``"failed"``: the error.
A pass the launcher ended as stalled (suite/pass_watch.py) adds ``"stalled"``: why. A rank
that stalled between benchmarks has ``"benchmark": "after <id>"``.

``frame`` is the innermost frame of the rank's main thread in this suite's code, ``innermost``
its innermost frame of all (usually inside torch). ``stuck`` names the ranks the others waited
for: those that did not answer with a record (no Python thread could run: the main thread held
the GIL, or the process was stopped or gone) and those whose main thread was not waiting inside
torch.distributed; where every rank waited in a collective, all of them.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from impl.atomic import write_json_atomic
from impl.rows.gate_records import HANG, RANK_HANG
from suite.run_files import fallback_path

STACKS_HEADER = "benchmark: "
AFTER = "after "  # a stacks file's position between benchmarks: "benchmark: after <id>"
STACKS_SIGNAL = signal.SIGUSR2  # a rank dumps every thread's stack into its stacks file
NO_PYTHON_THREAD = ("unknown: no Python thread of the rank could run (its main thread held "
                    "the GIL, or it was stopped); faulthandler's dump of every thread is in the "
                    "log")


def record_path(base: str | os.PathLike, rank: int) -> Path:
    return Path(f"{base}.hang-rank{rank}.json")


def stacks_path(base: str | os.PathLike, rank: int) -> Path:
    return Path(f"{base}.stacks-rank{rank}.txt")


def asked_path(base: str | os.PathLike, rank: int) -> Path:
    """Where rank ``rank`` dumps its stacks on STACKS_SIGNAL: a file of its own, which the
    rank never rewrites (it may go on right after the dump, suite/pass_watch.py)."""
    return Path(f"{base}.asked-rank{rank}.txt")


def done_path(base: str | os.PathLike, rank: int) -> Path:
    """An empty file: rank ``rank``'s pytest session is over (rank 0's results are written).
    It stays after the rank exits, so that the launcher knows a rank that finished from one
    that did not (suite/pass_watch.py), whichever it saw last."""
    return Path(f"{base}.done-rank{rank}")


def write_record(base: str | os.PathLike, record: dict) -> Path:
    """The rank's record beside ``base``; where that folder has no room (a full disk), beside
    the pass's results in the temporary folder (run_files.fallback_path), where
    ``read_records`` finds it too. OSError only when neither could be written."""
    try:
        return write_json_atomic(record_path(base, record["rank"]), record)
    except OSError:
        return write_json_atomic(record_path(fallback_path(base), record["rank"]), record)


def record_files(base: str | os.PathLike) -> list[Path]:
    """Every rank's record file of ``base``: beside it, and beside its fallback."""
    found = []
    for beside in (Path(base), fallback_path(base)):
        found += beside.parent.glob(f"{beside.name}.hang-rank*.json")
    return found


def read_records(base: str | os.PathLike, since: float = 0.0) -> list[dict]:
    """Every rank's record of ``base`` (``record_files``), by rank; files older than
    ``since`` (an earlier run's) are ignored."""
    records = {}
    for path in record_files(base):
        try:
            if path.stat().st_mtime >= since:
                record = json.loads(path.read_text())
                records.setdefault(record["rank"], record)
        except FileNotFoundError:  # removed meanwhile (the end of its run)
            continue
    return [records[rank] for rank in sorted(records)]


def backstop_dumps(base: str | os.PathLike,
                   older_than_s: float = 0.0) -> dict[int, tuple[str, str]]:
    """{rank: (benchmark, faulthandler's dump)} of ranks that dumped their stacks (a dump
    below the header line that names the benchmark), written at least ``older_than_s`` ago."""
    base = Path(base)
    dumps = {}
    for path in base.parent.glob(f"{base.name}.stacks-rank*.txt"):
        try:
            if time.time() - path.stat().st_mtime < older_than_s:
                continue
        except FileNotFoundError:  # its rank's record replaced it meanwhile
            continue
        if (dump := read_dump(path)) is not None:
            dumps[int(path.name.rsplit("stacks-rank", 1)[1].removesuffix(".txt"))] = dump
    return dumps


def read_dump(path: Path) -> tuple[str, str] | None:
    """(benchmark, faulthandler's dump) from a rank's stacks file; None without a dump."""
    try:
        return parse_dump(path.read_text(errors="replace"))
    except FileNotFoundError:
        return None


def parse_dump(text: str) -> tuple[str, str] | None:
    """(benchmark, dump) from a stacks file's text: its header line, then the dump."""
    header, _, dump = text.partition("\n")
    if dump.strip() and header.startswith(STACKS_HEADER):
        return header.removeprefix(STACKS_HEADER), dump
    return None


def summary(records: list[dict], dumps: dict[int, tuple[str, str]]) -> dict | None:
    """The hang entry of one pass (module docstring), or None when no rank stopped.

    The hung benchmark is rank 0's (else the lowest rank's); a rank that was elsewhere has
    its own benchmark beside its frame.
    """
    found = sorted([(r[RANK_HANG.rank], r[RANK_HANG.benchmark]) for r in records]
                   + [(rank, benchmark) for rank, (benchmark, _) in dumps.items()
                      if rank not in {r[RANK_HANG.rank] for r in records}])
    if not found:
        return None
    benchmark = found[0][1]
    first = next((r for r in records if r[RANK_HANG.benchmark] == benchmark), {})
    ranks = {}
    for record in records:
        ranks[str(record[RANK_HANG.rank])] = {
            RANK_HANG.frame: record[RANK_HANG.frame],
            RANK_HANG.innermost: record[RANK_HANG.innermost],
            **({RANK_HANG.failed: record[RANK_HANG.failed]} if RANK_HANG.failed in record
               else {})}
    for rank in dumps:
        ranks.setdefault(str(rank), {RANK_HANG.frame: NO_PYTHON_THREAD,
                                     RANK_HANG.innermost: NO_PYTHON_THREAD})
    for rank, elsewhere in found:
        if elsewhere != benchmark:
            ranks[str(rank)][RANK_HANG.benchmark] = elsewhere
    return {HANG.benchmark: benchmark, HANG.deadline_s: first.get(RANK_HANG.deadline_s),
            HANG.expected_s: first.get(RANK_HANG.expected_s),
            HANG.measured_with: first.get(RANK_HANG.measured_with, []),
            HANG.remaining: first.get(RANK_HANG.remaining), HANG.stuck: stuck_ranks(records, dumps),
            HANG.ranks: dict(sorted(ranks.items()))}


def stuck_ranks(records: list[dict], dumps: dict[int, tuple[str, str]]) -> list[int]:
    """The ranks the others waited for (module docstring)."""
    if not records:  # no rank's Python thread could run
        return sorted(dumps)
    world = max((r.get(RANK_HANG.world_size, 1) for r in records), default=0)
    answered = {r[RANK_HANG.rank] for r in records}
    silent = [rank for rank in range(world) if rank not in answered]
    not_waiting = [r[RANK_HANG.rank] for r in records if not r.get(RANK_HANG.waiting, False)]
    return sorted(silent + not_waiting) or sorted(answered)


def log_text(hang: dict, records: list[dict], dumps: dict[int, tuple[str, str]]) -> str:
    """What the launcher prints: the hang in one line per rank, then every rank's stacks (the
    launch shows only rank 0's output, so the others' come from their records)."""
    if failed := failed_ranks(hang):
        lines = [f"[suite] {hang['benchmark']} raised on rank(s) {', '.join(failed)} and the "
                 "other ranks did not finish it; the pass was stopped"]
    elif hang["deadline_s"] is not None:
        lines = [f"[suite] {hang['benchmark']} passed its deadline of {hang['deadline_s']:.0f} "
                 f"s (expected {hang['expected_s']:.1f} s); the pass was stopped"]
    else:  # no rank's watchdog answered: the launcher ended the pass
        lines = [f"[suite] the pass stalled ({hang['benchmark']}) and was ended"]
    if hang.get("stalled"):
        lines.append(f"[suite] the launcher ended it: {hang['stalled']}")
    if hang.get("stuck"):
        lines.append(f"[suite] the other ranks waited for rank(s) "
                     f"{', '.join(map(str, hang['stuck']))}")
    for rank, where in hang["ranks"].items():
        at = where.get("benchmark", "")
        elsewhere = f" ({at})" if at.startswith(AFTER) else f" (in {at})" if at else ""
        error = f"; raised {where['failed']}" if "failed" in where else ""
        lines.append(f"[suite]   rank {rank}{elsewhere}: {where['frame']}{error}")
    for record in records:
        lines += [f"[suite] rank {record['rank']}, Python stacks of every thread:",
                  record["stacks"].rstrip()]
    for rank, (_, dump) in sorted(dumps.items()):
        if rank not in {r["rank"] for r in records}:
            lines += [f"[suite] rank {rank}, faulthandler's dump:", dump.rstrip()]
    return "\n".join(lines)


def outcome_line(hang: dict) -> str:
    """The launcher's closing line for one hang: a hung benchmark was left out; a stall after
    a benchmark left nothing out (it had finished)."""
    if hang["benchmark"].startswith(AFTER):
        return (f"[suite] stalled {hang['benchmark']}, ended by the launcher: every benchmark "
                "before it is kept")
    if failed := failed_ranks(hang):
        return (f"[suite] raised on rank(s) {', '.join(failed)} alone, stopped and left out: "
                f"{hang['benchmark']}")
    return f"[suite] hung, stopped at its deadline and left out: {hang['benchmark']}"


def failed_ranks(hang: dict) -> list[str]:
    """The ranks whose benchmark raised while the others went on (``failed`` in their entry)."""
    return [rank for rank, where in hang.get("ranks", {}).items() if "failed" in where]


def resume_arguments(hang: dict) -> list[str] | None:
    """pytest arguments for a fresh pass that goes on after the hung benchmark and leaves out
    what was measured together with it; None when nothing is left to run."""
    if hang.get(HANG.remaining) == 0 or hang[HANG.benchmark].startswith(AFTER):
        return None  # the last benchmark, or a stall after one: nothing known left to run
    deselect = [part for nodeid in hang[HANG.measured_with] for part in ("--deselect", nodeid)]
    return ["--resume-after", hang[HANG.benchmark], *deselect]
