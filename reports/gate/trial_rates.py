"""The regression section's analysis: the gate's measured error rates, from its trials.

``python -m reports.gate.trials`` writes ``results/<label>/gate-trials.json``: pairs of runs
judged as CI judges them (files only, then the interleaved re-run). ``trial_rates`` turns each
file into one table row: how often the gate failed unchanged code (false alarms) and slowed
code (detections), files only and with the re-run, each rate with its 95% Clopper-Pearson
interval (impl/stats.py ``proportion``), the slowdown that was injected as measured, and the
machine's load during the trials. Pure: documents in, rows out.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path

from impl import stats
from reports.gate.trials_record import PAIR_KINDS

# results/ of the folder the command runs in, as the report's other default inputs
# (reports/loading.py, reports/archive.py): the folder a test's copy of the committed runs is
RESULTS_DIR = Path("results")
# gate-trials.json, or gate-trials-<what differs>.json beside it for trials of another gate
# setting on the same machine (reports/results.py skips them all)
TRIALS_PATTERN = "gate-trials*.json"


def find_trials(results_dir: Path | None = None) -> list[Path]:
    """The trials files of ``results_dir``'s machine folders (default: results/), by folder."""
    return sorted((results_dir or RESULTS_DIR).glob(f"*/{TRIALS_PATTERN}"))


def load_trials(paths: Sequence[Path]) -> tuple[list[tuple[str, dict]], list[str]]:
    """(path, document) of each readable trials file, and a note for each one left out."""
    documents, notes = [], []
    for path in paths:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            notes.append(f"{path}: left out, not readable as JSON ({error})")
            continue
        if not isinstance(document, dict) or not isinstance(document.get("pairs"), list):
            notes.append(f"{path}: left out, not a gate trials file of this version (no "
                         "'pairs' list)")
            continue
        documents.append((str(path), document))
    return documents, notes


def rate_text(count: int, trials: int) -> str:
    """"2/40 = 5.0% [0.6–16.9%]": the rate with its Clopper-Pearson 95% interval."""
    estimate = stats.proportion(count, trials)
    if estimate.value is None:
        return "no pairs"
    return (f"{count}/{trials} = {estimate.value:.1%} "
            f"[{estimate.low:.1%}–{estimate.high:.1%}]")


def _slowdown_text(document: dict) -> str | None:
    slowdown = document.get("slowdown") or {}
    measured = slowdown.get("cpu_time_ratio") or slowdown.get("step_time_ratio") or {}
    if measured.get("value") is None:
        return None
    interval = (f" [{measured['low'] - 1:.1%}–{measured['high'] - 1:.1%}]"
                if measured.get("low") is not None else "")
    what = "CPU time" if "cpu_time_ratio" in slowdown else "step time"
    return (f"extra_compute {slowdown.get('extra_compute')}: {what} +"
            f"{measured['value'] - 1:.1%}{interval}")


def trial_rates(documents: Sequence[tuple[str, dict]]) -> list[dict]:
    """One row per trials file: rates of the gate (with --confirm) and of files only."""
    rows = []
    for path, document in documents:
        pairs = [p for p in document["pairs"] if isinstance(p, dict)]
        by_kind = {kind: [p for p in pairs if p.get("kind") == kind] for kind in PAIR_KINDS}
        loads = sorted(p[side]["load_1min"] for p in pairs
                       for side in ("load_before", "load_after")
                       if isinstance(p.get(side), dict) and "load_1min" in p[side])
        machine = document.get("machine") or {}
        gate = document.get("gate") or {}
        rows.append({
            "machine": machine.get("label") or Path(path).parent.name,
            "target": (document.get("target") or {}).get("name"),
            "false_alarms": rate_text(sum(bool(p.get("regressed")) for p in by_kind["unchanged"]),
                                      len(by_kind["unchanged"])),
            "files_false_alarms": rate_text(
                sum(bool(p.get("files_regressed")) for p in by_kind["unchanged"]),
                len(by_kind["unchanged"])),
            "detections": rate_text(sum(bool(p.get("regressed")) for p in by_kind["slowed"]),
                                    len(by_kind["slowed"])),
            "files_detections": rate_text(
                sum(bool(p.get("files_regressed")) for p in by_kind["slowed"]),
                len(by_kind["slowed"])),
            "slowdown": _slowdown_text(document),
            "blocks": gate.get("confirm_blocks"),
            # trials made before the gate recorded it used block medians
            "block_value": gate.get("block_value", "median round"),
            "load": (f"{statistics.median(loads):g} ({loads[0]}–{loads[-1]})" if loads else None),
            "source": path,
        })
    return rows
