"""The report builder on small real results (tests/data/*-trimmed.json, see make_fixtures.py).

One full build (HTML and PDF, with a baseline) is shared by the module; the checks read its
HTML, the PDF's text and pages, and a headless-Chromium screenshot of the HTML. Bad inputs
run ``python -m reports.build`` and check its exit status and one-line message.
"""

from __future__ import annotations

import copy
import html as html_text
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


# --- GEMM: newest run per GPU model, tensor-core ceilings, v6's fallback ------------------

# TFLOP/s short and sustained, mean SM clock and power of the made-up single-H200 run
CEILINGS = {"mma.sync": (661.2, 655.4, 1980.0, 374.9), "wgmma": (912.7, 931.6, 1922.9, 482.8)}
CUBLAS_8192_TFLOPS = 773.4
H200_BF16_PEAK = 989.0


def _benchmark_like(template: dict, name: str, info: dict) -> dict:
    benchmark = copy.deepcopy(template)
    benchmark["name"] = name
    benchmark["fullname"] = f"suite/bench_gemm.py::{name}"
    benchmark["extra_info"] = info
    return benchmark


def single_h200_run(path: Path) -> Path:
    """A run of today's GEMM module on a 1-GPU H200 machine, newer than the GPU fixture.

    Made from the fixture's own GEMM rows: the square_4096 shape only (so the older run's
    1024×512×512 rows must not leak in), v1 (now the uncoalesced kernel) slower and v1c
    added, v6 added on the TMA path at 4096³ and on v5's kernel at a ragged shape, the two
    tensor-core ceilings, and the seed step.
    """
    document = json.loads(GPU_FIXTURE.read_text())
    document["suite"].update(label="h200x1", created="2026-11-22T10:00:00+00:00",
                             partial=False, failed_passes=[])
    document["machine_info"]["overlap"].update(machine_label="h200x1", world_size=1,
                                               gpu_names=["NVIDIA H200"],
                                               gpu_uuids=["GPU-h200x1"])
    benchmarks = []
    for benchmark in document["benchmarks"]:
        info = benchmark["extra_info"]
        if info.get("kind") == "seed_step":
            info["step_ms"] *= 0.9
            benchmarks.append(benchmark)
        if info.get("kind") != "gemm" or info["preset"] != "square_4096":
            continue
        info["kernel_path"] = info["version"]
        benchmarks.append(benchmark)
        if info["version"] == "v1":
            benchmarks.append(_benchmark_like(benchmark, "test_gemm[v1c-square_4096-fp32]",
                                              {**info, "version": "v1c",
                                               "kernel_path": "v1c"}))
            info["tflops"] /= 4
            info["pct_of_cublas"] /= 4
        if info["version"] == "v5":
            benchmarks.append(_benchmark_like(
                benchmark, "test_gemm[v6-square_4096-bf16]",
                {**info, "version": "v6", "kernel_path": "tma", "tflops": 612.3,
                 "pct_of_cublas": 78.9}))
            benchmarks.append(_benchmark_like(
                benchmark, "test_gemm[v6-ragged_3000x5000x2000-bf16]",
                {**info, "version": "v6", "kernel_path": "v5",
                 "preset": "ragged_3000x5000x2000", "m": 3000, "n": 5000, "k": 2000,
                 "tflops": 266.5, "pct_of_cublas": 41.7}))
    template = benchmarks[0]
    for instruction, (tflops, sustained, clock, power) in CEILINGS.items():
        benchmarks.append(_benchmark_like(template, f"test_tensor_core_ceiling[{instruction}]", {
            "kind": "tensor_core_ceiling", "instruction": instruction, "dtype": "bf16",
            "time_ms": 1.0, "flop_per_launch": int(tflops * 1e9), "tflops": tflops,
            "cublas_8192_tflops": CUBLAS_8192_TFLOPS,
            "pct_of_cublas_8192": 100 * tflops / CUBLAS_8192_TFLOPS,
            "sustained_tflops": sustained, "sustained_s": 2.0,
            "nvml": {"available": True, "gpus": ["GPU-h200x1"], "period_ms": 20.0,
                     "energy_j": [750.0], "mean": {"sm_clock_mhz": [clock],
                                                   "power_w": [power]}},
            "device_name": "NVIDIA H200", "peak_tflops": H200_BF16_PEAK,
            "pct_of_peak": 100 * tflops / H200_BF16_PEAK}))
    document["benchmarks"] = benchmarks
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="module")
def gemm_built(tmp_path_factory) -> dict:
    """The GPU fixture (h200x4, the old ladder) with the newer single-H200 run, HTML and PDF."""
    folder = tmp_path_factory.mktemp("gemm")
    newer = single_h200_run(folder / "h200x1.json")
    written = build.build([str(GPU_FIXTURE), str(newer)], folder / "out")
    return {"html": written["html"].read_text(), "pdf": written["pdf"],
            "rows": [b["extra_info"] for b in json.loads(newer.read_text())["benchmarks"]]}


