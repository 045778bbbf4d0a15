"""Hostile result files and output paths: the report and the gate stop with one line, exit 2.

Each case is a real result file (tests/data/) with one value made absurd; both tools read it
through reports/results.py, which must name the file and the field.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.committed import RESULTS, ROOT_COPY

DATA = Path(__file__).with_name("data")
SOURCE = json.loads((DATA / "cpu-2core-trimmed.json").read_text())
PIPELINE = json.loads((DATA / "pipeline-cpu-2core.json").read_text())
TP = json.loads((DATA / "cpu-2core-tp.json").read_text())
ROOT = Path(__file__).resolve().parent.parent


def _set(document: dict, path: tuple, value: object) -> dict:
    mutated = copy.deepcopy(document)
    parent = mutated
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return mutated


def _first_step_index() -> int:
    return next(i for i, b in enumerate(SOURCE["benchmarks"]) if "step_ms" in b["extra_info"])


STEP = _first_step_index()
HANG = {"pass": "torchrun gloo-tcp", "benchmark": "suite/bench_allreduce.py::test_allreduce[x]",
        "deadline_s": 60.0, "expected_s": 12.0, "measured_with": [], "remaining": 0, "stuck": [1],
        "ranks": {"0": {"frame": "impl/dist.py:9 in barrier", "innermost": "x"}}}


def _hung(**changed: object) -> dict:
    """The CPU run as if a benchmark of it had hung, the hang entry's fields ``changed``."""
    return _set(SOURCE, ("suite", "hangs"), [{**HANG, **changed}])

# case -> (file text, what the one line must contain)
CASES = {
    "deep-nesting": ('{"benchmarks": ' + "[" * 100_000 + "]" * 100_000 + "}",
                     "nested too deeply"),
    "400-digit-integer": (json.dumps(_set(SOURCE, ("benchmarks", STEP, "extra_info", "step_ms"),
                                          0)).replace('"step_ms": 0', '"step_ms": ' + "9" * 400),
                          f"benchmarks[{STEP}].extra_info.step_ms = an integer of 400 digits"),
    "5000-digit-integer": (json.dumps(SOURCE).replace('"machine_info": {',
                                                      '"machine_info": {"n": ' + "7" * 5000 + ", ",
                                                      1),
                           "machine_info.n = an integer of 5000 digits"),
    "step-ms-zero": (json.dumps(_set(SOURCE, ("benchmarks", STEP, "extra_info", "step_ms"), 0)),
                     "extra_info.step_ms = 0; expected a number > 0"),
    "median-zero": (json.dumps(_set(SOURCE, ("benchmarks", 0, "stats", "median"), 0.0)),
                    "stats.median = 0.0; expected a finite number > 0"),
    "negative-time": (json.dumps(_set(SOURCE, ("benchmarks", 0, "stats", "min"), -1e-3)),
                      "stats.min = -0.001; expected a finite number > 0"),
    "1e308-squared": (json.dumps(SOURCE).replace('"median": ', '"median": 1e309, "x": ', 1),
                      "stats.median = inf; expected a finite number"),
    "infinity": (json.dumps(_set(SOURCE, ("benchmarks", 0, "stats", "mean"), float("inf"))),
                 "stats.mean = inf; expected a finite number"),
    "nan": (json.dumps(_set(SOURCE, ("benchmarks", 0, "extra_info", "world_size"),
                            float("nan"))), "extra_info.world_size = nan; expected a finite"),
    "world-size-zero": (json.dumps(_set(SOURCE, ("benchmarks", STEP, "extra_info", "world_size"),
                                        0)), "extra_info.world_size = 0; expected an integer"),
    "world-size-negative": (json.dumps(_set(SOURCE, ("machine_info", "overlap", "world_size"),
                                            -2)),
                            "machine_info.overlap.world_size = -2; expected an integer >= 1"),
    "lone-surrogate": (json.dumps(_set(SOURCE, ("benchmarks", 0, "name"), "step\ud800")),
                       "benchmarks[0].name = 'step\\ud800'; not valid Unicode text"),
    # Finite but no measurement: the report's figures crashed on them (log axes, error bars).
    "round-time-5e-324": (json.dumps(_set(SOURCE, ("benchmarks", 0, "stats", "min"), 5e-324)),
                          "stats.min = 5e-324; expected a round time from 1e-09 to 1e+06 s"),
    "median-1e308": (json.dumps(_set(SOURCE, ("benchmarks", 0, "stats", "median"), 1e308)),
                     "stats.median = 1e+308; expected a round time from 1e-09 to 1e+06 s"),
    "step-ms-1e308": (json.dumps(_set(SOURCE, ("benchmarks", STEP, "extra_info", "step_ms"),
                                      1e308)),
                      "extra_info.step_ms = 1e+308; expected a time of at most 1e+09 ms"),
    "no-benchmarks": (json.dumps(_set(SOURCE, ("benchmarks",), [])),
                      "benchmarks = []; a results file holds one or more benchmarks"),
    "pipeline-zero-stages": (json.dumps(_set(PIPELINE, ("benchmarks", 0, "extra_info", "stages"),
                                             0)),
                             "extra_info.stages = 0; expected an integer >= 1"),
    "pipeline-zero-microbatches": (
        json.dumps(_set(PIPELINE, ("benchmarks", 0, "extra_info", "microbatches"), 0)),
        "extra_info.microbatches = 0; expected an integer >= 1"),
    "pipeline-empty-rounds": (
        json.dumps(_set(PIPELINE, ("benchmarks", 0, "extra_info", "round_ms"), [])),
        "extra_info.round_ms = []; expected a non-empty list of per-round values"),
    "tp-zero-tokens": (json.dumps(_set(TP, ("benchmarks", 0, "extra_info", "tokens"), 0)),
                       "extra_info.tokens = 0; expected an integer >= 1"),
    "autotune-k-zero": (json.dumps(_set(SOURCE, ("benchmarks", STEP, "extra_info", "candidates"),
                                        [1, 0, 5])),
                        "extra_info.candidates[1] = 0; expected an integer >= 1"),
    # The run's own record (impl/rows/suite_record.py): the report printed a hang's deadline
    # with :.0f and ended in "Unknown format code 'f'" on a string.
    "hang-deadline-string": (json.dumps(_hung(deadline_s="ten")),
                             "suite.hangs[0].deadline_s = 'ten'; expected a number from 0 to "
                             "1e+06 or null"),
    "hang-deadline-nan": (json.dumps(_hung(deadline_s=float("nan"))),
                          "suite.hangs[0].deadline_s = nan; expected a finite number"),
    "hang-deadline-negative": (json.dumps(_hung(deadline_s=-5)),
                               "suite.hangs[0].deadline_s = -5; expected a number from 0 to "
                               "1e+06 or null"),
    "hang-rank-400-digits": (json.dumps(_hung(stuck=[12345])).replace("12345", "9" * 400),
                             "suite.hangs[0].stuck[0] = an integer of 400 digits; expected a "
                             "finite number"),
    "hang-rank-string": (json.dumps(_hung(stuck=["1"])),
                         "suite.hangs[0].stuck[0] = '1'; expected an integer from 0 to "
                         "1.04858e+06"),
    "hang-ranks-list": (json.dumps(_hung(ranks=[0, 1])),
                        "suite.hangs[0].ranks is list; expected an object"),
    "pass-exit-string": (json.dumps(_set(SOURCE, ("suite", "passes"),
                                         [{"name": "torchrun gloo-tcp", "exit": "1"}])),
                         "suite.passes[0].exit = '1'; expected an integer from -255 to 255 or "
                         "null"),
    "pass-env-string": (json.dumps(_set(SOURCE, ("suite", "passes"),
                                        [{"name": "torchrun gloo-tcp", "env": "x"}])),
                        "suite.passes[0].env is str; expected an object"),
    "failed-passes-number": (json.dumps(_set(SOURCE, ("suite", "failed_passes"), [1])),
                             "suite.failed_passes[0] = 1; expected str"),
}


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          cwd=ROOT_COPY, env=env, timeout=300)


