"""The gate trials' bookkeeping, and the extra-compute setting the slowed candidates use."""

from __future__ import annotations

import json
import os

import pytest

from impl.presets import preset
from impl.settings import check_environment
from reports.gate import trials as gate_trials


def row(verdict: str, outcome: str | None, ratio: float | None = None,
        block_pairs: int = 8) -> dict:
    rerun = None if outcome is None else {"outcome": outcome, "ratio": {"value": ratio},
                                          "baseline_block_s": [0.03] * block_pairs}
    return {"files_verdict": verdict, "verdict": outcome == "regressed" and "regressed"
            or "unchanged", "rerun": rerun}


def pair(kind: str, regressed: bool, files: bool, rows: list[dict], load: float) -> dict:
    return {"kind": kind, "regressed": regressed, "files_regressed": files, "rows": rows,
            "load_before": {"load_1min": load}, "load_after": {"load_1min": load + 1}}


def test_summary_counts_gate_files_and_re_run_outcomes():
    pairs = [pair("unchanged", False, True, [row("regressed", "cleared", 0.99)], 1.0),
             pair("unchanged", False, False, [row("unchanged", None)], 2.0),
             pair("slowed", True, True, [row("regressed", "regressed", 0.90)], 3.0),
             pair("slowed", False, False, [row("unchanged", "inconclusive", 0.93, 24)], 4.0)]
    summary = gate_trials.summarise(pairs)
    assert summary["unchanged"]["gate_failed"]["count"] == 0
    assert summary["unchanged"]["files_only_failed"]["count"] == 1
    assert summary["unchanged"]["re_measured"] == 1
    assert summary["slowed"]["gate_failed"] == {"count": 1, "trials": 2, "rate": 0.5,
                                                "ci95": pytest.approx([0.0126, 0.9874],
                                                                      abs=1e-4)}
    assert summary["slowed"]["rerun_outcomes"] == {"regressed": 1, "cleared": 0,
                                                   "inconclusive": 1}
    assert summary["slowed"]["rerun_block_pairs"] == {8: 1, 24: 1}
    # the median of 0.90 and 0.93
    assert summary["slowed"]["rerun_throughput_ratio_median"] == pytest.approx(0.915)
    assert summary["load_1min"] == {"min": 1.0, "median": 3.0, "max": 5.0}


def test_calibration_runs_left_in_the_workdir_are_used_again(tmp_path, monkeypatch):
    made = []

    def fake_run(target, out):
        made.append(out)
        out.write_text("{}")
        return out

    monkeypatch.setattr(gate_trials, "run_target", fake_run)
    target = gate_trials.TARGETS["cpu"]
    paths, reused = gate_trials.calibration_runs(target, 3, tmp_path)
    assert not reused and made == paths == [tmp_path / f"calibration-{i}.json" for i in range(3)]
    again, reused = gate_trials.calibration_runs(target, 3, tmp_path)
    assert reused and again == paths and len(made) == 3


def test_load_is_the_load_average_and_other_busy_processes():
    load = gate_trials.load_now()
    assert load["load_1min"] == round(os.getloadavg()[0], 2)
    assert all(p["pcpu"] >= 5 and len(p["command"]) <= 120 for p in load["busiest"])


def test_extra_compute_setting_slows_mlp_presets_only(monkeypatch):
    monkeypatch.setenv("OVERLAP_EXTRA_COMPUTE", "0.1")
    assert preset("mlp_tiny").extra_compute == 0.1
    assert not hasattr(preset("gpt_tiny"), "extra_compute")
    monkeypatch.delenv("OVERLAP_EXTRA_COMPUTE")
    assert preset("mlp_tiny").extra_compute == 0.0
    for bad in ("2", "fast", "-0.1"):
        with pytest.raises(ValueError, match=f"OVERLAP_EXTRA_COMPUTE='{bad}' is not allowed; "
                                             "use number from 0 to 1"):
            check_environment({"OVERLAP_EXTRA_COMPUTE": bad})


