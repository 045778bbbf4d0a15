"""Held-out validation, the interference selection, stragglers, the sweep, the CLIs' refusals
and docs/costmodel.md against the command that generates its tables."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from impl.costmodel import accuracy, heldout, predict, validate
from impl.costmodel.fabric import MeasuredSweep, measured_sweep
from impl.costmodel.inputs import interference
from impl.costmodel.scale import expected_max_of_normals
from reports.view import View
from tests.committed import RESULTS, ROOT_COPY

ROOT = Path(__file__).resolve().parent.parent.parent
H200 = [str(RESULTS / "h200x2"), str(RESULTS / "h200x4"), str(RESULTS / "h200x1")]


@pytest.fixture(scope="module")
def every_run():
    return validate.load_rows(H200, merged=False)


@pytest.fixture(scope="module")
def h200x2_cells(every_run):
    from impl.rows.merge import merge_rows

    return [c for c in accuracy.interleaved_cells(merge_rows(every_run))
            if c.row["machine"] == "h200x2"]


def test_other_runs_take_no_input_from_the_checked_run(every_run, h200x2_cells):
    assert len(h200x2_cells) == 4  # 2 workloads × K = 5, 20
    for cell in h200x2_cells:
        inputs = heldout.other_runs(cell, every_run)
        assert isinstance(inputs, accuracy.Inputs), inputs
        run, file = cell.row["run"], cell.row["file"]
        assert inputs.compute["run"] != run
        assert inputs.compute["device"] == cell.row["device"]
        # Messages name each input's file (inputs.run_name), never the checked cell's.
        assert file not in inputs.interference.source
        assert re.search(r"\(h200x\d, \S+\.json, \d rank", inputs.interference.source)
        assert isinstance(inputs.comm, MeasuredSweep)
        sweep_files = set(re.findall(r"h200x4 (\S+?\.json)", inputs.comm_source))
        assert sweep_files and file not in sweep_files
        assert all(name.startswith(str(RESULTS / "h200x4")) for name in sweep_files)
    # With only the cell's own run there is nothing to draw from: it says so.
    cell = h200x2_cells[0]
    alone = [r for r in every_run if r["run"] == cell.row["run"]]
    assert heldout.other_runs(cell, alone) == (
        f"no compute-only step of {cell.row['workload']} on NVIDIA H200 in another run")


def test_leave_one_k_out_leaves_the_k_out(every_run, h200x2_cells):
    for cell in h200x2_cells:
        inputs = heldout.leave_one_k_out(cell, every_run)
        assert inputs.compute["chunks"] != cell.row["chunks"]
        other_k = ({5, 20} - {cell.row["chunks"]}).pop()
        assert f"K = {other_k} " in inputs.comm_source


def _interference_row(run: int, world: int, ratios: dict) -> dict:
    return {"kind": "interference", "workload": "w", "profile": "nvlink", "device": "GPU",
            "machine": "m", "run": run, "world_size": world,
            "slowdown": {kind: {"ratio": {"value": v}} for kind, v in ratios.items()}}


def test_a_one_rank_row_never_stands_in_for_an_all_reduce_ratio():
    two_ranks = _interference_row(1, 2, {"all-reduce": 1.18, "copy": 1.12, "add": 1.13})
    one_rank_newer = _interference_row(2, 1, {"copy": 1.14, "add": 1.14})
    chosen = interference([two_ranks, one_rank_newer], "w", "GPU", "nvlink", "m")
    assert (chosen.all_reduce, chosen.copy) == (1.18, 1.12)
    # Without the 2-rank row (or with its run held out), the add kernel stands in, and says so.
    held_out = interference([two_ranks, one_rank_newer], "w", "GPU", "nvlink", "m",
                            exclude_run=1)
    assert held_out.all_reduce == 1.14
    assert "memory-bound add standing in for NCCL's reduction kernels ×1.14" in held_out.source
    assert interference([], "w", "GPU", "nvlink", "m").all_reduce == 1.0


def test_the_sweep_is_read_between_its_sizes():
    sweep = measured_sweep([{"size_bytes": b, "time_ms": t}
                            for b, t in ((1e6, 0.03), (4e6, 0.04), (4e6, 0.05), (16e6, 0.1))],
                           "test")
    assert sweep.times_ms == (0.03, 0.045, 0.1)  # median of the two runs at 4 MB
    assert sweep.all_reduce_ms(2.5e6) == pytest.approx(0.0375)
    assert sweep.all_reduce_ms(0) == 0.03  # never below the smallest size's time
    assert sweep.all_reduce_ms(28e6) == pytest.approx(0.1 + 0.055 / 12e6 * 12e6)
    assert sweep.alpha_ms == pytest.approx(0.03 - 0.015 / 3e6 * 1e6)


def test_stragglers_are_the_expected_maximum_of_n_normal_draws():
    # Closed forms: 1/√π for 2 draws, 3/(2√π) for 3.
    assert expected_max_of_normals(1) == 0.0
    assert expected_max_of_normals(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-6)
    assert expected_max_of_normals(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), abs=1e-6)
    assert expected_max_of_normals(1024) == pytest.approx(3.248, abs=0.002)


def test_a_mistyped_results_file_is_one_line_exit_2(tmp_path, capsys):
    source = RESULTS / "cpu-2core" / "20261123T194800Z-_d1slign.json"
    data = json.loads(source.read_text())
    first = next(b for b in data["benchmarks"] if "world_size" in b["extra_info"])
    first["extra_info"]["world_size"] = "two"
    broken = tmp_path / "20261123T194800Z-ws.json"
    broken.write_text(json.dumps(data))
    for main in (validate.main, lambda argv: predict.main([*argv, "--fabric", "ib400-h200x8"])):
        assert main([str(broken)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "extra_info.world_size = 'two'; expected a number" in err


def test_a_deeply_nested_fabric_file_is_one_line_exit_2(tmp_path, capsys):
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    results = str(RESULTS / "h200x1" / "20261125T022950Z-649c5il2.json")
    assert predict.main([results, "--fabric", str(deep)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {deep}: nested too deeply to be a fabric file (a fabric file has " \
                  "two levels: [node] and [network] of { value, source })\n"


def test_a_fabric_of_another_gpu_model_is_warned_about(capsys):
    results = str(RESULTS / "h200x1" / "20261125T022950Z-649c5il2.json")
    assert predict.main([results, "--fabric", "ib400-h100x8"]) == 0
    err = capsys.readouterr().err
    assert err == ("warning: compute measured on NVIDIA H200, fabric ib400-h100x8 is for H100: "
                   "these predictions mix two machines\n")
    assert predict.default_fabric("NVIDIA H100 80GB HBM3") == "ib400-h100x8"
    assert predict.default_fabric("cpu") is None


def test_the_doc_holds_what_the_command_prints(capsys, monkeypatch):
    """docs/costmodel.md's tables are `python -m impl.costmodel.validate --markdown`'s output
    over the committed results, run where results/ is (the messages name files by the path
    it finds them at: results/<label>/<run>.json): regenerate the doc when the results or the
    model change."""
    doc = (ROOT / "docs" / "costmodel.md").read_text(encoding="utf-8")
    begin = doc.index("-->\n", doc.index("<!-- generated by:")) + 4
    end = doc.index("<!-- end of generated text -->")
    monkeypatch.chdir(ROOT_COPY)
    assert validate.main(["--markdown"]) == 0
    assert doc[begin:end] == capsys.readouterr().out


def test_the_chapter_shows_the_held_out_table_and_the_decisions(every_run):
    from impl.rows.merge import merge_rows
    from reports.sections import prediction

    section = prediction.section(View.of(merge_rows(every_run), []))
    table = section["held_out"]
    assert table.id == "tab-model-held-out"
    assert table.headers == ["machine", "variant", *heldout.SPLITS, heldout.TRIVIAL]
    assert {row[1].text for row in table.rows} >= {"sequential", "chunked", "ddp", "threaded"}
    assert "h200x2" in {row[0].text for row in table.rows}
    heads = [line.split(":")[0] for line in section["decisions"]]
    assert heads[:2] == ["Ranking", "Best variant per cell"]
    last = heads.index("Overlap efficiency")
    assert set(heads[2:last]) <= {"Wrong pick"}  # one line per wrongly picked cell
    assert set(heads[last + 1:]) <= {"Does not reproduce"}  # one per cell left out
    assert section["scaling"][0].startswith("PREDICTED weak-scaling efficiency of chunked at "
                                            "1024 GPUs on ib400-h200x8")
    assert not any("assumed" in note for note in section["notes"])  # the H200 file's measured
    from impl.costmodel.fabric_file import load_fabric

    assert prediction.assumed_fields(load_fabric("ib400-h100x8")) == [
        "node.busbw_gbps", "node.launch_us", "node.copy_gbps"]


def test_overlapping_bands_cannot_be_separated():
    from impl.costmodel.scale import Prediction, separable

    def predicted(strategy, step, band):
        return Prediction("w", strategy, 8, step, None, None, None, band=band)

    fast, close, slow = predicted("a", 10.0, 0.05), predicted("b", 10.8, 0.05), \
        predicted("c", 12.0, 0.05)
    # b's band reaches down to 10.26, under a's top of 10.5; c's only down to 11.4.
    assert separable([slow, close, fast]) == (fast, [close])
    assert separable([slow, fast]) == (fast, [])
    assert predict.fastest_lines([fast, close, slow], [8]) == [
        "8 GPUs: cannot separate a from b (bands overlap)"]


def test_markdown_without_a_gpu_cell_is_one_line_exit_2(capsys):
    cpu = str(RESULTS / "cpu-2core" / "20261123T194800Z-_d1slign.json")
    assert validate.main(["--markdown", cpu]) == 2
    assert capsys.readouterr().err == (f"error: {cpu}: Held-out validation: no GPU cell (NCCL, "
                                       "2 or more ranks) in these files.\n")


def test_every_pair_ordered_the_wrong_way_is_listed_with_its_interval(every_run):
    from impl.rows.merge import merge_rows

    decided = heldout.validate_held_out(every_run, merge_rows(every_run)).decisions
    wrong = decided.misordered
    assert len(wrong) == decided.pairs_separated - decided.pairs_right > 0
    for pair in wrong:
        assert 0 < pair.low_ms <= pair.measured_ms <= pair.high_ms  # measured slower, clearly
        assert pair.predicted_ms >= 0  # the model put it no slower
    # The copy-engine in the comm-heavy cell at K = 20: 0.68 ms slower than chunked+update,
    # measured; put 0.68 ms faster, within the two predictions' bands: cannot separate them.
    copy = next(p for p in wrong if p.slower == "copy-engine" and p.faster == "chunked+update"
                and p.cell == "h200x2 mlp_8192x12_b1024_bf16 K = 20")
    assert copy.measured_ms == pytest.approx(0.68, abs=0.01)
    assert copy.predicted_ms == pytest.approx(0.68, abs=0.01) and not copy.bands_apart
    # Measured 0.20 ms slower than threaded, put 1.28 ms faster: the bands overlap.
    close = next(p for p in wrong if p.slower == "copy-engine+update" and p.faster == "threaded")
    assert close.measured_ms == pytest.approx(0.20, abs=0.01) and not close.bands_apart
    # With 90% bands, few pairs are apart, and all 16 of those are ordered right.
    assert (decided.pairs_right_apart, sum(p.bands_apart for p in wrong)) == (16, 0)


def test_a_cell_that_does_not_reproduce_is_named_and_left_out(every_run):
    """GPT-small at K = 50 on 2 of the 4× H200: chunked measured 43.27 ms in the newest run,
    30.84 ms in an earlier one (29% apart, more than the 10% goal): it cannot validate the
    model, so the table leaves it out and a line says so, with both measurements."""
    from impl.rows.merge import merge_rows

    found = heldout.validate_held_out(every_run, merge_rows(every_run))
    assert found.table["h200x4", "chunked"][heldout.HEADLINE].cells == 19
    assert found.table["h200x4", "threaded"][heldout.HEADLINE].cells == 20
    [line] = found.unreproduced
    newest, earlier = (RESULTS / "h200x4" / name
                       for name in ("20261122T001808Z.json", "20261121T225754Z.json"))
    assert line.startswith("Does not reproduce: h200x4 gpt_small_bf16 K = 50, 2 ranks, "
                           f"chunked: 43.27 ms ({newest}, validated) against 30.84 ms "
                           f"({earlier}), -29%, more than the 10% goal")


def test_the_efficiencys_band_is_its_inputs_bands_propagated():
    # E = (S − T)/(S − L) at S = 10, T = 8, L = 6 ms: 0.5. A 10% band on S moves E by
    # (T − L)/(S − L)² · S · 0.1 = 2/16 · 1 = 0.125; 5% on T by T · 0.05/(S − L) = 0.1; 2% on
    # L by (S − T)/(S − L)² · L · 0.02 = 2/16 · 0.12 = 0.015; independent: √ of the squares.
    assert heldout.efficiency_band(10, 8, 6, 0.1, 0.05, 0.02) == pytest.approx(
        math.sqrt(0.125 ** 2 + 0.1 ** 2 + 0.015 ** 2))
    assert heldout.efficiency_band(10, 8, 6, 0, 0, 0) == 0.0
    assert heldout.efficiency_band(6, 6, 6, 0.1, 0.1, 0.1) == math.inf  # nothing to overlap


def test_a_checks_band_is_the_others_conformal_error_and_its_input_interval_in_quadrature():
    def check(chunks, predicted, compute_band=0.0, variant="v"):
        return accuracy.Check("m", "w", chunks, 2, "nvlink", variant, 100.0, None, None,
                              predicted, None, None, None, "", run=1, compute_band=compute_band)

    # |measured / predicted − 1| in three cells: 2/102, 4/96, 6/106. With two others, the
    # conformal rank ⌈3 · 0.9⌉ = 3 exceeds them: the largest of the others. The first's band:
    # max(4/96, 6/106) with its compute-only input's 3% interval, in quadrature.
    checks = [check(5, 102.0, 0.03), check(10, 96.0), check(20, 106.0)]
    found = heldout.bands(checks)
    assert found["m", 1, "w", 5, 2, "nvlink", "v"] == pytest.approx(math.hypot(6 / 106, 0.03))
    assert found["m", 1, "w", 10, 2, "nvlink", "v"] == pytest.approx(6 / 106)
    assert found["m", 1, "w", 20, 2, "nvlink", "v"] == pytest.approx(4 / 96)


def test_the_conformal_band_takes_the_rank_that_covers_nine_in_ten():
    errors = [i / 100 for i in range(1, 20)]  # 19 errors: rank ⌈20 · 0.9⌉ = 18
    assert heldout.conformal_band(errors) == pytest.approx(0.18)
    assert heldout.conformal_band([0.05, 0.01]) == 0.05  # too few: the largest
    assert heldout.conformal_band([]) is None
    # On held-out draws of the same spread, the band covers about 90%.
    rng = np.random.default_rng(7)
    band = heldout.conformal_band(list(np.abs(rng.normal(0, 0.05, 1999))))
    assert 0.89 <= np.mean(np.abs(rng.normal(0, 0.05, 20000)) <= band) <= 0.92


def test_a_knob_variants_band_is_its_strategy_familys():
    """chunked+update's one cell cannot estimate a band: it pools with chunked's."""
    def check(chunks, variant, predicted):
        return accuracy.Check("m", "w", chunks, 2, "nvlink", variant, 100.0, None, None,
                              predicted, None, None, None, "", run=1)

    checks = [check(5, "chunked", 110.0), check(10, "chunked", 98.0),
              check(20, "chunked+update", 101.0), check(5, "ddp", 150.0)]
    found = heldout.relative_bands(checks)
    assert found["chunked+update"] == found["chunked"] == pytest.approx(10 / 110)
    assert found["ddp"] == pytest.approx(50 / 150)
