"""The Perfetto traces of every drawn timeline."""

from __future__ import annotations

import copy
import json
import re

import pytest

from reports import traces
from tests.report.helpers import (
    REGIMES,
    answer_cell,
)


def test_every_drawn_timeline_is_a_valid_perfetto_trace(built):
    folder = built["out"] / "traces"
    named = set(re.findall(r"traces/([A-Za-z0-9._-]+\.json)", built["html"]))
    files = {p.name for p in folder.glob("*.json")}
    assert files == named and len(files) == 8  # 7 variants of the drawn cell + the simulation
    cell = answer_cell("mlp_1024x8_b64", REGIMES)
    for path in folder.glob("*.json"):
        document = json.loads(path.read_text())
        assert traces.check_trace(document) == [], path
    chunked = json.loads((folder / "cpu-2core-mlp_1024x8_b64-K20-w2-gloo-tcp-chunked.json")
                         .read_text())
    events = [e for e in chunked["traceEvents"] if e["ph"] == "X"]
    intervals = cell["timelines"]["chunked"]["intervals"]
    assert len(events) == len(intervals)
    for event, interval_ in zip(events, intervals):
        assert event["name"] == interval_["label"]
        assert event["tid"] == traces.LANES[interval_["lane"]]
        assert event["ts"] == pytest.approx(interval_["start_ms"] * 1e3, abs=1e-3)
        assert event["dur"] == pytest.approx(
            (interval_["end_ms"] - interval_["start_ms"]) * 1e3, abs=1e-3)
    names = {e["args"]["name"] for e in chunked["traceEvents"] if e["ph"] == "M"}
    assert {"compute", "communication"} <= names


def test_trace_checker_names_what_is_wrong():
    good = traces.trace({"intervals": [{"lane": "comm", "label": "all-reduce c0", "chunk": 0,
                                        "start_ms": 1.0, "end_ms": 2.5}], "notes": []},
                        "rank 0", {"variant": "chunked"})
    assert traces.check_trace(good) == []
    bad = copy.deepcopy(good)
    bad["traceEvents"][-1].update(dur=-1.0, pid="0")
    bad["traceEvents"].append({"name": "x", "ph": "B", "pid": 0, "tid": 1})
    assert traces.check_trace(bad) == [
        "traceEvents[3].pid = '0'; expected an integer",
        "traceEvents[3].dur = -1.0; expected microseconds >= 0",
        "traceEvents[4].ph = 'B'; this exporter writes only X and M"]
    assert traces.check_trace({"events": []}) == ["not an object with a traceEvents list"]