def _one_line_exit_2(result: subprocess.CompletedProcess, *expected: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("case", list(CASES))
def test_report_and_gate_name_the_file_and_field(tmp_path, case):
    text, expected = CASES[case]
    bad = tmp_path / f"{case}.json"
    bad.write_text(text)
    good = DATA / "cpu-2core-trimmed.json"
    _one_line_exit_2(_run("reports.build", str(bad), "--out", str(tmp_path / "out"),
                          "--html-only"), str(bad), expected)
    assert not (tmp_path / "out").exists()
    _one_line_exit_2(_run("reports.gate", str(good), str(bad), "--summary",
                          str(tmp_path / "summary.md")), str(bad), expected)


def test_mathtext_strategy_name_is_plain_text(tmp_path):
    """A "$\\foo$" label would make matplotlib parse TeX and fail; it is drawn as written."""
    document = copy.deepcopy(SOURCE)
    for benchmark in document["benchmarks"]:
        if benchmark["extra_info"].get("strategy") == "chunked":
            benchmark["extra_info"]["strategy"] = r"$\foo$"
    path = tmp_path / "mathtext.json"
    path.write_text(json.dumps(document))
    result = _run("reports.build", str(path), "--out", str(tmp_path / "out"), "--html-only")
    assert result.returncode == 0, result.stderr[-2000:]
    assert r"$\foo$" in (tmp_path / "out" / "report.html").read_text()


def test_report_output_that_is_a_file_is_refused(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    for out in (taken, taken / "sub"):
        line = _one_line_exit_2(_run("reports.build", str(DATA / "cpu-2core-trimmed.json"),
                                     "--out", str(out), "--html-only"))
        assert line == f"error: --out={out}: {taken} is a file, not a folder"
    assert taken.read_text() == "not a folder"


def test_gate_summary_under_a_file_is_refused(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    good = str(DATA / "cpu-2core-trimmed.json")
    line = _one_line_exit_2(_run("reports.gate", good, good, "--summary",
                                 str(taken / "summary.md")))
    assert line.startswith("gate: error: ") and str(taken) in line, line


def test_report_on_a_full_disk_is_one_line(tmp_path):
    """Every report file is written whole or not at all; a full disk is one line, exit 2."""
    prelude = ("import errno, sys, impl.atomic\n"
               "def full(path, data):\n"
               "    raise OSError(errno.ENOSPC, 'No space left on device', str(path))\n"
               "impl.atomic.write_bytes_atomic = full\n"
               "import reports.build\n"
               "sys.exit(reports.build.main(sys.argv[1:]))\n")
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-c", prelude, str(DATA / "cpu-2core-trimmed.json"),
                             "--out", str(out), "--html-only"], capture_output=True, text=True,
                            cwd=ROOT_COPY, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            timeout=300)
    line = _one_line_exit_2(result)
    assert line == (f"error: --out={out}: cannot write the report: [Errno 28] No space left on "
                    f"device: '{out / 'report.html'}'")


def test_gate_outputs_never_replace_a_file_it_did_not_write(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# my project\n")
    good = str(DATA / "cpu-2core-trimmed.json")
    for option in ("--summary", "--json"):
        line = _one_line_exit_2(_run("reports.gate", good, good, "--summary",
                                     str(tmp_path / "s.md"), option, str(readme)))
        assert line == (f"gate: error: {option} {readme}: the file exists and is not one the "
                        "gate wrote; choose another path or remove it")
    assert readme.read_text() == "# my project\n"
    # Its own files it replaces: a second run over the first one's summary and JSON.
    for _ in range(2):
        result = _run("reports.gate", good, good, "--summary", str(tmp_path / "s.md"),
                      "--json", str(tmp_path / "g.json"))
        assert result.returncode == 0, result.stderr


# The cost model reads a fabric file (TOML) beside the results: each number of it hostile.
GPU_RUN = RESULTS / "h200x2" / "20261123T091135Z.json"
FABRIC = (ROOT / "fabrics" / "ib400-h200x8.toml").read_text()
FABRIC_CASES = {
    # 400 digits overflowed math.isfinite: "OverflowError: int too large to convert to float"
    "400-digit-integer": (("gpus = { value = 8", "gpus = { value = " + "9" * 400),
                          "node.gpus = an integer of 400 digits: allowed an integer from 1 to "
                          "1024 (GPUs per node)"),
    # past Python's 4300 digits, tomllib's int() itself refuses it (a ValueError)
    "5000-digit-integer": (("nics = { value = 8", "nics = { value = " + "7" * 5000),
                           "network.nics = an integer of 5000 digits: allowed an integer from 1 "
                           "to 64 (NICs per node)"),
    "nan": (("nic_gbps = { value = 47", "nic_gbps = { value = nan"),
            "network.nic_gbps = nan: allowed a number from 0.001 to 10000 (GB/s reached per "
            "NIC)"),
    "1e400": (("busbw_gbps = { value = 348.7", "busbw_gbps = { value = 1e400"),
              "node.busbw_gbps = inf: allowed a number from 0.001 to 10000"),
    "string": (("launch_us = { value = 1.3", 'launch_us = { value = "1.3"'),
               "node.launch_us = '1.3': allowed a number from 0 to 1e+06"),
}


@pytest.mark.parametrize("case", list(FABRIC_CASES))
def test_the_cost_model_names_the_fabric_file_and_field(tmp_path, case):
    (old, new), expected = FABRIC_CASES[case]
    assert old in FABRIC
    bad = tmp_path / f"{case}.toml"
    bad.write_text(FABRIC.replace(old, new, 1))
    line = _one_line_exit_2(_run("impl.costmodel.predict", str(GPU_RUN), "--fabric", str(bad)))
    assert line.startswith(f"error: {bad}: {expected}"), line


def test_the_cost_model_refuses_a_hostile_hang_entry(tmp_path):
    """The cost model reads result files through the same declaration as the report."""
    document = json.loads(GPU_RUN.read_text())
    document["suite"]["hangs"] = [{**HANG, "deadline_s": "ten"}]
    bad = tmp_path / "hang.json"
    bad.write_text(json.dumps(document))
    expected = (f"error: {bad}: suite.hangs[0].deadline_s = 'ten'; expected a number from 0 to "
                "1e+06 or null")
    for module, args in (("impl.costmodel.predict", ["--fabric", "ib400-h200x8"]),
                         ("impl.costmodel.validate", [])):
        assert _one_line_exit_2(_run(module, str(bad), *args)) == expected
