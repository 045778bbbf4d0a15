"""GEMM: newest run per GPU model, tensor-core ceilings, v6's fallback, cuBLAS's own row."""

from __future__ import annotations

import copy
import html as html_text
import json
import re
from pathlib import Path

import pytest

from reports import analysis, build
from reports.format import fmt
from reports.view import View
from tests.report.helpers import (
    GPU_FIXTURE,
    infos,
    section_html,
    text_of,
)

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
    """The body cells of one data table, as text (a cell's interval line included)."""
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
    cells_ = table_cells(html, "tab-gemm-h200x1")
    assert {row[0] for row in cells_} == {"4096×4096×4096", "3000×5000×2000"}
    assert [row[2] for row in cells_ if row[1] == "fp32"] == ["v1", "v1c", "v2", "v3", "cublas"]
    new_v1 = next(r for r in gemm_built["rows"] if r.get("version") == "v1")
    assert next(row for row in cells_ if row[2] == "v1")[3] == fmt(new_v1["tflops"])
    # The seed step follows the same rule: the h200x1 rows only.
    assert {row[0] for row in table_cells(html, "tab-seed")} == {"h200x1"}
    assert "Left out here" in html and str(GPU_FIXTURE) in html
    # Dense: the ladder's table is in the appendix, its figures in the chapter.
    assert 'id="tab-gemm-h200x1"' in section_html(html, "tables")
    assert 'id="fig-gemm-h200x1"' in section_html(html, "gemm")


def test_cublas_row_against_its_own_baseline_is_explained(built):
    table = re.search(r'id="tab-gemm-h200x4">(.*?)</div>', built["html"], re.S).group(1)
    cublas = [r for r in infos(GPU_FIXTURE, "gemm") if r["version"] == "cublas"]
    widest = max(cublas, key=lambda r: abs(r["pct_of_cublas"] - 100))
    note = text_of(table)
    assert ("cuBLAS against its own baseline: the same kernel timed twice in one process"
            in note)
    assert f"up to {fmt(widest['pct_of_cublas'])}% at {widest['m']}×{widest['n']}×" \
           f"{widest['k']} {widest['dtype']}" in note
    marked = re.findall(r'<td>cublas</td><td class="num">[^<]*</td><td class="num">[^<]*'
                        r'<sup class="mark">(\w)</sup>', table)
    assert len(marked) == len(cublas) and len(set(marked)) == 1


def test_tensor_core_ceiling_table_renders_its_numbers(gemm_built, built):
    cells_ = table_cells(gemm_built["html"], "tab-tc-ceilings-h200x1")
    expected = [[instruction, fmt(tflops), fmt(100 * tflops / H200_BF16_PEAK),
                 fmt(100 * tflops / CUBLAS_8192_TFLOPS), fmt(sustained), fmt(clock), fmt(power)]
                for instruction, (tflops, sustained, clock, power) in CEILINGS.items()]
    assert cells_ == expected
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
    from reports.captions import Run
    from reports.sections.gemm import ceiling_table, section_gemm

    run = Run(0, "gpu", "r.json", "pytest", "pytest", "quick", False, None,
              {"gpu_names": ["Some GPU"]})
    row = {"kind": "tensor_core_ceiling", "machine": "gpu", "run": 0, "rounds": 5,
           "instruction": "mma.sync", "dtype": "bf16", "tflops": 300.0,
           "cublas_8192_tflops": 400.0, "pct_of_cublas_8192": 75.0, "device_name": "Some GPU",
           "peak_tflops": None, "pct_of_peak": None}
    table = ceiling_table(analysis.tensor_core_ceilings([row])[0], View.of([], [run]))
    assert table.headers == ["instruction", "TFLOP/s", "of datasheet peak (%)",
                             "of cuBLAS 8192³ (%)"]
    assert [c.text for c in table.rows[0]] == ["mma.sync", "300", "n/a", "75.0"]
    assert "No datasheet peak is on record" in table.caption
    assert section_gemm(View.of([], [run]))["ceilings"] == []


def test_every_gemm_version_has_its_own_fixed_colour():
    from reports.figures import version_color

    colours = [version_color(v) for v in analysis.GEMM_VERSION_ORDER]
    assert len(set(colours)) == len(colours)
    assert version_color("cublas") == "#222222"


def test_v6_rows_that_ran_v5s_kernel_are_marked(gemm_built, built):
    cells_ = table_cells(gemm_built["html"], "tab-gemm-h200x1")
    v6 = {row[0]: row[2] for row in cells_ if row[2].startswith("v6")}
    assert v6 == {"4096×4096×4096": "v6", "3000×5000×2000": "v6 (ran v5's kernel)"}
    assert "are v5's kernel" in html_text.unescape(gemm_built["html"])  # the bar chart's caption
    # Rows of runs before v1c existed: their v1 was the coalesced kernel, shown as v1c.
    old = table_cells(built["html"], "tab-gemm-h200x4")
    assert "v1c (recorded as v1)" in {row[2] for row in old}
    assert "v1" not in {row[2] for row in old}
