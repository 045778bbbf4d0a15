"""The report's regression section: the gate's trial rates with their binomial intervals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from reports.gate import trial_rates as regression
from reports.render import TEMPLATES
from reports.sections.regression import section_regression
from reports.view import View


def pair(kind: str, regressed: bool, files: bool, load: float) -> dict:
    return {"kind": kind, "regressed": regressed, "files_regressed": files, "rows": [],
            "load_before": {"load_1min": load}, "load_after": {"load_1min": load + 0.5}}


TRIALS = {
    "machine": {"label": "cpu-2core"}, "target": {"name": "cpu"},
    "gate": {"confirm_blocks": 6, "block_value": "fastest round"},
    "slowdown": {"extra_compute": 0.1, "cpu_time_ratio": {"value": 1.097, "low": 1.05,
                                                          "high": 1.14, "rounds": 30}},
    "pairs": ([pair("unchanged", False, i < 6, 1.0 + i / 10) for i in range(40)]
              + [pair("unchanged", True, True, 3.0)]
              + [pair("slowed", i < 39, True, 2.0) for i in range(40)]),
}


@pytest.fixture
def trials_dir(tmp_path) -> Path:
    folder = tmp_path / "results" / "cpu-2core"
    folder.mkdir(parents=True)
    (folder / "gate-trials.json").write_text(json.dumps(TRIALS))
    earlier = {**TRIALS, "pairs": TRIALS["pairs"][:3]}
    del earlier["gate"]  # trials made before the gate recorded its block value
    (folder / "gate-trials-block-median.json").write_text(json.dumps(earlier))
    (tmp_path / "results" / "h100x1").mkdir()
    (tmp_path / "results" / "h100x1" / "gate-trials.json").write_text('{"pairs": 3}')
    return tmp_path / "results"


def test_rates_carry_clopper_pearson_intervals(trials_dir):
    documents, notes = regression.load_trials(regression.find_trials(trials_dir))
    earlier, row = regression.trial_rates(documents)  # sorted by path: "-block-median" first
    assert earlier["false_alarms"] == "0/3 = 0.0% [0.0%–70.8%]"
    assert earlier["block_value"] == "median round" and earlier["blocks"] is None
    assert row["false_alarms"] == "1/41 = 2.4% [0.1%–12.9%]"
    assert row["files_false_alarms"] == "7/41 = 17.1% [7.2%–32.1%]"
    assert row["detections"] == "39/40 = 97.5% [86.8%–99.9%]"
    assert row["slowdown"] == "extra_compute 0.1: CPU time +9.7% [5.0%–14.0%]"
    assert row["load"] == "2.5 (1.0–5.4)" and row["blocks"] == 6
    assert row["block_value"] == "fastest round"
    assert notes == [f"{trials_dir / 'h100x1' / 'gate-trials.json'}: left out, not a gate "
                     "trials file of this version (no 'pairs' list)"]


def test_the_section_shows_the_rates_and_the_rules(trials_dir, monkeypatch):
    monkeypatch.setattr(regression, "RESULTS_DIR", trials_dir)
    context = section_regression(View.of([], []))
    environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=StrictUndefined)
    html = environment.get_template("sections/regression.html.j2").render(
        regression=context, s={"id": "regression", "title": "Regression"})
    assert "1/41 = 2.4% [0.1%–12.9%]" in html and "39/40 = 97.5% [86.8%–99.9%]" in html
    assert "fastest round" in html and "median round" in html
    assert "max(minimum, 1 - exp(-spread))" in html
    assert "regressed only when the interval of the loss lies entirely above" in html
    assert "not a gate trials file of this version" in html
    assert "No baseline given" in html


def test_without_trials_the_section_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(regression, "RESULTS_DIR", tmp_path)
    context = section_regression(View.of([], []))
    assert context["trials"] is None and context["trial_notes"] == []
