"""The result row (impl/rows): every kind declared once, written through its declaration and
read back through the same one, by the report, the gate and the cost model alike."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from impl.rows import kinds
from impl.rows.declare import Field, RowError, RowKind, ranged_fields
from impl.rows.files import ResultsError, find_result_files, load_results
from impl.rows.merge import benchmark_rows, merge_rows
from impl.rows.write import write_row
from reports import analysis
from reports.format import Column
from reports.gate import cli as gate
from tests.committed import RESULTS

ROOT = Path(__file__).resolve().parent.parent

# A kind the suite does not write: declared here the way impl/rows/kinds.py declares one.
PROBE = RowKind("probe", "A throwaway kind: one copy of a buffer of one size.", ("size_bytes",),
                (Field("size_bytes", "B", "Bytes copied.", shape="int", required=True),
                 Field("copy_ms", "ms", "Median time of one copy.", False, shape="num",
                       required=True),
                 Field("note", "", "Anything worth saying.", shape="str?")))


def allreduce_row(**changes) -> dict:
    row = {"kind": "allreduce", "backend": "gloo", "profile": "gloo-tcp", "world_size": 2,
           "dtype": "float32", "size_bytes": 1 << 20, "ops_per_round": 4, "time_ms": 0.8,
           "algbw_gbps": 1.31, "busbw_gbps": 1.31, "wrong_elements": 0, "device": "cpu"}
    return {**row, **changes}


def written(row: dict) -> dict:
    benchmark = SimpleNamespace(extra_info={})
    write_row(benchmark, row)
    return benchmark.extra_info


def test_a_declared_row_is_written_whole():
    assert written(allreduce_row()) == allreduce_row()


def test_an_undeclared_field_fails_when_the_row_is_written():
    with pytest.raises(RowError, match=r"allreduce row writes extra_info\.busbw_gpbs, which the "
                                       r"kind 'allreduce' does not declare"):
        written(allreduce_row(busbw_gpbs=1.31))


def test_a_missing_or_mistyped_field_fails_when_the_row_is_written():
    row = allreduce_row()
    del row["time_ms"]
    with pytest.raises(RowError, match=r"has extra_info\.time_ms = None; expected a number$"):
        written(row)
    with pytest.raises(RowError, match=r"has extra_info\.profile = 3; expected a string$"):
        written(allreduce_row(profile=3))
    with pytest.raises(RowError, match=r"row kind 'alreduce' is not declared"):
        written(allreduce_row(kind="alreduce"))


def test_a_field_only_older_runs_have_is_read_but_no_longer_written():
    step = kinds.STEP.by_name["wall_step_ms"]
    assert not step.written
    assert kinds.STEP.check_written({"wall_step_ms": 1.0}) == (
        "writes extra_info.wall_step_ms, which the kind 'step' no longer writes")


def test_a_field_carries_its_range_and_names_the_problem():
    world = kinds.STEP.by_name["world_size"]
    assert world.range == "count"
    assert [world.range_problem(v) for v in (1, 0, 2.5)] == [
        None, "expected an integer >= 1", "expected an integer >= 1"]
    assert kinds.STEP.by_name["comm_only_ms"].range_problem(-1) == "expected a number >= 0"
    assert kinds.STEP.by_name["step_ms"].range_problem(0) == "expected a number > 0"
    with pytest.raises(RowError, match=r"field 'x': range 'fraction' is none of any, "):
        Field("x", "", "", range="fraction")


def test_two_declarations_of_one_name_must_agree_on_its_range():
    one = RowKind("one", "", ("name",), (Field("stages", "", "", range="count"),))
    other = RowKind("other", "", ("name",), (Field("stages", "", ""),))
    with pytest.raises(RowError, match=r"different ranges: stages \(any and count\)$"):
        ranged_fields([one, other])
    assert ranged_fields([one]) == {"stages": one.fields[0]}
    assert kinds.RANGED_FIELDS["microbatches"].range == "count"


def test_a_kind_answers_what_readers_asked_of_the_kind_key():
    older, interleaved = {"kind": "step"}, {"kind": "step", "intervals": {}}
    assert kinds.STEP.holds(older) and not kinds.COMPARISON.holds(older)
    assert [kinds.is_older_step(r) for r in (older, interleaved, {"kind": "comparison"})] == [
        True, False, False]


def test_a_report_column_of_a_field_takes_its_key_label_and_unit_from_the_declaration():
    column = Column.of(kinds.STEP.by_name["compute_only_ms"])
    assert (column.key, column.title) == ("compute_only_ms", "compute-only (ms)")
    assert Column.of(kinds.ALLREDUCE.by_name["wrong_elements"]).title == "#wrong"
    assert Column.of(Field("x", "", "")).title == "x"  # a field without a label


def test_a_kinds_fields_and_names_read_as_attributes_checked_against_the_declaration():
    assert kinds.STEP.names.step_ms == "step_ms"
    assert kinds.HOST_ADAM.field.adam_gbps is kinds.HOST_ADAM.by_name["adam_gbps"]
    with pytest.raises(AttributeError, match="'gemm' declares no field 'step_ms'"):
        kinds.GEMM.names.step_ms  # noqa: B018 (the read is the test)


def test_a_row_is_built_by_its_kind_which_refuses_an_undeclared_field():
    row = kinds.ALLREDUCE.row(**{k: v for k, v in allreduce_row().items() if k != "kind"})
    assert row == allreduce_row()
    assert written(row) == allreduce_row()
    assert kinds.STEP.row() == {"kind": "step"}
    with pytest.raises(TypeError) as raised:
        kinds.ALLREDUCE.row(time_ms=0.8, busbw_gpbs=1.31)
    assert str(raised.value) == "row kind 'allreduce' declares no field 'busbw_gpbs'"


def kinds_built_in(source: str) -> set[str]:
    """The row kinds a suite module's source builds: ``KIND.row(...)`` of a kind of
    impl/rows/kinds.py."""
    by_variable = {name: kind.name for name, kind in vars(kinds).items()
                   if isinstance(kind, RowKind)}
    return {by_variable[name] for name in re.findall(r"\b([A-Z_]+)\.row\(", source)
            if name in by_variable}


def test_every_kind_the_suite_writes_is_declared_with_units_and_definitions():
    written_kinds = set()
    for path in sorted((ROOT / "suite").glob("bench_*.py")):
        source = path.read_text(encoding="utf-8")
        assert "extra_info.update" not in source, f"{path.name} writes a row around write_row"
        assert '"kind":' not in source, f"{path.name} spells a row's kind: build it with KIND.row"
        written_kinds |= kinds_built_in(source)
    assert written_kinds == set(kinds.ROW_KINDS)
    assert "autotune" in kinds.ROW_KINDS
    for kind in kinds.ROW_KINDS.values():
        assert kind.summary and kind.identity, kind.name
        for field in kind.fields:
            assert field.definition, f"{kind.name}.{field.name} has no definition"


def test_every_committed_result_file_reads_through_the_declarations():
    # Not result files: a suite summary, the sweep report's bare rows, the tests' durations.
    not_results = ("autotune-cpu-mlp_tiny.json", "gemm_sweep_rows.json", "test-durations.json")
    paths = [p for p in find_result_files([RESULTS, ROOT / "tests" / "data"])
             if p.name not in not_results]
    kinds_read = {b["extra_info"].get("kind") for p in paths for b in load_results(p).benchmarks}
    assert set(kinds.ROW_KINDS) <= kinds_read


def result_file(path: Path, rows: list[dict], seconds: float) -> Path:
    """A result file as pytest-benchmark writes it, one benchmark per row."""
    benchmarks = [{"group": "probe", "name": f"test_probe[{i}]",
                   "fullname": f"suite/bench_probe.py::test_probe[{i}]", "params": None,
                   "extra_info": row,
                   "stats": {"median": seconds, "min": seconds, "max": seconds, "mean": seconds,
                             "rounds": 20, "data": [seconds * (1 + 0.001 * r) for r in range(20)]}}
                  for i, row in enumerate(rows)]
    path.write_text(json.dumps({"machine_info": {"overlap": {"machine_label": "cpu-2core"}},
                                "benchmarks": benchmarks, "commit_info": {},
                                "datetime": "2026-11-25T10:00:00+00:00"}))
    return path


def test_a_new_kind_is_one_declaration(tmp_path, monkeypatch, capsys):
    """Declared, a new kind is written, checked on reading, merged by its identity, known to
    the report and compared by the gate: nothing else names it."""
    monkeypatch.setitem(kinds.ROW_KINDS, "probe", PROBE)
    row = written({"kind": "probe", "size_bytes": 4096, "copy_ms": 0.02})
    with pytest.raises(RowError, match=r"probe row writes extra_info\.copy_us"):
        written({"kind": "probe", "size_bytes": 4096, "copy_us": 20.0})

    base = result_file(tmp_path / "base.json", [row, {**row, "size_bytes": 8192}], 0.010)
    cand = result_file(tmp_path / "cand.json", [row], 0.010)
    bad = result_file(tmp_path / "bad.json", [{**row, "copy_ms": "fast"}], 0.010)
    with pytest.raises(ResultsError, match=r"\(probe\) has extra_info\.copy_ms = 'fast'; "
                                           r"expected a number$"):
        load_results(bad)

    files = [load_results(base), load_results(cand)]
    rows = merge_rows(r for run, f in enumerate(files)
                      for r in benchmark_rows(f.label, run, f.benchmarks))
    assert sorted((r["size_bytes"], r["run"]) for r in rows) == [(4096, 1), (8192, 0)]
    assert analysis.unknown_kinds(rows) == []

    assert gate.main([str(base), str(cand)]) == 0
    assert "test_probe[0]" in capsys.readouterr().out
