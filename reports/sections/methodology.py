"""Methodology and the definitions appendix (templates sections/methodology.html.j2 and
definitions.html.j2): each metric's definition quoted from the code
(impl/rows/metric_fields.py), the suite modes of the loaded runs, and the formulas' docstrings
(impl/metrics.py) as the report quotes them.
"""

from __future__ import annotations

from dataclasses import replace

from impl.metrics import ideal_speedup
from impl.rows.declare import Field
from impl.rows.metric_fields import ALLREDUCE_FIELDS, STEP_FIELDS
from reports import cells
from reports.view import View


def _doc(function) -> str:
    """A formula's docstring as one paragraph (the report quotes the code's own words)."""
    return " ".join(function.__doc__.split())


def _docs():
    from impl.metrics import lost_time_ms, schedule_bound_ms

    return _doc(lost_time_ms), _doc(schedule_bound_ms), _doc(ideal_speedup)


LOST_TIME_DOC, BOUND_DOC, IDEAL_DOC = _docs()


def quoted(field: Field) -> Field:
    """A field as a definitions table quotes it (its name, unit and definition): the
    declaration itself, with "–" for a field without a unit."""
    return replace(field, unit=field.unit or "–")


def section_methodology(view: View) -> dict:
    quote = lambda fields: [quoted(f) for f in fields]
    return {"empty": False, "step_fields": quote(STEP_FIELDS),
            "allreduce_fields": quote(ALLREDUCE_FIELDS),
            "modes": sorted({r.mode or "unknown" for r in view.runs}),
            "answer_chunks": cells.ANSWER_CHUNKS, "lost_time_doc": LOST_TIME_DOC,
            "ideal_doc": IDEAL_DOC}
