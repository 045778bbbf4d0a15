"""The report's own records whose keys share a row field's name, declared once: the code that
writes one and every reader go through these names (``group[GROUP.rows]``,
``event[TRACE_EVENT.name]``), as a row's readers go through its kind (impl/rows/kinds.py).
"""

from __future__ import annotations

from impl.rows.declare import Declared

# A group of rows the report draws or tabulates together (reports.analysis's step, all-reduce,
# GEMM-ladder and ceiling groups; the tensor-parallel roofline's points): its rows, beside
# the fields they share, keyed as theirs.
GROUP = Declared.keys("row group", ("rows",))

# One event of a Chrome/Perfetto trace (the Trace Event Format; reports.traces writes and
# checks them). A metadata event's ``args`` name its process or thread under ``name`` too.
TRACE_EVENT = Declared.keys("trace event", (
    "name", "cat", "ph", "ts", "dur", "pid", "tid", "args"))

# A step timeline the report draws, as the trace export takes it: the variant it is of, the
# timeline (impl.timeline.Timeline as JSON), the trace's file, the process row's name and what
# goes to the trace's otherData (reports.sections.step_anatomy and course_study write them,
# reports.build.write_traces reads them). ``timelines`` is where a section's context and the
# report's list them.
TRACED = Declared.keys("traced timeline", (
    "variant", "timeline", "file", "process", "about", "timelines"))

# Where a chapter's context lists its per-machine blocks (each with its "machine" label):
# the overlap chapter's under ``blocks``, the anatomy's, interference's and tensor
# parallelism's under ``machines``; reports.layout.CPU_BLOCKS moves the CPU's by these keys.
BLOCKS = Declared.keys("chapter blocks", ("blocks", "machines"))

# What a cell's main finding states for one strategy (reports.cells.finding): its hidden
# fraction (an estimate), its largest lost-time part and every part, and the backward time of
# compute-only's representative step and of its own.
FINDING = Declared.keys("finding", (
    "hidden", "largest", "parts", "backward_reference_ms", "backward_ms"))

# One variant's energy check in an interleaved cell (reports.cells.energy_check): energy per
# step (keyed as a step row's) against mean power × step time, and their ratio.
ENERGY_CHECK = Declared.keys("energy check", (
    "variant", "power_w", "power_times_step_j", "ratio"))

# An NVML series as the report plots it (reports.analysis.nvml_series): time, the mean over
# GPUs of each quantity, the GPUs, and the legend's label under ``strategy``.
NVML_CURVE = Declared.keys("nvml curve", ("strategy", "t_s", "mean", "gpus"))
