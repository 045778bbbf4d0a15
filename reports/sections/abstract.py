"""The abstract, page 1: the headline table and its figure and findings (headline.py),
one line per study with its result or why it has none (studies.py), and one line on
how well figures reproduce between runs (reproducibility.py). The verdicts of every
strategy against every other are in the overlap chapter, every cell in the appendix.

    context = section(rows, runs, archive, agreement_line)
"""

from __future__ import annotations

from collections.abc import Sequence

from reports import cells
from reports.archive import Archive
from reports.captions import Run, and_list, machine_labels, machine_text
from reports.sections import headline, studies


def section(rows: Sequence[dict], runs: Sequence[Run], archive: Archive,
            agreement_line: str) -> dict:
    return {"empty": False, "machines": and_list([machine_text(label, runs)
                                                 for label in machine_labels(runs)]),
            "answer_chunks": cells.ANSWER_CHUNKS, "headline": headline.section(rows, runs, archive),
            "studies": studies.section(rows, runs, archive), "agreement": agreement_line}
