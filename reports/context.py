"""The report's contents: which sections, in which order, and the context the templates fill.

``SECTIONS`` declares them, keyed by the id they render, in report order, each with the
function that builds its context (its key: the id as a template variable) from the view of
the loaded results (reports/view.py): a function of its module in reports/sections/ (a module
per section, named after its partial, reports/templates/sections/<id>.html.j2).
``report_context`` builds them in that order, so a section made from another's context reads
it in ``view.built``; then the layout (reports/layout.py) moves the CPU's blocks and the dense
tables to their appendices. A section whose context says ``empty`` is left out of the report
and its table of contents. Captions say what was measured, on which machine (label and GPUs)
and how (command, mode, rounds).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from impl.rows.declare import RowKind
from impl.rows.kinds import INTERFERENCE, TENSOR_PARALLEL
from impl.rows.report_records import TRACED
from reports import layout
from reports.archive import Archive
from reports.captions import Run
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
from reports.view import View

TITLE = "Hiding gradient all-reduce behind backward: measurements"


@dataclass(frozen=True)
class Section:
    """A section of the report: ``id`` names its partial (reports/templates/sections/
    <id>.html.j2) and its anchor, and its context key is the id as a template variable
    (reports/layout.py, context_key). ``role``: "front" follows the title page, a "chapter"
    starts on a new page, a "section" flows on, an "appendix" is a chapter lettered A, B, ...
    ``build``: makes its context from the view; None where another makes it: the layout (a
    ``-cpu`` section, the detail tables) or the section it ``renders``, whose context it shows."""

    id: str
    title: str
    role: str
    build: Callable[[View], dict] | None = None
    renders: str | None = None

    @property
    def key(self) -> str:
        return layout.context_key(self.renders or self.id)


def runs_appendix(view: View) -> dict:
    """The appendix on runs, which names the body sections left out for want of data (all
    built before it)."""
    dropped = [s.title for s in SECTIONS.values() if s.role in layout.BODY_ROLES
               and s.key in view.built and is_empty(view.built[s.key])]
    return appendix.section_runs(view, dropped)


# Every section, keyed by the id it renders, in report order.
SECTIONS: dict[str, Section] = {s.id: s for s in (
    Section("abstract", "Abstract", "front", abstract.section),
    Section("methodology", "Methodology", "front", methodology.section_methodology),
    Section("overlap", "Overlap, measured interleaved", "chapter", overlap.section_results),
    Section("reproducibility", "Run-to-run agreement", "section", reproducibility.section),
    Section("step-anatomy", "Anatomy of a step", "chapter", step_anatomy.section_anatomy),
    Section("interference", "Interference: compute beside communication", "section",
            interference.section_interference),
    Section("course-study", "The course study, reproduced", "section",
            course_study.section_study),
    Section("allreduce", "All-reduce bandwidth", "chapter", allreduce.section_allreduce),
    Section("energy", "Power and energy", "section", energy.section_energy),
    Section("gemm", "GEMM ladder and the seed step", "chapter", gemm.section_gemm),
    Section("tensor-parallel", "Tensor parallelism", "chapter", tensor_parallel.section),
    Section("pipeline", "Pipeline and CPU-GPU hybrid training", "chapter", pipeline.section),
    Section("prediction", "Beyond this machine", "chapter", prediction.section),
    Section("regression", "Regression against a baseline", "chapter",
            regression.section_regression),
    Section("environment", "Environment", "chapter", environment.section_environment),
    Section("runs", "Runs loaded and how this report uses them", "appendix", runs_appendix),
    Section("before-interleaving", appendix.BEFORE_INTERLEAVING_TITLE, "appendix",
            appendix.section_before_interleaving),
    Section("cells", "Every interleaved cell", "appendix", appendix.section_cells),
    Section("overlap-cpu", "Overlap on the CPU", "appendix"),
    Section("step-anatomy-cpu", "Anatomy of a step on the CPU", "appendix"),
    Section("interference-cpu", "Interference on the CPU and on one GPU", "appendix"),
    Section("tensor-parallel-cpu", "Tensor parallelism on the CPU and on one rank", "appendix"),
    Section("agreement", "Run-to-run agreement, every figure", "appendix",
            reproducibility.section_appendix),
    Section("detail", "Detail tables", "appendix"),
    Section("tables", "Dense tables", "appendix", appendix.section_tables),
    Section("topology", "GPU topology (nvidia-smi topo -m)", "appendix",
            environment.section_topology),
    Section("definitions", "Definitions, quoted from the code", "appendix",
            renders="methodology"),
)}


# --- the whole context --------------------------------------------------------------------------


def is_empty(section: dict) -> bool:
    """Whether a section has nothing to show (it is then left out, contents included)."""
    if "empty" in section:
        return section["empty"]
    return not section.get("table")  # a section_kinds table of a study without results


def scaled(rows: Sequence[dict], kind: RowKind, gpu_labels: set[str]) -> set[str]:
    """The GPU machines whose rows of ``kind`` span ranks."""
    return {r["machine"] for r in rows if kind.holds(r)
            and r.get(kind.names.world_size, 1) > 1} & gpu_labels


def report_context(rows: Sequence[dict], runs: Sequence[Run],
                   baseline: Baseline | None = None, archive: Archive | None = None) -> dict:
    """Everything the templates need; rows are impl.rows.merge.benchmark_rows of every run, merged;
    ``archive`` holds every result file, log and trials file of their folders (the front
    page's study lines and run-to-run agreement)."""
    view = View.of(rows, runs, archive, baseline)
    for s in SECTIONS.values():
        if s.build:
            view.built[s.key] = s.build(view)
    context = view.built
    timelines = step_anatomy.timelines(context)  # every block's, before the CPU's move
    gpu_labels = set(view.machines.gpu)
    layout.split_cpu_blocks(context, gpu_labels, {
        "tensor-parallel": scaled(rows, TENSOR_PARALLEL, gpu_labels),
        "interference": scaled(rows, INTERFERENCE, gpu_labels)})
    moved = layout.move_detail_tables(context, SECTIONS.values())
    context["detail"] = {"empty": not moved, "groups": moved}
    shown, letters = [], iter(string.ascii_uppercase)
    for s in SECTIONS.values():
        if is_empty(context[s.key]):
            continue
        shown.append({"id": s.id, "title": s.title, "key": s.key, "role": s.role,
                      "letter": next(letters) if s.role == "appendix" else None})
    letter = {s["id"]: s["letter"] for s in shown}
    if moved:
        layout.point_to(moved, letter["detail"])
    return {**context, "title": TITLE,
            "labels_line": ", ".join(view.machines.labels), "sections": shown,
            "letters": letter, TRACED.timelines: timelines,
            "partial": any(r.partial for r in runs)}
