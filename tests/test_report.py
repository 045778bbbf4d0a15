"""The report builder on small real results (tests/data/*-trimmed.json, see make_fixtures.py).

One full build (HTML, PDF and traces, with a baseline) of a mix of formats is shared by the
module: an old-format 4× H200 run and CPU run (measured before interleaving) beside two
interleaved CPU runs. The checks read its HTML, the PDF's text, outline and pages, the trace
files, and a headless-Chromium screenshot. Bad inputs run ``python -m reports.build`` and
check its exit status and one-line message.
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

from impl import stats
from reports import analysis, build, cells, render, traces
from reports.format import fmt, fmt_pct
from reports.results import newest_per_machine
from tests import pdf_pages

DATA = Path(__file__).parent / "data"
GPU_FIXTURE = DATA / "h200x4-trimmed.json"  # 4× H200, before interleaving
CPU_FIXTURE = DATA / "cpu-2core-trimmed.json"  # CPU, before interleaving
INTERLEAVED = DATA / "cpu-2core-interleaved-trimmed.json"  # mlp_tiny, gpt_tiny; K = 1, 20
REGIMES = DATA / "cpu-2core-regimes-trimmed.json"  # mlp_1024x8_b64; K = 1, 5, 20
ALL = [GPU_FIXTURE, CPU_FIXTURE, INTERLEAVED, REGIMES]
ROOT = Path(__file__).parent.parent
CHROMIUM = "/usr/bin/chromium"


def run_build(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reports.build", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)


def infos(path: Path, kind: str) -> list[dict]:
    return [b["extra_info"] for b in json.loads(path.read_text())["benchmarks"]
            if b["extra_info"].get("kind") == kind]


def text_of(html: str) -> str:
    """The HTML's visible text on one line (tags dropped, entities decoded)."""
    return re.sub(r"\s+", " ", html_text.unescape(re.sub(r"<[^>]+>", " ", html)))


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
    (out / "traces").mkdir()
    (out / "traces" / "from-an-earlier-build.json").write_text("{}")
    result = run_build(*map(str, ALL), "--baseline", str(baseline_file), "--out", str(out))
    assert result.returncode == 0, result.stderr
    html = (out / "report.html").read_text()
    return {"out": out, "html": html, "text": text_of(html), "pdf": out / "report.pdf",
            "slowed": json.loads(baseline_file.read_text())}


@pytest.fixture(scope="module")
def pdf_text(built) -> str:
    pypdf = pytest.importorskip("pypdf")
    reader = pypdf.PdfReader(built["pdf"])
    return "\n".join(page.extract_text() for page in reader.pages)


def section_html(html: str, section_id: str) -> str:
    found = re.search(rf'<section id="{section_id}".*?</section>', html, re.S)
    assert found, f"no section {section_id}"
    return found.group(0)


# --- what is shown, and what is left out -----------------------------------------------------


def test_sections_with_data_only_and_in_the_contents(built):
    html = built["html"]
    shown = re.findall(r'<section id="([^"]+)"', html)
    assert shown == ["abstract", "methodology", "overlap", "reproducibility", "step-anatomy",
                     "interference", "course-study", "allreduce", "gemm", "prediction",
                     "regression", "environment", "runs", "before-interleaving", "cells",
                     "detail", "tables", "topology", "definitions"]
    toc = re.search(r'<nav class="toc">(.*?)</nav>', html, re.S).group(1)
    assert re.findall(r'href="#([^"]+)"', toc) == shown
    # Nothing of the studies without data, not even a "no data" line.
    for absent in ("tensor-parallel", "pipeline", "energy", "No tensor-parallel results"):
        assert absent not in toc and f'id="{absent}"' not in html
    runs = section_html(html, "runs")
    assert ("Left out for lack of data: Power and energy, Tensor parallelism, Pipeline and CPU-GPU "
            "hybrid training.") in text_of(runs)


def test_figures_of_every_chapter(built):
    figure_ids = re.findall(r'<figure class="fig" id="([^"]+)">', built["html"])
    assert sorted(figure_ids) == sorted([
        "fig-headline", "fig-speedup-k-0", "fig-gantt-0", "fig-steps-0", "fig-lost-0",
        "fig-interference-cpu-2core", "fig-regime", "fig-synthetic", "fig-synthetic-gantt",
        "fig-allreduce", "fig-gemm-h200x4", "fig-roofline-h200x4"])
    # The fixture's GPU run predates interleaving: "Beyond this machine" predicts from
    # interleaved cells only, so it shows the model's errors and no predicted curves.
    sources = re.findall(r'<img src="([^"]+)"', built["html"])
    assert len(sources) == len(figure_ids)
    assert all(s.startswith(("data:image/svg+xml;base64,", "data:image/png;base64,"))
               for s in sources)


def test_html_quotes_metric_definitions_from_code(built):
    from markupsafe import escape  # what Jinja's autoescape uses

    from impl.metrics import ALLREDUCE_FIELDS, STEP_FIELDS, ideal_speedup, lost_time_ms

    for field in (*STEP_FIELDS, *ALLREDUCE_FIELDS):
        assert str(escape(field.definition)) in built["html"], field.name
    for function in (lost_time_ms, ideal_speedup):
        assert " ".join(function.__doc__.split()) in built["text"]


# --- the answers, in the overlap chapter (the abstract has the headline table) ------------------


def answer_cell(workload: str, path: Path) -> dict:
    return next(c for c in infos(path, "comparison") if c["workload"] == workload
                and c["world_size"] == 2 and c["chunks"] == cells.ANSWER_CHUNKS)


