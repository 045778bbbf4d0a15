"""The two tiers (tests/tiers.py): chosen from the recorded durations, the fast one within its
budget, and the README's line on them generated from the same data."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime

import pytest

from tests import tiers

DATA = tiers.load()


def test_the_durations_say_how_and_when_they_were_measured():
    assert DATA["runs"], "no durations recorded: tests/tiers.py says how"
    for run in DATA["runs"]:
        assert run["command"].startswith("python -m pytest ")
        assert "--record-durations tests/data/test-durations.json" in run["command"]
        assert datetime.fromisoformat(run["date"]).tzinfo is not None
        assert run["machine"].endswith("CPU machine") and len(run["load_1min"]) == 2
    assert len(DATA["tests"]) > 1000
    for nodeid, test in DATA["tests"].items():
        assert (tiers.ROOT / nodeid.split("::")[0]).is_file(), f"{nodeid}: no such file"
        assert all(test[phase] >= 0 for phase in ("setup", "call", "teardown")), nodeid
        assert set(test["paid"]) <= set(DATA["fixtures"]) and set(test["uses"]) <= set(
            DATA["fixtures"]), nodeid


def test_the_fast_tier_is_recorded_within_its_budget():
    fast, slow = tiers.tiers(DATA, DATA["marked_slow"])
    assert fast and slow
    assert tiers.fast_tier_s(DATA) <= tiers.BUDGET_S, (
        f"the fast tier's recorded time is {tiers.fast_tier_s(DATA):.0f} s, over "
        f"{tiers.BUDGET_S:g} s: lower tests/tiers.py's THRESHOLD_S or speed a test up")
    # Every test over the threshold is in the slow tier, and none of the fast ones is.
    assert all(tiers.cost_s(DATA["tests"][n], DATA["fixtures"]) <= tiers.THRESHOLD_S
               for n in fast)


def test_a_shared_fixture_sends_its_tests_to_the_slow_tier_together():
    """A module's report build (60 s) is paid by its first test's setup; each of its tests
    would pay it alone, so all three are slow; the fixture counts once in the tier's total."""
    build = "tests/test_page.py::report"
    data = {"fixtures": {build: 60.0, "::tmp_path_factory": 0.0}, "tests": {
        "tests/test_page.py::test_a": {"setup": 60.5, "call": 1.0, "teardown": 0.0,
                                       "paid": [build], "uses": [build]},
        "tests/test_page.py::test_b": {"setup": 0.0, "call": 2.0, "teardown": 0.0,
                                       "paid": [], "uses": [build]},
        "tests/test_page.py::test_c": {"setup": 0.0, "call": 0.5, "teardown": 0.0,
                                       "paid": [], "uses": [build, "::tmp_path_factory"]},
        "tests/test_unit.py::test_d": {"setup": 0.1, "call": 4.0, "teardown": 0.1,
                                       "paid": [], "uses": ["::tmp_path_factory"]}}}
    assert tiers.own_s(data["tests"]["tests/test_page.py::test_a"], data["fixtures"]) == 1.5
    assert tiers.slow_by_duration(data) == {"tests/test_page.py::test_a",
                                            "tests/test_page.py::test_b",
                                            "tests/test_page.py::test_c"}
    assert tiers.tier_total_s(data, data["tests"]) == pytest.approx(60 + 1.5 + 2 + 0.5 + 4.2)
    assert tiers.tiers(data, ["tests/test_unit.py::test_d"]) == ([], sorted(data["tests"]))


def test_collection_leaves_the_slow_tier_out_without_all():
    """The report build of tests/report/test_front_page.py is recorded far over the threshold:
    its tests are collected only with --all."""
    front = [n for n in DATA["tests"] if n.startswith("tests/report/test_front_page.py::")]
    assert front and all(n in tiers.slow_by_duration(DATA) for n in front)

    def collected(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                               "-p", "no:cacheprovider", "tests/report/test_front_page.py",
                               *args],
                              cwd=tiers.ROOT, capture_output=True, text=True, timeout=300,
                              check=False)
        return re.sub(r" in [\d.]+s$", "", done.stdout.strip().splitlines()[-1])

    assert collected() == f"no tests collected ({len(front)} deselected)"
    assert collected("--all") == f"{len(front)} tests collected"


def test_the_readme_states_the_recorded_tiers():
    readme = (tiers.ROOT / "README.md").read_text()
    assert tiers.readme_block(readme) == tiers.readme_text(DATA), "run python -m tests.tiers"
    assert "nox -s tests -- --all" in readme
