"""What the report's tests share: the fixture files, the build command and readers of its
HTML and PDF pages."""

from __future__ import annotations

import html as html_text
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reports import cells
from reports.format import fmt
from tests.committed import ROOT_COPY

DATA = Path(__file__).parent.parent / "data"
GPU_FIXTURE = DATA / "h200x4-trimmed.json"  # 4× H200, before interleaving
CPU_FIXTURE = DATA / "cpu-2core-trimmed.json"  # CPU, before interleaving
INTERLEAVED = DATA / "cpu-2core-interleaved-trimmed.json"  # mlp_tiny, gpt_tiny; K = 1, 20
REGIMES = DATA / "cpu-2core-regimes-trimmed.json"  # mlp_1024x8_b64; K = 1, 5, 20
ALL = [GPU_FIXTURE, CPU_FIXTURE, INTERLEAVED, REGIMES]
ROOT = Path(__file__).parent.parent.parent
CHROMIUM = "/usr/bin/chromium"


def run_build(*args: str) -> subprocess.CompletedProcess:
    """``python -m reports.build ARGS`` with this checkout's code, run in the copy of the
    committed results (tests/committed.py): what it reads by default, results/ and its gate
    trials, is what the repository ships, never a user's own runs."""
    return subprocess.run([sys.executable, "-m", "reports.build", *args], cwd=ROOT_COPY,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300, check=False)


def infos(path: Path, kind: str) -> list[dict]:
    return [b["extra_info"] for b in json.loads(path.read_text())["benchmarks"]
            if b["extra_info"].get("kind") == kind]


def text_of(html: str) -> str:
    """The HTML's visible text on one line (tags dropped, entities decoded)."""
    return re.sub(r"\s+", " ", html_text.unescape(re.sub(r"<[^>]+>", " ", html)))



def section_html(html: str, section_id: str) -> str:
    found = re.search(rf'<section id="{section_id}".*?</section>', html, re.S)
    assert found, f"no section {section_id}"
    return found.group(0)


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


def answer_cell(workload: str, path: Path) -> dict:
    return next(c for c in infos(path, "comparison") if c["workload"] == workload
                and c["world_size"] == 2 and c["chunks"] == cells.ANSWER_CHUNKS)


def interval(estimate: dict) -> str:
    return f"{fmt(estimate['value'])} [{fmt(estimate['low'])}, {fmt(estimate['high'])}]"