def interval(estimate: dict) -> str:
    return f"{fmt(estimate['value'])} [{fmt(estimate['low'])}, {fmt(estimate['high'])}]"


def round_medians(cell: dict, variant: str) -> list[float]:
    import statistics

    return [statistics.median(s) for s in cell["measurement"]["step_ms"][variant]]


@pytest.mark.parametrize(("workload", "path"), [("mlp_tiny", INTERLEAVED),
                                                 ("gpt_tiny", INTERLEAVED),
                                                 ("mlp_1024x8_b64", REGIMES)])
def test_chapter_answers_each_workload_with_intervals_and_verdicts(built, workload, path):
    cell = answer_cell(workload, path)
    speedups = {s: f["vs_sequential"]["speedup"] for s, f in cell["strategies"].items()}
    best = max(speedups, key=lambda s: speedups[s]["value"])
    line = text_of(re.search(r"<li>" + re.escape(workload) + r", read.*?</li>",
                             section_html(built["html"], "overlap"), re.S).group(0))
    assert f"read at K = {cells.ANSWER_CHUNKS}, the suite's default chunk count" in line
    assert f"{best} is fastest, {interval(speedups[best]).replace(' [', '× [')} over " \
           f"sequential" in line
    hidden = cell["strategies"][best]["hidden_comm_fraction"]
    assert f"hidden communication fraction {interval(hidden)}" in line
    # Every other strategy of the cell, compared in the same rounds (paired bootstrap).
    for other in speedups:
        if other == best:
            continue
        verdict = stats.verdict(stats.difference(round_medians(cell, best),
                                                 round_medians(cell, other)))
        expected = (f"no significant difference from {other}" if verdict ==
                    stats.NO_DIFFERENCE else f"{verdict} than {other}")
        assert expected in line, (other, line)
    buckets = cell["ddp_bucket_counts"].get(best)
    if buckets is not None and buckets != cell["chunks"]:
        assert f"no overlap efficiency: it made {buckets} bucket(s)" in line
    else:
        assert f"overlap efficiency {interval(cell['strategies'][best]['overlap_efficiency'])}" \
            in line


def test_no_nvlink_answer_is_said_and_old_files_named(built):
    chapter = text_of(section_html(built["html"], "overlap"))
    assert ("There is no interleaved NVLink result over several GPUs yet, so this report gives "
            f"no NVLink answer. The NVLink files loaded ({GPU_FIXTURE}) were "
            "measured before interleaving") in chapter
    abstract = text_of(section_html(built["html"], "abstract"))
    assert ("Not in the table: h200x4 (measured before interleaving: its step rows are in the "
            "appendix).") in abstract
    # The old-format 4-GPU numbers are nowhere in the abstract.
    for row in infos(GPU_FIXTURE, "step"):
        if row["overlap_efficiency"] is not None:
            assert f"{fmt(row['overlap_efficiency'])} (" not in abstract


def test_chapter_checks_one_rank_cells(built):
    abstract = text_of(section_html(built["html"], "overlap"))
    single = [c for path in (INTERLEAVED, REGIMES) for c in infos(path, "comparison")
              if c["world_size"] == 1]
    assert f"an interval containing 0 in {len(single)} of {len(single)} cells" in abstract
    for cell in single:
        difference = cell["references"]["sequential_vs_compute_only"]["difference_ms"]
        assert f"{cell['workload']}: {interval(difference)} ms" in abstract


