"""The page checks of tests/report/pdf_pages.py on a small PDF made for them: they must find
text drawn over text and a figure drawn empty, and pass a page without either."""

from __future__ import annotations

import base64
import shutil

import pytest

from tests.report import pdf_pages

pytestmark = pytest.mark.skipif(shutil.which("pdftotext") is None
                                or shutil.which("pdftoppm") is None,
                                reason="pdftotext and pdftoppm (poppler-utils) missing")

BLANK = '<svg xmlns="http://www.w3.org/2000/svg" width="300" height="150"></svg>'
DRAWN = ('<svg xmlns="http://www.w3.org/2000/svg" width="300" height="150">'
         '<rect x="20" y="20" width="260" height="110" fill="black"/></svg>')


def figure(svg: str, number: int) -> str:
    src = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
    return (f'<figure><img src="{src}"><figcaption>Figure {number}. A caption.</figcaption>'
            f'</figure>')


def pdf(tmp_path, body: str):
    from reports.render import import_weasyprint

    path = tmp_path / "page.pdf"
    path.write_bytes(import_weasyprint().HTML(string=f"<html><body>{body}</body></html>"
                                              ).write_pdf())
    return path


def test_a_figure_drawn_empty_is_found_and_a_drawn_one_is_not(tmp_path):
    path = pdf(tmp_path, "<p>Some text above.</p>" + figure(DRAWN, 1) + "<p>Between.</p>"
               + figure(BLANK, 2))
    pages = pdf_pages.pages_of(path)
    assert [name for _, name, _ in pdf_pages.figure_bands(pages)] == ["Figure 1.", "Figure 2."]
    found = pdf_pages.empty_figures(path, pages, tmp_path)
    assert len(found) == 1 and found[0].startswith("page 1: Figure 2. (band ")


def test_text_drawn_over_text_is_found(tmp_path):
    # (the same word at the same place would be read once: poppler drops such doubles)
    placed = '<p style="position: absolute; top: {}mm; left: {}mm">{}</p>'
    path = pdf(tmp_path, placed.format(40, 20, "Overlapping") + placed.format(41, 24, "Text"))
    assert pdf_pages.overlapping_words(pdf_pages.pages_of(path)) == [
        "page 1: 'Overlapping' over 'Text'"]
    clean = pdf(tmp_path, "<p>One line of words that do not touch.</p><p>Another line.</p>")
    assert pdf_pages.overlapping_words(pdf_pages.pages_of(clean)) == []
