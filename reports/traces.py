"""Step timelines as Chrome/Perfetto trace files (the Trace Event Format), beside the report.

Every step timeline the report draws is also written to ``OUT/traces/<name>.json``, which
https://ui.perfetto.dev and chrome://tracing open:

    {"traceEvents": [
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "rank 0 ..."}},
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "compute"}},
        {"name": "backward c0", "ph": "X", "ts": 1530.0, "dur": 920.0, "pid": 0, "tid": 1,
         "cat": "compute", "args": {"chunk": 0, ...}}, ...],
     "displayTimeUnit": "ms", "otherData": {...}}

One complete event (``ph: "X"``) per interval, ``ts`` and ``dur`` in microseconds from the
step's start, ``pid`` the rank whose timeline it is (the results hold rank 0's), ``tid`` the
lane (LANES), and metadata events (``ph: "M"``) naming the process and its threads.
``check_trace`` lists what in a document breaks that format (the tests use it).
"""

from __future__ import annotations

import json
import re

from impl.rows.kinds import STEP_TIMELINE
from impl.rows.report_records import TRACE_EVENT

LANES = {"compute": 1, "comm": 2}
LANE_NAMES = {1: "compute", 2: "communication"}
METADATA = ("process_name", "thread_name", "process_sort_index", "thread_sort_index")


def trace(timeline: dict, process: str, about: dict, rank: int = 0) -> dict:
    """A step's timeline (impl.timeline.Timeline as JSON) as a trace document.

    ``process`` names the process row (say, "rank 0 · chunked · mlp_tiny K=20");
    ``about`` goes to ``otherData`` and to every event's ``args`` (workload, K, variant...).
    """
    e = TRACE_EVENT  # the keys, in the order the events are written
    events: list[dict] = [{e.name: "process_name", e.ph: "M", e.pid: rank, e.tid: 0,
                           e.args: {e.name: process}}]
    events += [{e.name: "thread_name", e.ph: "M", e.pid: rank, e.tid: tid,
                e.args: {e.name: lane}} for tid, lane in LANE_NAMES.items()]
    for interval in timeline[STEP_TIMELINE.intervals]:
        start_us = interval["start_ms"] * 1e3
        events.append({e.name: interval["label"], e.cat: interval["lane"], e.ph: "X",
                       e.ts: round(start_us, 3),
                       e.dur: round(max(interval["end_ms"] * 1e3 - start_us, 0.0), 3),
                       e.pid: rank, e.tid: LANES.get(interval["lane"], 3),
                       e.args: {"chunk": interval["chunk"], **about}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {**about, "notes": list(timeline.get("notes") or [])}}


def file_name(*parts: object) -> str:
    """A file name from the parts of a timeline's identity (safe on every file system)."""
    text = "-".join(str(p) for p in parts if p not in (None, ""))
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text) + ".json"


def encode(document: dict) -> bytes:
    return json.dumps(document, indent=None, separators=(",", ":")).encode()


def check_trace(document: object) -> list[str]:
    """What in ``document`` breaks the Trace Event Format's JSON object form; [] if nothing."""
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        return ["not an object with a traceEvents list"]
    problems, e = [], TRACE_EVENT
    for index, event in enumerate(document["traceEvents"]):
        where = f"traceEvents[{index}]"
        if not isinstance(event, dict):
            problems.append(f"{where} is not an object")
            continue
        for key in (e.pid, e.tid):
            if not isinstance(event.get(key), int) or isinstance(event.get(key), bool):
                problems.append(f"{where}.{key} = {event.get(key)!r}; expected an integer")
        name = event.get(e.name)
        if not isinstance(name, str) or not name:
            problems.append(f"{where}.name = {name!r}; expected a name")
        if not isinstance(event.get(e.args, {}), dict):
            problems.append(f"{where}.args is not an object")
        phase = event.get(e.ph)
        if phase == "X":
            for key in (e.ts, e.dur):
                number = event.get(key)
                if (not isinstance(number, (int, float)) or isinstance(number, bool)
                        or number != number or number < 0):
                    problems.append(f"{where}.{key} = {number!r}; expected microseconds >= 0")
        elif phase == "M":
            if name not in METADATA:
                problems.append(f"{where}: metadata event {name!r}")
            elif not isinstance((event.get(e.args) or {}).get(e.name, 0), (str, int)):
                problems.append(f"{where}.args.name is missing")
        else:
            problems.append(f"{where}.ph = {phase!r}; this exporter writes only X and M")
    if document.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        problems.append(f"displayTimeUnit = {document['displayTimeUnit']!r}; expected ms or ns")
    return problems
