"""The PDF: contents, page numbers, captions, blank pages, overlaps, the baseline table and a
screenshot."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.report import pdf_pages
from tests.report.helpers import (
    CHROMIUM,
    blank_fraction,
    chapter_ends,
)


def test_pdf_has_toc_page_numbers_and_numbered_captions(pdf_text):
    text = re.sub(r"\s+", " ", pdf_text)
    assert re.search(r"Anatomy of a step\s*\.+\s*\d+", pdf_text)
    assert re.search(r"Appendix B\. Step rows measured before interleaving\s*\.+\s*\d+", pdf_text)
    assert "Figure 1. " in text and "Table 1. " in text
    assert "Hiding gradient all-reduce behind backward" in text


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
