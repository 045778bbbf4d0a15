"""Run-to-run agreement (reports/sections/reproducibility.py) on two real default CPU runs.

results/cpu-2core/20261123T104838Z-unyma_9t.json (at 87ae985) and 20261123T194800Z-_d1slign.json
(at 5c4274c) measured the same cells with different code. Trimmed to a few kinds of rows, and
in some tests made up to share one commit (said so where it is done), they check the table
figure by figure against the JSON, and that the report shows it only for clean runs of one
commit.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from impl.rows.files import load_results
from reports import build, cells
from reports.archive import Archive
from reports.format import device_words, fmt_estimate, fmt_pct
from reports.sections import reproducibility
from reports.view import View
from tests.committed import RESULTS as COMMITTED

RESULTS = COMMITTED / "cpu-2core"
RUNS = (RESULTS / "20261123T104838Z-unyma_9t.json", RESULTS / "20261123T194800Z-_d1slign.json")
KEPT = ("comparison", "hybrid_step", "tensor_parallel")


def trimmed(source: Path, target: Path, commit: str | None = None, dirty: bool = False) -> Path:
    """``source`` with only the mlp_tiny cells and the hybrid and TP rows; with ``commit``,
    made up as if the run had been made at that commit (clean unless ``dirty``)."""
    document = json.loads(source.read_text())
    document["benchmarks"] = [b for b in document["benchmarks"]
                              if b["extra_info"].get("kind") in KEPT
                              and b["extra_info"].get("workload", "mlp_tiny") == "mlp_tiny"]
    if commit:
        document["machine_info"]["overlap"].update(git_commit=commit, git_dirty=dirty)
        document["commit_info"].update(id=commit, dirty=dirty)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document))
    return target


@pytest.fixture(scope="module")
def same_commit(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("cpu-2core")
    commit = json.loads(RUNS[0].read_text())["machine_info"]["overlap"]["git_commit"]
    return [trimmed(path, folder / path.name, commit) for path in RUNS]


def test_runs_at_different_commits_are_not_compared_and_the_line_says_so(tmp_path):
    files = [load_results(trimmed(p, tmp_path / p.name)) for p in RUNS]
    assert reproducibility.repeat_groups(files) == []
    assert reproducibility.section(View.of([], [], Archive(files)))["table"] is None
    assert reproducibility.abstract_line(files, []) == (
        "No two clean runs of one machine share a commit, so no figure has been measured "
        "twice with the same code yet (cpu-2core: 2 of 2 runs clean, at 2 commit(s)).")


def test_a_dirty_run_is_not_the_code_of_its_commit(tmp_path):
    commit = "87ae98543b9c0f81f5e7f1f3b1f8a0c0c6b2d1e4"
    files = [load_results(trimmed(RUNS[0], tmp_path / "a.json", commit)),
             load_results(trimmed(RUNS[1], tmp_path / "b.json", commit, dirty=True))]
    assert reproducibility.repeat_groups(files) == []


def estimates_of(path: Path) -> dict[tuple, dict]:
    """Every figure of the trimmed run, keyed as the table keys them."""
    found = {}
    for info in (b["extra_info"] for b in json.loads(path.read_text())["benchmarks"]):
        if info["kind"] == "comparison":
            where = (f"{info['workload']}, K = {info['chunks']}, {info['world_size']} ranks, "
                     f"{info['profile']}" + (", mpirun" if cells.is_mpi(info) else ""))
            for strategy in cells.compared(info):
                found["interleaved cell", where, f"{strategy}: speedup over sequential"] = (
                    info["strategies"][strategy]["vs_sequential"]["speedup"])
        elif info["kind"] == "tensor_parallel":
            where = (f"{info['preset']}, {info['gemm_backend']}, {info['scaling']}, "
                     f"{info['world_size']} ranks")
            found["tensor parallel", where, f"{info['schedule']}: step (ms)"] = (
                info["estimates"]["step_ms"])
        else:
            where = f"{info['study']}, {info['workload']}, {device_words(info['device'])}"
            found["hybrid", where, f"{info['variant']}: step (ms)"] = info["step_ms_estimate"]
    return found


def test_every_figure_of_both_runs_with_its_intervals_overlap_and_spread(same_commit):
    files = [load_results(p) for p in same_commit]
    groups = reproducibility.repeat_groups(files)
    assert [(g["label"], len(g["runs"])) for g in groups] == [("cpu-2core", 2)]
    rows = {(r["kind"], r["where"], r["what"]): r
            for r in reproducibility.agreement_rows(groups)}
    first, second = (estimates_of(p) for p in same_commit)
    assert set(rows) == set(first) & set(second) and len(rows) > 30
    assert {kind for kind, _, _ in rows} == {"interleaved cell", "tensor parallel", "hybrid"}
    for key, row in rows.items():
        a, b = first[key], second[key]
        assert [e for _, e in row["runs"]] == [a, b]
        assert row["overlap"] == (max(a["low"], b["low"]) <= min(a["high"], b["high"]))
        values = [a["value"], b["value"]]
        assert row["spread_pct"] == pytest.approx(
            100 * (max(values) - min(values)) / statistics.median(values))
    # The two runs really differ: some intervals are apart, none of the spreads is zero.
    assert any(not r["overlap"] for r in rows.values())
    assert all(r["spread_pct"] > 0 for r in rows.values())


def test_the_report_shows_the_table_and_the_abstract_line(same_commit, tmp_path):
    written = build.build([str(p) for p in same_commit], tmp_path / "out", pdf=False)
    html = written["html"].read_text()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&#39;", "'")
    rows = reproducibility.agreement_rows(reproducibility.repeat_groups(
        [load_results(p) for p in same_commit]))
    summary = reproducibility.summary(rows)
    assert (f"Run to run: Of {summary['figures']} figures measured by two or more clean runs "
            f"at one commit (cpu-2core at {rows[0]['commit']}), {summary['overlapping']} of "
            f"{summary['decided']} have 95% intervals that overlap across the runs; the runs' "
            f"values differ by {fmt_pct(summary['median_spread'])} (median)") in text
    appendix = re.search(r'<section id="agreement">.*?</section>', html, re.S).group(0)
    assert "Appendix" in appendix and appendix.count("<tr>") == len(rows) + 1
    for row in rows:
        for name, estimate in row["runs"]:
            assert f"{name}: {fmt_estimate(estimate)}" in text
    assert 'id="tab-agreement-summary"' in html
