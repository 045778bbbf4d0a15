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
from tests.committed import RESULTS, make_copy

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


def test_an_attempt_before_the_run_that_measured_the_study_is_history(tmp_path):
    """On 4 H200 the run at 5e4d7f8 hung before any TP benchmark (its console log, 17:07 on
    27 Nov); the run at 59d9cf5 measured TP there the next morning. Page 1 then gives that
    result without calling the study unfinished; without it, the attempt is named."""
    hung, measured = "20261127T1707-default-run-hung.log", "20261128T055146Z-m_louupf.json"
    folder = make_copy(tmp_path, [f"results/h200x4/logs/{hung}",
                                  f"results/h200x4/{measured}"]) / "results" / "h200x4"
    found = archive.Archive(logs=archive.read_logs([folder]))
    (before,) = studies.attempts(found, "bench_tp", ("test_tp",))
    assert before.startswith("on h200x4 the run ended without a results file during the "
                             "overlap benchmark mlp_8192x12_bf16-compute-only-K20-w4-nvlink")
    run = loading.describe_run(0, load_results(folder / measured))
    assert studies.attempts(found, "bench_tp", ("test_tp",), {"h200x4": run}) == []


def test_a_hang_inside_the_run_that_measured_the_study_stays_named(tmp_path):
    path = hung_run(tmp_path)
    found = archive.Archive(files=[load_results(path)])
    run = loading.describe_run(0, load_results(path))
    assert studies.attempts(found, "bench_tp", ("test_tp",), {"h200x2": run}) == [
        f"on h200x2 {TP_TEST} hung on rank 1 (deadline 60 s; pass torchrun nvlink) "
        "(appendix on runs)"]
