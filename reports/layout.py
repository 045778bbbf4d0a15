"""Where the report puts what: the body answers, the appendices hold the rest.

The body (abstract to environment) reads as the answer and its evidence in figures and short
tables, within a page budget. Two things leave it, decided here once so that the section
modules build their context as before and need not know the budget:

- a dense table, a row per variant or setting and more than KEEP_ROWS rows, each value with
  its interval, moves to the appendix "Detail tables" (DETAIL_TABLES, by table id); the body
  keeps one line saying where;
- in a chapter made of per-machine blocks (CPU_BLOCKS), the CPU's blocks move to an appendix
  of their own when a GPU machine has a block there: the GPU answers, the CPU checks the method
  (in tensor parallelism and interference, a GPU machine of one rank goes with them where
  another ran several).

    split_cpu_blocks(context, gpu_labels)            # context["anatomy_cpu"], ...
    groups = move_detail_tables(context, SECTIONS)   # [{"title", "tables"}], marks the tables
    point_to(groups, "D")                           # their body lines name the appendix
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from reports.format import Table

# (table id, full match; what the body line calls it)
DETAIL_TABLES = (
    (r"tab-world-one", "one rank: sequential against compute-only"),
    (r"tab-lost-\d+", "lost time per strategy"),
    (r"tab-energy-\d+", "energy per step against mean power × step time"),
    (r"tab-interference-.+", "GEMM time alone and beside traffic"),
    (r"tab-tp-(?!efficiency$|overlap-).+", "every tensor-parallel variant"),
    (r"tab-pipeline", "every pipeline schedule and setting"),
    (r"tab-hybrid", "every hybrid step"),
    (r"tab-digits", "the digits MLP's final losses and accuracies"),
    (r"tab-host-adam", "host Adam alone, every implementation"),
    (r"tab-tc-ceilings-.+", "tensor-core ceilings per MMA family"),
    (r"tab-gemm-sweep-(?!summary-).+", "every shape of the GEMM sweep"),
    (r"tab-seed", "the course study's training step, own kernels against torch"),
    (r"tab-gpt-forward", "the study's GPT forward, every iteration"),
    (r"tab-predicted-.+", "predicted figures per GPU count"),
    (r"tab-fabric-.+", "a fabric file's numbers and their sources"),
    (r"tab-model-(cells|earlier|interleaved-more)", "the cost model's error on more cells"),
)
# Moved whatever their length: what the body's own tables already answer for the GPUs.
ALWAYS_MOVED = (r"tab-model-(earlier|interleaved-more)", r"tab-tc-ceilings-.+", r"tab-seed")
BODY_ROLES = ("front", "chapter", "section")
KEEP_ROWS = 6  # a table of a few rows stays: its line in the body would cost about as much
# (context key, its list of per-machine blocks): each block has a "machine" label
CPU_BLOCKS = (("overlap", "blocks"), ("anatomy", "machines"), ("interference", "machines"),
              ("tensor_parallel", "machines"))


def split_cpu_blocks(context: dict, gpu_labels: set[str],
                     keep: dict[str, set[str]] | None = None) -> None:
    """Move the CPU machines' blocks of CPU_BLOCKS to ``<key>_cpu`` (same shape), where a GPU
    machine has a block in the same chapter; ``<key>_cpu`` is empty otherwise. ``keep`` names,
    per key, the machines that stay in the body instead of every GPU machine (tensor
    parallelism and interference: those that ran more than one rank, where any did)."""
    for key, field in CPU_BLOCKS:
        labels = (keep or {}).get(key) or gpu_labels
        blocks = context[key].get(field) or []
        gpu = [b for b in blocks if b["machine"] in labels]
        cpu = [b for b in blocks if b["machine"] not in labels] if gpu else []
        context[f"{key}_cpu"] = {field: cpu, "empty": not cpu}
        if cpu:
            context[key] = {**context[key], field: gpu}


def detail_name(table_id: str) -> str | None:
    return next((name for pattern, name in DETAIL_TABLES if re.fullmatch(pattern, table_id)),
                None)


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


def move_detail_tables(context: dict, sections: Sequence[tuple]) -> list[dict]:
    """The body's detail tables, grouped by the section they come from; each is marked
    ``moved_to`` so that the body shows one line in its place."""
    groups = []
    for _, title, key, role in sections:
        if role not in BODY_ROLES or key not in context:
            continue
        found = [t for t in tables_in(context[key]) if detail_name(t.id) and (
            len(t.rows) > KEEP_ROWS or any(re.fullmatch(p, t.id) for p in ALWAYS_MOVED))]
        for table in found:
            table.moved_to = detail_name(table.id)
        if found:
            groups.append({"title": title, "tables": found})
    return groups


def point_to(groups: Sequence[dict], letter: str) -> None:
    """The body line of every moved table: what it holds and the appendix that has it."""
    for group in groups:
        for table in group["tables"]:
            table.moved_to = (f"The table of {detail_name(table.id)} is in Appendix {letter}, "
                              f"'Detail tables'.")
