"""The two tiers of the tests, chosen from measured durations.

``nox -s tests`` runs the fast tier; ``nox -s tests -- --all`` (pytest ``--all``) adds the
slow tier: the report's PDF builds, launcher runs, mpirun, gate re-runs. A test is slow when
it is marked ``slow`` in its file, or when its recorded cost is over ``THRESHOLD_S``: its own
time (setup, call and teardown) plus the setup of every module-, package- or class-scoped
fixture it needs. Such a fixture counts in full for each test that uses it, so the tests of
one expensive build go to the slow tier together, and the fast tier never pays for it.

The durations are data: tests/data/test-durations.json, recorded on the 2-core CPU machine by

    python -m pytest --all --record-durations tests/data/test-durations.json \\
        [FILES]

file group by file group (each run updates the tests it ran and adds its command, date and
load to ``runs``), then with ``--collect-only`` and no files: the whole suite's collection time
and its slow marks. A test not yet recorded is fast unless it is marked slow. The README's lines
on the two tiers are generated from the data:

    python -m tests.tiers            # rewrites them; tests/test_tiers.py checks them
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import sys
import textwrap
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DURATIONS = ROOT / "tests" / "data" / "test-durations.json"
THRESHOLD_S = 5.0  # a test that costs more than this, on its own, is slow
BUDGET_S = 600.0  # the fast tier's recorded total: nox -s tests within 10 minutes
SHARED_SCOPES = ("session", "package", "module", "class")


def load(path: Path = DURATIONS) -> dict:
    """The recorded durations, or an empty record where none was made yet."""
    if not path.is_file():
        return {"runs": [], "tests": {}, "fixtures": {}}
    return json.loads(path.read_text())


def dumps(data: dict) -> str:
    """The record as JSON, one line a test (a re-recorded test changes its own line)."""
    def value(key: str) -> str:
        if key != "tests":
            return json.dumps(data[key], indent=1, sort_keys=True)
        return "{\n" + ",\n".join(f"  {json.dumps(nodeid)}: {json.dumps(test, sort_keys=True)}"
                                   for nodeid, test in sorted(data[key].items())) + "\n }"
    return "{\n" + ",\n".join(f" {json.dumps(key)}: {value(key)}" for key in sorted(data)) + "\n}\n"


def own_s(test: dict, fixtures: dict[str, float]) -> float:
    """A test's own time: its setup, call and teardown, less the shared fixtures its setup
    made (the first test of a module pays for the module's fixtures)."""
    paid = sum(fixtures.get(key, 0.0) for key in test.get("paid", ()))
    return max(0.0, test["setup"] + test["call"] + test["teardown"] - paid)


def is_session(key: str) -> bool:
    """A session fixture's key ("::tmp_path_factory": the session's node id is empty)."""
    return key.startswith("::")


def cost_s(test: dict, fixtures: dict[str, float]) -> float:
    """What running the test costs on its own: its own time and every module, package or class
    fixture it uses. Session fixtures are every run's overhead, as collection is: they count in
    a tier's total, not in a test's cost."""
    return own_s(test, fixtures) + sum(fixtures.get(key, 0.0) for key in test.get("uses", ())
                                       if not is_session(key))


def slow_by_duration(data: dict, threshold_s: float = THRESHOLD_S) -> set[str]:
    """Node ids whose recorded cost is over the threshold."""
    fixtures = data["fixtures"]
    return {nodeid for nodeid, test in data["tests"].items()
            if cost_s(test, fixtures) > threshold_s}


def tier_total_s(data: dict, nodeids: Iterable[str]) -> float:
    """The recorded time of running these tests together: their own times, and each shared
    fixture they use once."""
    fixtures, tests = data["fixtures"], data["tests"]
    chosen = [tests[n] for n in nodeids if n in tests]
    used = {key for test in chosen for key in test.get("uses", ())}
    return sum(own_s(t, fixtures) for t in chosen) + sum(fixtures.get(k, 0.0) for k in used)


def tiers(data: dict, marked_slow: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """(fast, slow) node ids of the recorded tests; ``marked_slow`` are slow by their mark."""
    slow = slow_by_duration(data) | set(marked_slow)
    return (sorted(n for n in data["tests"] if n not in slow),
            sorted(n for n in data["tests"] if n in slow))


def collect_s(data: dict) -> float:
    """The longest recorded collection: the whole suite's (``--collect-only``, imports included),
    which a run of the fast tier pays once before its first test."""
    return max((run.get("collect_s", 0.0) for run in data["runs"]), default=0.0)


def fast_tier_s(data: dict) -> float:
    """The fast tier's recorded time: collecting the suite, then its tests."""
    fast, _ = tiers(data, data.get("marked_slow", ()))
    return collect_s(data) + tier_total_s(data, fast)


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def readme_text(data: dict) -> str:
    """The README's lines on the tiers, from the recorded durations."""
    fast, slow = tiers(data, data.get("marked_slow", ()))
    runs = data["runs"]
    first, last = runs[0]["date"][:10], runs[-1]["date"][:10]
    loads = [load for run in runs for load in run["load_1min"]]
    sentence = (
        f"Recorded on {runs[0]['machine']} ({first if first == last else f'{first} to {last}'}"
        f", 1-minute load {min(loads):.1f} to {max(loads):.1f}; "
        f"tests/data/test-durations.json): the fast tier, {len(fast)} tests, in "
        f"{minutes(fast_tier_s(data))} with collection; the slow tier, {len(slow)} more, in "
        f"{minutes(tier_total_s(data, slow))}. A test is slow when it takes over "
        f"{THRESHOLD_S:g} s on its own, its module and package fixtures included "
        "(tests/tiers.py).")
    return textwrap.fill(sentence, width=95, break_on_hyphens=False) + "\n"


class Recorder:
    """``--record-durations PATH``: each test's setup, call and teardown (pytest's own
    durations, as ``--durations=0`` prints them), the setup of each shared fixture and the
    tests marked slow in their files, merged into PATH."""

    def __init__(self, path: Path, marked_slow: set[str]) -> None:
        self.path, self.marked_slow = path, marked_slow
        self.tests: dict[str, dict] = {}
        self.fixtures: dict[str, float] = {}
        self.active: dict[str, str] = {}  # argname -> key of its live shared instance
        self.paid: list[str] = []
        self.load_start = os.getloadavg()[0]
        self.started = time.perf_counter()
        self.collect_s = 0.0
        self.collected: set[str] = set()

    def pytest_collection_finish(self, session):
        self.collect_s = time.perf_counter() - self.started
        self.collected = {item.nodeid for item in session.items}

    def entry(self, nodeid: str) -> dict:
        return self.tests.setdefault(nodeid, {"setup": 0.0, "call": 0.0, "teardown": 0.0})

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        started = time.perf_counter()
        try:
            return (yield)
        finally:
            if fixturedef.scope in SHARED_SCOPES:
                key = f"{request.node.nodeid}::{fixturedef.argname}"
                self.fixtures[key] = time.perf_counter() - started
                self.active[fixturedef.argname] = key
                self.paid.append(key)

    def pytest_fixture_post_finalizer(self, fixturedef, request):
        if fixturedef.scope in SHARED_SCOPES:
            self.active.pop(fixturedef.argname, None)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        self.paid = []
        try:
            return (yield)
        finally:
            entry = self.entry(item.nodeid)
            entry["paid"] = self.paid
            entry["uses"] = sorted({self.active[name] for name in item.fixturenames
                                    if name in self.active})

    def pytest_runtest_logreport(self, report):
        entry = self.entry(report.nodeid)
        entry[report.when] = round(report.duration, 4)
        if report.when != "teardown" and entry.get("outcome") in (None, "passed"):
            entry["outcome"] = report.outcome

    def pytest_sessionfinish(self, session):
        data = load(self.path)
        data["tests"].update(self.tests)
        data["fixtures"].update({k: round(v, 4) for k, v in self.fixtures.items()})
        data["runs"].append({
            "command": " ".join(["python -m pytest", *sys.argv[1:]]),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": f"a {os.cpu_count()}-core {platform.machine()} CPU machine",
            "load_1min": [round(self.load_start, 2), round(os.getloadavg()[0], 2)],
            "collect_s": round(self.collect_s, 2), "tests": len(self.tests)})
        data["marked_slow"] = sorted(set(data.get("marked_slow", ())) - self.collected
                                     | (self.marked_slow & self.collected))
        self.path.write_text(dumps(data))


GENERATED = re.compile(r"(<!-- generated by: python -m tests\.tiers -->\n)(.*?)"
                       r"(<!-- end of generated text -->)", re.S)


def readme_block(readme: str) -> str | None:
    """The README's generated lines on the tiers, as they stand."""
    found = GENERATED.search(readme)
    return found.group(2) if found else None


def main() -> int:
    """Rewrites the README's generated lines from the recorded durations, and prints them."""
    readme = ROOT / "README.md"
    text = readme_text(load())
    rewritten, count = GENERATED.subn(lambda m: m.group(1) + text + m.group(3),
                                      readme.read_text())
    if count != 1:
        print("error: README.md has no block '<!-- generated by: python -m tests.tiers -->'")
        return 2
    readme.write_text(rewritten)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