def table_cells(html: str, table_id: str) -> list[list[str]]:
    """The body cells of one data table, as text."""
    block = re.search(rf'<div class="table-block[^"]*" id="{re.escape(table_id)}">(.*?)</div>',
                      html, re.S)
    assert block, f"no table {table_id}"
    body = block.group(1).split("<tbody>")[1].split("</tbody>")[0]
    return [[html_text.unescape(re.sub(r"<[^>]+>", "", cell))
             for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def test_newest_gemm_run_of_a_gpu_model_supersedes_other_machines():
    def gemm(machine: str, run: int, version: str, device: str, preset: str = "p") -> dict:
        return {"kind": "gemm", "machine": machine, "run": run, "version": version,
                "preset": preset, "m": 8, "n": 8, "k": 8, "dtype": "fp32", "tflops": 1.0,
                "device_name": device, "kernel_path": version}

    rows = [gemm("h200x4", 0, "v1", "NVIDIA H200"), gemm("h200x4", 0, "v2", "NVIDIA H200"),
            gemm("h200x4", 0, "v3", "NVIDIA H200", preset="only-in-the-old-run"),
            gemm("h100x1", 1, "v1", "NVIDIA H100 80GB HBM3"),
            gemm("h200x1", 2, "v1c", "NVIDIA H200"), gemm("h200x1", 2, "v1", "NVIDIA H200")]
    kept = {(r["machine"], r["run"], r["version"]) for g in analysis.gemm_ladder(rows)
            for r in g["rows"]}
    # H200: only the newest run (h200x1), none of the h200x4 rows, not even the shape the
    # newer run lacks; the H100's older run is another GPU model and stays.
    assert kept == {("h200x1", 2, "v1"), ("h200x1", 2, "v1c"), ("h100x1", 1, "v1")}
    assert [r["version"] for g in analysis.gemm_ladder(rows) if g["machine"] == "h200x1"
            for r in g["rows"]] == ["v1", "v1c"]


def test_newer_single_h200_run_replaces_the_h200x4_gemm_rows_in_the_report(gemm_built):
    html = gemm_built["html"]
    assert 'id="tab-gemm-h200x1"' in html and 'id="tab-gemm-h200x4"' not in html
    assert 'id="fig-gemm-h200x1"' in html and 'id="fig-gemm-h200x4"' not in html
    cells = table_cells(html, "tab-gemm-h200x1")
    assert {row[0] for row in cells} == {"4096×4096×4096", "3000×5000×2000"}
    assert [row[2] for row in cells if row[1] == "fp32"] == ["v1", "v1c", "v2", "v3", "cublas"]
    new_v1 = next(r for r in gemm_built["rows"] if r.get("version") == "v1")
    assert next(row for row in cells if row[2] == "v1")[3] == fmt(new_v1["tflops"])
    # The seed step follows the same rule: the h200x1 rows only.
    assert {row[0] for row in table_cells(html, "tab-seed")} == {"h200x1"}
    assert "Left out here" in html and str(GPU_FIXTURE) in html


def test_tensor_core_ceiling_table_renders_its_numbers(gemm_built, built):
    cells = table_cells(gemm_built["html"], "tab-tc-ceilings-h200x1")
    expected = [[instruction, fmt(tflops), fmt(100 * tflops / H200_BF16_PEAK),
                 fmt(100 * tflops / CUBLAS_8192_TFLOPS), fmt(sustained), fmt(clock), fmt(power)]
                for instruction, (tflops, sustained, clock, power) in CEILINGS.items()]
    assert cells == expected
    pypdf = pytest.importorskip("pypdf")
    text = re.sub(r"\s+", " ", "\n".join(page.extract_text()
                                         for page in pypdf.PdfReader(gemm_built["pdf"]).pages))
    assert "Tensor-core ceilings on h200x1" in text
    assert "v6 by the wgmma ceiling" in text
    for instruction, (tflops, *_) in CEILINGS.items():
        assert f"{instruction} {fmt(tflops)}" in text
    assert f"{fmt(CUBLAS_8192_TFLOPS)} TFLOP/s at 8192³" in text
    # Without ceiling rows there is no table and no heading for them.
    assert "tab-tc-ceilings" not in built["html"] and "Tensor-core ceilings" not in built["html"]


def test_ceiling_table_without_sustained_rate_or_peak():
    from reports.sections import Run, ceiling_table, section_gemm

    run = Run(0, "gpu", "r.json", "pytest", "pytest", "quick", False, None,
              {"gpu_names": ["Some GPU"]})
    row = {"kind": "tensor_core_ceiling", "machine": "gpu", "run": 0, "rounds": 5,
           "instruction": "mma.sync", "dtype": "bf16", "tflops": 300.0,
           "cublas_8192_tflops": 400.0, "pct_of_cublas_8192": 75.0, "device_name": "Some GPU",
           "peak_tflops": None, "pct_of_peak": None}
    table = ceiling_table(analysis.tensor_core_ceilings([row])[0], [run])
    assert table.headers == ["instruction", "TFLOP/s", "of datasheet peak (%)",
                             "of cuBLAS 8192³ (%)"]
    assert [c.text for c in table.rows[0]] == ["mma.sync", "300", "n/a", "75.0"]
    assert "No datasheet peak is on record" in table.caption
    assert section_gemm([], [run])["ceilings"] == []


def test_every_gemm_version_has_its_own_fixed_colour():
    from reports.figures import version_color

    colours = [version_color(v) for v in analysis.GEMM_VERSION_ORDER]
    assert len(set(colours)) == len(colours)
    assert version_color("cublas") == "#222222"


def test_v6_rows_that_ran_v5s_kernel_are_marked(gemm_built, built):
    cells = table_cells(gemm_built["html"], "tab-gemm-h200x1")
    v6 = {row[0]: row[2] for row in cells if row[2].startswith("v6")}
    assert v6 == {"4096×4096×4096": "v6", "3000×5000×2000": "v6 (ran v5's kernel)"}
    assert "are v5's kernel" in html_text.unescape(gemm_built["html"])  # the bar chart's caption
    # Rows of runs before v1c existed: their v1 was the coalesced kernel, shown as v1c.
    old = table_cells(built["html"], "tab-gemm-h200x4")
    assert "v1c (recorded as v1)" in {row[2] for row in old}
    assert "v1" not in {row[2] for row in old}


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
    anchor = 355.1  # docs/ANCHORS.md, nccl-tests 4 GPU, 1 GiB
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
