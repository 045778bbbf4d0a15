"""The report's contents: which sections, in which order, and the context the templates fill.

``SECTIONS`` declares them, keyed by the id they render, in report order; ``report_context``
fills each one's context (its key: the id as a template variable) from its module in
reports/sections/ (a module per section, named after its partial,
reports/templates/sections/<id>.html.j2). A section whose context says ``empty`` is left out of
the report and its table of contents. Captions say what was measured, on which machine (label
and GPUs) and how (command, mode, rounds).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass

from reports import layout
from reports.archive import Archive
from reports.captions import Run, is_gpu_machine, machine_labels
from reports.gate.loading import Baseline
from reports.sections import (
    abstract,
    allreduce,
    appendix,
    course_study,
    energy,
    environment,
    gemm,
    interference,
    methodology,
    overlap,
    pipeline,
    prediction,
    regression,
    reproducibility,
    step_anatomy,
    tensor_parallel,
)

TITLE = "Hiding gradient all-reduce behind backward: measurements"


@dataclass(frozen=True)
class Section:
    """A section of the report: ``id`` names its partial (reports/templates/sections/
    <id>.html.j2) and its anchor, and its context key is the id as a template variable
    (reports/layout.py, context_key). ``role``: "front" follows the title page, a "chapter"
    starts on a new page, a "section" flows on, an "appendix" is a chapter lettered A, B, ...
    ``renders``: the section whose context it shows, where not its own."""

    id: str
    title: str
    role: str
    renders: str | None = None

    @property
    def key(self) -> str:
        return layout.context_key(self.renders or self.id)


# Every section, keyed by the id it renders, in report order.
SECTIONS: dict[str, Section] = {s.id: s for s in (
    Section("abstract", "Abstract", "front"),
    Section("methodology", "Methodology", "front"),
    Section("overlap", "Overlap, measured interleaved", "chapter"),
    Section("reproducibility", "Run-to-run agreement", "section"),
    Section("step-anatomy", "Anatomy of a step", "chapter"),
    Section("interference", "Interference: compute beside communication", "section"),
    Section("course-study", "The course study, reproduced", "section"),
    Section("allreduce", "All-reduce bandwidth", "chapter"),
    Section("energy", "Power and energy", "section"),
    Section("gemm", "GEMM ladder and the seed step", "chapter"),
    Section("tensor-parallel", "Tensor parallelism", "chapter"),
    Section("pipeline", "Pipeline and CPU-GPU hybrid training", "chapter"),
    Section("prediction", "Beyond this machine", "chapter"),
    Section("regression", "Regression against a baseline", "chapter"),
    Section("environment", "Environment", "chapter"),
    Section("runs", "Runs loaded and how this report uses them", "appendix"),
    Section("before-interleaving", appendix.BEFORE_INTERLEAVING_TITLE, "appendix"),
    Section("cells", "Every interleaved cell", "appendix"),
    Section("overlap-cpu", "Overlap on the CPU", "appendix"),
    Section("step-anatomy-cpu", "Anatomy of a step on the CPU", "appendix"),
    Section("interference-cpu", "Interference on the CPU and on one GPU", "appendix"),
    Section("tensor-parallel-cpu", "Tensor parallelism on the CPU and on one rank", "appendix"),
    Section("agreement", "Run-to-run agreement, every figure", "appendix"),
    Section("detail", "Detail tables", "appendix"),
    Section("tables", "Dense tables", "appendix"),
    Section("topology", "GPU topology (nvidia-smi topo -m)", "appendix"),
    Section("definitions", "Definitions, quoted from the code", "appendix",
            renders="methodology"),
)}


# --- the whole context --------------------------------------------------------------------------


def is_empty(key: str, section: dict) -> bool:
    """Whether a section has nothing to show (it is then left out, contents included)."""
    if key == "regression":
        return not section["given"]
    if "empty" in section:
        return section["empty"]
    return not section.get("table")  # a section_kinds table of a study without results


def report_context(rows: Sequence[dict], runs: Sequence[Run],
                   baseline: Baseline | None = None, archive: Archive | None = None) -> dict:
    """Everything the templates need; rows are impl.rows.merge.benchmark_rows of every run, merged;
    ``archive`` holds every result file, log and trials file of their folders (the front
    page's study lines and run-to-run agreement)."""
    archive = archive or Archive()
    labels = machine_labels(runs)
    agreement = reproducibility.section(archive.files)
    context = {
        "abstract": abstract.section(rows, runs, archive, agreement["line"]),
        "methodology": methodology.section_methodology(rows, runs),
        "overlap": overlap.section_results(rows, runs),
        "reproducibility": agreement,
        "step_anatomy": step_anatomy.section_anatomy(rows, runs),
        "interference": interference.section_interference(rows, runs),
        "course_study": course_study.section_study(rows, runs),
        "allreduce": allreduce.section_allreduce(rows, runs),
        "energy": energy.section_energy(rows, runs),
        "gemm": gemm.section_gemm(rows, runs),
        "tensor_parallel": tensor_parallel.section(rows, runs),
        "pipeline": pipeline.section(rows, runs),
        "prediction": prediction.section(rows, runs),
        "regression": regression.section_regression(baseline),
        "environment": environment.section_environment(rows, runs),
        "before_interleaving": appendix.section_before_interleaving(rows, runs),
        "cells": appendix.section_cells(rows, runs),
        "agreement": {"empty": agreement["table"] is None, "table": agreement["table"]},
    }
    context["tables"] = appendix.section_tables(rows, runs, context["gemm"]["tables"])
    timelines = step_anatomy.timelines(context)  # every block's, before the CPU's move
    gpu_labels = {label for label in labels if is_gpu_machine(label, runs)}
    def scaled(kind: str) -> set[str]:  # GPU machines whose rows of ``kind`` span ranks
        return {r["machine"] for r in rows if r.get("kind") == kind
                and r.get("world_size", 1) > 1} & gpu_labels

    layout.split_cpu_blocks(context, gpu_labels, {"tensor-parallel": scaled("tensor_parallel"),
                                                  "interference": scaled("interference")})
    moved = layout.move_detail_tables(context, SECTIONS.values())
    context["topology"] = {"empty": not context["environment"]["topology"]}
    context["detail"] = {"empty": not moved, "groups": moved}
    dropped = [s.title for s in SECTIONS.values() if s.key in context
               and s.role in layout.BODY_ROLES and is_empty(s.key, context[s.key])]
    context["runs"] = appendix.section_runs(rows, runs, dropped)
    shown, letters = [], iter(string.ascii_uppercase)
    for s in SECTIONS.values():
        if is_empty(s.key, context[s.key]):
            continue
        shown.append({"id": s.id, "title": s.title, "key": s.key, "role": s.role,
                      "letter": next(letters) if s.role == "appendix" else None})
    letter = {s["id"]: s["letter"] for s in shown}
    if moved:
        layout.point_to(moved, letter["detail"])
    return {**context, "title": TITLE,
            "labels_line": ", ".join(labels), "sections": shown, "letters": letter,
            "timelines": timelines,
            "partial": any(r.partial for r in runs)}
