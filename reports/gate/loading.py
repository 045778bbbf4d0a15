"""The gate's input: the result files of each side, which of them may be compared, and the
benchmarks and recorded spread they hold.

Files from different machines are refused unless ``force``: GPU models, driver, launched world
size, backend and interconnect profile must agree with the newest baseline file's (CPU model
and core count too when there is no GPU; pytest-benchmark's CPU fields for files without a
fingerprint), and so must the suite mode (``suite.mode``: quick, default and full runs use
other rounds and sizes). In a folder, files that differ are left out with a note; the gate
refuses only when a side has no comparable file left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from impl.rows.files import ResultsFile, find_result_files, load_results, newest
from impl.rows.gate_records import MACHINE
from reports.gate.spread import SPREAD_KEY, GroupSpread, recorded_spread

# machine_info["overlap"] fields that must agree; the CPU ones only where neither side has a GPU.
MACHINE_FIELDS = (MACHINE.gpu_names, MACHINE.driver, MACHINE.world_size, MACHINE.backend,
                  MACHINE.profile)
CPU_MACHINE_FIELDS = (MACHINE.cpu_model, MACHINE.cpu_cores)
# What pytest-benchmark itself writes, for files without the suite's fingerprint.
PLAIN_MACHINE_FIELDS = (("cpu", "brand_raw"), ("cpu", "count"), ("machine",), ("system",))


class GateError(Exception):
    """A usage or input problem: printed as one line, exit status 2."""


@dataclass
class Baseline:
    """A baseline file's benchmarks and the candidate benchmarks of the same machine (the
    report's regression section judges them by the gate's rule)."""

    path: str
    label: str
    benchmarks: dict[str, dict]
    candidate: dict[str, dict]
    notes: list[str] = field(default_factory=list)  # candidate files left out, and why


def machine_identity(machine_info: dict, plain: bool = False,
                     with_cpu: bool = False) -> dict[str, object]:
    """The fields that make two results comparable, from ``machine_info``.

    ``plain`` uses only what pytest-benchmark writes (for files without a fingerprint);
    ``with_cpu`` adds the CPU model and core count (for runs without GPUs).
    """
    overlap = machine_info.get("overlap")
    if plain or not overlap:
        identity = {}
        for keys in PLAIN_MACHINE_FIELDS:
            value: object = machine_info
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            identity[".".join(keys)] = value
        return identity
    fields = MACHINE_FIELDS + (CPU_MACHINE_FIELDS if with_cpu else ())
    return {field: overlap.get(field) for field in fields}


def machine_mismatches(baseline_info: dict, candidate_info: dict) -> list[tuple[str, object,
                                                                                 object]]:
    """(field, baseline value, candidate value) for every field that differs."""
    base_overlap, cand_overlap = baseline_info.get("overlap"), candidate_info.get("overlap")
    plain = not (base_overlap and cand_overlap)
    # The host CPU matters only where it does the work: when neither side used a GPU.
    with_cpu = not plain and not base_overlap.get("gpu_names") and not cand_overlap.get(
        "gpu_names")
    base = machine_identity(baseline_info, plain, with_cpu)
    cand = machine_identity(candidate_info, plain, with_cpu)
    return [(field, base.get(field), cand.get(field))
            for field in dict.fromkeys([*base, *cand]) if base.get(field) != cand.get(field)]


def suite_mode(results: ResultsFile) -> str | None:
    """``suite.mode`` (quick, default, full) of a suite run; None for plain pytest files."""
    suite = results.data.get("suite")
    return suite.get("mode") if isinstance(suite, dict) else None


def mode_mismatch(baseline: ResultsFile, candidate: ResultsFile) -> list[tuple[str, object,
                                                                              object]]:
    """[("suite.mode", a, b)] when both files record a different mode, else []."""
    a, b = suite_mode(baseline), suite_mode(candidate)
    return [("suite.mode", a, b)] if a is not None and b is not None and a != b else []


def load_side(path: str | Path, side: str) -> list[ResultsFile]:
    """The validated result files of one side (a file, or every result file of a folder)."""
    files = [load_results(found) for found in find_result_files(path)]
    if not files:
        raise GateError(f"{side} {path}: no result files there")
    return files


def by_fullname(files: Sequence[ResultsFile]) -> dict[str, tuple[ResultsFile, dict]]:
    """Each fullname's newest (file, benchmark)."""
    found: dict[str, tuple[ResultsFile, dict]] = {}
    for results in sorted(files, key=lambda f: (f.sort_time, f.path.name)):
        found.update((b["fullname"], (results, b)) for b in results.benchmarks)
    return found


def merge_benchmarks(files: Sequence[ResultsFile]) -> dict[str, dict]:
    """Benchmarks by fullname; where a fullname is in several files, the newest file's wins."""
    return {name: benchmark for name, (_, benchmark) in by_fullname(files).items()}


def describe_mismatches(mismatches: list[tuple[str, object, object]]) -> str:
    return "; ".join(f"{field} {a!r} vs {b!r}" for field, a, b in mismatches)


def comparable_files(baseline: list[ResultsFile], candidate: list[ResultsFile],
                     force: bool = False) -> tuple[list[ResultsFile], list[ResultsFile],
                                                   list[str]]:
    """The files of each side measured on the same machine, in the same suite mode, as the
    newest baseline file.

    Files of a folder from another machine (say, before a driver update) or of another mode
    are left out with a note; a side left with no file raises GateError naming the differing
    fields. ``force`` keeps every file, with a note for each difference.
    """
    reference = newest(baseline)
    kept: dict[str, list[ResultsFile]] = {"baseline": [], "candidate": []}
    notes, refusals = [], {}
    for side, files in (("baseline", baseline), ("candidate", candidate)):
        for results in files:
            machine = machine_mismatches(reference.machine_info, results.machine_info)
            found = machine + mode_mismatch(reference, results)
            if not found:
                kept[side].append(results)
                continue
            problem = (f"baseline {reference.path} vs {side} {results.path} differ in "
                       + describe_mismatches(found))
            if force:
                kept[side].append(results)
                notes.append(f"compared anyway (--force): {problem}")
            else:
                notes.append(f"left out {results.path}: {problem}")
                what = ("results of different machines" if machine
                        else "runs of different suite modes (other rounds and sizes)")
                refusals.setdefault(side, f"refusing to compare {what}: {problem}")
        if not kept[side]:
            raise GateError(f"{refusals[side]} (--force to compare anyway)")
    return kept["baseline"], kept["candidate"], notes


def baseline_spreads(files: Sequence[ResultsFile]) -> tuple[dict[str, GroupSpread], str | None]:
    """The spread recorded in the newest baseline file that has one, and that file's path."""
    recorded = [f for f in files if SPREAD_KEY in f.data]
    if not recorded:
        return {}, None
    source = newest(recorded)
    try:
        return recorded_spread(source.data, str(source.path)), str(source.path)
    except ValueError as error:
        raise GateError(str(error)) from None
