"""impl/strategy_records.py, the torch-free record of each strategy and named variant, says
what the classes of impl/strategies/ say, the report reads it without importing torch, and
no other module keeps a list of strategy names of its own."""

from __future__ import annotations

import ast
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
# Lists of names kept by hand outside the records, each for its order in the committed report.
HAND_KEPT = {
    # which variants the cost model predicts at scale, in the order its tables list them
    ("impl/costmodel/scale.py", "PREDICTED_VARIANTS"),
    # the cells' order, which is not reading_order() (its comment says why)
    ("reports/cells.py", "VARIANT_ORDER"),
}


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
    code = ("import sys, impl.strategy_records, reports.cells, reports.figures; "
            "print('torch' in sys.modules)")
    found = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                           text=True, check=True)
    assert found.stdout.strip() == "False"


def name_lists(path: Path) -> list[tuple[str, str | None, int]]:
    """(file, the name it is assigned to or None, line) of every tuple, list or set literal of
    ``path`` that holds two or more recorded strategy or variant names. The right side of an
    unpacking (``DDP, DDP_DEFAULT = "ddp", "ddp-25mb"``) names constants, not a list."""
    tree = ast.parse(path.read_text())
    owner, unpacked = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Tuple):
                unpacked.add(node.value)
            for inner in ast.walk(node.value) if node.value is not None else ():
                owner.setdefault(inner, target.id if isinstance(target, ast.Name) else None)
    return [(str(path.relative_to(ROOT)), owner.get(node), node.lineno)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node not in unpacked
            and sum(isinstance(e, ast.Constant) and e.value in NAMES for e in node.elts) >= 2]


def test_no_module_keeps_a_list_of_strategy_names_of_its_own():
    found = [hit for folder in ("impl", "suite", "reports")
             for path in sorted((ROOT / folder).rglob("*.py"))
             if path != ROOT / "impl" / "strategy_records.py" for hit in name_lists(path)]
    assert [hit for hit in found if hit[:2] not in HAND_KEPT] == [], \
        "read the strategies from impl/strategy_records.py"
    assert {hit[:2] for hit in found} == HAND_KEPT  # a list no longer kept leaves HAND_KEPT


def test_the_scan_finds_a_list_of_names(tmp_path, monkeypatch):
    module = tmp_path / "kept.py"
    module.write_text('ORDER = ("sequential", "chunked")\nDDP, DEFAULT = "ddp", "ddp-25mb"\n'
                      'def f(s):\n    return s in ["threaded", "chunked+update"]\n')
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert name_lists(module) == [("kept.py", "ORDER", 1), ("kept.py", None, 4)]
