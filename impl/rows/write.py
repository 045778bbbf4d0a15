"""The suite's one way to write a row: checked against its kind's declaration first."""

from __future__ import annotations

from impl.rows.declare import RowError
from impl.rows.kinds import ROW_KINDS


def write_row(benchmark, row: dict) -> None:
    """Check ``row`` against its kind's declaration, then store it as the benchmark's
    extra_info; RowError names the kind and the field that does not match."""
    kind = ROW_KINDS.get(row.get("kind"))
    if kind is None:
        raise RowError(f"row kind {row.get('kind')!r} is not declared in impl/rows/kinds.py "
                       f"(declared: {', '.join(sorted(ROW_KINDS))})")
    if problem := kind.check_written(row):
        raise RowError(f"{kind.name} row {problem}")
    benchmark.extra_info.update(row)
