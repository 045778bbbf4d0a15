"""The report's pipeline and hybrid section on a real CPU run of suite/bench_pipeline.py and
suite/bench_hybrid.py (tests/data/pipeline-cpu-2core.json: the rows of those kinds of
results/cpu-2core/20261123T082837Z.json, numbers as measured) and a real one-GPU run of
suite/bench_hybrid.py (tests/data/hybrid-h200x1-trimmed.json): its analysis, its figures, its
tables and its "no data" lines."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from markupsafe import escape

from impl.hybrid import HYBRID_FIELDS
from impl.pipeline.measure import PIPELINE_FIELDS
from impl.rows.merge import benchmark_rows
from reports import analysis, build, study_tables
from reports.format import fmt
from reports.sections import hybrid, pipeline
from reports.view import View
from tests.report.helpers import run_build

FIXTURE = Path(__file__).parent.parent / "data" / "pipeline-cpu-2core.json"
GPU_FIXTURE = Path(__file__).parent.parent / "data" / "hybrid-h200x1-trimmed.json"
# The crossover ladders of a one-H200 default run (results/h200x1/20261129T095700Z-yeajb3k3.json),
# its other rows left out.
CROSSOVER_FIXTURE = Path(__file__).parent.parent / "data" / "crossover-h200x1-trimmed.json"


@pytest.fixture(scope="module")
def document() -> dict:
    return json.loads(FIXTURE.read_text())


@pytest.fixture(scope="module")
def rows(document) -> list[dict]:
    return benchmark_rows("cpu-2core", 0, document["benchmarks"])


def kinds(document) -> dict[str, int]:
    counts: dict[str, int] = {}
    for benchmark in document["benchmarks"]:
        kind = benchmark["extra_info"]["kind"]
        counts[kind] = counts.get(kind, 0) + 1
    return counts


@pytest.fixture(scope="module")
def gpu_document() -> dict:
    return json.loads(GPU_FIXTURE.read_text())


@pytest.fixture(scope="module")
def gpu_rows(gpu_document) -> list[dict]:
    return benchmark_rows("h200x1", 0, gpu_document["benchmarks"])


@pytest.fixture(scope="module")
def crossover_document() -> dict:
    return json.loads(CROSSOVER_FIXTURE.read_text())


def test_fixtures_hold_every_kind_of_the_section(document, gpu_document, crossover_document):
    assert set(kinds(document)) | set(kinds(gpu_document)) | set(kinds(crossover_document)) \
        == set(analysis.PIPELINE_KINDS)


def test_the_crossover_rows_show_each_ladder_and_its_verdict(crossover_document):
    older = benchmark_rows("h200x1", 0, crossover_document["benchmarks"])
    rows = older + benchmark_rows("h200x1", 1, crossover_document["benchmarks"])
    crossings = hybrid.crossover_rows(rows)
    assert [(r["workload"], r["run"]) for r in crossings] == [("gpt_small_bf16", 1),
                                                             ("mlp_4096x8_b8192", 1)]
    decoder = crossings[0]
    assert decoder["batches_text"] == ("16 rows, 16,384 tokens: 1.73 [1.67, 1.76]; 32 rows, "
                                       "32,768 tokens: 1.07 [1.03, 1.08]")
    assert decoder["verdict"] == ("within 1.10× from 32,768 tokens a step (1.068× [1.032, "
                                  "1.077]); 1.727× [1.674, 1.755] at 16,384")


def test_hybrid_rows_show_each_check(rows, gpu_rows):
    older = {r["variant"]: r for r in hybrid.hybrid_rows(rows)}
    assert older["offload-overlap"]["check_text"].endswith(
        "(older check: against Adam on the CPU after N steps)")
    table = {r["variant"]: r for r in hybrid.hybrid_rows(gpu_rows)}
    delayed = table["offload-overlap-dpu"]
    check = delayed["check"]
    assert delayed["check_text"] == (
        f"gradients {fmt(check['gradient_error'])} ≤ {fmt(check['gradient_tolerance'])}; "
        f"weights {fmt(check['weight_error'])} ≤ {fmt(check['weight_tolerance'])} "
        "(update one step late)")
    assert table["coarse-hybrid"]["check_text"].startswith("gradients ")


def test_host_work_and_host_adam_tables(gpu_rows):
    split = {r["variant"]: r for r in hybrid.host_work_rows(gpu_rows)}
    assert set(split) == {"offload-after-backward", "offload-overlap", "offload-overlap-dpu"}
    row = next(r for r in gpu_rows if r.get("variant") == "offload-overlap")
    assert split["offload-overlap"]["hidden_host_fraction_text"] == study_tables.interval_text(
        row["hidden_host_fraction"])
    adam = hybrid.host_adam_rows(gpu_rows)
    assert len(adam) == 5
    assert [r["adam_gbps"] for r in adam] == sorted((r["adam_gbps"] for r in adam),
                                                     reverse=True)


def test_pipeline_rows_and_bubble_series(rows, document):
    table = pipeline.pipeline_rows(rows)
    assert len(table) == kinds(document)["pipeline"]
    assert [r["microbatches"] for r in table] == sorted(r["microbatches"] for r in table)
    library = [r for r in table if r["variant"].startswith("torch-")]
    assert library and all(r["bubble_text"] == "not measured (one opaque library call)"
                           for r in library)
    series = pipeline.bubble_series(rows)
    assert {s["variant"] for s in series} == {"gpipe", "gpipe+recompute", "1f1b"}
    for s in series:
        ms = [point[0] for point in s["points"]]
        assert ms == sorted(ms) and len(ms) == 4
        for _, value, low, high in s["points"]:
            assert low <= value <= high


def test_comparison_rows_flatten_every_pair(rows, document):
    expected = sum(len(b["extra_info"]["comparisons"]) for b in document["benchmarks"]
                   if b["extra_info"]["kind"] == "pipeline_comparison")
    flattened = study_tables.comparison_rows(rows, "pipeline_comparison")
    assert len(flattened) == expected
    verdicts = {r["verdict"] for r in flattened}
    assert verdicts <= {"faster", "slower", "no significant difference"}


def test_interval_text():
    assert study_tables.interval_text({"value": 1.234, "low": 1.0, "high": 1.5}, "ms") == \
        "1.23 ms [1.00, 1.50]"
    assert study_tables.interval_text({"value": 2.0, "low": None, "high": None}) == "2.00"
    assert study_tables.interval_text(None) == "n/a"


def test_gpt_rows_put_the_study_beside_the_run(rows):
    table = hybrid.gpt_rows(rows)
    measured = [r for r in table if r["source"] == "cpu-2core"]
    study = [r for r in table if r["source"] == "the study"]
    assert len(measured) == 1 and measured[0]["device"].endswith("CPU cores")
    assert [(r["device"], r["first_ms"], r["steady_ms"]) for r in study] == [
        ("16-core Intel i7", "—", "2,100–2,500"), ("NVIDIA GTX 1650", "655", "60.0")]


def test_digits_rows_state_the_criterion(rows):
    table = {r["variant"]: r for r in hybrid.digits_rows(rows)}
    assert table["cpu"]["criterion_text"] == "reference"
    assert table["coarse-hybrid"]["criterion_text"].endswith("(≤ 0.0500)")
    assert all(r["accuracy_pct"] >= 95 for r in table.values())


def test_figures_are_svg(rows):
    bubble = pipeline.bubble_figure(pipeline.bubble_series(rows))
    curves = hybrid.curves_figure([r for r in hybrid.digits_rows(rows)])
    for image in (bubble, curves):
        assert image.mime == "image/svg+xml" and image.data.startswith(b"<?xml")


def test_section_of_nothing_is_empty():
    context = pipeline.section(View.of([], []))
    assert context["empty"] is True
    assert context["pipeline_table"] is None and context["gpt_table"] is None


@pytest.fixture(scope="module")
def html(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("report")
    return build.build([str(FIXTURE)], out, pdf=False)["html"].read_text()


def test_report_has_the_section_tables_and_figures(html):
    for table_id in ("tab-pipeline", "tab-pipeline-compare", "tab-hybrid", "tab-hybrid-compare",
                     "tab-digits", "tab-gpt-forward", "tab-pipeline-fields"):
        assert f'id="{table_id}"' in html, table_id
    assert 'id="fig-pipeline-bubble"' in html and 'id="fig-digits-cpu-2core"' in html
    assert "No pipeline or hybrid results" not in html
    assert str(escape("655 ms at first, then ≈60 ms")) in html


def test_report_shows_the_crossover_table(tmp_path):
    html = build.build([str(CROSSOVER_FIXTURE)], tmp_path, pdf=False)["html"].read_text()
    assert 'id="tab-hybrid-crossover"' in html
    assert str(escape("within 1.10× from 4,096 tokens a step")) in html


def test_report_quotes_the_definitions_from_code(html):
    for field in (*PIPELINE_FIELDS, *HYBRID_FIELDS):
        assert str(escape(field.definition)) in html, field.name


def test_missing_parts_say_so(tmp_path, document):
    only_gpt = copy.deepcopy(document)
    only_gpt["benchmarks"] = [b for b in only_gpt["benchmarks"]
                              if b["extra_info"]["kind"] == "gpt_forward"]
    path = tmp_path / "gpt-only.json"
    path.write_text(json.dumps(only_gpt))
    html = build.build([str(path)], tmp_path / "out", pdf=False)["html"].read_text()
    for line in ("No pipeline results in the loaded result files",
                 "No hybrid step results in the loaded result files",
                 "No digits curves in the loaded result files"):
        assert line in html, line
    assert 'id="tab-gpt-forward"' in html


@pytest.mark.parametrize("kind, key, value, problem", [
    ("pipeline", "stages", "two", "extra_info.stages = 'two'; expected a number"),
    ("digits_curve", "curve", {"train_loss": [1.0, "x"], "test_loss": [], "test_accuracy": [],
                               "epoch_s": []},
     "extra_info.curve.train_loss[1] = 'x'; expected num"),
])
def test_a_broken_row_is_named_at_load(tmp_path, document, kind, key, value, problem):
    broken = copy.deepcopy(document)
    benchmark = next(b for b in broken["benchmarks"] if b["extra_info"]["kind"] == kind)
    benchmark["extra_info"][key] = value
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    result = run_build(str(path), "--html-only", "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert problem in result.stderr and str(path) in result.stderr
