"""The tests' own plumbing: the two tiers (tests/tiers.py) and the committed results that every
test reads instead of results/ (tests/committed.py).

    python -m pytest                      # the fast tier (nox -s tests)
    python -m pytest --all                # both tiers (nox -s tests -- --all; .ci/run)
    python -m pytest -m slow              # the slow tier alone
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import committed, tiers

EXPLICIT_SLOW = pytest.StashKey[set]()
LEFT_OUT = pytest.StashKey[int]()


def pytest_addoption(parser):
    group = parser.getgroup("overlap tests")
    group.addoption("--all", action="store_true", dest="all_tiers",
                    help="run the slow tier too (tests/tiers.py): report PDF builds, "
                         "launcher runs, mpirun, gate re-runs")
    group.addoption("--record-durations", metavar="PATH", default=None,
                    help="merge this run's durations into PATH (tests/data/test-durations.json"
                         "; tests/tiers.py says how it is recorded)")


def pytest_configure(config):
    config.stash[EXPLICIT_SLOW] = set()
    if path := config.getoption("record_durations"):
        config.pluginmanager.register(tiers.Recorder(Path(path), config.stash[EXPLICIT_SLOW]),
                                      "overlap-duration-recorder")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Marks each test whose recorded cost is over the threshold slow, then, without --all, an
    -m expression or a test named by its node id, leaves the slow ones out."""
    config.stash[EXPLICIT_SLOW].update(item.nodeid for item in items
                                       if item.get_closest_marker("slow"))
    recorded_slow = tiers.slow_by_duration(tiers.load())
    for item in items:
        if item.nodeid in recorded_slow and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    named = any("::" in arg for arg in config.args)
    if config.getoption("all_tiers") or config.getoption("markexpr") or named:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        config.stash[LEFT_OUT] = len(slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture(autouse=True, scope="session")
def _committed_gate_trials(request):
    """A report's gate trials table reads the committed trials files (tests/committed.py), as
    every test reads the committed results, whatever folder the tests run in. (Not in a run
    of the benchmarks that tests launch from tests/*_bench/: they read no result.)"""
    if not any(item.path.name.startswith("test_") for item in request.session.items):
        yield
        return
    from reports.gate import trial_rates

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trial_rates, "RESULTS_DIR", committed.RESULTS)
        yield


def pytest_terminal_summary(terminalreporter, config):
    if left_out := config.stash.get(LEFT_OUT, 0):
        terminalreporter.write_line(f"slow tier: {left_out} test(s) left out (over "
                                    f"{tiers.THRESHOLD_S:g} s recorded, or marked slow); "
                                    "run them with --all")
