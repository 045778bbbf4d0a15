"""The report's tensor-parallel section on a real CPU run of suite/bench_tp.py.

tests/data/cpu-2core-tp.json was made on the 2-core machine with 4 gloo ranks, so that strong and
weak scaling have 1, 2 and 4 ranks:

    OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 4 --local-ranks-filter 0 \\
        -m pytest suite/bench_tp.py --suite-mode quick --world-sizes 1,2,4 \\
        --results-json tests/data/cpu-2core-tp.json

(one GEMM backend on CPU, so question 4's sentence is tested on rows built from it below).
"""

from __future__ import annotations

import copy
import html as html_text
import json
import re
from pathlib import Path

import pytest
from markupsafe import escape

from impl.rows.merge import benchmark_rows
from impl.tensor_parallel.metrics import TP_FIELDS
from reports import build
from reports.sections import tensor_parallel as tp_report
from reports.view import View
from tests.report.helpers import CPU_FIXTURE, run_build

TP_FIXTURE = Path(__file__).parent.parent / "data" / "cpu-2core-tp.json"
MACHINE = "cpu-2core"


def fixture_rows() -> list[dict]:
    document = json.loads(TP_FIXTURE.read_text())
    return benchmark_rows(document["suite"]["label"], 0, document["benchmarks"])


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("tp-report")
    result = run_build(str(TP_FIXTURE), "--out", str(out))
    assert result.returncode == 0, result.stderr
    html = (out / "report.html").read_text()
    section = re.search(r'<section id="tensor-parallel">(.*?)</section>', html, re.S).group(1)
    return {"out": out, "html": html, "section": section}


def test_section_has_scaling_comm_overlap_timeline_and_roofline_figures(built):
    presets = sorted({r["preset"] for r in tp_report.variant_rows(fixture_rows())})
    figure_ids = re.findall(r'<figure class="fig" id="([^"]+)">', built["section"])
    expected = [f"fig-tp-{kind}-{MACHINE}-{preset}" for preset in presets
                for kind in ("scaling", "comm", "gantt")]
    expected += [f"fig-tp-overlap-{MACHINE}", f"fig-tp-roofline-{MACHINE}"]
    assert sorted(figure_ids) == sorted(expected)
    for table_id in ("tab-tp-efficiency", f"tab-tp-overlap-{MACHINE}"):
        assert f'id="{table_id}"' in built["section"], table_id
    # The table of every variant is in the appendix of detail tables, the definitions in the
    # appendix of definitions; the section says where.
    for table_id, appendix in ((f"tab-tp-{MACHINE}", "detail"), ("tab-tp-fields", "definitions")):
        found = re.search(rf'<section id="{appendix}">(.*?)</section>', built["html"], re.S)
        assert f'id="{table_id}"' in found.group(1) and table_id not in built["section"]
    assert "The table of every tensor-parallel variant is in Appendix" in built["section"]


def test_numbers_and_verdicts_are_the_rows(built):
    rows = tp_report.variant_rows(fixture_rows())
    section = html_text.unescape(built["html"])
    for row in rows:
        assert tp_report.interval_text(row, "step_ms") in section, row["name"]
        if row["world_size"] > 1:
            assert tp_report.interval_text(row, "scaling_efficiency") in section, row["name"]
        if row["schedule"] == "overlapped":
            assert tp_report.interval_text(row, "overlap_speedup") in section, row["name"]
    verdicts = [r["verdicts"]["overlap_speedup"] for r in rows if r["schedule"] == "overlapped"]
    assert verdicts and all(v in section for v in verdicts)


def test_definitions_are_quoted_from_the_code(built):
    for field in TP_FIELDS:
        assert str(escape(field.definition)) in built["html"], field.name


