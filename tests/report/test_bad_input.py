"""Bad input: one line and exit status 2."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reports import render
from tests.committed import ROOT_COPY
from tests.report.helpers import (
    CPU_FIXTURE,
    GPU_FIXTURE,
    INTERLEAVED,
    ROOT,
    run_build,
)


def _corrupt(tmp_path: Path, case: str) -> tuple[Path, str]:
    path = tmp_path / f"{case}.json"
    if case == "truncated":
        path.write_text(GPU_FIXTURE.read_text()[:4000])
        return path, "not valid JSON (truncated or corrupt?)"
    if case == "foreign":
        path.write_text('{"a": 1}')
        return path, "not a pytest-benchmark results file"
    source = INTERLEAVED if case.startswith("comparison") else GPU_FIXTURE
    document = json.loads(source.read_text())
    index = next(i for i, b in enumerate(document["benchmarks"])
                 if b["extra_info"].get("kind") == ("comparison" if source == INTERLEAVED
                                                    else "step"))
    victim = copy.deepcopy(document["benchmarks"][index])
    if case == "missing-stats":
        del victim["stats"]
        expected = "has no 'stats' object"
    elif case == "nan-stats":
        victim["stats"]["median"] = float("nan")
        expected = "benchmarks[0].stats.median = nan; expected a finite number"
    elif case == "nan-extra-info":
        victim["extra_info"]["step_ms"] = float("nan")
        expected = "benchmarks[0].extra_info.step_ms = nan; expected a finite number"
    elif case == "comparison-without-references":
        del victim["extra_info"]["references"]
        expected = "(comparison) has extra_info.references = None; expected an object"
    elif case == "comparison-bad-estimate":
        victim["extra_info"]["strategies"]["chunked"]["step_ms"]["low"] = "fast"
        expected = "extra_info.strategies.chunked.step_ms.low = 'fast'; expected num"
    else:  # missing-field
        del victim["extra_info"]["limit_ms"]
        expected = "has extra_info.limit_ms = None; expected a number"
    document["benchmarks"][index] = victim
    path.write_text(json.dumps(document))  # json writes NaN as NaN, as a careless writer would
    return path, expected


@pytest.mark.parametrize("case", ["truncated", "foreign", "missing-stats", "nan-stats",
                                  "nan-extra-info", "missing-field",
                                  "comparison-without-references", "comparison-bad-estimate"])
def test_bad_input_stops_with_one_line(tmp_path, case):
    path, expected = _corrupt(tmp_path, case)
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("earlier good report")
    result = run_build(str(path), "--out", str(out))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"error: {path}: ") and expected in lines[0], lines[0]
    assert (out / "report.html").read_text() == "earlier good report"


def test_no_result_files(tmp_path):
    result = run_build(str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: no result files in {tmp_path}"


def test_missing_pango_is_one_clear_line_and_the_html_is_still_written(tmp_path):
    # A stand-in weasyprint that fails as the real one does without Pango's libraries.
    fake = tmp_path / "weasyprint"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "raise OSError(\"cannot load library 'libpango-1.0-0': No such file\")\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "reports.build", str(CPU_FIXTURE), "--out",
                             str(out)], cwd=ROOT_COPY, env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {render.PANGO_HINT}"), result.stderr
    assert result.stderr.endswith(f"(wrote {out / 'report.html'}, no PDF)\n"), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert "before interleaving" in (out / "report.html").read_text()
    assert not (out / "report.pdf").exists()
