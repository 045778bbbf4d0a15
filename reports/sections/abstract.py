"""The abstract, page 1: the headline table and its figure and findings (headline.py),
one line per study with its result or why it has none (studies.py), and one line on
how well figures reproduce between runs (reproducibility.py; its template reads
``reproducibility.line``). The verdicts of every strategy against every other are in the
overlap chapter, every cell in the appendix.

    context = section(view)
"""

from __future__ import annotations

from reports import cells
from reports.captions import and_list
from reports.sections import headline, studies
from reports.view import View


def section(view: View) -> dict:
    return {"empty": False,
            "machines": and_list([view.machines.words[label] for label in view.machines.labels]),
            "answer_chunks": cells.ANSWER_CHUNKS, "headline": headline.section(view),
            "studies": studies.section(view)}
