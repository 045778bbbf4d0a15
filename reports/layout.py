"""Where the report puts what: the body answers, the appendices hold the rest.

The body (abstract to environment) reads as the answer and its evidence in figures and short
tables, within a page budget. Two things leave it, so that the section modules build their
context as they would without a budget:

- a dense table declares its place where it is made (reports/format.py, Placement): it moves
  to the appendix "Detail tables" when it has more than KEEP_ROWS rows (or whatever its
  length, where its placement says ``always``); the body keeps one line saying where;
- in a chapter made of per-machine blocks (CPU_BLOCKS, by section id), the CPU's blocks move
  to the section's ``-cpu`` appendix when a GPU machine has a block there: the GPU answers,
  the CPU checks the method (in tensor parallelism and interference, a GPU machine of one rank
  goes with them where another ran several).

    split_cpu_blocks(context, gpu_labels)            # context["step_anatomy_cpu"], ...
    groups = move_detail_tables(context, SECTIONS)   # [{"title", "tables"}], marks the tables
    point_to(groups, "D")                           # their body lines name the appendix
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from impl.rows.report_records import BLOCKS
from reports.format import Table

BODY_ROLES = ("front", "chapter", "section")
KEEP_ROWS = 6  # a table of a few rows stays: its line in the body would cost about as much
# (section id, its list of per-machine blocks): each block has a "machine" label; the CPU's
# blocks go to the section "<id>-cpu"
CPU_BLOCKS = (("overlap", BLOCKS.blocks), ("step-anatomy", BLOCKS.machines),
              ("interference", BLOCKS.machines), ("tensor-parallel", BLOCKS.machines))


def context_key(section_id: str) -> str:
    """The context key of a section: its id as a template variable (``step-anatomy`` ->
    ``step_anatomy``)."""
    return section_id.replace("-", "_")


def split_cpu_blocks(context: dict, gpu_labels: set[str],
                     keep: dict[str, set[str]] | None = None) -> None:
    """Move the CPU machines' blocks of CPU_BLOCKS to the section ``<id>-cpu`` (same shape),
    where a GPU machine has a block in the same chapter; that section is empty otherwise.
    ``keep`` names, per section id, the machines that stay in the body instead of every GPU
    machine (tensor parallelism and interference: those that ran more than one rank, where
    any did)."""
    for section_id, field in CPU_BLOCKS:
        key = context_key(section_id)
        labels = (keep or {}).get(section_id) or gpu_labels
        blocks = context[key].get(field) or []
        gpu = [b for b in blocks if b["machine"] in labels]
        cpu = [b for b in blocks if b["machine"] not in labels] if gpu else []
        context[f"{key}_cpu"] = {field: cpu, "empty": not cpu}
        if cpu:
            context[key] = {**context[key], field: gpu}


def tables_in(value: object) -> Iterator[Table]:
    """Every Table inside a section's context (dicts, lists and tuples), in order."""
    if isinstance(value, Table):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from tables_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tables_in(item)


def moves(table: Table) -> bool:
    """Whether ``table`` leaves the body for the detail appendix (its Placement)."""
    return table.placement is not None and (table.placement.always
                                            or len(table.rows) > KEEP_ROWS)


def move_detail_tables(context: dict, sections: Iterable) -> list[dict]:
    """The body's detail tables, grouped by the section (reports/context.py's Section) they
    come from; each is marked ``moved_to`` so that the body shows one line in its place."""
    groups = []
    for section in sections:
        if section.role not in BODY_ROLES or section.key not in context:
            continue
        found = [t for t in tables_in(context[section.key]) if moves(t)]
        for table in found:
            table.moved_to = table.placement.name
        if found:
            groups.append({"title": section.title, "tables": found})
    return groups


def point_to(groups: Iterable[dict], letter: str) -> None:
    """The body line of every moved table: what it holds and the appendix that has it."""
    for group in groups:
        for table in group["tables"]:
            table.moved_to = (f"The table of {table.placement.name} is in Appendix {letter}, "
                              f"'Detail tables'.")