def nvlink_run(path: Path) -> Path:
    """A made-up 2-GPU NVLink run: the interleaved CPU fixture relabelled (its numbers are
    the CPU's), with made-up NVML power and per-round energy for the energy check."""
    document = json.loads(INTERLEAVED.read_text())
    document["suite"].update(label="h200x2", profile="nvlink")
    document["machine_info"]["overlap"].update(
        machine_label="h200x2", gpu_names=["NVIDIA H200"] * 2, backend="nccl",
        profile="nvlink",
        gpu_limits=[{"uuid": uuid, "power_limit_w": 700.0, "max_sm_clock_mhz": 1980}
                    for uuid in ("GPU-a", "GPU-b")])
    for benchmark in document["benchmarks"]:
        info = benchmark["extra_info"]
        if "profile" in info:
            info.update(profile="nvlink", backend="nccl")
        if info.get("kind") == "comparison":
            steps = info["measurement"]["step_ms"]
            info["measurement"]["energy_j"] = {v: [0.5 * sum(r) for r in rounds]
                                               for v, rounds in steps.items()}
            info["nvml"] = {"available": True, "gpus": ["a", "b"], "period_ms": 50.0,
                            "energy_j": [1.0, 1.0], "mean": {"power_w": [240.0, 260.0]}}
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="module")
def nvlink_built(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("nvlink")
    written = build.build([str(nvlink_run(folder / "h200x2.json"))], folder / "out", pdf=False)
    html = written["html"].read_text()
    return {"html": html, "text": text_of(html), "written": written}


def test_nvlink_answer_heads_the_table_when_an_interleaved_nvlink_run_exists(nvlink_built):
    cell = answer_cell("mlp_tiny", INTERLEAVED)
    best = max(cell["strategies"],
               key=lambda s: cell["strategies"][s]["vs_sequential"]["speedup"]["value"])
    speedup = cell["strategies"][best]["vs_sequential"]["speedup"]
    table = re.search(r'id="tab-headline">.*?<tbody>(.*?)</tbody>', nvlink_built["html"],
                      re.S).group(1)
    first = text_of(re.search(r"<tr>(.*?)</tr>", table, re.S).group(1))
    assert first.startswith(f" 1 h200x2 · nvlink · 2 GPUs mlp_tiny {best} "
                            f"{interval(speedup).replace(' [', '× [')}")
    chapter = text_of(section_html(nvlink_built["html"], "overlap"))
    assert "h200x2 (2× NVIDIA H200) · nvlink · 2 GPUs (nccl) mlp_tiny, read at K = 20" in chapter
    assert f"{best} is fastest, {interval(speedup).replace(' [', '× [')}" in chapter
    assert "no NVLink answer" not in chapter
    assert "is a CPU machine" not in chapter


def test_power_limit_clocks_and_energy_check(nvlink_built):
    environment = text_of(section_html(nvlink_built["html"], "environment"))
    assert "power limit (W) 700 (×2)" in environment
    assert "max SM clock (MHz) 1,980 (×2)" in environment
    assert "max memory clock" not in environment  # not recorded: no row
    # The energy table has a row per variant: the section says it is in the detail tables.
    assert ("The table of energy per step against mean power × step time is in Appendix"
            in text_of(section_html(nvlink_built["html"], "energy")))
    energy = section_html(nvlink_built["html"], "detail")
    # energy per step is 0.5 J per ms of step: against 500 W × step, a ratio of exactly 1.
    assert "energy / (power × step)" in energy and "1.00" in energy
    assert "counter updates every few milliseconds" in text_of(energy)


# --- old-format runs: listed, labelled, never headlined ---------------------------------------


def test_appendix_lists_every_run_and_how_it_is_used(built):
    runs = text_of(section_html(built["html"], "runs"))
    for path in ALL:
        assert str(path) in runs
    assert runs.count("· before interleaving ·") == 2 and runs.count("· interleaved ·") == 2
    old_steps = len(infos(GPU_FIXTURE, "step"))
    assert (f"step: {old_steps} row(s); {old_steps} measured before interleaving, shown only "
            "in the appendix 'Step rows measured before interleaving'") in runs
    assert f"comparison: {len(infos(INTERLEAVED, 'comparison'))} row(s)" in runs
    # Per-pass command lines and the commit with its dirty flag.
    passes = json.loads(INTERLEAVED.read_text())["suite"]["passes"]
    assert passes[0]["command"] in runs
    commit = json.loads(INTERLEAVED.read_text())["machine_info"]["overlap"]["git_commit"]
    assert f"commit {commit[:12]} (dirty: tracked files differed from it)" in runs
    assert "docs/ANCHORS.md" in runs


def test_old_format_rows_appear_only_in_their_appendix(built):
    html = built["html"]
    before = section_html(html, "before-interleaving")
    tables = re.findall(r'id="(tab-before-[^"]+)"', html)
    assert tables and all(f'id="{t}"' in before for t in tables)
    groups = {(r["workload"], r["world_size"], r["profile"])
              for path in (GPU_FIXTURE, CPU_FIXTURE) for r in infos(path, "step")}
    assert len([t for t in tables if t != "tab-before-energy"]) == len(groups)
    captions = re.findall(r"<caption>(.*?)</caption>", before, re.S)
    assert all(c.startswith("Measured before interleaving: references measured at other "
                            "moments, no intervals.") for c in captions)
    # Their notes say why an old efficiency cannot be read as one.
    notes = text_of(before)
    assert "sequential against its own reference measured at another moment" in notes
    assert "K = 1: nothing can overlap" in notes


# --- intervals everywhere --------------------------------------------------------------------


def test_result_tables_carry_an_interval_under_every_value(built):
    answers = section_html(built["html"], "cells")
    cell = answer_cell("mlp_tiny", INTERLEAVED)
    chunked = cell["strategies"]["chunked"]
    row = re.search(r"<tr><td>mlp_tiny</td><td class=\"num\">20</td><td>chunked</td>(.*?)</tr>",
                    answers, re.S).group(1)
    for key in ("step_ms", "overlap_efficiency", "bound_efficiency", "hidden_comm_fraction"):
        estimate = chunked[key]
        shown = (f"[{fmt(estimate['low'])}, {fmt(estimate['high'])}]"
                 if estimate["low"] is not None else None)
        assert fmt(estimate["value"]) in row
        if shown:
            assert f'<span class="ci">{shown}</span>' in row
    # Every efficiency without a value or interval has a footnote saying why.
    notes = text_of(answers)
    assert "DDP made 1 bucket(s), not K = 20 chunks" in notes
    assert "no interval: some resamples had no headroom" in notes


def test_anatomy_draws_every_variant_and_states_the_finding(built):
    anatomy = section_html(built["html"], "step-anatomy")
    cell = answer_cell("mlp_1024x8_b64", REGIMES)  # the drawn workload (cells.REFERENCE_...)
    assert "mlp_1024x8_b64, K = 20, 2 ranks, gloo-tcp" in text_of(anatomy)
    for variant in cell["timelines"]:
        assert f"traces/cpu-2core-mlp_1024x8_b64-K20-w2-gloo-tcp-{variant}.json" in anatomy
    best = max(cell["strategies"],
               key=lambda s: cell["strategies"][s]["vs_sequential"]["speedup"]["value"])
    hidden = cell["strategies"][best]["hidden_comm_fraction"]
    assert (f"The fastest here, {best}, hides {fmt_pct(100 * hidden['value'])} of its "
            f"communication [{fmt_pct(100 * hidden['low'])}, {fmt_pct(100 * hidden['high'])}]"
            ) in text_of(anatomy)
    lost = cell["strategies"]["chunked"]["lost_time"]
    row = re.search(r"<tr><td>chunked</td>(.*?)</tr>", anatomy, re.S).group(1)
    for part in ("exposed_comm_ms", "compute_slowdown_ms", "other_ms", "gap_ms"):
        assert f"{fmt(lost[part]['value'])}" in row
        assert f"[{fmt(lost[part]['low'])}, {fmt(lost[part]['high'])}]" in row


def test_course_study_beside_the_real_measurement_at_its_ratio(built):
    study = text_of(section_html(built["html"], "course-study"))
    nearest = min((c for path in (INTERLEAVED, REGIMES) for c in infos(path, "comparison")
                   if c["world_size"] == 2 and c["chunks"] > 1),
                  key=lambda c: abs(__import__("math").log(
                      c["references"]["compute_to_comm"]["value"] / 1.5)))
    ratio = nearest["references"]["compute_to_comm"]
    assert f"{interval(ratio)} (cpu-2core, {nearest['workload']}, K = {nearest['chunks']}" in study
    speedup = nearest["strategies"]["chunked"]["vs_sequential"]["speedup"]
    saved = [100 * (1 - 1 / speedup[k]) for k in ("value", "low", "high")]
    assert f"chunked: {fmt(saved[0])} [{fmt(saved[1])}, {fmt(saved[2])}]%" in study
    # The simulation's rows: the newer CPU run's replaced the older one's (same K).
    for row in infos(GPU_FIXTURE, "synthetic") + infos(INTERLEAVED, "synthetic"):
        assert fmt_pct(row["speedup_pct"]) in study
    # The reference workload's ratio from the old 4× H200 run, labelled as such.
    assert "measured before interleaving, no interval" in study


def test_interference_slowdowns_with_intervals(built):
    section = text_of(section_html(built["html"], "interference"))
    for row in infos(INTERLEAVED, "interference") + infos(REGIMES, "interference"):
        ratio = row["slowdown"]["all-reduce"]["ratio"]
        assert f"all-reduce {interval(ratio)} {row['slowdown']['all-reduce']['verdict']}" in section


# --- traces -------------------------------------------------------------------------------------


def test_every_drawn_timeline_is_a_valid_perfetto_trace(built):
    folder = built["out"] / "traces"
    named = set(re.findall(r"traces/([A-Za-z0-9._-]+\.json)", built["html"]))
    files = {p.name for p in folder.glob("*.json")}
    assert files == named and len(files) == 8  # 7 variants of the drawn cell + the simulation
    cell = answer_cell("mlp_1024x8_b64", REGIMES)
    for path in folder.glob("*.json"):
        document = json.loads(path.read_text())
        assert traces.check_trace(document) == [], path
    chunked = json.loads((folder / "cpu-2core-mlp_1024x8_b64-K20-w2-gloo-tcp-chunked.json")
                         .read_text())
    events = [e for e in chunked["traceEvents"] if e["ph"] == "X"]
    intervals = cell["timelines"]["chunked"]["intervals"]
    assert len(events) == len(intervals)
    for event, interval_ in zip(events, intervals):
        assert event["name"] == interval_["label"]
        assert event["tid"] == traces.LANES[interval_["lane"]]
        assert event["ts"] == pytest.approx(interval_["start_ms"] * 1e3, abs=1e-3)
        assert event["dur"] == pytest.approx(
            (interval_["end_ms"] - interval_["start_ms"]) * 1e3, abs=1e-3)
    names = {e["args"]["name"] for e in chunked["traceEvents"] if e["ph"] == "M"}
    assert {"compute", "communication"} <= names


def test_trace_checker_names_what_is_wrong():
    good = traces.trace({"intervals": [{"lane": "comm", "label": "all-reduce c0", "chunk": 0,
                                        "start_ms": 1.0, "end_ms": 2.5}], "notes": []},
                        "rank 0", {"variant": "chunked"})
    assert traces.check_trace(good) == []
    bad = copy.deepcopy(good)
    bad["traceEvents"][-1].update(dur=-1.0, pid="0")
    bad["traceEvents"].append({"name": "x", "ph": "B", "pid": 0, "tid": 1})
    assert traces.check_trace(bad) == [
        "traceEvents[3].pid = '0'; expected an integer",
        "traceEvents[3].dur = -1.0; expected microseconds >= 0",
        "traceEvents[4].ph = 'B'; this exporter writes only X and M"]
    assert traces.check_trace({"events": []}) == ["not an object with a traceEvents list"]


# --- the PDF ------------------------------------------------------------------------------------


def test_pdf_has_toc_page_numbers_and_numbered_captions(pdf_text):
    text = re.sub(r"\s+", " ", pdf_text)
    assert re.search(r"Anatomy of a step\s*\.+\s*\d+", pdf_text)
    assert re.search(r"Appendix B\. Step rows measured before interleaving\s*\.+\s*\d+", pdf_text)
    assert "Figure 1. " in text and "Table 1. " in text
    assert "Hiding gradient all-reduce behind backward" in text


def blank_fraction(png: Path, top_mm: float = 21, bottom_mm: float = 19,
                   gap_mm: float = 6) -> float:
    """The share of a page's body (between the running header and footer margins) covered by
    runs of blank pixel rows taller than ``gap_mm``: empty space, not the space between lines."""
    from matplotlib.image import imread

    pixels = imread(png)
    gray = pixels[..., :3].mean(axis=2) if pixels.ndim == 3 else pixels
    per_mm = gray.shape[0] / 297
    body = gray[int(top_mm * per_mm): gray.shape[0] - int(bottom_mm * per_mm)]
    blank_rows = list(body.min(axis=1) > 0.94) + [False]
    covered = run = 0
    for blank in blank_rows:
        if blank:
            run += 1
            continue
        if run >= gap_mm * per_mm:
            covered += run
        run = 0
    return covered / len(body)


def chapter_ends(pdf: Path) -> tuple[set[int], int]:
    """0-based pages that end a chapter: before each level-1 bookmark (title, chapters and
    appendices start pages), and the last page."""
    pypdf = pytest.importorskip("pypdf")
    reader = pypdf.PdfReader(pdf)
    starts = {reader.get_destination_page_number(item) for item in reader.outline
              if not isinstance(item, list)}
    pages = len(reader.pages)
    return {s - 1 for s in starts if s > 0} | {pages - 1}, pages


@pytest.mark.skipif(shutil.which("pdftoppm") is None, reason="pdftoppm (poppler-utils) missing")
def test_no_page_is_more_than_half_blank_but_a_chapters_last(built, tmp_path):
    ends, pages = chapter_ends(built["pdf"])
    assert 12 <= pages <= 40, pages
    subprocess.run(["pdftoppm", "-png", "-gray", "-r", "40", str(built["pdf"]),
                    str(tmp_path / "page")], check=True, timeout=300)
    images = sorted(tmp_path.glob("page-*.png"))
    assert len(images) == pages
    fractions = {index: blank_fraction(png) for index, png in enumerate(images)}
    too_blank = {index + 1: round(f, 2) for index, f in fractions.items()
                 if f > 0.5 and index not in ends}
    assert too_blank == {}, f"pages more than half blank (1-based): {too_blank}"
    assert all(f < 0.97 for f in fractions.values()), fractions  # no empty page at all


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) missing")
def test_no_text_over_text_and_no_empty_figure(built, tmp_path):
    pages = pdf_pages.pages_of(built["pdf"])
    assert pdf_pages.overlapping_words(pages) == []
    figures = re.findall(r'<figure class="fig" id="([^"]+)">', built["html"])
    assert len(pdf_pages.figure_bands(pages)) == len(figures)
    assert pdf_pages.empty_figures(built["pdf"], pages, tmp_path) == []


