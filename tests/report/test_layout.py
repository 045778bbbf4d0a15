"""Where the report puts what: sections keyed by the id they render, tables moved to the
detail appendix by the placement declared where they are made, CPU blocks by section id."""

from __future__ import annotations

from pathlib import Path

from reports import layout
from reports.context import SECTIONS
from reports.format import Cell, Placement, Table

TEMPLATES = Path(__file__).resolve().parents[2] / "reports" / "templates" / "sections"


def table(table_id: str, rows: int, placement: Placement | None = None) -> Table:
    return Table(table_id, "caption", ["a"], [[Cell(str(i))] for i in range(rows)],
                 placement=placement)


def test_every_section_renders_its_partial_from_the_context_key_of_its_id():
    for section_id, section in SECTIONS.items():
        assert section.id == section_id
        assert (TEMPLATES / f"{section_id}.html.j2").is_file()
    assert SECTIONS["step-anatomy"].key == "step_anatomy"
    assert SECTIONS["course-study"].key == "course_study"
    assert SECTIONS["definitions"].key == "methodology"  # the methodology's fields, quoted


def test_a_table_moves_by_its_placement_not_by_its_id():
    dense = table("tab-mine", layout.KEEP_ROWS + 1, Placement("every row of mine"))
    short = table("tab-short", layout.KEEP_ROWS, Placement("a few rows"))
    always = table("tab-always", 1, Placement("what the body already answers", always=True))
    undeclared = table("tab-pipeline", layout.KEEP_ROWS + 5)  # an id the old rules moved
    appendix = table("tab-appendix", layout.KEEP_ROWS + 1, Placement("in an appendix"))
    context = {"overlap": {"tables": [dense, short, undeclared]},
               "step_anatomy": {"machines": [{"table": always}]},
               "cells": {"table": appendix}}
    groups = layout.move_detail_tables(context, SECTIONS.values())
    assert [(g["title"], [t.id for t in g["tables"]]) for g in groups] == [
        ("Overlap, measured interleaved", ["tab-mine"]), ("Anatomy of a step", ["tab-always"])]
    layout.point_to(groups, "I")
    assert dense.moved_to == ("The table of every row of mine is in Appendix I, 'Detail "
                              "tables'.")
    assert short.moved_to is None and undeclared.moved_to is None and appendix.moved_to is None


def test_cpu_blocks_move_to_the_cpu_section_of_their_section_id():
    context = {"overlap": {"blocks": [{"machine": "h200x2"}, {"machine": "cpu-2core"}]},
               "step_anatomy": {"machines": [{"machine": "cpu-2core"}]},
               "interference": {"machines": [{"machine": "h200x1"}, {"machine": "h200x2"}]},
               "tensor_parallel": {"machines": []}}
    layout.split_cpu_blocks(context, {"h200x2", "h200x1"}, {"interference": {"h200x2"}})
    assert context["overlap"]["blocks"] == [{"machine": "h200x2"}]
    assert context["overlap_cpu"] == {"blocks": [{"machine": "cpu-2core"}], "empty": False}
    # no GPU block in the chapter: the CPU's stay in the body
    assert context["step_anatomy_cpu"] == {"machines": [], "empty": True}
    assert context["interference"]["machines"] == [{"machine": "h200x2"}]
    assert context["interference_cpu"]["machines"] == [{"machine": "h200x1"}]
    assert context["tensor_parallel_cpu"]["empty"]
