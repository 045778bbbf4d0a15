"""What every section of the report is built from (reports/context.py, ``Section.build``): the
merged rows, the runs, their machines (labels, order and words, derived once), the archive of
their folders, the baseline, and the contexts of the sections built before it.

    view = View.of(rows, runs)              # no archive nor baseline: a section's own test
    context = allreduce.section_allreduce(view)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reports.archive import Archive
from reports.captions import Machines, Run
from reports.gate.loading import Baseline


@dataclass(frozen=True)
class View:
    """``rows``: impl.rows.merge.benchmark_rows of every run, merged. ``archive``: every result
    file, log and trials file of their folders (the front page's study lines, run-to-run
    agreement). ``built``: context key -> context, of the sections built so far, in report
    order (a section made from another's reads it there)."""

    rows: Sequence[dict]
    runs: Sequence[Run]
    machines: Machines
    archive: Archive = field(default_factory=Archive)
    baseline: Baseline | None = None
    built: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Sequence[dict], runs: Sequence[Run], archive: Archive | None = None,
           baseline: Baseline | None = None) -> View:
        return cls(rows, runs, Machines.of(runs), archive or Archive(), baseline)
