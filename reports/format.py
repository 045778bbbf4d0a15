"""Numbers and tables as the report prints them: 3 significant digits, units in headers,
"n/a" with a footnote saying why.

    table = make_table("tab-x", "What was measured.", [Column("step_ms", "step", "ms")], rows)

Every number the report prints goes through ``fmt``, so the tests can format a value from
the JSON the same way and look for it in the PDF's text.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from impl.rows.declare import Field
from impl.rows.kinds import STEP
from reports.analysis import note_for

NA = "n/a"


def fmt(value: object, digits: int = 3) -> str:
    """A number to ``digits`` significant digits, without exponents between 1e-3 and 1e6.

    Integers print as they are; large floats are rounded and grouped ("7,380"); None is n/a.
    """
    if value is None:
        return NA
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    # Round first, so that 9.996 becomes 10.0 (three digits), not 10.00.
    rounded = float(f"{value:.{digits - 1}e}")
    magnitude = math.floor(math.log10(abs(rounded)))
    if magnitude >= 6 or magnitude < -3:
        return f"{rounded:.{digits - 1}e}"
    if magnitude >= digits - 1:
        return f"{rounded:,.0f}"
    return f"{rounded:.{digits - 1 - magnitude}f}"


CPU_DEVICE = re.compile(r"cpu \((\d+) threads?\)")  # the hybrid rows' CPU (bench_hybrid)


def device_words(device: str) -> str:
    """A row's device as a reader reads it: "cpu (1 threads)" is "the CPU, 1 thread"."""
    if found := CPU_DEVICE.fullmatch(device or ""):
        threads = int(found[1])
        return f"the CPU, {threads} thread{'' if threads == 1 else 's'}"
    return device


def fmt_pct(value: float | None) -> str:
    """A percentage with 3 significant digits and a % sign (n/a for None)."""
    return NA if value is None else f"{fmt(value)}%"


def fmt_estimate(estimate: dict | None, digits: int = 3) -> str:
    """An impl.stats.Estimate (as JSON) as "value [low, high]"; the value alone with "(no
    interval)" where the rounds gave none; n/a where the figure is undefined."""
    if not estimate or estimate.get("value") is None:
        return NA
    return f"{fmt(estimate['value'], digits)} {fmt_range(estimate, digits)}"


def fmt_range(estimate: dict | None, digits: int = 3) -> str:
    """The 95% interval of an Estimate as "[low, high]", or "(no interval)"."""
    if not estimate or estimate.get("low") is None or estimate.get("high") is None:
        return "(no interval)"
    return f"[{fmt(estimate['low'], digits)}, {fmt(estimate['high'], digits)}]"


def fmt_times(estimate: dict | None) -> str:
    """A speedup Estimate as "1.16× [0.95, 1.61]"."""
    if not estimate or estimate.get("value") is None:
        return NA
    return f"{fmt(estimate['value'])}× {fmt_range(estimate)}"


def fmt_bytes(size: int) -> str:
    """1048576 -> "1 MiB", 1073741824 -> "1 GiB"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


@dataclass(frozen=True)
class Column:
    """One table column: ``key`` into the row, header text and unit (shown as "(unit)")."""

    key: str
    header: str
    unit: str = ""
    render: Callable[[object], str] = fmt
    numeric: bool = True
    nowrap: bool = False  # short codes such as shapes, which read badly when broken
    detail: Callable[[object], str] | None = None  # a second, smaller line (an interval)

    @classmethod
    def of(cls, declared: Field, header: str | None = None, unit: str | None = None,
           **options) -> Column:
        """The column of a declared row field: its key, header and unit from the declaration
        (impl/rows), so the table and the row cannot disagree on them; ``header`` and ``unit``
        where the table words them otherwise (a unit the header already says: unit="")."""
        return cls(declared.name, header or declared.label or declared.name,
                   declared.unit if unit is None else unit, **options)

    @property
    def title(self) -> str:
        return f"{self.header} ({self.unit})" if self.unit else self.header


def text_column(key: str, header: str | None = None, nowrap: bool = False) -> Column:
    """A column of text; its header is ``key`` where none is given (a field's own name)."""
    return Column(key, key if header is None else header,
                  render=lambda v: NA if v is None else str(v), numeric=False, nowrap=nowrap)


def estimate_column(key: str, header: str, unit: str = "") -> Column:
    """A column of Estimates: the median, and its 95% interval on a second line."""
    return Column(key, header, unit, render=lambda e: fmt((e or {}).get("value")),
                  detail=lambda e: "" if not e or e.get("value") is None else fmt_range(e))


@dataclass(frozen=True)
class Cell:
    text: str
    mark: str = ""  # footnote letter, when the value is n/a or needs a warning
    numeric: bool = False
    nowrap: bool = False
    detail: str = ""  # a second, smaller line: the interval of an estimate


@dataclass(frozen=True)
class Placement:
    """A dense table's place in the appendix "Detail tables" (reports/layout.py), declared
    where the table is made: it moves there from the body when it has more than
    layout.KEEP_ROWS rows, or whatever its length where ``always`` (what the body's own
    tables already answer); ``name`` is what the body's line calls it."""

    name: str
    always: bool = False


@dataclass
class Table:
    id: str
    caption: str
    headers: list[str]
    rows: list[list[Cell]]
    notes: list[tuple[str, str]] = field(default_factory=list)  # (mark, text)
    numeric: list[bool] = field(default_factory=list)
    moved_to: str | None = None  # where the body points to, when an appendix shows it
    placement: Placement | None = None  # None: it stays where its section puts it


def missing_value_note(key: str, row: dict) -> str | None:
    """The default footnote rule: why a value is n/a (and any overlap efficiency's warning)."""
    if row.get(key) is None or key == STEP.names.overlap_efficiency:
        return note_for(key, row)
    return None


def make_table(table_id: str, caption: str, columns: Sequence[Column],
               rows: Sequence[dict],
               note: Callable[[str, dict], str | None] = missing_value_note,
               placement: Placement | None = None) -> Table:
    """Rows rendered through their columns; a value ``note`` has words for gets a lettered
    footnote (by default ``missing_value_note``; the same reason gets the same letter
    throughout one table). ``placement``: where the table may move (Placement).
    """
    notes: dict[str, str] = {}
    rendered = []
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column.key)
            reason = note(column.key, row) if column.numeric else None
            mark = ""
            if reason is not None:
                if reason not in notes:
                    notes[reason] = string.ascii_lowercase[len(notes) % 26]
                mark = notes[reason]
            detail = column.detail(value) if column.detail else ""
            cells.append(Cell(column.render(value), mark, column.numeric, column.nowrap, detail))
        rendered.append(cells)
    return Table(table_id, caption, [c.title for c in columns], rendered,
                 [(mark, reason) for reason, mark in notes.items()],
                 [c.numeric for c in columns], placement=placement)