def test_blank_fraction_measures_empty_space(tmp_path):
    import numpy as np
    from matplotlib.image import imsave

    page = np.ones((297 * 2, 210 * 2))  # 2 pixels per mm
    page[84:400:6, 40:380] = 0  # text lines every 3 mm, from 42 mm down to 200 mm
    imsave(tmp_path / "half.png", page, cmap="gray")
    top, bottom = 21 * 2, 297 * 2 - 19 * 2  # the body, between the margins
    empty = (84 - top) + (bottom - 397)  # above the first line and below the last one
    assert blank_fraction(tmp_path / "half.png") == pytest.approx(empty / (bottom - top))
    page[42:556:6, 40:380] = 0  # lines from the top margin to the bottom one: a full page
    imsave(tmp_path / "full.png", page, cmap="gray")
    assert blank_fraction(tmp_path / "full.png") == 0


def test_regression_table_against_baseline(built, pdf_text):
    slowed = next(b for b in built["slowed"]["benchmarks"]
                  if b["extra_info"].get("kind") == "step" and b["extra_info"]["world_size"] == 4)
    text = re.sub(r"\s+", " ", pdf_text)
    assert "1 regressed, 0 improved" in text
    assert slowed["name"].split("[")[0] in text


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} (Debian chromium) missing")
def test_html_screenshot_is_not_blank(built, tmp_path):
    import numpy as np
    from matplotlib.image import imread

    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                    "--window-size=1280,2000", (built["out"] / "report.html").as_uri()],
                   capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    pixels = (imread(shot)[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    dark = float((pixels.min(axis=1) < 235).mean())
    assert dark > 0.02 and len(np.unique(pixels, axis=0)) > 16, dark


# --- inputs: the default selection ----------------------------------------------------------


def copy_as(source: Path, target: Path, **suite) -> Path:
    document = json.loads(source.read_text())
    document["suite"].update(suite)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document))
    return target


