"""Rendering: the template context to HTML (Jinja, reports/templates/) and HTML to PDF
(WeasyPrint), with what WeasyPrint says while it renders.

WeasyPrint's log during rendering is captured and sorted by what each record costs the PDF:

- Lost content fails the build (exit 3): every ERROR (an image, stylesheet or anchor target
  that failed to load), and every WARNING not named below (an ignored or invalid CSS
  declaration, a target-counter without its anchor, an anchor defined twice, table cells
  dropped).
- TOLERATED_WARNINGS change how the PDF is stored or looks, never what it says: fonts subset
  by fontTools because libharfbuzz-subset0 is missing (the same glyphs), a font embedded whole
  because subsetting failed, a colour-space fallback to sRGB, a deprecated CSS prefix. Each
  kind is printed once as a note, with "(no content lost)".
- A glyph that no installed font has (".notdef glyph rendered"): the PDF draws a box in its
  place and keeps the character in its text layer (pdftotext reads it back); the HTML shows
  it with the reader's fonts. A box is lost content only where it hides a value, and the
  report writes every value (numbers, units, axis and column names) with ASCII and
  REPORT_CHARACTERS, which DejaVu Sans has. So a box for one of those fails the build; a box
  for any other character (CJK or emoji in a workload name, a command, a path, a CPU model:
  text that comes from the inputs) is tolerated and named in one note, with the fonts that
  would draw it. The figures follow the same rule: matplotlib draws their text as outlines
  with its own DejaVu Sans, and a character it lacks becomes a box in the figure.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from impl.rows.report_records import TRACED
from reports import archive
from reports.captions import Run
from reports.context import report_context
from reports.gate.loading import Baseline
from reports.loading import BuildError

TEMPLATES = Path(__file__).parent / "templates"


PANGO_HINT = "WeasyPrint needs Pango: apt-get install libpango-1.0-0 libpangoft2-1.0-0"


TOLERATED_WARNINGS = ("Using fontTools instead of HarfBuzz-Subset", "Unable to subset",
                      "Unable to instantiate", "Unable to save emoji font", "use sRGB instead",
                      "Deprecated `")


MISSING_GLYPH = re.compile(r"^\.notdef glyph rendered for Unicode string unsupported by fonts: "
                           r".* \(U\+([0-9A-F]{4,6})\)$")


# Besides ASCII, the characters reports/format.py, reports/sections/ and the templates write
# values with (tests/report/test_weasyprint.py checks that they use no other).
REPORT_CHARACTERS = "×·−±–—≤≥≈Δ…³“”ᵀ"


FIGURE_MISSING_GLYPH = re.compile(r"^Glyph (\d+) \(.*\) missing from font\(s\)")


FONT_HINT = "fonts-noto-cjk and fonts-noto-color-emoji draw them"


def import_weasyprint():
    """WeasyPrint, or a BuildError saying what to install (it loads Pango when imported)."""
    try:
        with warnings.catch_warnings():
            # Without libharfbuzz-subset0 WeasyPrint also warns on import; rendering names the
            # same fact once as a note (TOLERATED_WARNINGS).
            warnings.filterwarnings("ignore", message="HarfBuzz-Subset will be required")
            import weasyprint
    except OSError as error:  # Pango or one of its libraries is missing
        raise BuildError(f"{PANGO_HINT} ({error})") from None
    except ImportError as error:
        raise BuildError(f"WeasyPrint is not installed: pip install weasyprint ({error})"
                         ) from None
    return weasyprint


def render_html(context: dict) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return environment.get_template("report.html.j2").render(**context)


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def missing_glyph(record: logging.LogRecord) -> str | None:
    """The character WeasyPrint drew as a box because no installed font has it, or None."""
    match = MISSING_GLYPH.match(record.getMessage())
    return chr(int(match.group(1), 16)) if match else None


def writes_values(character: str) -> bool:
    """True for the characters the report writes its values with (module docstring)."""
    return character.isascii() or character in REPORT_CHARACTERS


def lost_content(record: logging.LogRecord) -> bool:
    """True when a WeasyPrint log record means the PDF lacks something (module docstring)."""
    if record.levelno >= logging.ERROR:
        return True
    character = missing_glyph(record)
    if character is not None:
        return writes_values(character)
    return not any(marker in record.getMessage() for marker in TOLERATED_WARNINGS)


def _unique(texts: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(texts))


def _listed(characters: Sequence[str]) -> str:
    return ", ".join(f"{c} (U+{ord(c):04X})" for c in characters)


def tolerated_notes(records: Sequence[logging.LogRecord]) -> list[str]:
    """One line per kind of tolerated record (WeasyPrint repeats them per font or glyph)."""
    characters = _unique(c for r in records if (c := missing_glyph(r)) is not None)
    by_kind: dict[str, list[str]] = {}
    for record in records:
        if missing_glyph(record) is None:
            by_kind.setdefault(record.msg, []).append(record.getMessage())
    notes = []
    for messages in by_kind.values():
        messages = _unique(messages)
        more = f" (and {len(messages) - 1} more like it)" if len(messages) > 1 else ""
        notes.append(f"WeasyPrint: {messages[0]}{more} (no content lost)")
    if characters:
        notes.append(f"WeasyPrint: no installed font has {_listed(characters)}: the PDF draws "
                     "boxes in their place and keeps them in its text, the HTML shows them "
                     f"({FONT_HINT}; input text only, no value lost)")
    return notes


def render_report_html(rows: list[dict], runs: list[Run], compared: Baseline | None,
                       found: archive.Archive | None = None
                       ) -> tuple[str, list[str], list[dict]]:
    """The HTML, with its figures, a note naming characters the figures drew as boxes, and
    the step timelines it draws (for their traces)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        context = report_context(rows, runs, compared, found)
        html = render_html(context)
    characters = []
    for warning in caught:
        match = FIGURE_MISSING_GLYPH.match(str(warning.message))
        if match is None:  # not about glyphs: shown as it would have been
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno)
        else:
            characters.append(chr(int(match.group(1))))
    characters = _unique(characters)
    if lost := [c for c in characters if writes_values(c)]:
        raise BuildError(f"matplotlib's font has no {_listed(lost)}, which the figures write "
                         "values with", status=3)
    if not characters:
        return html, [], context[TRACED.timelines]
    return html, [f"matplotlib: its font has no {_listed(characters)}: the figures draw boxes "
                  "in their place (input text only, no value lost)"], context[TRACED.timelines]


def render_pdf(weasyprint, html: str, base_url: str) -> tuple[bytes, list[str]]:
    """The PDF and notes on the tolerated warnings; raises BuildError listing lost content."""
    logger = logging.getLogger("weasyprint")
    collector = _Collector()
    propagate = logger.propagate
    logger.addHandler(collector)
    logger.propagate = False  # collected here and reported once, not also printed raw
    try:
        pdf = weasyprint.HTML(string=html, base_url=base_url).write_pdf()
    finally:
        logger.removeHandler(collector)
        logger.propagate = propagate
    fatal = _unique(f"{r.levelname.lower()}: {r.getMessage()}"
                    for r in collector.records if lost_content(r))
    if fatal:
        raise BuildError(f"WeasyPrint could not render all of the report ({len(fatal)} "
                         f"problem(s)): {'; '.join(fatal)}", status=3)
    return pdf, tolerated_notes(collector.records)
