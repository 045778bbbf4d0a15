"""The report's contents: which sections, in which order, and the context the templates fill.

``SECTIONS`` lists them in report order; ``report_context`` fills each from its module in
reports/sections/ (a module per section, named after its partial,
reports/templates/sections/<id>.html.j2). A section whose context says ``empty`` is left out of
the report and its table of contents. Captions say what was measured, on which machine (label
and GPUs) and how (command, mode, rounds).
"""

from __future__ import annotations

import string
from collections.abc import Sequence

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
# (id, title, context key, role): "front" sections follow the title page, a "chapter" starts
# on a new page, a "section" flows on, an "appendix" is a chapter lettered A, B, ...
SECTIONS = (
    ("abstract", "Abstract", "abstract", "front"),
    ("methodology", "Methodology", "methodology", "front"),
    ("overlap", "Overlap, measured interleaved", "overlap", "chapter"),
    ("reproducibility", "Run-to-run agreement", "reproducibility", "section"),
    ("step-anatomy", "Anatomy of a step", "anatomy", "chapter"),
    ("interference", "Interference: compute beside communication", "interference", "section"),
    ("course-study", "The course study, reproduced", "study", "section"),
    ("allreduce", "All-reduce bandwidth", "allreduce", "chapter"),
    ("energy", "Power and energy", "energy", "section"),
    ("gemm", "GEMM ladder and the seed step", "gemm", "chapter"),
    ("tensor-parallel", "Tensor parallelism", "tensor_parallel", "chapter"),
    ("pipeline", "Pipeline and CPU-GPU hybrid training", "pipeline", "chapter"),
    ("prediction", "Beyond this machine", "prediction", "chapter"),
    ("regression", "Regression against a baseline", "regression", "chapter"),
    ("environment", "Environment", "environment", "chapter"),
    ("runs", "Runs loaded and how this report uses them", "runs", "appendix"),
    ("before-interleaving", appendix.BEFORE_INTERLEAVING_TITLE, "before_interleaving",
     "appendix"),
    ("cells", "Every interleaved cell", "cells", "appendix"),
    ("overlap-cpu", "Overlap on the CPU", "overlap_cpu", "appendix"),
    ("step-anatomy-cpu", "Anatomy of a step on the CPU", "anatomy_cpu", "appendix"),
    ("interference-cpu", "Interference on the CPU and on one GPU", "interference_cpu",
     "appendix"),
    ("tensor-parallel-cpu", "Tensor parallelism on the CPU and on one rank", "tensor_parallel_cpu",
     "appendix"),
    ("agreement", "Run-to-run agreement, every figure", "agreement", "appendix"),
    ("detail", "Detail tables", "detail", "appendix"),
    ("tables", "Dense tables", "tables", "appendix"),
    ("topology", "GPU topology (nvidia-smi topo -m)", "topology", "appendix"),
    ("definitions", "Definitions, quoted from the code", "methodology", "appendix"),
)


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
        "anatomy": step_anatomy.section_anatomy(rows, runs),
        "interference": interference.section_interference(rows, runs),
        "study": course_study.section_study(rows, runs),
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

    layout.split_cpu_blocks(context, gpu_labels, {"tensor_parallel": scaled("tensor_parallel"),
                                                  "interference": scaled("interference")})
    moved = layout.move_detail_tables(context, SECTIONS)
    context["topology"] = {"empty": not context["environment"]["topology"]}
    context["detail"] = {"empty": not moved, "groups": moved}
    dropped = [title for _, title, key, role in SECTIONS if key in context
               and role in layout.BODY_ROLES and is_empty(key, context[key])]
    context["runs"] = appendix.section_runs(rows, runs, dropped)
    shown, letters = [], iter(string.ascii_uppercase)
    for section_id, title, key, role in SECTIONS:
        if is_empty(key, context[key]):
            continue
        shown.append({"id": section_id, "title": title, "key": key, "role": role,
                      "letter": next(letters) if role == "appendix" else None})
    letter = {s["id"]: s["letter"] for s in shown}
    if moved:
        layout.point_to(moved, letter["detail"])
    return {**context, "title": TITLE,
            "labels_line": ", ".join(labels), "sections": shown, "letters": letter,
            "timelines": timelines,
            "partial": any(r.partial for r in runs)}