def test_default_inputs_are_the_strongest_run_per_machine_and_fabric(tmp_path):
    gpu = copy_as(GPU_FIXTURE, tmp_path / "h200x4" / "a.json", mode="default", partial=False)
    copy_as(GPU_FIXTURE, tmp_path / "h200x4" / "newer-quick.json", mode="quick",
            created="2030-01-01T00:00:00+00:00")
    copy_as(CPU_FIXTURE, tmp_path / "cpu-2core" / "old-default.json", mode="default")
    fresh = copy_as(INTERLEAVED, tmp_path / "cpu-2core" / "fresh-quick.json", mode="quick")
    regimes = copy_as(REGIMES, tmp_path / "cpu-2core" / "regimes.json", mode="quick",
                      created="2020-01-01T00:00:00+00:00")
    # A newer quick GPU run does not displace the default one; an interleaved CPU run beats
    # an old-format default one; a run of workloads no chosen run measured joins them.
    assert newest_per_machine(tmp_path) == sorted([fresh, regimes]) + [gpu]


def test_cpu_only_report_leaves_out_the_gpu_chapters(tmp_path):
    document = json.loads(INTERLEAVED.read_text())
    document["machine_info"]["overlap"]["gpu_limits"] = None  # today's fingerprint without NVML
    source = tmp_path / "cpu.json"
    source.write_text(json.dumps(document))
    written = build.build([str(source)], tmp_path / "out", pdf=False)
    html = written["html"].read_text()
    assert "power limit" not in text_of(section_html(html, "environment"))
    assert 'id="gemm"' not in html and 'id="before-interleaving"' not in html
    assert 'id="regression"' not in html and "No baseline given" not in html
    assert "No NVLink result over several GPUs was loaded" in text_of(html)
    assert not (tmp_path / "out" / "report.pdf").exists()
    assert {p.name for p in written["traces"]} == {p.name
                                                   for p in (tmp_path / "out" / "traces").iterdir()}


