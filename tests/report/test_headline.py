"""The headline of page 1 (reports/sections/headline.py) on the interleaved CPU fixtures: one
row per workload's answer, its marks of provenance, the findings computed from the rows, and the
default inputs that bring a study run made on its own into the report."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from impl.rows.files import load_results
from impl.rows.merge import benchmark_rows, merge_rows
from reports import archive, cells, loading
from reports.results import newest_per_machine
from reports.sections import headline
from reports.view import View
from tests.committed import RESULTS
from tests.report.helpers import INTERLEAVED, REGIMES

ROOT = Path(__file__).parent.parent.parent
TP_RUN = RESULTS / "h200x2" / "20261123T100132Z.json"
OVERLAP_RUN = RESULTS / "h200x2" / "20261123T094012Z.json"


@pytest.fixture(scope="module")
def loaded():
    inputs = [load_results(p) for p in (INTERLEAVED, REGIMES)]
    runs = [loading.describe_run(i, r) for i, r in enumerate(inputs)]
    rows = merge_rows(row for run, r in zip(runs, inputs)
                               for row in benchmark_rows(r.label, run.index,
                                                                  r.benchmarks))
    return rows, runs


def test_one_row_per_answer_with_the_best_strategy_and_its_figures(loaded):
    rows, runs = loaded
    entries = headline.rows_of(View.of(rows, runs))
    answers = [a for a in cells.answers(rows) if not cells.is_mpi(a["cell"])]
    assert len(entries) == len(answers) == 3
    for entry in entries:
        cell = entry["cell"]
        speedups = {s: cell["strategies"][s]["vs_sequential"]["speedup"]["value"]
                    for s in cells.compared(cell)}
        assert entry["best"] == max(speedups, key=speedups.get)
        assert entry["speedup"] == cell["strategies"][entry["best"]]["vs_sequential"]["speedup"]
        if cells.other_chunking(cell, entry["best"]):
            assert entry["efficiency"] is None
            assert entry["efficiency_note"].startswith("DDP made fewer buckets than K")
    table = headline.table(entries)
    assert [row[0].text for row in table.rows] == ["1", "2", "3"]
    # The machine and the run in words; the file is the appendix's to name.
    assert {row[1].text for row in table.rows} == {"CPU (2 cores), gloo over TCP, 2 ranks"}
    assert [row[-1].text for row in table.rows] == ["default run, 337753e, 2026-11-23 07:59",
                                                    "default run, 337753e, 2026-11-23 07:53",
                                                    "default run, 337753e, 2026-11-23 07:53"]
    # One footnote for every DDP that bucketed otherwise, whatever its bucket count.
    assert sum(text.startswith("DDP made fewer buckets") for _, text in table.notes) <= 1


def test_provenance_marks_a_partial_run_a_dirty_tree_and_an_unknown_commit(loaded):
    _, runs = loaded
    run = runs[0]  # commit 337753e, a dirty tree
    commit = run.fingerprint["git_commit"]
    marks = headline.provenance(run, "chunked", archive.Archive())
    assert f"made from a tree whose tracked files differed from {commit[:7]} (dirty)" in marks
    changed = subprocess.run(["git", "-C", str(ROOT), "rev-list", "--count", f"{commit}..HEAD",
                              "--", "impl/strategies/chunked.py"], capture_output=True,
                             text=True, check=False)
    older = [m for m in marks if m.startswith("older than this checkout's code")]
    if changed.returncode == 0 and int(changed.stdout) > 0:
        assert older == [f"older than this checkout's code: {int(changed.stdout)} change(s) "
                         f"to chunked's code since {commit[:7]}"]
    partial = replace(run, partial=True, failed_passes=("mpirun",))
    assert headline.provenance(partial, "chunked", archive.Archive())[0] == (
        "from a partial run (mpirun did not finish; the appendix on runs has its note)")
    unknown = replace(run, fingerprint={**run.fingerprint, "git_commit": "0" * 40,
                                        "git_dirty": False})
    assert headline.provenance(unknown, "chunked", archive.Archive()) == [
        "commit 0000000 is not in this checkout's history: the age of its code is unknown"]
    none = replace(run, fingerprint={**run.fingerprint, "git_commit": None, "git_dirty": None})
    assert headline.provenance(none, "chunked", archive.Archive()) == [
        "its run recorded no commit: the age of its code is unknown"]


def test_a_variant_is_the_code_of_its_strategy_and_the_knobs():
    assert headline.strategy_files("chunked") == ("impl/strategies/chunked.py",)
    assert headline.strategy_files("chunked+priority") == (
        "impl/strategies/chunked.py", "impl/strategy_records.py", "impl/strategies/knobs.py")
    assert headline.strategy_files("ddp-25mb") == (
        "impl/strategies/ddp.py", "impl/strategy_records.py", "impl/strategies/knobs.py")
    assert headline.strategy_files("copy-engine") == ("impl/strategies/copy_engine.py",)
    assert headline.strategy_files("no-such-strategy") == ()


def test_findings_are_computed_from_the_rows(loaded):
    rows, runs = loaded
    entries = headline.rows_of(View.of(rows, runs))
    found = headline.findings(entries)
    assert 3 <= len(found) <= headline.MAX_FINDINGS
    faster = [e for e in entries if e["cell"]["strategies"][e["best"]]["vs_sequential"][
        "verdict"] == "faster"]
    assert found[0] == (f"The best strategy is faster than sequential in {len(faster)} of "
                        f"{len(entries)} rows (the interval of the paired difference "
                        f"excluding 0).")
    bucketed = [e for e in entries if cells.other_chunking(e["cell"], e["best"])]
    assert (f"In {len(bucketed)} of {len(entries)} rows (cpu-2core) the fastest is DDP with "
            f"fewer buckets than K") in " ".join(found)
    marked = [e for e in entries if e["marks"]]
    assert f"{len(marked)} of {len(entries)} headline rows carry a provenance mark" in " ".join(
        found)
    assert not any(f.startswith("On GPUs") for f in found)  # no GPU row here


def test_default_inputs_bring_in_a_study_run_made_on_its_own(tmp_path):
    """The 2x H200 tensor-parallel run measured no overlap workload: it is read beside the
    stronger overlap run of the same machine, so that its study has its GPU result."""
    folder = tmp_path / "h200x2"
    folder.mkdir()
    for path in (TP_RUN, OVERLAP_RUN):
        shutil.copy(path, folder / path.name)
    assert newest_per_machine(tmp_path) == sorted(folder / p.name for p in (OVERLAP_RUN,
                                                                            TP_RUN))
    # A second run of the same study adds nothing new: the stronger one stays alone.
    twin = json.loads(TP_RUN.read_text())
    twin["suite"]["created"] = "2026-11-20T00:00:00+00:00"
    (folder / "older-tp.json").write_text(json.dumps(twin))
    assert folder / "older-tp.json" not in newest_per_machine(tmp_path)
