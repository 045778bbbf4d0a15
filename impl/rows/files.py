"""Read and validate result files: pytest-benchmark JSON plus the suite's additions.

One reader for the report, the gate and the cost model, so all reject the same broken files
with the same message. A result file is what ``pytest --benchmark-json=PATH
--benchmark-save-data`` writes (each benchmark's ``stats.data`` holds its raw per-round times
in seconds), plus:

- top-level ``suite``: the run's record, declared in impl/rows/suite_record.py (schema, label,
  partial, command, profile, created, the passes and their hangs)
- ``machine_info["overlap"]``: the environment fingerprint (impl/fingerprint.py)
- each benchmark's ``extra_info``: a row of a kind declared in impl/rows/kinds.py, checked
  against its declaration (rows of kinds this version does not declare are kept unchecked)

Files without ``suite`` are accepted as plain pytest-benchmark output; their label is then
``machine_info["overlap"]["machine_label"]`` or, without it, the name of their folder.

    from impl.rows.files import find_result_files, load_results
    for path in find_result_files("results/cpu-2core"):
        results = load_results(path)  # raises ResultsError naming the file and the problem
        print(results.label, len(results.benchmarks))

Which run of a machine the report chooses is reports/results.py's.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from impl.rows.json_values import first_bad_value, parse_int, with_benchmark_name
from impl.rows.kinds import RANGED_FIELDS, ROW_KINDS
from impl.rows.shapes import TEXT, is_number, shape_error
from impl.rows.suite_record import SUITE_SHAPE

SCHEMAS = (1,)  # values of suite.schema this loader reads
GZIP_MAGIC = b"\x1f\x8b"  # a gzip file's first bytes: a compressed run is refused by name
BASELINES_DIR = "baselines"  # results/baselines/<label>.json: the gate's references, not runs
PREDICTIONS_DIR = "predictions"  # results/predictions/: the cost model's frozen predictions
# Folders of a results tree that hold no runs: the gate's references, the frozen predictions,
# and the consoles and side outputs (the gate's --json, trial blocks) kept beside a machine's runs.
NOT_RUN_FOLDERS = (BASELINES_DIR, PREDICTIONS_DIR, "logs")
# Files that live beside the results but are not pytest-benchmark output: the gate's trials
# (reports/gate/trials.py), gate-trials.json and gate-trials-<what differs>.json.
SIDE_FILE_PREFIXES = ("gate-trials",)
# Round-time statistics (seconds): a round takes time, so these are > 0; spreads may be 0.
POSITIVE_STATS = ("min", "max", "mean", "median", "q1", "q3")
SPREAD_STATS = ("stddev", "iqr")
# What a measured time can be: from 1 ns (below any timer's resolution) to 1e6 s (11.6 days,
# beyond any run). Outside it a number is no measurement, and the report's figures (log axes,
# error bars of differences) and the gate's ratios overflow or underflow on it.
ROUND_S_RANGE = (1e-9, 1e6)
MS_LIMIT = ROUND_S_RANGE[1] * 1e3  # any extra_info time in ms, at any depth: |t| <= this
# Each number of extra_info is also held to the range of the field its nearest key names
# (impl/rows/kinds.py's RANGED_FIELDS), for every kind of row and at any depth, so neither the
# report nor the gate divides by a zero step, world size or micro-batch count.
# Lists of per-round values (round_ms, candidate_round_ms, step_ms_rounds, an estimate's
# rounds): a figure made from none has no median.
ROUND_LISTS = ("round_ms", "rounds")


# The environment fingerprint the report prints (impl/fingerprint.py).
FINGERPRINT_SHAPE = {"gpu_names?": [TEXT], "gpu_uuids?": [TEXT], "machine_label?": "str?",
                     "driver?": "str?", "cuda?": "str?", "nccl?": "str?", "torch?": "str?",
                     "mpi?": "str?", "cpu_model?": "str?", "cpu_cores?": "int?",
                     "gpu_topology?": "str?", "nccl_env?": {"*": TEXT}, "backend?": "str?",
                     "world_size?": "int?", "profile?": "str?", "git_commit?": "str?",
                     "git_dirty?": "bool?",
                     "gpu_limits?": [{"uuid?": "str?", "power_limit_w?": "num?",
                                      "max_sm_clock_mhz?": "num?", "max_mem_clock_mhz?": "num?",
                                      "sm_clock_mhz?": "num?", "mem_clock_mhz?": "num?"}, "?"]}


class ResultsError(Exception):
    """A result file that cannot be used; the message starts with its path."""

    def __init__(self, path: str | Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


@dataclass(frozen=True)
class ResultsFile:
    """One validated result file.

    ``data`` is the whole JSON object; ``benchmarks`` is ``data["benchmarks"]``;
    ``machine_info`` is ``data["machine_info"]``; ``partial`` is True for a run that stopped
    before its end; ``created`` is when the run was made (None when the file does not say).
    """

    path: Path
    data: dict
    label: str
    machine_info: dict
    benchmarks: list[dict]
    partial: bool
    created: datetime | None

    @property
    def fingerprint(self) -> dict:
        """``machine_info["overlap"]``, or an empty dict for plain pytest-benchmark output."""
        return self.machine_info.get("overlap") or {}

    @property
    def sort_time(self) -> datetime:
        """``created`` or, without it, the file's modification time (for "newest" choices)."""
        if self.created is not None:
            return self.created
        return datetime.fromtimestamp(self.path.stat().st_mtime, tz=timezone.utc)