def test_question_4_says_there_is_no_data_with_one_backend(built):
    line = (f"{MACHINE}, tp_mlp_h256_t512_fp32: no data to answer question 4 (only the torch "
            "GEMM backend was measured above one rank).")
    assert line in html_text.unescape(built["section"])
    pypdf = pytest.importorskip("pypdf")
    text = " ".join(page.extract_text() for page in pypdf.PdfReader(built["out"] / "report.pdf")
                    .pages)
    assert "no data to answer question 4" in " ".join(text.split())


def with_faster_backend(factor_eff: float, widen: bool) -> list[dict]:
    """The fixture's rows plus a second backend "v3" built from them: twice the 1-rank GEMM
    speed and ``factor_eff`` times the strong-scaling efficiency (``widen``: intervals so wide
    that they overlap the torch ones)."""
    rows = tp_report.variant_rows(fixture_rows())
    extra = []
    for row in rows:
        twin = copy.deepcopy(row)
        twin["gemm_backend"] = "v3"
        estimates = twin["estimates"]
        if row["scaling"] == "single":
            estimates["tflops_per_gpu"] = {k: v * 2 if isinstance(v, float) else v
                                           for k, v in estimates["tflops_per_gpu"].items()}
        efficiency = estimates["scaling_efficiency"]
        if efficiency["value"] is not None:
            scaled = efficiency["value"] * factor_eff
            efficiency.update(value=scaled, low=scaled * (0.01 if widen else 0.99),
                              high=scaled * (100 if widen else 1.01))
        extra.append(twin)
    return tp_report.variant_rows(rows + extra)


def test_question_4_sentence_comes_from_the_efficiency_table():
    rows = with_faster_backend(0.5, widen=False)
    efficiency = tp_report.efficiency_rows(rows)
    sentences = tp_report.question4(efficiency)
    torch_row = next(e for e in efficiency if e["gemm_backend"] == "torch"
                     and e["preset"] == "tp_mlp_h256_t512_fp32")
    v3_row = next(e for e in efficiency if e["gemm_backend"] == "v3"
                  and e["preset"] == "tp_mlp_h256_t512_fp32")
    expected = (f"{MACHINE}, tp_mlp_h256_t512_fp32, strong scaling to 4 ranks with the sync "
                f"schedule: a faster GEMM (v3, {tp_report.fmt(v3_row['gemm_tflops'])} TFLOP/s "
                f"per GPU on one rank, against torch's "
                f"{tp_report.fmt(torch_row['gemm_tflops'])}) lowers scaling efficiency from "
                f"{torch_row['sync_w4']} to {v3_row['sync_w4']}.")
    assert expected in sentences
    raised = tp_report.question4(tp_report.efficiency_rows(with_faster_backend(2.0, False)))
    assert any(") raises scaling efficiency from " in s for s in raised)
    overlapping = tp_report.question4(tp_report.efficiency_rows(with_faster_backend(0.9, True)))
    assert any(s.endswith("the 95% intervals overlap, so these rounds do not separate the two.")
               for s in overlapping)


def test_a_section_without_data_is_left_out(tmp_path):
    html = build.build([str(CPU_FIXTURE)], tmp_path, pdf=False)["html"].read_text()
    assert 'id="tensor-parallel"' not in html and 'href="#tensor-parallel"' not in html
    runs = re.search(r'<section id="runs"[^>]*>(.*?)</section>', html, re.S).group(1)
    assert "Tensor parallelism" in runs  # named among the chapters left out for want of data
    assert tp_report.section(View.of([], []))["empty"] is True


def test_a_malformed_estimate_stops_the_build_naming_the_field(tmp_path):
    document = json.loads(TP_FIXTURE.read_text())
    row = next(b for b in document["benchmarks"]
               if b["extra_info"].get("kind") == "tensor_parallel")
    row["extra_info"]["estimates"]["step_ms"] = "fast"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(document))
    result = run_build(str(broken), "--out", str(tmp_path / "out"), "--html-only")
    assert result.returncode == 2
    assert "extra_info.estimates.step_ms is str; expected an object" in result.stderr
