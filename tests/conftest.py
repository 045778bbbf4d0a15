"""The tests' own plumbing: the committed results that every test reads instead of results/
(tests/committed.py)."""

from __future__ import annotations

import pytest

from tests import committed


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
