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

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from impl.rows.files import ResultsError, load_results
from reports import build
from reports.gate import cli as gate
from tests.committed import RESULTS

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


# --- the committed runs, the run's own record and the cost model ------------------------------
# One committed run of each machine folder (results/<machine>/, its newest file), its first
# benchmarks kept, with a hang entry and a pass added to its ``suite`` record so that the
# mutations reach every field the report, the gate and the cost model read from it
# (impl/rows/suite_record.py). derandomize: the same examples on every CI run.

ROOT = DATA.parent.parent
HANG = {"pass": "torchrun gloo-tcp", "benchmark": "suite/bench_allreduce.py::test_allreduce[x]",
        "deadline_s": 60.0, "expected_s": 12.5, "measured_with": ["b"], "remaining": 2,
        "stuck": [1], "ranks": {"0": {"frame": "impl/dist.py:9 in barrier", "innermost": "x"},
                                "1": {"frame": "f", "innermost": "i", "benchmark": "after b"}},
        "stalled": "rank(s) 0 ended 15 s ago and rank 1 (pid 7, stopped) did not"}


def committed_run(path: Path, keep: int = 4) -> dict:
    document = json.loads(path.read_text())
    document["benchmarks"] = document["benchmarks"][:keep]
    suite = document.setdefault("suite", {"schema": 1, "label": path.parent.name})
    suite["hangs"] = [HANG]
    suite.setdefault("passes", [{"name": "torchrun gloo-tcp", "command": "c", "env": {},
                                 "exit": 1}])
    suite.setdefault("failed_passes", ["torchrun gloo-tcp"])
    return document


COMMITTED = {path.parent.name: committed_run(path) for path in sorted(
    max(folder.glob("2*.json")) for folder in RESULTS.iterdir()
    if folder.is_dir() and any(folder.glob("2*.json")))}
# The cost model's input: a committed GPU run with a compute-only timeline, that row first
# (paths() indexes the first elements of each list).
GPU_RUN = json.loads((RESULTS / "h200x2" / "20261123T091135Z.json").read_text())
GPU_RUN["benchmarks"] = [GPU_RUN["benchmarks"][8], *GPU_RUN["benchmarks"][:2]]
GPU_RUN["suite"]["hangs"] = [HANG]


def suite_paths(document: dict) -> list[tuple]:
    return [p for p in paths(document) if p[:1] == ("suite",)]


def mutated_text(draw, document: dict, sites: list[tuple]) -> str:
    """One mutation of ``document`` at one of ``sites``: a value dropped, renamed or replaced
    (an odd JSON value, or raw hostile JSON text), or the whole text truncated."""
    how = draw(st.sampled_from(["drop", "rename", "replace", "raw", "truncate"]))
    if how == "truncate":
        text = json.dumps(document)
        return text[:draw(st.integers(min_value=0, max_value=len(text) - 1))]
    site = draw(st.sampled_from(sites))
    if how == "raw":
        text = json.dumps(mutate(document, site, "replace", MARK))
        return text.replace(f'"{MARK}"', draw(HOSTILE_JSON))
    return json.dumps(mutate(document, site, how, draw(ODD_VALUES)))


@st.composite
def committed_mutations(draw) -> str:
    document = COMMITTED[draw(st.sampled_from(sorted(COMMITTED)))]
    # Half of the mutations go to the run's record: its fields are few beside the rows'.
    sites = suite_paths(document) if draw(st.booleans()) else paths(document)
    return mutated_text(draw, document, sites)


@st.composite
def cost_model_mutations(draw) -> str:
    return mutated_text(draw, GPU_RUN, paths(GPU_RUN))


def one_line_naming(capsys, path: Path) -> None:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(path) in err, err


