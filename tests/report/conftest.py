"""One full build (HTML, PDF and traces, with a baseline) of a mix of formats, shared by the
report's tests: an old-format 4× H200 run and CPU run (measured before interleaving) beside two
interleaved CPU runs (tests/data/*-trimmed.json, see make_fixtures.py). The checks read its
HTML, the PDF's text, outline and pages, the trace files, and a headless-Chromium screenshot.
Bad inputs run ``python -m reports.build`` and check its exit status and one-line message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.report.helpers import ALL, GPU_FIXTURE, run_build, text_of


@pytest.fixture(scope="package")
def baseline_file(tmp_path_factory) -> Path:
    """The GPU fixture with one benchmark's rounds 20% faster: the candidate regressed."""
    document = json.loads(GPU_FIXTURE.read_text())
    slowed = next(b for b in document["benchmarks"]
                  if b["extra_info"].get("kind") == "step" and b["extra_info"]["world_size"] == 4)
    slowed["stats"]["data"] = [t * 0.8 for t in slowed["stats"]["data"]]
    slowed["stats"]["median"] *= 0.8
    path = tmp_path_factory.mktemp("baseline") / "h200x4-baseline.json"
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="package")
def built(tmp_path_factory, baseline_file) -> dict:
    out = tmp_path_factory.mktemp("report")
    (out / "traces").mkdir()
    (out / "traces" / "from-an-earlier-build.json").write_text("{}")
    result = run_build(*map(str, ALL), "--baseline", str(baseline_file), "--out", str(out))
    assert result.returncode == 0, result.stderr
    html = (out / "report.html").read_text()
    return {"out": out, "html": html, "text": text_of(html), "pdf": out / "report.pdf",
            "slowed": json.loads(baseline_file.read_text())}


@pytest.fixture(scope="package")
def pdf_text(built) -> str:
    pypdf = pytest.importorskip("pypdf")
    reader = pypdf.PdfReader(built["pdf"])
    return "\n".join(page.extract_text() for page in reader.pages)