def round_times(benchmark: dict) -> list[float] | None:
    """The raw per-round times in seconds (``stats.data``), or None when they were not saved."""
    return benchmark["stats"].get("data")


def _check_benchmark(path: Path, index: int, benchmark: object) -> None:
    if not isinstance(benchmark, dict):
        raise ResultsError(path, f"benchmarks[{index}] is a {type(benchmark).__name__}, "
                                 "expected an object")
    for key in ("name", "fullname"):
        if not isinstance(benchmark.get(key), str):
            raise ResultsError(path, f"benchmarks[{index}] has no {key!r} string")
    name = benchmark["fullname"]
    stats = benchmark.get("stats")
    if not isinstance(stats, dict):
        raise ResultsError(path, f"benchmark {name!r} has no 'stats' object")
    if not is_number(stats.get("median")):
        raise ResultsError(path, f"benchmark {name!r} has no numeric stats.median "
                                 f"(got {stats.get('median')!r})")
    low, high = ROUND_S_RANGE
    for key in (*POSITIVE_STATS, *SPREAD_STATS):
        value, positive = stats.get(key), key in POSITIVE_STATS
        # stddev is legitimately absent (null) with one round; anything present must be sane.
        if value is not None and (not is_number(value) or value < 0 or (positive and value == 0)):
            raise ResultsError(path, f"benchmark {name!r} has stats.{key} = {value!r}; "
                                     f"expected a finite number {'> 0' if positive else '>= 0'}")
        if value is not None and (value > high or (positive and value < low)):
            raise ResultsError(path, f"benchmark {name!r} has stats.{key} = {value!r}; "
                                     f"expected a round time from {low:g} to {high:g} s")
    data = stats.get("data")
    if data is not None:
        if not isinstance(data, list) or not data:
            raise ResultsError(path, f"benchmark {name!r} has stats.data = {data!r}; "
                                     "expected a non-empty list of round times")
        for round_index, value in enumerate(data):
            if type(value) is float and low <= value <= high:  # the common case, first
                continue
            if not is_number(value) or not low <= value <= high:
                raise ResultsError(path, f"benchmark {name!r} has stats.data[{round_index}] = "
                                         f"{value!r}; round times must be from {low:g} to "
                                         f"{high:g} s")
    info = benchmark.get("extra_info")
    if not isinstance(info, dict):
        raise ResultsError(path, f"benchmark {name!r} has no 'extra_info' object")
    if found := _extra_info_problem(info):
        where, value, problem = found
        raise ResultsError(path, f"benchmark {name!r} has extra_info.{where} = {value!r:.80}; "
                                 f"{problem}")