def test_a_resumed_run_keeps_its_pairs_and_records_each_invocations_commit(tmp_path,
                                                                            monkeypatch):
    commits = iter([("a" * 40, True), ("b" * 40, True)])
    monkeypatch.setattr(gate_trials, "git_clean_commit", lambda: next(commits))
    monkeypatch.setattr(gate_trials, "machine", lambda: {"label": "test"})
    monkeypatch.setattr(gate_trials, "measure_slowdown",
                        lambda target, extra: {"step_time_ratio": {"value": 1.1}})
    monkeypatch.setattr(gate_trials, "calibration_runs", lambda target, count, folder: ([], False))
    monkeypatch.setattr(gate_trials, "load_now", lambda: {"load_1min": 1.0})

    def fake_trial(kind, index, folder, *rest):
        record = pair(kind, kind == "slowed", kind == "slowed", [row("unchanged", None)], 1.0)
        return record | {"gate_exit": int(record["regressed"]), "seconds": 1.0}

    monkeypatch.setattr(gate_trials, "trial", fake_trial)
    out = tmp_path / "trials.json"
    assert gate_trials.main(["--pairs", "1", "--out", str(out)]) == 0
    assert gate_trials.main(["--pairs", "2", "--resume", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [p["kind"] for p in report["pairs"]] == ["unchanged", "slowed"] * 2
    assert [p["calibration"] for p in report["pairs"]] == [0, 0, 1, 1]
    assert [c["code"]["git_commit"] for c in report["calibrations"]] == ["a" * 40, "b" * 40]
    assert report["code"]["git_commit"] == "a" * 40
    assert report["summary"]["slowed"]["gate_failed"]["count"] == 2


def test_the_suite_target_gates_whole_quick_suite_files(tmp_path):
    """suite-quick runs the suite's launcher (the issue's own narrowed quick run) and, files
    only, the gate without --confirm."""
    target = gate_trials.TARGETS["suite-quick"]
    command = gate_trials.target_command(target, tmp_path / "base.json")
    assert command[1:] == ["-m", "suite.run", "--quick", "--skip-mpi", "--results-dir",
                           str(tmp_path / "base.run"), "--", "--workloads", "mlp_tiny",
                           "--chunks", "1,10"]
    files_only = gate_trials.gate_command(tmp_path / "b", tmp_path / "c", tmp_path, target, 0.0,
                                          8, None, confirm=False)
    assert "--confirm" not in files_only and files_only[:2] == [str(tmp_path / "b"),
                                                                 str(tmp_path / "c")]
    assert "--confirm" in gate_trials.gate_command(tmp_path / "b", tmp_path / "c", tmp_path,
                                                   target, 0.0, 8, None)


def test_unconfirmed_pairs_and_files_only_benchmarks_are_counted_apart():
    rows = [row("regressed", None), row("unchanged", None), row("unchanged", None)]
    pairs = [pair("unchanged", False, True, rows, 1.0) | {"unconfirmed": True},
             pair("unchanged", False, False, rows[1:], 1.0) | {"unconfirmed": False}]
    summary = gate_trials.summarise(pairs)["unchanged"]
    assert summary["gate_failed"]["count"] == 0
    assert summary["gate_unconfirmed"]["count"] == 1
    assert summary["benchmarks_files_only_regressed"] == {
        "count": 1, "trials": 5, "rate": 0.2, "ci95": pytest.approx([0.0051, 0.7164], abs=1e-4)}
    assert gate_trials.summarise(pairs)["slowed"]["gate_failed"]["trials"] == 0


def test_only_the_kinds_asked_for_run(tmp_path, monkeypatch):
    monkeypatch.setattr(gate_trials, "git_clean_commit", lambda: ("a" * 40, True))
    monkeypatch.setattr(gate_trials, "machine", lambda: {"label": "test"})
    monkeypatch.setattr(gate_trials, "measure_slowdown",
                        lambda target, extra: {"step_time_ratio": {"value": 1.1}})
    monkeypatch.setattr(gate_trials, "calibration_runs", lambda target, count, folder: ([], False))
    monkeypatch.setattr(gate_trials, "load_now", lambda: {"load_1min": 1.0})
    confirms = []

    def fake_trial(kind, index, folder, target, extra, calibration, blocks, tree, confirm):
        confirms.append(confirm)
        return pair(kind, False, True, [row("regressed", None)], 1.0) | {
            "gate_exit": 3, "unconfirmed": True, "seconds": 1.0}

    monkeypatch.setattr(gate_trials, "trial", fake_trial)
    out = tmp_path / "trials.json"
    assert gate_trials.main(["--target", "suite-quick", "--pairs", "3", "--kinds", "unchanged",
                             "--files-only", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [p["kind"] for p in report["pairs"]] == ["unchanged"] * 3 and confirms == [False] * 3
    assert report["gate"]["files_only"] is True and "--confirm" not in report["gate"]["command"]
    assert report["summary"]["unchanged"]["gate_unconfirmed"]["count"] == 3
    with pytest.raises(SystemExit):
        gate_trials.parse_args(["--kinds", "same", "--out", str(out)])
