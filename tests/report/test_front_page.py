"""Page 1 of the report built from the committed results (python -m reports.build with its
default inputs, as a reader runs it, in a copy of the committed results: tests/committed.py):
the headline table and every study's line, each number checked against the JSON it names;
provenance marks; the body's length; and the PDF's pages looked at with poppler for
half-blank pages, text drawn over text and figures drawn empty.

One build (about a minute) is shared by the module. The checks read what the results hold,
so they stay true when new runs are committed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC
from pathlib import Path

import pytest

from impl.rows.files import find_result_files, load_results
from reports import cells
from reports.format import fmt
from reports.sections import headline
from tests.committed import RESULTS
from tests.report import pdf_pages
from tests.report.helpers import blank_fraction, chapter_ends, run_build, section_html, text_of

ROOT = Path(__file__).parent.parent.parent
BODY_PAGES = 25
pytestmark = pytest.mark.skipif(shutil.which("pdftotext") is None,
                                reason="pdftotext (poppler-utils) missing")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("front")
    result = run_build("--out", str(out))
    assert result.returncode == 0, result.stderr
    html = (out / "report.html").read_text()
    page_one = subprocess.run(["pdftotext", "-layout", "-f", "1", "-l", "1",
                               str(out / "report.pdf"), "-"],
                              capture_output=True, text=True, check=True).stdout
    return {"out": out, "pdf": out / "report.pdf", "html": html,
            "page_one": squeeze(page_one), "pages": pdf_pages.pages_of(out / "report.pdf")}


def squeeze(text: str) -> str:
    """Text without whitespace: a PDF line may break inside a path or an interval."""
    return re.sub(r"\s+", "", text)


def headline_rows(html: str) -> list[list[str]]:
    """The headline table's cells as text, with the footnote marks and the interval lines."""
    table = re.search(r'<div class="table-block[^"]*" id="tab-headline">(.*?)</div>', html,
                      re.S).group(1)
    rows = re.findall(r"<tr>(.*?)</tr>", re.search(r"<tbody>(.*?)</tbody>", table,
                                                   re.S).group(1), re.S)
    return [[text_of(cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in rows]


def notes_of(html: str) -> dict[str, str]:
    table = re.search(r'id="tab-headline">(.*?)</div>', html, re.S).group(1)
    return {mark: text_of(note).strip() for mark, note in
            re.findall(r"<li><sup>(\w)</sup>(.*?)</li>", table, re.S)}


def answer_cells() -> list[tuple[Path, dict, dict]]:
    """(file, document, cell) of every comparison cell at the answer K, over several ranks."""
    found = []
    for path in find_result_files(RESULTS):
        document = json.loads(path.read_text())
        for benchmark in document["benchmarks"]:
            info = benchmark["extra_info"]
            if (info.get("kind") == "comparison" and info["chunks"] == cells.ANSWER_CHUNKS
                    and info["world_size"] > 1 and not cells.is_mpi(info)):
                found.append((path, document, info))
    return found


def run_words(path: Path, document: dict) -> str:
    """"quick run, 09676a9, 2026-11-23 09:40" (UTC), from the file itself."""
    made = load_results(path).created.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    commit = document["machine_info"]["overlap"]["git_commit"][:7]
    return f"{document['suite']['mode']} run, {commit}, {made}"


def interval(estimate: dict) -> str:
    return f"[{fmt(estimate['low'])}, {fmt(estimate['high'])}]"


def test_page_one_holds_the_headline_table_checked_against_the_json(report):
    rows = headline_rows(report["html"])
    assert rows, "no headline rows"
    notes = notes_of(report["html"])
    # A run is named in words: its mode, commit and the minute it was made.
    by_place = {(run_words(path, document), cell["workload"]): (document, cell)
                for path, document, cell in answer_cells()}
    for number, row in enumerate(rows, 1):
        index, machine, workload, best, speedup, efficiency, ddp, run = row
        assert index == str(number)
        words, marks = re.fullmatch(r"(.*? \d\d:\d\d)\s*(\S*)", run).groups()
        document, cell = by_place[words, workload]
        gpus = document["machine_info"]["overlap"]["gpu_names"]
        if gpus:
            assert machine.startswith(f"{cell['world_size']}× {gpus[0]}, ")
        else:
            assert machine.startswith("CPU (") and machine.endswith(
                f", {cell['world_size']} ranks")
        speedups = {s: cell["strategies"][s]["vs_sequential"]["speedup"]
                    for s in cells.compared(cell)}
        top = max(speedups, key=lambda s: speedups[s]["value"])
        assert best == top
        assert speedup == f"{fmt(speedups[top]['value'])}× {interval(speedups[top])}"
        figures = cell["strategies"][top]
        buckets = (cell.get("ddp_bucket_counts") or {}).get(top)
        if buckets is not None and buckets != cell["chunks"]:
            assert efficiency.startswith("n/a")
        else:
            eff = figures["overlap_efficiency"]
            assert efficiency == f"{fmt(eff['value'])} {interval(eff)}"
        for peer, key in (("ddp", "vs_ddp"), ("ddp-25mb", "vs_ddp_25mb")):
            if peer == top:
                assert f"is {peer}" in ddp
            else:
                verdict = figures[key]["verdict"]
                assert f"{ {'no significant difference': 'n.s.'}.get(verdict, verdict)} vs " \
                       f"{peer}" in ddp
        commit = document["machine_info"]["overlap"]["git_commit"]
        # Provenance: a partial run is marked, so is a dirty tree and older code.
        texts = [notes[m] for m in marks.split(",") if m]
        assert any(t.startswith("from a partial run") for t in texts) == document["suite"][
            "partial"]
        assert any("(dirty)" in t for t in texts) == document["machine_info"]["overlap"][
            "git_dirty"]
        files = headline.strategy_files(top)
        counted = subprocess.run(["git", "-C", str(ROOT), "rev-list", "--count",
                                  f"{commit}..HEAD", "--", *files], capture_output=True,
                                 text=True, check=False)
        if counted.returncode != 0:  # a shallow clone: the run's commit is not in it
            assert f"commit {commit[:7]} is not in this checkout's history: the age of its " \
                   f"code is unknown" in texts
        else:
            assert any(t.startswith("older than this checkout's code") for t in texts) == (
                int(counted.stdout) > 0)
        # The same numbers are on page 1 of the PDF (a cell's lines are apart in its text).
        for text in (f"{fmt(speedups[top]['value'])}×", interval(speedups[top]),
                     workload, *words.replace(",", "").split()):
            assert squeeze(text) in report["page_one"], text
    assert squeeze("Table 1. The best strategy at K = 20") in report["page_one"]


def study_lines(html: str) -> dict[str, str]:
    """The abstract's study lines: {title: text}."""
    found = re.search(r'<ul class="studies">(.*?)</ul>', html, re.S).group(1)
    return {text_of(title).strip(): text_of(text).strip() for title, text in
            re.findall(r"<li><strong>(.*?):</strong>(.*?)</li>", found, re.S)}


def test_page_one_says_which_studies_have_no_gpu_result_and_why(report):
    lines = study_lines(report["html"])
    for study in ("Pipeline", "CPU–GPU hybrid"):
        line = next(text for title, text in lines.items() if title.startswith(study))
        gpu_rows = [b for path in find_result_files(RESULTS)
                    if load_results(path).fingerprint.get("gpu_names")
                    for b in load_results(path).benchmarks
                    if b["extra_info"].get("kind") == ("pipeline" if study == "Pipeline"
                                                       else "hybrid_step")]
        if gpu_rows:  # a GPU run landed since: its line gives it instead
            assert not line.startswith("no GPU result")
            continue
        assert line.startswith("no GPU result: on h200x2 the run stopped by signal 15 "
                               "(timeout 250 s) during the pipeline benchmark ")
        assert "(from its console log)" in line and "results/" not in line
        assert squeeze(line[:60]) in report["page_one"]
    assert len(lines) == 6
    for title, text in lines.items():  # every line, whole, on page 1
        assert squeeze(f"{title}: {text}") in report["page_one"], title


def test_run_to_run_line_reads_the_commits_of_the_committed_runs(report):
    abstract = text_of(section_html(report["html"], "abstract"))
    files = [load_results(p) for p in find_result_files(RESULTS / "cpu-2core")]
    clean = [f for f in files if f.fingerprint.get("git_dirty") is False]
    commits = {f.fingerprint["git_commit"] for f in clean}
    if len(commits) == len(clean):  # no two clean CPU runs share a commit yet
        assert (f"cpu-2core: {len(clean)} of {len(files)} runs clean, at {len(commits)} "
                f"commit(s)") in abstract
    else:
        assert "figures measured by two or more clean runs at one commit" in abstract
        assert 'id="agreement"' in report["html"]


def test_body_is_at_most_25_pages_and_no_page_is_half_blank(report, tmp_path):
    pypdf = pytest.importorskip("pypdf")
    reader = pypdf.PdfReader(report["pdf"])
    appendices = [reader.get_destination_page_number(item) for item in reader.outline
                  if not isinstance(item, list) and item.title.startswith("Appendix")]
    assert appendices and min(appendices) <= BODY_PAGES, min(appendices)
    ends, pages = chapter_ends(report["pdf"])
    subprocess.run(["pdftoppm", "-png", "-gray", "-r", "40", str(report["pdf"]),
                    str(tmp_path / "page")], check=True, timeout=300)
    fractions = {index: blank_fraction(png)
                 for index, png in enumerate(sorted(tmp_path.glob("page-*.png")))}
    assert len(fractions) == pages
    too_blank = {i + 1: round(f, 2) for i, f in fractions.items() if f > 0.5 and i not in ends}
    assert too_blank == {}, f"pages more than half blank (1-based): {too_blank}"


def test_no_text_over_text_and_no_empty_figure(report, tmp_path):
    assert pdf_pages.overlapping_words(report["pages"]) == []
    bands = pdf_pages.figure_bands(report["pages"])
    figures = re.findall(r'<figure class="fig" id="([^"]+)">', report["html"])
    assert len(bands) == len(figures)
    assert pdf_pages.empty_figures(report["pdf"], report["pages"], tmp_path) == []



def test_page_one_holds_the_whole_abstract_and_splits_no_word(report):
    """The abstract fits page 1, to its last line (run to run), with its answer sentences.
    Every word pdftotext -bbox finds in page 1's body is a word of the HTML, whole: a name or
    a number broken across lines ("chunked+pri ority") would be two pieces the HTML does not
    have. A line may end after a hyphen a word has ("device-" "adam"), as type does."""
    assert squeeze("Run to run:") in report["page_one"]
    assert squeeze("Newest run:") in report["page_one"]
    assert squeeze("(hidden communication fraction) and saves") in report["page_one"]
    # Each strategy the answers name is said in words, from the strategy registry.
    assert squeeze("Strategies: ddp: torch DistributedDataParallel, the peer users would pick; "
                   "copy-engine: each chunk all-reduced through symmetric memory, the bytes "
                   "moved by copy engines; chunked+priority: chunked with "
                   "comm_priority='high'.") in report["page_one"]
    _, height, words = report["pages"][0]
    title = next(w for w in words if w.text == "Hiding")  # the kicker above is letter-spaced
    footer = height - 19 / 25.4 * 72  # the bottom margin holds "page 1 of N"
    body = [w.text for w in words if title.y0 <= w.y0 < footer]
    known = {word.lower() for word in text_of(report["html"]).split()}
    broken, at = [], 0
    while at < len(body):
        word = body[at].lower()
        joined = word + body[at + 1].lower() if at + 1 < len(body) else ""
        if word.endswith("-") and joined in known:  # a line ends after the word's own hyphen
            at += 2
            continue
        if word not in known and not re.fullmatch(r"\d+\.", word):  # list and table counters
            broken.append(body[at])
        at += 1
    assert broken == []
