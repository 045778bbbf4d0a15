"""The communication lane beside backward (impl/costmodel/lanes.py), on hand-made timelines."""

from __future__ import annotations

from pathlib import Path

import pytest

from impl.costmodel.lanes import LaneEffects, lane_effects, timeline_effects

RESULTS = Path(__file__).resolve().parent.parent / "results"


def interval(lane: str, label: str, chunk: int | None, start: float, end: float) -> dict:
    return {"lane": lane, "label": label, "chunk": chunk, "start_ms": start, "end_ms": end}


def timeline() -> dict:
    """Backward 2–10 ms in two chunks (ready at 6 and 10); c0 launched 0.1 ms after its data,
    1.0 ms beside backward; c1 launched 0.3 ms after its data, 0.6 ms alone after backward."""
    return {"intervals": [
        interval("compute", "forward", None, 0.0, 2.0),
        interval("compute", "backward c0", 0, 2.0, 6.0),
        interval("compute", "backward c1", 1, 6.0, 10.0),
        interval("comm", "all-reduce c0", 0, 6.1, 7.1),
        interval("comm", "all-reduce c1", 1, 10.3, 10.9)]}


def test_a_timeline_gives_the_excess_beside_backward_and_the_launch_delay():
    beside, launch = timeline_effects(timeline())
    assert beside == pytest.approx(1.0 - 0.6)
    assert launch == pytest.approx(0.2)  # median of 0.1 and 0.3


def test_the_predicted_cell_never_reads_its_own_timeline():
    row = {"kind": "comparison", "machine": "m", "run": 2, "chunks": 2, "device": "gpu",
           "workload": "w", "world_size": 2, "profile": "nvlink",
           "timelines": {"threaded": timeline()}}
    assert lane_effects([row], row, "threaded") == LaneEffects()
    other = {**row, "run": 1}
    found = lane_effects([row, other], row, "threaded")
    assert (found.beside_ms, found.launch_ms) == pytest.approx((0.4, 0.2))
    assert "1 other cells' timelines" in found.source
    # DDP's buckets differ in bytes: a difference of durations would compare unlike sizes.
    assert lane_effects([row, other], row, "ddp").beside_ms == 0.0


def test_a_prediction_at_scale_carries_the_threaded_lane_it_is_given():
    from impl.costmodel import scale, validate
    from impl.costmodel.fabric_file import load_fabric

    rows = validate.load_rows([str(RESULTS / "h200x2")])
    fabric = load_fabric("ib400-h200x8")

    def steps(lanes):
        return {(p.workload, p.strategy): p.step_ms for p in scale.predict(
            rows, fabric, worlds=[8], strategies=["chunked", "threaded"], lanes=lanes)[1]}

    plain = steps(None)
    workload = "mlp_8192x12_b1024_bf16"
    # Without a lane the thread launches as chunked does: the same step.
    assert plain[workload, "threaded"] == pytest.approx(plain[workload, "chunked"])
    slowed = steps({("NVIDIA H200", workload, "threaded"): LaneEffects(0.5, 0.05, "test")})
    assert slowed[workload, "threaded"] > plain[workload, "threaded"]
    assert slowed[workload, "chunked"] == plain[workload, "chunked"]  # only its own variant
