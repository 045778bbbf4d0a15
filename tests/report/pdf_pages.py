"""Checks of a built PDF's pages, with poppler: words that overlap, figures drawn empty.

``pdftotext -bbox`` gives every word's box (the report's figures draw their text as outlines,
so a figure holds no words); ``pdftoppm`` renders the pages. A figure's image lies between its
caption ("Figure N.") and the nearest word above it in the caption's columns, so that band of
the rendered page must hold ink.
"""

from __future__ import annotations

import html
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

PAGE = re.compile(r'<page width="([\d.]+)" height="([\d.]+)">(.*?)</page>', re.S)
WORD = re.compile(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">'
                  r'(.*?)</word>')


@dataclass(frozen=True)
class Word:
    x0: float
    y0: float
    x1: float
    y1: float
    text: str

    def area(self) -> float:
        return max(self.x1 - self.x0, 0) * max(self.y1 - self.y0, 0)


def pages_of(pdf: Path) -> list[tuple[float, float, list[Word]]]:
    """(width, height, words) per page, in PDF points from the top left."""
    text = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True,
                          text=True, check=True, timeout=300).stdout
    return [(float(w), float(h), [Word(*map(float, m[:4]), html.unescape(m[4]))
                                  for m in WORD.findall(body)])
            for w, h, body in PAGE.findall(text)]


def overlapping_words(pages: list[tuple[float, float, list[Word]]],
                      share: float = 0.3) -> list[str]:
    """Pairs of words on one page whose boxes overlap by more than ``share`` of the smaller
    one: text drawn over text."""
    found = []
    for number, (_, _, words) in enumerate(pages, 1):
        ordered = sorted(words, key=lambda w: w.y0)
        for i, a in enumerate(ordered):
            for b in ordered[i + 1:]:
                if b.y0 >= a.y1:
                    break
                width = min(a.x1, b.x1) - max(a.x0, b.x0)
                height = min(a.y1, b.y1) - max(a.y0, b.y0)
                smaller = min(a.area(), b.area())
                if width > 0 and height > 0 and smaller and width * height > share * smaller:
                    found.append(f"page {number}: {a.text!r} over {b.text!r}")
    return found


def caption_right(words: list[Word], first: Word, gap: float = 12) -> float:
    """The right edge of a caption's column: its words run on from ``first`` with gaps under
    ``gap`` points, on its first lines (a float's caption ends where the text beside it
    starts)."""
    right = first.x1
    for line_top in sorted({round(w.y0) for w in words if first.y0 - 1 <= w.y0 < first.y0 + 30}):
        row = sorted((w for w in words if abs(w.y0 - line_top) < 1.5 and w.x0 >= first.x0 - 1),
                     key=lambda w: w.x0)
        edge = first.x0
        for w in row:
            if w.x0 - edge > gap and edge > first.x0:
                break
            edge = max(edge, w.x1)
        right = max(right, edge)
    return right


def figure_bands(pages: list[tuple[float, float, list[Word]]], top_margin: float = 60
                 ) -> list[tuple[int, str, tuple[float, float, float, float]]]:
    """(page index, "Figure N.", (x0, y0, x1, y1)) of each figure's image: the band above its
    caption up to the nearest word above that shares the caption's columns (or the running
    header's margin)."""
    bands = []
    for index, (_, _, words) in enumerate(pages):
        for i, word in enumerate(words):
            if word.text != "Figure" or i + 1 >= len(words) or not re.fullmatch(
                    r"\d+\.", words[i + 1].text):
                continue
            x0, x1 = word.x0, caption_right(words, word)
            above = [w.y1 for w in words if w.y1 <= word.y0 - 1 and w.x1 > x0 and w.x0 < x1]
            bands.append((index, f"Figure {words[i + 1].text}",
                          (x0, max(above, default=top_margin), x1, word.y0)))
    return bands


def empty_figures(pdf: Path, pages: list[tuple[float, float, list[Word]]], folder: Path,
                  ink: float = 0.01) -> list[str]:
    """Figures whose image band holds less than ``ink`` of dark pixels (drawn empty)."""
    from matplotlib.image import imread

    dpi = 50
    subprocess.run(["pdftoppm", "-png", "-gray", "-r", str(dpi), str(pdf), str(folder / "p")],
                   check=True, timeout=300)
    images = sorted(folder.glob("p-*.png"))
    scale = dpi / 72
    found = []
    for index, name, (x0, y0, x1, y1) in figure_bands(pages):
        pixels = imread(images[index])
        gray = pixels[..., :3].mean(axis=2) if pixels.ndim == 3 else pixels
        band = gray[int(y0 * scale): int(y1 * scale), int(x0 * scale): int(x1 * scale)]
        if band.size == 0 or (band < 0.6).mean() < ink:
            found.append(f"page {index + 1}: {name} (band {y1 - y0:.0f} pt tall)")
    return found
