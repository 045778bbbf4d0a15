"""The gate on a real training step's rounds: the same rounds 10% slower are flagged, the same
rounds again pass.

tests/data/gate-step-baseline.json is one real run of tests/gate_bench/gate_workload.py (60
rounds, the 2-core CPU machine). Two fresh runs cannot be a test: on that machine, quiet, a run
with 10% more compute measured 17.9% faster than the run before it, and with two busy loops
beside it the ratio's interval spanned 0.71–1.52. How often the gate flags a real slowdown
between fresh runs, and how often it raises a false alarm, is measured, not asserted:
reports/gate/trials.py (results/cpu-2core/gate-trials*.json), and the interleaved re-run that
removes the drift between runs is checked in tests/gate/test_confirm.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from reports.gate.trials import ROOT

BASELINE = ROOT / "tests" / "data" / "gate-step-baseline.json"
TIME_STATS = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ld15iqr", "hd15iqr",
              "total")
TIME_FIELDS = ("step_ms", "compute_only_ms", "sequential_ms", "limit_ms")


def gate(*args, summary: Path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "GITHUB_STEP_SUMMARY"}
    return subprocess.run([sys.executable, "-m", "reports.gate", *map(str, args),
                           "--summary", str(summary)], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False)


def slower(path: Path, factor: float, out: Path) -> Path:
    """The run at ``path`` with every round and time ``factor`` times as long."""
    document = json.loads(path.read_text())
    for benchmark in document["benchmarks"]:
        stats, info = benchmark["stats"], benchmark["extra_info"]
        stats["data"] = [t * factor for t in stats["data"]]
        for key in TIME_STATS:
            stats[key] *= factor
        stats["ops"] /= factor
        for key in TIME_FIELDS:
            if key in info:  # a training step's fields; a bare benchmark has none
                info[key] *= factor
        if "samples_per_s" in info:
            info["samples_per_s"] /= factor
    out.write_text(json.dumps(document))
    return out


def test_the_same_rounds_ten_percent_slower_regress(tmp_path):
    # Files only: the regression is shown, unconfirmed (exit 3); only a re-run fails the gate.
    result = gate(BASELINE, slower(BASELINE, 1.1, tmp_path / "candidate.json"),
                  summary=tmp_path / "summary.md")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "regressed (unconfirmed: files only)" in result.stdout
    assert "Throughput gate: UNCONFIRMED (1 regressed" in result.stdout
    assert "samples_per_s 4585 -> 4168; 9.1% slower (> 5%)" in result.stdout  # 1 / 1.1


def test_the_same_rounds_pass(tmp_path):
    result = gate(BASELINE, BASELINE, summary=tmp_path / "summary.md")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Throughput gate: PASS" in result.stdout