def _extra_info_problem(info: dict) -> tuple[str, object, str] | None:
    """(place, value, problem) of the first value in ``info`` that no measurement has: each
    number is judged by its nearest key (``_field_problem``), and as a time in ms when any
    key above it ends in "_ms"; a per-round list (ROUND_LISTS) must not be empty."""
    todo: list[tuple[str, object, str, bool]] = [
        (key, value, key, key.endswith("_ms")) for key, value in reversed(info.items())]
    while todo:
        where, value, key, in_ms = todo.pop()
        if isinstance(value, dict):
            todo += [(f"{where}.{k}", v, k, in_ms or k.endswith("_ms"))
                     for k, v in reversed(value.items())]
        elif isinstance(value, list):
            if not value and key.endswith(ROUND_LISTS):
                return where, value, "expected a non-empty list of per-round values"
            todo += [(f"{where}[{i}]", v, key, in_ms) for i, v in reversed(list(enumerate(value)))]
        elif is_number(value) and (problem := _field_problem(key, value, in_ms)):
            return where, value, problem
    return None


def _field_problem(key: str, value: float, in_ms: bool = False) -> str | None:
    """Why ``value`` cannot be extra_info's ``key`` (its field's range, RANGED_FIELDS), or
    None; ``in_ms``: it is a time in milliseconds (its key or one above ends in "_ms")."""
    field = RANGED_FIELDS.get(key)
    if field and (problem := field.range_problem(value)):
        return problem
    if (in_ms or key.endswith("_ms")) and abs(value) > MS_LIMIT:
        return f"expected a time of at most {MS_LIMIT:g} ms"
    if (field and field.range == "positive" and key.endswith("_ms")
            and value < ROUND_S_RANGE[0] * 1e3):
        return f"expected a time of at least {ROUND_S_RANGE[0] * 1e3:g} ms"
    return None


def _parse_time(path: Path, field: str, value: object) -> datetime:
    if not isinstance(value, str):
        raise ResultsError(path, f"{field} = {value!r}; expected an ISO 8601 time string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ResultsError(path, f"{field} = {value!r}; expected an ISO 8601 time string"
                           ) from None
    # Naive times are taken as UTC so that every created time compares with every other.
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _is_gzip(path: Path) -> bool:
    """Whether the file starts with gzip's magic bytes (1f 8b): a ``.json.gz`` of a run."""
    with path.open("rb") as head:
        return head.read(2) == GZIP_MAGIC


def _gunzip(path: Path) -> str:
    """The command that decompresses ``path`` beside it (gunzip wants a ``.gz`` name)."""
    if path.suffix == ".gz":
        return f"gunzip {path}"
    return f"gunzip -c {path} > {path.with_name(path.stem + '-unzipped.json')}"


