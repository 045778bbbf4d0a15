"""The report builder on small real results (tests/data/*-trimmed.json, see make_fixtures.py).

One full build (HTML and PDF, with a baseline) is shared by the module; the checks read its
HTML, the PDF's text and pages, and a headless-Chromium screenshot of the HTML. Bad inputs
run ``python -m reports.build`` and check its exit status and one-line message.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reports import analysis, build
from reports.format import fmt, fmt_pct
from reports.sections import SECTIONS

DATA = Path(__file__).parent / "data"
GPU_FIXTURE = DATA / "h200x4-trimmed.json"
CPU_FIXTURE = DATA / "cpu-2core-trimmed.json"
ROOT = Path(__file__).parent.parent
CHROMIUM = "/usr/bin/chromium"


def run_build(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reports.build", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)


def step_rows(path: Path) -> list[dict]:
    document = json.loads(path.read_text())
    return [b["extra_info"] for b in document["benchmarks"]
            if b["extra_info"].get("kind") == "step"]


@pytest.fixture(scope="module")
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


@pytest.fixture(scope="module")
def built(tmp_path_factory, baseline_file) -> dict:
    out = tmp_path_factory.mktemp("report")
    result = run_build(str(GPU_FIXTURE), str(CPU_FIXTURE), "--baseline", str(baseline_file),
                       "--out", str(out))
    assert result.returncode == 0, result.stderr
    return {"out": out, "html": (out / "report.html").read_text(), "pdf": out / "report.pdf",
            "slowed": json.loads(baseline_file.read_text())}


@pytest.fixture(scope="module")
def pdf_text(built) -> str:
    pypdf = pytest.importorskip("pypdf")
    reader = pypdf.PdfReader(built["pdf"])
    return "\n".join(page.extract_text() for page in reader.pages)


def expected_figures(paths: list[Path]) -> list[str]:
    """The figure ids the report must contain for these fixtures, from their data."""
    rows = [row for index, path in enumerate(paths)
            for row in analysis.benchmark_rows(json.loads(path.read_text())["suite"]["label"],
                                               index, json.loads(path.read_text())["benchmarks"])]
    ids = []
    for setting in analysis.reference_settings(rows):
        label = setting["machine"]
        ids += [f"fig-gantt-{label}", f"fig-chunks-{label}", f"fig-totals-{label}"]
        if len({r["chunks"] for r in analysis.setting_rows(rows, setting, chunks=False)}) > 1:
            ids.append(f"fig-sweep-{label}")
        if len(analysis.world_sizes(rows)[label]) > 1:
            ids.append(f"fig-scaling-{label}")
        if any(r["energy_per_step_j"] is not None for r in analysis.setting_rows(rows, setting)):
            ids += [f"fig-nvml-{label}", f"fig-energy-{label}"]
    overheads = analysis.sampler_overhead(rows)
    ids += [f"fig-sampler-{row['machine']}-{index}" for index, row in enumerate(overheads)]
    ids += ["fig-allreduce"] if analysis.allreduce_groups(rows) else []
    ids += ["fig-synthetic", "fig-synthetic-gantt"] if analysis.synthetic(rows) else []
    for label in {g["machine"] for g in analysis.gemm_ladder(rows)}:
        ids += [f"fig-gemm-{label}", f"fig-roofline-{label}"]
    return ids


# --- HTML -------------------------------------------------------------------------------------


def test_html_has_every_section_and_figure(built):
    html = built["html"]
    for section_id, _ in SECTIONS:
        assert f'<section id="{section_id}"' in html, section_id
    figure_ids = re.findall(r'<figure class="fig" id="([^"]+)">', html)
    assert sorted(figure_ids) == sorted(expected_figures([GPU_FIXTURE, CPU_FIXTURE]))
    # Self-contained: every image is embedded, SVG for charts and PNG for NVML timelines.
    sources = re.findall(r'<img src="([^"]+)"', html)
    assert len(sources) == len(figure_ids)
    assert all(s.startswith(("data:image/svg+xml;base64,", "data:image/png;base64,"))
               for s in sources)
    assert "data:image/png;base64," in html and "data:image/svg+xml;base64," in html


def test_html_quotes_metric_definitions_from_code(built):
    from markupsafe import escape  # what Jinja's autoescape uses

    from impl.metrics import ALLREDUCE_FIELDS, STEP_FIELDS

    for field in (*STEP_FIELDS, *ALLREDUCE_FIELDS):
        assert str(escape(field.definition)) in built["html"], field.name


def test_missing_sections_say_so_in_one_line(built):
    html = built["html"]
    assert "No tensor-parallel results in the loaded result files" in html
    assert "No pipeline or hybrid results in the loaded result files" in html
    assert "h200x4: measured nvlink; no results for shm, socket" in html
    assert "Simulation (sleep-based), not a measurement" in html


def test_na_values_have_footnotes(built):
    html = built["html"]
    assert "undefined at world size 1: there is no communication to hide" in html
    assert "not observable for DDP" in html
    assert 'n/a<sup class="mark">' in html


def test_cpu_only_report_without_baseline(tmp_path):
    written = build.build([str(CPU_FIXTURE)], tmp_path, pdf=False)
    html = written["html"].read_text()
    assert "No NVML readings in the loaded result files" in html
    assert "No GEMM results in the loaded result files" in html
    assert "No baseline given" in html
    assert "cpu-2core: gloo-tcp only" in html
    assert not (tmp_path / "report.pdf").exists()


# --- PDF --------------------------------------------------------------------------------------


def test_pdf_pages_and_headline_numbers(built, pdf_text):
    pypdf = pytest.importorskip("pypdf")
    pages = len(pypdf.PdfReader(built["pdf"]).pages)
    assert 10 <= pages <= 40, pages
    text = re.sub(r"\s+", " ", pdf_text)
    assert f"page 1 of {pages}" in text and f"page {pages} of {pages}" in text

    # The best plausible overlap efficiency (sequential and values above 1 left out) and DDP's
    # in the same setting, computed here from the JSON.
    rows = step_rows(GPU_FIXTURE) + step_rows(CPU_FIXTURE)
    candidates = [r for r in rows if r["strategy"] != "sequential"
                  and r["overlap_efficiency"] is not None and r["overlap_efficiency"] <= 1]
    best = max(candidates, key=lambda r: r["overlap_efficiency"])
    ddp = next(r for r in rows if r["strategy"] == "ddp" and all(
        r[k] == best[k] for k in ("workload", "chunks", "world_size", "profile", "backend")))
    assert f"best overlap efficiency measured is {fmt(best['overlap_efficiency'])}" in text
    assert f"overlap efficiency of {fmt(ddp['overlap_efficiency'])}" in text

    gib = [b["extra_info"] for b in json.loads(GPU_FIXTURE.read_text())["benchmarks"]
           if b["extra_info"].get("kind") == "allreduce" and b["extra_info"]["size_bytes"] == 2**30]
    widest = max(gib, key=lambda r: r["world_size"])
    anchor = 355.1  # ANCHORS.md, nccl-tests 4 GPU, 1 GiB
    assert f"bus bandwidth of {fmt(widest['busbw_gbps'])} GB/s" in text
    assert f"{fmt_pct(widest['busbw_gbps'] / anchor * 100)} of the {fmt(anchor)} GB/s" in text


def test_pdf_has_toc_page_numbers_and_numbered_captions(pdf_text):
    text = re.sub(r"\s+", " ", pdf_text)
    assert re.search(r"Anatomy of a step\s*\.+\s*\d+", pdf_text)
    assert "Figure 1. " in text and "Table 1. " in text
    assert "Hiding gradient all-reduce behind backward" in text


def test_regression_table_against_baseline(built, pdf_text):
    slowed = next(b for b in built["slowed"]["benchmarks"]
                  if b["extra_info"].get("kind") == "step" and b["extra_info"]["world_size"] == 4)
    text = re.sub(r"\s+", " ", pdf_text)
    assert "1 regressed, 0 improved" in text
    assert slowed["name"].split("[")[0] in text
    assert "regressed" in built["html"]


# --- pictures ---------------------------------------------------------------------------------


def non_white_fraction(png: Path) -> tuple[float, int]:
    """The share of clearly non-white pixels and the number of distinct colours."""
    import numpy as np
    from matplotlib.image import imread

    pixels = (imread(png)[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    dark = float((pixels.min(axis=1) < 235).mean())
    return dark, len(np.unique(pixels, axis=0))


@pytest.mark.skipif(shutil.which("pdftoppm") is None, reason="pdftoppm (poppler-utils) missing")
def test_pdf_first_page_is_not_blank(built, tmp_path):
    subprocess.run(["pdftoppm", "-png", "-r", "50", "-f", "1", "-l", "2", str(built["pdf"]),
                    str(tmp_path / "page")], check=True, timeout=120)
    pages = sorted(tmp_path.glob("page-*.png"))
    assert len(pages) == 2
    for page in pages:
        dark, colours = non_white_fraction(page)
        assert dark > 0.02 and colours > 8, (page, dark, colours)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} (Debian chromium) missing")
def test_html_screenshot_is_not_blank(built, tmp_path):
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                    "--window-size=1280,2000", (built["out"] / "report.html").as_uri()],
                   capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    dark, colours = non_white_fraction(shot)
    assert dark > 0.02 and colours > 16, (dark, colours)


# --- bad input --------------------------------------------------------------------------------


def _corrupt(tmp_path: Path, case: str) -> tuple[Path, str]:
    path = tmp_path / f"{case}.json"
    if case == "truncated":
        path.write_text(GPU_FIXTURE.read_text()[:4000])
        return path, "not valid JSON (truncated or corrupt?)"
    if case == "foreign":
        path.write_text('{"a": 1}')
        return path, "not a pytest-benchmark results file"
    document = json.loads(GPU_FIXTURE.read_text())
    victim = copy.deepcopy(document["benchmarks"][0])
    if case == "missing-stats":
        del victim["stats"]
        expected = "has no 'stats' object"
    elif case == "nan-stats":
        victim["stats"]["median"] = float("nan")
        expected = "has stats.median = nan; expected a finite number"
    elif case == "nan-extra-info":
        victim["extra_info"]["step_ms"] = float("nan")
        expected = "has extra_info.step_ms = nan; expected a finite number"
    else:  # missing-field
        del victim["extra_info"]["limit_ms"]
        expected = "has extra_info.limit_ms = None; expected a number"
    document["benchmarks"][0] = victim
    path.write_text(json.dumps(document))  # json writes NaN as NaN, as a careless writer would
    return path, expected


@pytest.mark.parametrize("case", ["truncated", "foreign", "missing-stats", "nan-stats",
                                  "nan-extra-info", "missing-field"])
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


def test_missing_pango_is_one_clear_line(tmp_path):
    # A stand-in weasyprint that fails as the real one does without Pango's libraries.
    fake = tmp_path / "weasyprint"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "raise OSError(\"cannot load library 'libpango-1.0-0': No such file\")\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    result = subprocess.run([sys.executable, "-m", "reports.build", str(GPU_FIXTURE), "--out",
                             str(tmp_path / "out")], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {build.PANGO_HINT}"), result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


# --- WeasyPrint's warnings --------------------------------------------------------------------


def test_warning_policy():
    def record(level: int, message: str) -> logging.LogRecord:
        return logging.LogRecord("weasyprint", level, __file__, 0, message, (), None)

    assert build.lost_content(record(logging.ERROR, "Failed to load image at 'x.png'"))
    assert build.lost_content(record(logging.WARNING, "Ignored `foo: bar` at 1:2, unknown."))
    assert build.lost_content(record(logging.WARNING, ".notdef glyph rendered for ..."))
    assert not build.lost_content(record(logging.WARNING, 'Unable to subset "DejaVu" with '
                                                          "HarfBuzz"))


def test_unloadable_image_fails_the_pdf(tmp_path):
    weasyprint = build.import_weasyprint()
    html = '<html><body><p>x</p><img src="data:image/png;base64,AAAA"></body></html>'
    with pytest.raises(build.BuildError) as caught:
        build.render_pdf(weasyprint, html, str(tmp_path))
    assert caught.value.status == 3
    assert "image" in str(caught.value).lower()


# --- analysis and formatting ------------------------------------------------------------------


def test_scaling_efficiency_is_against_the_same_strategy_at_one_rank():
    rows = [{"kind": "step", "machine": "m", "workload": "w", "profile": "p", "chunks": 1,
             "strategy": "chunked", "world_size": w, "samples_per_s": sps, "step_ms": 1.0}
            for w, sps in ((1, 100.0), (2, 180.0), (4, 300.0))]
    efficiency = {r["world_size"]: r["scaling_efficiency"] for r in analysis.scaling(rows)}
    assert efficiency == pytest.approx({1: 1.0, 2: 0.9, 4: 0.75})


def test_best_overlap_leaves_out_sequential_and_values_above_one():
    base = {"kind": "step", "machine": "m", "workload": "w", "profile": "p", "chunks": 1,
            "world_size": 2}
    rows = [{**base, "strategy": "sequential", "overlap_efficiency": 0.9},
            {**base, "strategy": "mpi", "overlap_efficiency": 3.4},
            {**base, "strategy": "chunked", "overlap_efficiency": 0.4}]
    assert [r["strategy"] for r in analysis.best_overlap(rows)] == ["chunked"]
    assert analysis.note_for("overlap_efficiency", rows[1]) == analysis.EFFICIENCY_ABOVE_ONE


@pytest.mark.parametrize(("value", "text"), [(0.39598, "0.396"), (62.99, "63.0"),
                                             (353.7, "354"), (7379.27, "7,380"),
                                             (0.000122, "1.22e-04"), (9.996, "10.0"),
                                             (None, "n/a"), (0, "0"), (-0.0477, "-0.0477")])
def test_three_significant_digits(value, text):
    assert fmt(value) == text
