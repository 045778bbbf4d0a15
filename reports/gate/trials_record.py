"""The gate trials' record: the machine's load beside each pair, and the rates with intervals.

reports/gate/trials.py runs the pairs; this module describes them: the 1-minute load average
and the busiest other processes (the machine is shared: that is part of the record), and per
kind of pair the rates (gate failed, unconfirmed, files only; per pair and per benchmark) with
95% Clopper-Pearson intervals (impl/stats.py ``proportion``).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
from collections import Counter
from importlib.metadata import version

from impl import stats
from impl.rows.gate_records import ESTIMATED, RERUN, TRIAL_PAIR, TRIAL_ROW

# the kinds of pair a trial runs: the same code on both sides, or a candidate with extra compute
PAIR_KINDS = ("unchanged", "slowed")

# --- the machine's load -------------------------------------------------------------------------


def busiest_processes(limit: int = 5) -> list[dict]:
    """The other processes using the most CPU (ps's %CPU: over each one's lifetime)."""
    result = subprocess.run(["ps", "-eo", "pid=,pcpu=,etime=,args=", "--sort=-pcpu"],
                            capture_output=True, text=True, check=False)
    busy = []
    for line in result.stdout.splitlines():
        pid, pcpu, elapsed, command = (line.split(None, 3) + ["", "", "", ""])[:4]
        if pid.isdigit() and int(pid) != os.getpid() and float(pcpu or 0) >= 5:
            busy.append({"pcpu": float(pcpu), "elapsed": elapsed, "command": command[:120]})
    return busy[:limit]


def load_now() -> dict:
    return {"load_1min": round(os.getloadavg()[0], 2), "busiest": busiest_processes()}


# --- summary ------------------------------------------------------------------------------------


def _rate(count: int, trials: int) -> dict:
    if not trials:
        return {"count": 0, "trials": 0, "rate": None, "ci95": [None, None]}
    estimate = stats.proportion(count, trials)
    return {"count": count, "trials": trials, "rate": estimate.value,
            "ci95": [estimate.low, estimate.high]}


def summarise(pairs: list[dict]) -> dict:
    """Per kind: the gate's rate per pair and per benchmark, and the files-only rate."""
    summary = {}
    for kind in PAIR_KINDS:
        done = [p for p in pairs if p[TRIAL_PAIR.kind] == kind]
        rows = [r for p in done for r in p[TRIAL_PAIR.rows]]
        reruns = [r[TRIAL_ROW.rerun] for r in rows if r[TRIAL_ROW.rerun]]
        summary[kind] = {
            "pairs": len(done),
            "gate_failed": _rate(sum(p[TRIAL_PAIR.regressed] for p in done), len(done)),
            "gate_unconfirmed": _rate(sum(p.get(TRIAL_PAIR.unconfirmed, False) for p in done),
                                      len(done)),
            "files_only_failed": _rate(sum(p[TRIAL_PAIR.files_regressed] for p in done),
                                       len(done)),
            "benchmarks_regressed": _rate(
                sum(r[TRIAL_ROW.verdict] == "regressed" for r in rows), len(rows)),
            "benchmarks_files_only_regressed": _rate(
                sum(r[TRIAL_ROW.files_verdict] == "regressed" for r in rows), len(rows)),
            "re_measured": sum(r[TRIAL_ROW.rerun] is not None for r in rows),
            # how many block pairs the re-runs took (inconclusive ones grow)
            "rerun_block_pairs": dict(sorted(Counter(
                len(rerun[RERUN.baseline_block_s]) for rerun in reruns).items())),
            "rerun_outcomes": {outcome: sum(rerun.get(RERUN.outcome) == outcome
                                            for rerun in reruns)
                               for outcome in ("regressed", "cleared", "inconclusive")},
        }
    slowed = [r[TRIAL_ROW.rerun][RERUN.ratio][ESTIMATED.value]
              for p in pairs if p[TRIAL_PAIR.kind] == "slowed"
              for r in p[TRIAL_PAIR.rows] if r[TRIAL_ROW.rerun] and r[TRIAL_ROW.rerun][RERUN.ratio]]
    summary["slowed"]["rerun_throughput_ratio_median"] = (
        statistics.median(slowed) if slowed else None)
    loads = sorted(p[side]["load_1min"] for p in pairs
                   for side in (TRIAL_PAIR.load_before, TRIAL_PAIR.load_after))
    summary["load_1min"] = ({"min": loads[0], "median": statistics.median(loads), "max": loads[-1]}
                            if loads else None)
    return summary


def machine() -> dict:
    import torch

    from impl.fingerprint import cpu_model, machine_label

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {"label": machine_label(), "cpu": cpu_model(), "cpu_cores": os.cpu_count(),
            "gpus": gpus, "python": platform.python_version(), "torch": version("torch")}