# --- GEMM: newest run per GPU model, tensor-core ceilings, v6's fallback, cuBLAS's own row -----

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
    cells_ = table_cells(gemm_built["html"], "tab-gemm-h200x1")
    v6 = {row[0]: row[2] for row in cells_ if row[2].startswith("v6")}
    assert v6 == {"4096×4096×4096": "v6", "3000×5000×2000": "v6 (ran v5's kernel)"}
    assert "are v5's kernel" in html_text.unescape(gemm_built["html"])  # the bar chart's caption
    # Rows of runs before v1c existed: their v1 was the coalesced kernel, shown as v1c.
    old = table_cells(built["html"], "tab-gemm-h200x4")
    assert "v1c (recorded as v1)" in {row[2] for row in old}
    assert "v1" not in {row[2] for row in old}


# --- bad input --------------------------------------------------------------------------------


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
                             str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {render.PANGO_HINT}"), result.stderr
    assert result.stderr.endswith(f"(wrote {out / 'report.html'}, no PDF)\n"), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert "before interleaving" in (out / "report.html").read_text()
    assert not (out / "report.pdf").exists()


# --- WeasyPrint's warnings --------------------------------------------------------------------


def weasyprint_record(level: int, message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("weasyprint", level, __file__, 0, message, args, None)


NOTDEF = '.notdef glyph rendered for Unicode string unsupported by fonts: "%s" (U+%04X)'


def test_warning_policy():
    assert render.lost_content(weasyprint_record(logging.ERROR, "Failed to load image at 'x.png'"))
    assert render.lost_content(weasyprint_record(logging.WARNING,
                                                "Ignored `foo: bar` at 1:2, unknown."))
    assert not render.lost_content(weasyprint_record(logging.WARNING,
                                                    'Unable to subset "DejaVu" with HarfBuzz'))
    # A box in place of a character the report writes values with hides a value; a box for
    # CJK or emoji from the inputs does not (build.py's docstring).
    for character in ("7", "%", "−", "×"):
        assert render.lost_content(weasyprint_record(logging.WARNING, NOTDEF, character,
                                                    ord(character))), character
    for character in ("策", "🚀"):
        assert not render.lost_content(weasyprint_record(logging.WARNING, NOTDEF, character,
                                                        ord(character))), character


def test_report_text_uses_only_characters_dejavu_draws():
    """REPORT_CHARACTERS lists every non-ASCII character the report writes values with."""
    from impl.metrics import ALLREDUCE_FIELDS, STEP_FIELDS

    sources = [*(ROOT / "reports").glob("*.py"), *(ROOT / "reports" / "templates").rglob("*")]
    texts = [path.read_text(encoding="utf-8") for path in sources if path.is_file()]
    texts += [field.definition for field in (*STEP_FIELDS, *ALLREDUCE_FIELDS)]
    used = {c for text in texts for c in text if not c.isascii()}
    assert used <= set(render.REPORT_CHARACTERS), sorted(used - set(render.REPORT_CHARACTERS))


def pdf_pages_text(path: Path) -> list[str]:
    pypdf = pytest.importorskip("pypdf")
    return [page.extract_text() for page in pypdf.PdfReader(path).pages]


def build_in_process(capsys, *args: str) -> tuple[int, list[str], str]:
    """``python -m reports.build ARGS`` in this process, so that monkeypatches apply: its exit
    status, its stderr lines and its stdout."""
    status = build.main(list(args))
    captured = capsys.readouterr()
    return status, captured.err.splitlines(), captured.out


def wrote_line(out: Path) -> str:
    """What a build that wrote both files and its traces prints."""
    traces = len(list((out / "traces").glob("*.json")))
    return (f"wrote {out / 'report.html'} and {out / 'report.pdf'}, {traces} trace(s) in "
            f"{out / 'traces'}\n")


def test_fonttools_subsetting_is_one_note_and_loses_nothing(tmp_path, monkeypatch, capsys):
    """Without libharfbuzz-subset0, WeasyPrint subsets fonts with fontTools and warns."""
    fonts = pytest.importorskip("weasyprint.pdf.fonts")
    with_harfbuzz = build.build([str(CPU_FIXTURE)], tmp_path / "harfbuzz")
    # What weasyprint.text.ffi leaves there when libharfbuzz-subset.so.0 cannot be loaded:
    # WeasyPrint then takes its real fontTools path and logs its real warning.
    monkeypatch.setattr(fonts, "harfbuzz_subset", None)
    out = tmp_path / "fonttools"
    status, notes, stdout = build_in_process(capsys, str(CPU_FIXTURE), "--out", str(out))
    assert status == 0 and len(notes) == 1, notes
    assert notes[0].startswith('note: WeasyPrint: Using fontTools instead of HarfBuzz-Subset '
                               'for font "DejaVu '), notes[0]
    assert notes[0].endswith("(no content lost)"), notes[0]
    assert stdout == wrote_line(out)
    assert pdf_pages_text(out / "report.pdf") == pdf_pages_text(with_harfbuzz["pdf"])


def test_unloadable_image_fails_with_exit_3_and_keeps_the_html(tmp_path, monkeypatch, capsys):
    from reports import figures

    # Every figure an image WeasyPrint cannot decode: content the PDF would lack.
    monkeypatch.setattr(figures, "data_uri", lambda image: "data:image/png;base64,AAAA")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.pdf").write_bytes(b"%PDF- an earlier build")
    status, lines, stdout = build_in_process(capsys, str(CPU_FIXTURE), "--out", str(out))
    assert status == 3 and len(lines) == 1, lines
    assert lines[0].startswith("error: WeasyPrint could not render all of the report (1 "
                               "problem(s)): error: Failed to load image at "), lines[0]
    assert lines[0].endswith(f"(wrote {out / 'report.html'}, no PDF; removed the earlier "
                             f"{out / 'report.pdf'})"), lines[0]
    assert stdout == ""
    assert 'src="data:image/png;base64,AAAA"' in (out / "report.html").read_text()
    assert not (out / "report.pdf").exists()


# Characters DejaVu lacks, in text that comes from a result file: its folder, its command, the
# CPU model, a workload and a strategy name.
CJK_FOLDER, CJK_COMMAND, CJK_CPU = "結果🚀", "実験", "処理装置 🖥"
CJK_WORKLOAD, CJK_STRATEGY = "mlp_小さい", "threaded_策略🚀"


def dejavu_only_fontconfig(folder: Path) -> Path:
    """A fontconfig file whose only fonts are matplotlib's copies of DejaVu, the report's font:
    the build sees the same fonts whatever this machine has installed (CJK fonts included)."""
    import matplotlib

    fonts = folder / "fonts"
    fonts.mkdir()
    for font in (Path(matplotlib.get_data_path()) / "fonts" / "ttf").glob("DejaVu*.ttf"):
        (fonts / font.name).symlink_to(font)
    config = folder / "fonts.conf"
    config.write_text(f"<?xml version=\"1.0\"?>\n<fontconfig><dir>{fonts}</dir>"
                      f"<cachedir>{folder / 'cache'}</cachedir></fontconfig>\n")
    return config


@pytest.fixture(scope="module")
def cjk_built(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("cjk")
    folder = root / CJK_FOLDER
    folder.mkdir()
    document = json.loads(CPU_FIXTURE.read_text())
    document["suite"]["command"] += f" --note {CJK_COMMAND}"
    document["machine_info"]["overlap"]["cpu_model"] = f"AMD EPYC {CJK_CPU}"
    for benchmark in document["benchmarks"]:
        info = benchmark["extra_info"]
        if info.get("workload") == "mlp_tiny":
            info["workload"] = CJK_WORKLOAD
        if info.get("strategy") == "threaded":
            info["strategy"] = CJK_STRATEGY
    path = folder / "cpu-2core.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    out = root / "out"
    env = {**os.environ, "FONTCONFIG_FILE": str(dejavu_only_fontconfig(root))}
    result = subprocess.run([sys.executable, "-m", "reports.build", str(path), "--out", str(out)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                            check=False)
    return {"result": result, "out": out, "path": path}


def test_cjk_and_emoji_in_the_inputs_build_both_files_with_notes(cjk_built):
    result, out = cjk_built["result"], cjk_built["out"]
    assert result.returncode == 0, result.stderr
    assert result.stdout == wrote_line(out)
    # This run was measured before interleaving: its rows are in an appendix table, no figure
    # draws their names, so the only note on the glyphs is the PDF's. Without the optional
    # libharfbuzz-subset0 a subsetting note comes too (its own test is above): not counted here.
    notes = [line for line in result.stderr.splitlines()
             if "Using fontTools instead of HarfBuzz-Subset" not in line]
    assert len(notes) == 1, result.stderr
    pdf_note = notes[0]
    assert pdf_note.startswith("note: WeasyPrint: no installed font has "), pdf_note
    assert pdf_note.endswith("(fonts-noto-cjk and fonts-noto-color-emoji draw them; input text "
                             "only, no value lost)"), pdf_note
    expected = {c for text in (CJK_FOLDER, CJK_COMMAND, CJK_CPU, CJK_WORKLOAD, CJK_STRATEGY)
                for c in text if not c.isascii() and not c.isspace()}
    listed = set(re.findall(r"(\S) \(U\+[0-9A-F]{4,6}\)", pdf_note))
    assert listed == expected
    html = (out / "report.html").read_text(encoding="utf-8")
    for text in (CJK_COMMAND, CJK_CPU, CJK_WORKLOAD, CJK_STRATEGY, str(cjk_built["path"])):
        assert html_text.escape(text, quote=False) in html, text


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) missing")
def test_cjk_and_emoji_stay_in_the_pdf_text(cjk_built):
    assert cjk_built["result"].returncode == 0, cjk_built["result"].stderr
    text = subprocess.run(["pdftotext", str(cjk_built["out"] / "report.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    flat = re.sub(r"\s", "", text)  # table cells wrap long names over lines
    for value in (CJK_COMMAND, CJK_CPU, CJK_WORKLOAD, CJK_STRATEGY):
        assert re.sub(r"\s", "", value) in flat, value


# --- analysis and formatting ------------------------------------------------------------------


def cell_like(chunks: int, world: int = 2, **strategies: float) -> dict:
    """A comparison row with the given strategies' median speedups over sequential."""
    estimate = lambda v: {"value": v, "low": v - 0.1, "high": v + 0.1, "rounds": 12}
    return {"kind": "comparison", "machine": "m", "profile": "p", "world_size": world,
            "workload": "w", "chunks": chunks, "sequential_reference": "sequential",
            "compared": list(strategies), "ddp_bucket_counts": {},
            "measurement": {"step_ms": {s: [[1.0]] for s in strategies}},
            "strategies": {s: {"vs_sequential": {"speedup": estimate(v)},
                               "overlap_efficiency": estimate(0.5)}
                           for s, v in strategies.items()}}


def test_answer_is_read_at_the_default_k_not_the_best_one():
    group = [cell_like(1, chunked=1.0), cell_like(5, chunked=1.4),
             cell_like(20, chunked=1.1, ddp=1.05), cell_like(50, chunked=1.2)]
    cell, why = cells.answer_cell(group)
    assert cell["chunks"] == 20 and "fixed before the data were seen" in why
    assert cells.best_strategy(cell) == "chunked"
    cell, why = cells.answer_cell([group[0], group[1], group[3]])
    assert cell["chunks"] == 50 and "nearest the default K = 20" in why  # |log 50/20| < |log 5/20|
    cell, why = cells.answer_cell([group[0]])
    assert cell["chunks"] == 1 and "nothing can overlap" in why


def test_efficiency_notes_say_why():
    cell = cell_like(20, chunked=1.1, ddp=1.2)
    cell["ddp_bucket_counts"] = {"ddp": 12}
    assert cells.efficiency_note(cell, "ddp").startswith("DDP made 12 bucket(s), not K = 20")
    assert cells.efficiency_note(cell, "chunked") is None
    cell["strategies"]["chunked"]["overlap_efficiency"] = {"value": -0.4, "low": -0.9,
                                                           "high": 0.1, "rounds": 12}
    assert cells.efficiency_note(cell, "chunked") == ("negative: the step was slower than "
                                                      "sequential")
    cell["strategies"]["chunked"]["overlap_efficiency"]["value"] = 1.3
    assert cells.efficiency_note(cell, "chunked").startswith("above 1: the step beat")
    cell["strategies"]["chunked"]["overlap_efficiency"] = {"value": 0.3, "low": None,
                                                           "high": None, "rounds": 12}
    assert cells.efficiency_note(cell, "chunked").startswith("no interval")
    assert cells.efficiency_note(cell_like(1, chunked=1.0), "chunked").startswith("K = 1")
    assert cells.efficiency_note(cell_like(1, world=1, chunked=1.0), "chunked").startswith(
        "world size 1")


def test_old_format_efficiency_notes():
    base = {"kind": "step", "world_size": 4, "chunks": 20, "overlap_efficiency": 0.5,
            "sequential_reference": "sequential"}
    note = lambda **row: analysis.note_for("overlap_efficiency", {**base, **row})
    assert note(strategy="sequential").startswith("sequential against its own reference")
    assert note(strategy="chunked", chunks=1) == "K = 1: nothing can overlap"
    assert note(strategy="ddp", ddp_bucket_count=12).startswith("DDP made 12 bucket(s)")
    assert note(strategy="mpi").startswith("MPI against the torch.distributed references")
    assert note(strategy="chunked", overlap_efficiency=-4.55).startswith("negative")
    assert note(strategy="chunked") is None


def test_regime_points_leave_out_other_chunking_and_k_one():
    cell = cell_like(20, chunked=1.1, ddp=1.9)
    cell["ddp_bucket_counts"] = {"ddp": 3}
    cell["references"] = {"compute_to_comm": {"value": 1.5, "low": 1.2, "high": 1.8,
                                              "rounds": 12}}
    single = {**cell_like(1, chunked=1.0), "references": cell["references"]}
    assert [p["strategy"] for p in cells.regime_points([cell, single])] == ["chunked"]


def test_energy_check_pairs_energy_with_power_times_step():
    cell = cell_like(20, chunked=1.0)
    cell["measurement"] = {"steps_per_round": 2, "step_ms": {"chunked": [[10.0, 10.0]] * 4},
                           "energy_j": {"chunked": [6.0] * 4}}
    cell["nvml"] = {"mean": {"power_w": [100.0, 200.0]}}
    row = cells.energy_check(cell)[0]
    # 3 J per step against 300 W × 10 ms = 3 J.
    assert row["energy_per_step_j"]["value"] == pytest.approx(3.0)
    assert row["power_times_step_j"]["value"] == pytest.approx(3.0)
    assert row["ratio"]["value"] == pytest.approx(1.0)


@pytest.mark.parametrize(("value", "text"), [(0.39598, "0.396"), (62.99, "63.0"),
                                             (353.7, "354"), (7379.27, "7,380"),
                                             (0.000122, "1.22e-04"), (9.996, "10.0"),
                                             (None, "n/a"), (0, "0"), (-0.0477, "-0.0477")])
def test_three_significant_digits(value, text):
    assert fmt(value) == text


def test_estimates_print_with_their_interval():
    from reports.format import fmt_estimate, fmt_times

    assert fmt_estimate({"value": 1.694, "low": 1.21, "high": 2.2, "rounds": 12}) == (
        "1.69 [1.21, 2.20]")
    assert fmt_estimate({"value": 0.5, "low": None, "high": None, "rounds": 2}) == (
        "0.500 (no interval)")
    assert fmt_estimate(None) == "n/a"
    assert fmt_times({"value": 1.694, "low": 1.21, "high": 2.2, "rounds": 12}) == (
        "1.69× [1.21, 2.20]")
