"""impl/strategy_records.py, the torch-free record of each strategy, says what the classes of
impl/strategies/ say, and the report reads it without importing torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from impl.strategies import STRATEGIES
from impl.strategies.base import ChunkedGradientStrategy
from impl.strategy_records import STRATEGY_RECORDS, overlaps_in_k_chunks

ROOT = Path(__file__).resolve().parent.parent


def test_every_registered_strategy_has_the_record_its_class_declares():
    assert list(STRATEGY_RECORDS) == list(STRATEGIES)
    for name, cls in STRATEGIES.items():
        record = STRATEGY_RECORDS[name]
        assert (record.name, record.role) == (cls.name, cls.role), name
        assert record.k_chunks == issubclass(cls, ChunkedGradientStrategy), name


def test_the_overlapping_strategies_in_k_chunks():
    assert {name for name in STRATEGY_RECORDS if overlaps_in_k_chunks(name)} == {
        "threaded", "mpi", "chunked", "copy-engine"}
    assert not overlaps_in_k_chunks("comm-only")  # a reference measurement, not a strategy


def test_the_record_and_the_report_cells_import_without_torch():
    code = "import sys, impl.strategy_records, reports.cells; print('torch' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                           text=True, check=True)
    assert found.stdout.strip() == "False"
