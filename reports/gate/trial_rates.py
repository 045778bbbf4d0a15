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
from impl.rows.gate_records import ESTIMATED, TRIAL_PAIR, TRIAL_RATE, TRIALS
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
        if not isinstance(document, dict) or not isinstance(document.get(TRIALS.pairs), list):
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
    slowdown = document.get(TRIALS.slowdown) or {}
    measured = slowdown.get("cpu_time_ratio") or slowdown.get("step_time_ratio") or {}
    if measured.get(ESTIMATED.value) is None:
        return None
    interval = (f" [{measured[ESTIMATED.low] - 1:.1%}–{measured[ESTIMATED.high] - 1:.1%}]"
                if measured.get(ESTIMATED.low) is not None else "")
    what = "CPU time" if "cpu_time_ratio" in slowdown else "step time"
    return (f"extra_compute {slowdown.get('extra_compute')}: {what} +"
            f"{measured[ESTIMATED.value] - 1:.1%}{interval}")


def _rate_of(pairs: list[dict], outcome: str) -> str:
    """The rate of ``pairs`` whose ``outcome`` (TRIAL_PAIR.regressed or .files_regressed)
    is true."""
    return rate_text(sum(bool(p.get(outcome)) for p in pairs), len(pairs))


def trial_rates(documents: Sequence[tuple[str, dict]]) -> list[dict]:
    """One row per trials file: rates of the gate (with --confirm) and of files only."""
    rows = []
    for path, document in documents:
        pairs = [p for p in document[TRIALS.pairs] if isinstance(p, dict)]
        by_kind = {kind: [p for p in pairs if p.get(TRIAL_PAIR.kind) == kind]
                   for kind in PAIR_KINDS}
        loads = sorted(p[side]["load_1min"] for p in pairs
                       for side in (TRIAL_PAIR.load_before, TRIAL_PAIR.load_after)
                       if isinstance(p.get(side), dict) and "load_1min" in p[side])
        machine = document.get(TRIALS.machine) or {}
        gate = document.get(TRIALS.gate) or {}
        rows.append({
            TRIAL_RATE.machine: machine.get("label") or Path(path).parent.name,
            TRIAL_RATE.target: (document.get(TRIALS.target) or {}).get("name"),
            TRIAL_RATE.false_alarms: _rate_of(by_kind["unchanged"], TRIAL_PAIR.regressed),
            TRIAL_RATE.files_false_alarms: _rate_of(by_kind["unchanged"],
                                                    TRIAL_PAIR.files_regressed),
            TRIAL_RATE.detections: _rate_of(by_kind["slowed"], TRIAL_PAIR.regressed),
            TRIAL_RATE.files_detections: _rate_of(by_kind["slowed"], TRIAL_PAIR.files_regressed),
            TRIAL_RATE.slowdown: _slowdown_text(document),
            TRIAL_RATE.blocks: gate.get("confirm_blocks"),
            # trials made before the gate recorded it used block medians
            TRIAL_RATE.block_value: gate.get("block_value", "median round"),
            TRIAL_RATE.load: (f"{statistics.median(loads):g} ({loads[0]}–{loads[-1]})"
                              if loads else None),
            TRIAL_RATE.source: path,
        })
    return rows
