"""Records that are not rows but whose keys share rows' field names, declared once: an
estimate's JSON, a machine's fingerprint, the launcher's hang, pass and timing records, and
the gate's verdicts, trials and their tables.

Each is a ``Declared`` of its keys, so the code that writes a record and every reader name a
key as an attribute (``pair[TRIAL_PAIR.rows]``, ``hang[HANG.measured_with]``): the key is
spelt here alone, and a misspelt one raises AttributeError. Torch-free.
"""

from __future__ import annotations

from impl.rows.declare import Declared
from impl.rows.shapes import ESTIMATE
from impl.rows.suite_record import HANG_SHAPE, PASS_SHAPE, TIMING_SHAPE

# impl.stats.Estimate.to_json: a median with its 95% interval and the rounds behind it.
ESTIMATED = Declared.keys("estimate", ESTIMATE)

# impl.fingerprint.fingerprint: the machine a result file was measured on (machine_info
# ["overlap"]); the gate compares baselines on the same machine by some of these.
MACHINE = Declared.keys("machine fingerprint", (
    "machine_label", "gpu_names", "gpu_uuids", "driver", "cuda", "nccl", "torch", "mpi",
    "cpu_model", "cpu_cores", "gpu_topology", "gpu_limits", "nccl_env", "backend",
    "world_size", "profile", "git_commit", "git_dirty", "python"))

# --- the launcher's records (impl/rows/suite_record.py declares their shapes) ---------------

# suite.watchdog: what one rank wrote when its benchmark passed its deadline; suite.hangs
# gathers the ranks' records into one HANG.
RANK_HANG = Declared.keys("rank's hang record", (
    "benchmark", "rank", "world_size", "deadline_s", "expected_s", "elapsed_s", "frame",
    "innermost", "measured_with", "remaining", "stacks", "waiting", "failed"))
HANG = Declared.keys("hang", HANG_SHAPE)
# suite.run: one pass of the launcher; suite.budget.PassTiming: each benchmark it timed.
PASS = Declared.keys("pass", PASS_SHAPE)
TIMED = Declared.keys("timed benchmark", TIMING_SHAPE["benchmarks"]["*"])

# --- the gate (reports/gate) ------------------------------------------------------------------

# reports.gate.comparison: one benchmark's verdict (Row.to_json) and the whole comparison.
GATE_ROW = Declared.keys("gate verdict", (
    "fullname", "group", "verdict", "verdict_text", "files_verdict", "ratio", "ci",
    "p_value", "threshold", "minimum", "spread", "suspect", "reason", "baseline_median_s",
    "candidate_median_s", "confirmation"))
GATE = Declared.keys("gate comparison", (
    "verdicts", "unconfirmed_regressions", "regressed", "status", "exit_status", "rows",
    "only_baseline", "only_candidate"))
# reports.gate.confirm.Confirmation.to_json: a re-run's verdict.
RERUN = Declared.keys("re-run", (
    "verdict", "outcome", "reason", "threshold", "ratio", "baseline_block_s",
    "candidate_block_s"))

# reports.gate.trials: a trials file, each pair the gate judged in it and each benchmark of a
# pair (a GATE_ROW's figures, its re-run under "rerun").
TRIALS = Declared.keys("gate trials", (
    "what", "commands", "created", "machine", "code", "target", "gate", "slowdown",
    "calibrations", "pairs", "summary", "updated"))
TRIAL_PAIR = Declared.keys("gate trial pair", (
    "kind", "index", "extra_compute", "gate_exit", "regressed", "unconfirmed",
    "files_regressed", "rows", "seconds", "load_before", "load_after", "calibration"))
TRIAL_ROW = Declared.keys("gate trial benchmark", (
    "fullname", "files_verdict", "files_ratio", "threshold", "suspect", "verdict", "rerun"))
# reports.gate.trial_rates: one trials file's rates, a row of the report's table of them.
TRIAL_RATE = Declared.keys("gate trial rates", (
    "machine", "target", "false_alarms", "files_false_alarms", "detections",
    "files_detections", "slowdown", "blocks", "block_value", "load", "source"))
# reports.sections.regression: one benchmark of the report's comparison against a baseline.
REGRESSION = Declared.keys("regression table row", (
    "benchmark", "group", "baseline_ms", "candidate_ms", "ratio", "ci", "threshold",
    "p_value", "verdict", "reason"))
