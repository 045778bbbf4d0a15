"""The cost model against the committed measurements, the prediction CLI and its chapter."""

from __future__ import annotations

import pytest

from impl.costmodel import accuracy, predict, variant_plans
from impl.costmodel.compute import parameter_layout
from impl.costmodel.validate import load_rows
from reports.sections import prediction
from reports.view import View
from tests.committed import RESULTS

H200X2 = str(RESULTS / "h200x2" / "20261123T094012Z.json")
CPU = str(RESULTS / "cpu-2core" / "20261123T194800Z-_d1slign.json")


@pytest.fixture(scope="module")
def h200_rows():
    return load_rows([H200X2])


@pytest.fixture(scope="module")
def h200_checks(h200_rows):
    return accuracy.validate(h200_rows)


def test_chunked_and_sequential_meet_the_goal_on_2_h200(h200_checks):
    summary = accuracy.by_strategy(h200_checks)
    for strategy in ("sequential", "chunked", "ddp"):
        assert summary["h200x2", strategy]["meets_goal"], summary["h200x2", strategy]
    assert summary["h200x2", "chunked"]["median_abs_error"] < 0.02
    assert summary["h200x2", "chunked"]["cells"] == 4  # 2 workloads × K = 5, 20


def test_without_interference_the_model_is_optimistic(h200_checks):
    summary = accuracy.by_strategy(h200_checks)
    for strategy in ("chunked", "threaded", "ddp", "copy-engine", "chunked+update"):
        assert summary["h200x2", strategy]["median_calm_error"] < -0.05
    # and the interference brings it back: less optimistic with it than without
    for check in h200_checks:
        if check.error is not None and variant_plans.variant(check.variant)[0] != "sequential":
            assert check.error >= check.calm_error - 1e-12


def test_every_miss_says_why(h200_checks):
    missed = [c for c in h200_checks if c.missed]
    assert missed
    for check in missed:
        assert accuracy.reason(check) != "within the goal"
    ctas = next(c for c in h200_checks if c.variant == "chunked+ctas8")
    assert accuracy.reason(ctas).startswith("not modelled: NCCL capped at 8 CTAs")
    threaded = next(c for c in missed if c.variant == "threaded")
    assert "host thread's hand-off" in accuracy.reason(threaded)


@pytest.mark.parametrize("path", [H200X2, CPU])
def test_ddp_buckets_are_those_ddp_made(path):
    """The model's buckets against the bucket counts DDP's reducer reported in each cell."""
    for row in load_rows([path]):
        if row.get("kind") != "comparison" or not row.get("ddp_bucket_counts"):
            continue
        spans, size = parameter_layout(row["workload"])
        for name, count in row["ddp_bucket_counts"].items():
            assert len(variant_plans.collective_ends(name, row["chunks"], spans, size)) == count, (
                row["workload"], row["chunks"], name)


def test_predict_prints_every_strategy_at_every_world_size(capsys):
    assert predict.main([H200X2, "--fabric", "ib400-h200x8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PREDICTED by the cost model")
    for text in ("mlp_8192x12_bf16", "mlp_8192x12_b1024_bf16", "1024", "chunked+update",
                 "peer copies reach only the 8 GPUs of a node", "median |err|"):
        assert text in out
    lines = [line for line in out.splitlines() if " ddp-25mb " in line and "GPUs:" not in line]
    assert len(lines) == 2 + 1  # one block per workload, one summary line


def test_predict_refuses_bad_input_with_one_line(capsys, tmp_path):
    assert predict.main([H200X2, "--fabric", "infiniband"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: infiniband: no fabric of that name in ")
    assert err.count("\n") == 1
    gemm_only = str(RESULTS / "h200x1" / "20261122T001541Z.json")
    assert predict.main([gemm_only, "--fabric", "ib400-h200x8"]) == 2
    assert capsys.readouterr().err == (
        f"error: {gemm_only}: no compute-only timeline (an overlap cell of "
        "suite/bench_overlap.py, any world size) to predict from\n")
    with pytest.raises(SystemExit):
        predict.main([H200X2, "--fabric", "ib400-h200x8", "--chunks", "0"])
    assert "--chunks: '0': allowed an integer from 1 to 256" in capsys.readouterr().err


def test_the_chapter_renders_predictions_and_the_validation(h200_rows, h200_checks):
    section = prediction.section(View.of(h200_rows, []))
    assert not section["empty"]
    [device] = section["devices"]  # one GPU model: one figure, a row of panels per workload
    assert device["figure"].caption.startswith("PREDICTED, not measured")
    assert "measured on h200x2" in device["figure"].caption
    tables = {t.id: t for t in section["tables"]}
    assert [t for t in tables if t.startswith("tab-predicted-")] == [
        "tab-predicted-ib400-h200x8-0", "tab-predicted-ib400-h200x8-1"]
    caption = tables["tab-predicted-ib400-h200x8-0"].caption
    assert caption.startswith("PREDICTED for mlp_8192x12_b1024_bf16")
    assert "from compute-only " in caption and ", interference " in caption
    assert tables["tab-predicted-ib400-h200x8-0"].headers[2:] == [
        f"{w} GPUs" for w in (8, 16, 32, 64, 128, 256, 512, 1024)]
    assert "tab-fabric-ib400-h200x8" in tables
    assert len(tables["tab-model-cells"].rows) == len([c for c in h200_checks
                                                       if c.interleaved])
    assert section["summaries"][0].id == "tab-model-interleaved"  # GPU machines first
