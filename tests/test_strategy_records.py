"""impl/strategy_records.py, the torch-free record of each strategy and named variant, says
what the classes of impl/strategies/ say, and the report reads it without importing torch."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from impl.strategies import STRATEGIES, StrategyOptions
from impl.strategies.base import ChunkedGradientStrategy
from impl.strategy_records import (
    GPU_VARIANTS,
    STRATEGY_RECORDS,
    VARIANTS,
    needs_mpi,
    overlaps_in_k_chunks,
    reading_order,
    strategy_of,
)

ROOT = Path(__file__).resolve().parent.parent
NAMES = {*STRATEGY_RECORDS, *VARIANTS}


def test_every_registered_strategy_has_the_record_its_class_declares():
    assert list(STRATEGY_RECORDS) == list(STRATEGIES)
    for name, cls in STRATEGIES.items():
        record = STRATEGY_RECORDS[name]
        assert (record.name, record.role) == (cls.name, cls.role), name
        assert record.k_chunks == issubclass(cls, ChunkedGradientStrategy), name
        assert record.needs_mpi == cls.needs_mpi, name


def test_every_named_variant_is_a_recorded_strategy_with_its_options():
    fields = {field.name for field in dataclasses.fields(StrategyOptions)}
    for name, (strategy, options) in VARIANTS.items():
        assert strategy in STRATEGY_RECORDS and set(options) <= fields, name
        assert strategy_of(name) == strategy
    assert set(GPU_VARIANTS) <= set(VARIANTS)
    assert strategy_of("chunked") == "chunked" and strategy_of("comm-only") == "comm-only"


def test_the_reading_order_lists_each_role_with_the_mpi_strategies_last():
    assert reading_order() == (
        "sequential", "mpi-sequential", "threaded", "threaded+update", "chunked",
        "chunked+update", "chunked+layers", "chunked+first1mb", "chunked+priority",
        "chunked+ctas8", "chunked+carveout32", "copy-engine", "copy-engine+update", "mpi",
        "ddp", "ddp-25mb", "synthetic")


def test_the_strategies_that_run_only_under_mpirun():
    assert sorted(name for name in NAMES if needs_mpi(name)) == ["mpi", "mpi-sequential"]
    assert not needs_mpi("compute-only")


def test_the_overlapping_strategies_in_k_chunks():
    assert {name for name in STRATEGY_RECORDS if overlaps_in_k_chunks(name)} == {
        "threaded", "mpi", "chunked", "copy-engine"}
    assert not overlaps_in_k_chunks("comm-only")  # a reference measurement, not a strategy


def test_the_record_and_the_report_cells_import_without_torch():
    code = "import sys, impl.strategy_records, reports.cells; print('torch' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                           text=True, check=True)
    assert found.stdout.strip() == "False"
