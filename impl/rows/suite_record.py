"""The run's own record in a result file: the top-level ``suite`` object, declared once.

conftest.py writes it with every pass's file, suite/run.py adds what the launcher knows (the
passes, their exit statuses, the hangs, what stopped the run), and the report and the gate
read it; impl/rows/files.py checks it against ``SUITE_SHAPE`` (impl/rows/shapes.py), so a
string where a number belongs, or a number outside what any run writes, is one line naming
the file and the field before anything reads it.

    {"schema": 1, "label": "cpu-2core", "partial": false, "command": "...",
     "launcher_command": "python -m suite.run --quick", "profile": "gloo-tcp", "mode": "quick",
     "created": "2026-11-21T23:20:56+00:00", "failed_passes": [], "stopped_by": null,
     "passes": [{"name": "torchrun gloo-tcp", "command": "...", "env": {}, "exit": 0}],
     "hangs": [HANG_SHAPE, ...]}
"""

from __future__ import annotations

from impl.rows.shapes import BOOL, TEXT, Range

# A deadline or an expected time of one benchmark, in seconds: up to 1e6 s (11.6 days, beyond
# any run; impl/rows/files.py's longest round time).
BENCHMARK_SECONDS = Range("num?", 0, 1e6)
RANK = Range("int", 0, 1 << 20)

# One hang (suite/hangs.py's ``summary``, with the pass it was in and, for a pass the launcher
# ended, why it stalled).
HANG_SHAPE = {
    "benchmark": TEXT, "pass?": "str?", "deadline_s?": BENCHMARK_SECONDS,
    "expected_s?": BENCHMARK_SECONDS, "measured_with?": [TEXT, "?"],
    "remaining?": Range("int?", 0, 1 << 30), "stuck?": [RANK, "?"],
    "ranks?": {"*": {"frame?": "str?", "innermost?": "str?", "benchmark?": "str?"}, "?": True},
    "stalled?": "str?"}

# A pass's record of its benchmarks (suite/budget.py's ``PassTiming``): the machine class and
# its GPUs, and per benchmark its study, the expected seconds it adds to the plan and what it
# took.
TIMING_SHAPE = {"machine": TEXT, "gpus?": Range("int", 0, 1 << 16), "benchmarks": {
    "*": {"study": TEXT, "expected_s": Range("num", 0, 1e9), "duration_s": BENCHMARK_SECONDS}},
    "?": True}
PASS_SECONDS = Range("num?", 0, 1e9)

# One pass of the launcher (suite/run.py's ``merge``): its exit status as Popen gives it (a
# negative number for a signal) or null for a pass that never started; its wall time, what
# its plan expected and its benchmarks' timing.
PASS_SHAPE = {"name": TEXT, "command?": "str?", "env?": {"*": TEXT, "?": True},
              "exit?": Range("int?", -255, 255), "wall_s?": PASS_SECONDS,
              "planned_s?": PASS_SECONDS, "timing?": TIMING_SHAPE}

SUITE_SHAPE = {
    "schema": "int", "label": TEXT, "partial?": BOOL, "command?": "str?",
    "launcher_command?": "str?", "profile?": "str?", "mode?": "str?", "created?": "str?",
    "failed_passes?": [TEXT, "?"], "passes?": [PASS_SHAPE, "?"], "hangs?": [HANG_SHAPE, "?"],
    "stopped_by?": "str?", "note?": "str?", "recovered_as?": "str?",
    "timing?": TIMING_SHAPE}
