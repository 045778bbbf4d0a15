"""The report names what hung: the results file's ``suite.hangs`` (which benchmark, on which
rank) on page 1's study line and in the appendix's runs."""

from __future__ import annotations

import json
from pathlib import Path

from reports import archive, loading
from reports.results import load_results
from reports.sections import appendix, studies
from reports.sections.hangs import hang_text
from reports.view import View
from tests.committed import RESULTS

TP_RUN = RESULTS / "h200x2" / "20261123T100132Z.json"
TP_TEST = "suite/bench_tp.py::test_tp[tp2-overlapped-nvlink]"
HANG = {"pass": "torchrun nvlink", "benchmark": TP_TEST, "deadline_s": 60.0,
        "expected_s": 12.0, "measured_with": [], "remaining": 3, "stuck": [1],
        "ranks": {"0": {"frame": "impl/dist.py:9 in barrier", "innermost": "x"}}}


def hung_run(folder: Path) -> Path:
    """Made up: the 2x H200 TP run as if one of its TP benchmarks had hung on rank 1."""
    document = json.loads(TP_RUN.read_text())
    document["suite"]["hangs"] = [HANG]
    path = folder / "h200x2" / "20261123T120000Z.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(document))
    return path


def test_a_hang_is_one_line_naming_the_benchmark_and_the_rank():
    assert hang_text(HANG) == (f"{TP_TEST} hung on rank 1 (deadline 60 s; pass torchrun "
                               "nvlink)")
    stall = {"benchmark": f"after {TP_TEST}", "stuck": [1, 2], "deadline_s": None,
             "stalled": "rank(s) 0 ended 15 s ago and rank 1 (pid 7, stopped) did not"}
    assert hang_text(stall) == (f"stalled after {TP_TEST} on ranks 1, 2 (the launcher ended "
                                "the pass: rank(s) 0 ended 15 s ago and rank 1 (pid 7, "
                                "stopped) did not)")


def test_the_study_line_names_the_hang_and_its_rank(tmp_path):
    path = hung_run(tmp_path)
    found = archive.Archive(files=[load_results(path)])
    assert studies.attempts(found, "bench_tp", ("test_tp",)) == [
        f"on h200x2 {TP_TEST} hung on rank 1 (deadline 60 s; pass torchrun nvlink) "
        "(appendix on runs)"]
    assert studies.attempts(found, "bench_pipeline", ("test_pipeline",)) == []


def test_the_appendix_lists_the_runs_hangs(tmp_path):
    path = hung_run(tmp_path)
    run = loading.describe_run(0, load_results(path))
    (entry,) = appendix.section_runs(View.of([], [run]), [])["runs"]
    assert entry["hangs"] == [hang_text(HANG)]
