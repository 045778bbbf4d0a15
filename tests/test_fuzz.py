"""Mutated real result files never crash the loader, the gate or the report.

Each example takes a trimmed real result file (tests/data/), mutates it (truncation, dropped
keys, wrong types, NaN/Inf, huge numbers, unicode names) and feeds it in: the outcome must be
a result or a clean one-line error (ResultsError / exit 2), never an unhandled exception.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from impl.rows.files import ResultsError, load_results
from reports import build
from reports.gate import cli as gate

DATA = Path(__file__).with_name("data")
SOURCE = json.loads((DATA / "h200x4-trimmed.json").read_text())
SOURCE["benchmarks"] = SOURCE["benchmarks"][:12]  # small enough for many examples
TEXT = json.dumps(SOURCE)

ODD_VALUES = st.sampled_from([None, "", "x", "ünï©ødé ✓", [], {}, -1, 0, 1e308, -1e308,
                              10**30, math.nan, math.inf, -math.inf, True, [1, "a"]])


def paths(document: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path in a JSON document (lists indexed), to pick a mutation site from."""
    found = [prefix] if prefix else []
    if isinstance(document, dict):
        for key, value in document.items():
            found += paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document[:4]):
            found += paths(value, (*prefix, index))
    return found


PATHS = paths(SOURCE)


def mutate(document: dict, path: tuple, action: str, value: object) -> dict:
    mutated = copy.deepcopy(document)
    parent = mutated
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if action == "drop" and isinstance(parent, dict):
        del parent[last]
    elif action == "rename" and isinstance(parent, dict):
        parent["ünï-" + str(last)] = parent.pop(last)
    else:
        parent[last] = value
    return mutated


def write(tmp_path: Path, text: str) -> Path:
    target = tmp_path / "mutated.json"
    target.write_text(text, encoding="utf-8")
    return target


documents = st.builds(
    lambda path, action, value: json.dumps(mutate(SOURCE, path, action, value)),
    st.sampled_from(PATHS), st.sampled_from(["drop", "replace", "rename"]), ODD_VALUES)
# Values json.dumps cannot write or the loader must refuse, spliced in as raw JSON text:
# deep nesting, integers past the float range and Python's 4300-digit limit, non-finite and
# zero numbers, a lone surrogate, matplotlib mathtext.
MARK = "@@hostile@@"
HOSTILE_JSON = st.sampled_from([
    "[" * 100_000 + "]" * 100_000, '{"a":' * 5000 + "1" + "}" * 5000, "9" * 400, "-" + "7" * 5000,
    "1e308", "1e309", "-1e400", "NaN", "Infinity", "-Infinity", "0", "0.0", "-0.0", "-1",
    '"\\ud800"', '"x\\udfff"', '"$\\\\foo$"', '"$x^2$ \\\\mathrm{a}"'])
hostile = st.builds(
    lambda path, raw: json.dumps(mutate(SOURCE, path, "replace", MARK)).replace(f'"{MARK}"', raw),
    st.sampled_from(PATHS), HOSTILE_JSON)
truncated = st.integers(min_value=0, max_value=len(TEXT) - 1).map(lambda n: TEXT[:n])
# derandomize: CI sees the same examples on every run, so a failure is reproducible, not luck.
FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(text=st.one_of(documents, truncated, hostile))
def test_loader_returns_or_names_the_file(tmp_path, text):
    path = write(tmp_path, text)
    try:
        load_results(path)
    except ResultsError as error:
        assert str(error).startswith(str(path))


@FUZZ
@given(text=st.one_of(documents, truncated, hostile))
def test_gate_exits_cleanly(tmp_path, text, capsys):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(TEXT)
    candidate = write(tmp_path, text)
    status = gate.main([str(baseline), str(candidate), "--summary", str(tmp_path / "s.md")])
    assert status in (0, 1, 2)
    if status == 2:
        assert capsys.readouterr().err.count("\n") == 1  # one line, no traceback


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(documents, truncated, hostile))
def test_report_builds_or_stops_with_a_message(tmp_path, text, capsys):
    builds_or_stops_with_a_message(tmp_path, text, capsys)


def builds_or_stops_with_a_message(tmp_path, text, capsys):
    path = write(tmp_path, text)
    status = build.main([str(path), "--out", str(tmp_path / "out"), "--html-only"])
    assert status in (0, 2)
    if status == 2:
        assert "mutated.json" in capsys.readouterr().err


# One interleaved cell and one interference row of a real CPU run: the nested figures the
# report reads from comparison rows (impl.comparisons) must either validate or be refused.
CELL = json.loads((DATA / "cpu-2core-interleaved-trimmed.json").read_text())
CELL["benchmarks"] = [b for b in CELL["benchmarks"]
                      if b["extra_info"].get("kind") in ("comparison", "interference")
                      and b["extra_info"].get("workload") == "mlp_tiny"
                      and b["extra_info"].get("chunks") in (20, None)]
CELL_PATHS = [p for p in paths(CELL) if p[:1] == ("benchmarks",)]
cell_documents = st.builds(
    lambda path, action, value: json.dumps(mutate(CELL, path, action, value)),
    st.sampled_from(CELL_PATHS), st.sampled_from(["drop", "replace", "rename"]), ODD_VALUES)


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=cell_documents)
def test_report_on_interleaved_cells_builds_or_stops_with_a_message(tmp_path, text, capsys):
    builds_or_stops_with_a_message(tmp_path, text, capsys)


def test_report_survives_a_gpu_without_nvml_samples(tmp_path, capsys):
    """Found by the fuzzer: a null per-GPU mean (a GPU with no samples) broke the report."""
    document = mutate(SOURCE, ("benchmarks", 3, "extra_info", "nvml", "mean", "sm_clock_mhz",
                               0), "replace", None)
    path = write(tmp_path, json.dumps(document))
    assert build.main([str(path), "--out", str(tmp_path / "out"), "--html-only"]) == 0
