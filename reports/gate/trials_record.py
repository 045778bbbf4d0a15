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
        done = [p for p in pairs if p["kind"] == kind]
        rows = [r for p in done for r in p["rows"]]
        summary[kind] = {
            "pairs": len(done),
            "gate_failed": _rate(sum(p["regressed"] for p in done), len(done)),
            "gate_unconfirmed": _rate(sum(p.get("unconfirmed", False) for p in done),
                                      len(done)),
            "files_only_failed": _rate(sum(p["files_regressed"] for p in done), len(done)),
            "benchmarks_regressed": _rate(sum(r["verdict"] == "regressed" for r in rows),
                                          len(rows)),
            "benchmarks_files_only_regressed": _rate(
                sum(r["files_verdict"] == "regressed" for r in rows), len(rows)),
            "re_measured": sum(r["rerun"] is not None for r in rows),
            # how many block pairs the re-runs took (inconclusive ones grow)
            "rerun_block_pairs": dict(sorted(Counter(
                len(r["rerun"]["baseline_block_s"]) for r in rows if r["rerun"]).items())),
            "rerun_outcomes": {outcome: sum((r["rerun"] or {}).get("outcome") == outcome
                                            for r in rows)
                               for outcome in ("regressed", "cleared", "inconclusive")},
        }
    slowed = [r["rerun"]["ratio"]["value"] for p in pairs if p["kind"] == "slowed"
              for r in p["rows"] if r["rerun"] and r["rerun"]["ratio"]]
    summary["slowed"]["rerun_throughput_ratio_median"] = (
        statistics.median(slowed) if slowed else None)
    loads = sorted(p[side]["load_1min"] for p in pairs for side in ("load_before", "load_after"))
    summary["load_1min"] = ({"min": loads[0], "median": statistics.median(loads), "max": loads[-1]}
                            if loads else None)
    return summary


def machine() -> dict:
    import torch

    from impl.fingerprint import cpu_model, machine_label

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {"label": machine_label(), "cpu": cpu_model(), "cpu_cores": os.cpu_count(),
            "gpus": gpus, "python": platform.python_version(), "torch": version("torch")}