FAST = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@settings(FAST, max_examples=80)
@given(text=committed_mutations())
def test_every_reader_of_committed_runs_answers_or_names_the_file(tmp_path, text, capsys):
    """The loader, the gate and the report over mutated committed runs: a result, or one line
    naming the file (exit 2)."""
    capsys.readouterr()  # one example's output, not the last one's too
    path = write(tmp_path, text)
    try:
        load_results(path)
    except ResultsError as error:
        assert str(error).startswith(str(path))
        loads = False
    else:
        loads = True
    baseline = tmp_path / "baseline.json"
    baseline.write_text(text if loads else TEXT)
    status = gate.main([str(baseline), str(path), "--summary", str(tmp_path / "s.md")])
    assert status in ((0, 1, 3) if loads else (2,)), status
    if status == 2:
        one_line_naming(capsys, path)
    capsys.readouterr()
    status = build.main([str(path), "--out", str(tmp_path / "out"), "--html-only"])
    assert status == (0 if loads else 2), capsys.readouterr().err
    if status == 2:
        one_line_naming(capsys, path)


@pytest.fixture(scope="module")
def no_held_out(request):
    """predict without the held-out bands (they come from every committed run: seconds)."""
    from impl.costmodel import predict
    from impl.costmodel.validate import Model

    saved = predict.held_out_model
    predict.held_out_model = lambda paths, runs=None: Model({}, {}, {})
    yield
    predict.held_out_model = saved


@FAST
@given(text=cost_model_mutations())
def test_the_cost_model_predicts_or_names_the_file(tmp_path, text, capsys, no_held_out):
    from impl.costmodel import predict, validate

    capsys.readouterr()
    path = write(tmp_path, text)
    for main, args in ((predict.main, ["--fabric", "ib400-h200x8"]), (validate.main, [])):
        status = main([str(path), *args])
        assert status in (0, 2), status
        if status == 2:
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "Traceback" not in err, err
        capsys.readouterr()


# Fabric files are TOML: mutated as text, each committed file's numbers replaced by raw TOML
# values (too long, not finite, of another type), lines dropped, the text cut short.
FABRICS = {path.stem: path.read_text() for path in sorted((ROOT / "fabrics").glob("*.toml"))}
HOSTILE_TOML = st.sampled_from([
    "9" * 400, "-" + "7" * 5000, "1e400", "-1e400", "nan", "inf", "-inf", "0", "-1", "0.0",
    "1e-400", '"47"', "'x'", "true", "[1, 2]", "{}", "{ value = 1 }", "2026-11-21", "0x10",
    "1_000", "[[[[[[[[1]]]]]]]]", "[" * 5000 + "]" * 5000, '"\\ud800"', ""])


@st.composite
def fabric_mutations(draw) -> str:
    text = FABRICS[draw(st.sampled_from(sorted(FABRICS)))]
    how = draw(st.sampled_from(["value", "value", "line", "truncate"]))
    if how == "truncate":
        return text[:draw(st.integers(min_value=0, max_value=len(text) - 1))]
    lines = text.splitlines()
    at = draw(st.integers(min_value=0, max_value=len(lines) - 1))
    if how == "line":
        return "\n".join(lines[:at] + lines[at + 1:])
    values = [i for i, line in enumerate(lines) if "value = " in line]
    at = draw(st.sampled_from(values))
    head, _, tail = lines[at].partition("value = ")
    rest = tail.split(",", 1)[1] if "," in tail else " }"
    lines[at] = f"{head}value = {draw(HOSTILE_TOML)},{rest}"
    return "\n".join(lines)


@FAST
@given(text=fabric_mutations())
def test_a_mutated_fabric_file_predicts_or_names_the_file(tmp_path, text, capsys, no_held_out):
    from impl.costmodel import predict
    from impl.costmodel.fabric_file import FabricError, load_fabric

    capsys.readouterr()
    path = tmp_path / "mutated.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_fabric(str(path))
    except FabricError as error:
        assert str(error).startswith(str(path)) and "\n" not in str(error)
    status = predict.main([str(DATA.parent.parent / "results" / "h200x2"
                                / "20261123T091135Z.json"), "--fabric", str(path)])
    assert status in (0, 2), status
    if status == 2:
        one_line_naming(capsys, path)
