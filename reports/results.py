"""Which runs of each machine the report and the gate use (the files themselves are read
and checked by impl/rows/files.py).

``python -m reports.results [PATH ...]`` lists result files (label, created, benchmarks);
``--newest-label`` prints only the label of the most recently created one (CI uses it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from impl.rows.files import (
    NOT_RUN_FOLDERS,
    ResultsError,
    ResultsFile,
    find_result_files,
    load_results,
    newest,
)
from impl.rows.gate_records import MACHINE
from impl.rows.kinds import STEP

MODE_RANK = {"quick": 0, "default": 1, "full": 2}  # more rounds and a larger grid rank higher
OVERLAP_KINDS = ("step", "comparison")


def _profile(result: ResultsFile) -> str:
    return str(result.data.get("suite", {}).get("profile")
               or result.fingerprint.get(MACHINE.profile))


def is_interleaved(result: ResultsFile) -> bool:
    """A run whose overlap cells were measured interleaved (it has comparison rows)."""
    return any(b["extra_info"].get("kind") == "comparison" for b in result.benchmarks)


def strength(result: ResultsFile) -> tuple:
    """How much a run is worth as the source of a machine's answer, for ``max``: interleaved
    before older runs, then the most thorough mode, complete before partial, then newest."""
    mode = result.data.get("suite", {}).get("mode")
    return (is_interleaved(result), MODE_RANK.get(mode, -1), not result.partial,
            result.sort_time, result.path.name)


def committed_files(folder: Path) -> set[Path]:
    """The files git tracks under ``folder``: the repository's reference runs. Outside a git
    checkout, none: every run there is the user's own."""
    listed = subprocess.run(["git", "-C", str(folder), "ls-files", "-z", "."],
                            capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        return set()
    return {(folder / name).resolve() for name in listed.stdout.split("\0") if name}


def _measured(result: ResultsFile) -> tuple[set[tuple], set[str]]:
    """What a run measured: its overlap workloads (workload × world size) and the other kinds
    of rows it holds (a study such as tensor parallelism, or the GEMM ladder)."""
    infos = [b["extra_info"] for b in result.benchmarks]
    # step and comparison rows declare the workload and the world size alike
    workloads = {(i.get(STEP.names.workload), i.get(STEP.names.world_size)) for i in infos
                 if i.get("kind") in OVERLAP_KINDS}
    return workloads, {str(i.get("kind")) for i in infos if i.get("kind") not in OVERLAP_KINDS}


def newest_per_machine(results_dir: str | Path = "results") -> list[Path]:
    """The strongest results of each machine-label folder of ``results_dir``, per profile,
    the user's own (uncommitted) runs before the repository's.

    Folders are ``results/<label>/``; those holding no runs (NOT_RUN_FOLDERS: the gate's
    baselines, the cost model's frozen predictions) are skipped. Each interconnect
    profile is a run of its own (suite/run.py), so files are chosen per profile: first the
    strongest (``strength``: interleaved, most thorough mode, complete, newest), so a quick
    run made on a laptop never displaces a thorough GPU run and an old-format run never
    displaces an interleaved one; then, strongest first, every other file that measured
    overlap workloads (workload × world size) or kinds of rows (a study's, such as a
    tensor-parallel run made on its own) none of the chosen files did, such as the course
    study's layer on its own kernels, so that no workload or study is lost to a file that
    did not measure it. A file sharing an overlap workload with a chosen one is left out: its
    rows would replace the stronger file's when merged. Every file looked at is validated,
    so a broken one raises ResultsError.
    """
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise ResultsError(results_dir, "no such folder")
    chosen = []
    for folder in sorted(p for p in results_dir.iterdir() if p.is_dir()):
        if folder.name in NOT_RUN_FOLDERS:
            continue
        by_profile: dict[str, list[ResultsFile]] = {}
        for path in find_result_files(folder):
            result = load_results(path)
            by_profile.setdefault(_profile(result), []).append(result)
        committed = committed_files(folder)
        for files in by_profile.values():
            # The user's own runs (not committed) first: the report answers for the run just
            # made, and the repository's runs of that machine fill in what it did not measure.
            ranked = sorted(files, key=lambda r: (r.path.resolve() not in committed,
                                                  strength(r)), reverse=True)
            picked = [ranked[0]]
            workloads, kinds = _measured(ranked[0])
            for result in ranked[1:]:
                own_workloads, own_kinds = _measured(result)
                new = own_workloads - workloads or own_kinds - kinds
                if new and not own_workloads & workloads:
                    picked.append(result)
                    workloads |= own_workloads
                    kinds |= own_kinds
            chosen += sorted(result.path for result in picked)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.results", description=(
        "List result files (label, created, benchmarks, path)."))
    parser.add_argument("paths", nargs="*", default=["results"],
                        help="files or folders (default: results)")
    parser.add_argument("--newest-label", action="store_true",
                        help="print only the label of the most recently created file")
    args = parser.parse_args(argv)
    try:
        files = [load_results(path) for path in find_result_files(args.paths)]
    except ResultsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not files:
        print(f"error: no result files in {' '.join(args.paths)}", file=sys.stderr)
        return 2
    if args.newest_label:
        print(newest(files).label)
        return 0
    for results in sorted(files, key=lambda f: (f.label, f.sort_time)):
        created = results.created.isoformat(timespec="seconds") if results.created else "-"
        flag = " (partial)" if results.partial else ""
        print(f"{results.label:<16} {created:<25} {len(results.benchmarks):>4} benchmarks  "
              f"{results.path}{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