def load_results(path: str | Path) -> ResultsFile:
    """Read and validate one result file; every problem raises ResultsError naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsError(path, "no such file") from None
    except IsADirectoryError:
        raise ResultsError(path, "is a folder, expected a result file") from None
    except UnicodeDecodeError as error:
        if _is_gzip(path):
            raise ResultsError(path, f"gzip-compressed; decompress it first ({_gunzip(path)})"
                               ) from None
        raise ResultsError(path, f"cannot read: {error}") from None
    except OSError as error:
        raise ResultsError(path, f"cannot read: {error}") from None
    try:
        data = json.loads(text, parse_int=parse_int)
    except json.JSONDecodeError as error:
        raise ResultsError(path, f"not valid JSON (truncated or corrupt?): {error.msg} at line "
                                 f"{error.lineno} column {error.colno}") from None
    except RecursionError:
        raise ResultsError(path, "nested too deeply to be a result file (more than "
                                 f"{sys.getrecursionlimit()} levels)") from None
    if problem := first_bad_value(data):
        raise ResultsError(path, with_benchmark_name(data, problem))
    if (not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list)
            or not isinstance(data.get("machine_info"), dict)):
        raise ResultsError(path, "not a pytest-benchmark results file (expected a JSON object "
                                 "with a 'benchmarks' list and a 'machine_info' object)")
    if not data["benchmarks"]:
        raise ResultsError(path, "benchmarks = []; a results file holds one or more benchmarks")
    for index, benchmark in enumerate(data["benchmarks"]):
        _check_benchmark(path, index, benchmark)
    machine_info = data["machine_info"]
    overlap = machine_info.get("overlap")
    if overlap is not None and not isinstance(overlap, dict):
        raise ResultsError(path, f"machine_info.overlap is a {type(overlap).__name__}, "
                                 "expected an object")
    world = (overlap or {}).get("world_size")
    if is_number(world) and (problem := _field_problem("world_size", world)):
        raise ResultsError(path, f"machine_info.overlap.world_size = {world!r}; {problem}")

    suite = data.get("suite")
    created = None
    if suite is None:
        label = (overlap or {}).get("machine_label") or path.resolve().parent.name
        partial = False
    else:
        if not isinstance(suite, dict):
            raise ResultsError(path, f"'suite' is a {type(suite).__name__}, expected an object")
        if suite.get("schema") not in SCHEMAS:
            raise ResultsError(path, f"suite.schema = {suite.get('schema')!r}; this loader "
                                     f"reads schema {', '.join(map(str, SCHEMAS))}")
        label = suite.get("label")
        if not isinstance(label, str) or not label:
            raise ResultsError(path, f"suite.label = {label!r}; expected a machine label string")
        partial = suite.get("partial", False)
        if not isinstance(partial, bool):
            raise ResultsError(path, f"suite.partial = {partial!r}; expected true or false")
        if "created" in suite:
            created = _parse_time(path, "suite.created", suite["created"])
        if error := shape_error(suite, SUITE_SHAPE, "suite"):
            raise ResultsError(path, error)
    if created is None and "datetime" in data:  # pytest-benchmark's own time stamp of the run
        created = _parse_time(path, "datetime", data["datetime"])
    if error := shape_error(overlap or {}, FINGERPRINT_SHAPE, "machine_info.overlap"):
        raise ResultsError(path, error)
    for benchmark in data["benchmarks"]:
        info = benchmark["extra_info"]
        kind = ROW_KINDS.get(info.get("kind"))
        if kind and (problem := kind.check_read(info)):
            raise ResultsError(path, f"benchmark {benchmark['fullname']!r} ({kind.name}) "
                                     f"{problem}")
    return ResultsFile(path, data, label, machine_info, data["benchmarks"], partial, created)


def _is_result_name(path: Path) -> bool:
    return (path.suffix == ".json" and ".tmp" not in path.suffixes
            and not path.name.startswith(SIDE_FILE_PREFIXES))


def find_result_files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """Result files named by ``paths``: files as given, folders searched recursively.

    In folders, ``*.json`` files are taken except temporary files (``*.tmp``), side files
    (SIDE_FILE_PREFIXES) and anything under a NOT_RUN_FOLDERS folder; a path that does not exist
    raises ResultsError. The list is sorted and has no duplicates.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: set[Path] = set()
    for given in map(Path, paths):
        if given.is_file():
            found.add(given)
        elif given.is_dir():
            for candidate in given.rglob("*.json"):
                relative = candidate.relative_to(given)
                if (candidate.is_file() and _is_result_name(candidate)
                        and not set(NOT_RUN_FOLDERS) & set(relative.parts[:-1])):
                    found.add(candidate)
        else:
            raise ResultsError(given, "no such file or folder")
    return sorted(found)


def newest(files: Iterable[ResultsFile]) -> ResultsFile:
    """The most recently created of ``files`` (ties broken by file name)."""
    return max(files, key=lambda f: (f.sort_time, f.path.name))


