"""The GEMM sweep's report figures from six real rows (tests/data/gemm_sweep_rows.json, taken
from the H100 sweep committed under results/h100x1/)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from reports.sections import gemm_sweep

DATA = Path(__file__).parent.parent / "data" / "gemm_sweep_rows.json"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [dict(row, machine="h100x1", run=0) for row in json.loads(DATA.read_text())["rows"]]


def test_geometric_mean_and_its_refusal() -> None:
    assert gemm_sweep.geometric_mean([0.5, 2.0]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"geometric mean needs positive values; got \[1.0, 0.0\]"):
        gemm_sweep.geometric_mean([1.0, 0.0])


def test_headline_quotes_the_family_not_the_best_row(rows: list[dict]) -> None:
    v7 = [r["vs_cublas"]["v7"]["value"] for r in rows]
    assert min(v7) == pytest.approx(0.45298, abs=1e-5)
    expected_mean = math.exp(sum(map(math.log, v7)) / 6)
    line = gemm_sweep.sweep_headline(rows)
    assert line == (
        "own GEMM v7 against cuBLAS on NVIDIA H100 80GB HBM3, 6 shapes × dtypes: geometric "
        f"mean {expected_mean:.3g} (0.739 without the unaligned family), minimum 0.453 "
        "(held_out_324x920x4640 bf16); v6 0.506 and 0.217")
    assert gemm_sweep.sweep_headline([]) is None


def test_family_summary_per_dtype_with_every_family_last(rows: list[dict]) -> None:
    summary = gemm_sweep.family_summary(rows)
    assert [(s["dtype"], s["family"]) for s in summary] == [
        ("bf16", "square"), ("bf16", "skinny_m"), ("bf16", "ragged"), ("bf16", "held_out"),
        ("fp16", "transformer"), ("fp16", "unaligned"), ("bf16", "all"), ("fp16", "all")]
    bf16 = summary[-2]
    assert bf16["rows"] == 4 and bf16["v7_worst"] == "held_out_324x920x4640"
    assert bf16["v7_min"] == pytest.approx(0.45298, abs=1e-5)


def test_rows_carry_tile_roofline_and_interval(rows: list[dict]) -> None:
    shown = {(r["preset"], r["dtype"]): r for r in gemm_sweep.sweep_rows(rows)}
    skinny = shown[("skinny_m_64x8192x8192", "bf16")]
    assert skinny["v7_tile"] == "128×128, ×8" and skinny["roofline_bound"] == "memory"
    odd = shown[("unaligned_1000x1001x999", "fp16")]
    assert odd["v7_tile"] == "128×128, ×64 (copies a+b)"
    interval = shown[("square_8192", "bf16")]["v7_vs_cublas"]
    assert interval["low"] <= interval["value"] <= interval["high"] and interval["rounds"] == 15


def test_split_k_shows_in_the_tile_column(rows: list[dict]) -> None:
    row = next(r for r in rows if r["preset"] == "held_out_324x920x4640")
    (shown,) = gemm_sweep.sweep_rows([dict(row, v7_splits=5)])
    assert shown["v7_tile"] == "128×128, ×8, split-K 5"


def test_family_table_for_the_docs(rows: list[dict], tmp_path: Path, capsys) -> None:
    table = gemm_sweep.family_markdown(rows).splitlines()
    assert table[0].startswith("| family | dtype | shapes | v7 geomean")
    assert table[-2] == "| all | bf16 | 4 | " + table[-2].split(" | ", 3)[3]
    assert "0.45 (held_out_324x920x4640)" in table[-2]
    results = tmp_path / "sweep.json"
    results.write_text(json.dumps({"benchmarks": [{"extra_info": r} for r in rows]}))
    assert gemm_sweep.main([str(results)]) == 0
    assert capsys.readouterr().out.splitlines() == table
    assert gemm_sweep.main([str(results), str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err == (
        "usage: python -m reports.sections.gemm_sweep [--variants] RESULTS.json [RESULTS.json "
        f"...] (sweep results files, their rows pooled); got {results} "
        f"{tmp_path / 'missing.json'}\n")


def test_files_drawn_apart_are_pooled_and_shapes_short_of_cublas_counted(
        rows: list[dict], tmp_path: Path, capsys) -> None:
    halves = []
    for index, half in enumerate((rows[:3], rows[3:])):
        halves.append(tmp_path / f"seed{index}.json")
        halves[-1].write_text(json.dumps({"benchmarks": [{"extra_info": r} for r in half]}))
    assert gemm_sweep.main([str(path) for path in halves]) == 0
    assert capsys.readouterr().out.splitlines() == gemm_sweep.family_markdown(rows).splitlines()
    bf16 = next(s for s in gemm_sweep.family_summary(rows) if s["family"] == "all"
                and s["dtype"] == "bf16")
    assert bf16["v7_short"] == sum(gemm_sweep.ratio(r, "v7") < 0.90 for r in rows
                                   if r["dtype"] == "bf16")
    assert bf16["v7_short"] == 3
