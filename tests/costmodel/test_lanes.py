"""The communication lane beside backward (impl/costmodel/lanes.py), on hand-made timelines."""

from __future__ import annotations

import pytest

from impl.costmodel.compute import backward_kernels
from impl.costmodel.lanes import LaneEffects, lane_effects, timeline_effects
from tests.committed import RESULTS

WORKLOAD, OTHER = "mlp_tiny", "mlp_1024x8"  # presets: their layouts are known


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


def with_updates() -> dict:
    """The same with an update share after each collective on the lane: 0.5 ms beside
    backward (7.1–7.6), 0.1 ms after it (10.9–11.0); c1 waits for c0's share, not c0."""
    found = timeline()
    found["intervals"] += [interval("compute", "update c0", 0, 7.1, 7.6),
                           interval("compute", "update c1", 1, 10.9, 11.0)]
    return found


def compute_only() -> dict:
    """Backward 2–10 ms: 8 ms over the preset's GEMMs."""
    return {"intervals": [interval("compute", "forward", None, 0.0, 2.0),
                          interval("compute", "backward c0", 0, 2.0, 6.0),
                          interval("compute", "backward c1", 1, 6.0, 10.0)]}


def cell(workload: str, run: int, chunks: int = 2, **timelines) -> dict:
    return {"kind": "comparison", "machine": "m", "run": run, "chunks": chunks,
            "device": "gpu", "workload": workload, "world_size": 2, "profile": "nvlink",
            "timelines": {"compute-only": compute_only(), **timelines}}


def test_a_timeline_gives_the_excess_beside_backward_and_the_launch_delay():
    found = timeline_effects(timeline())
    assert (found.beside_ms, found.launch_ms, found.alone_ms) == pytest.approx((0.4, 0.2, 0.6))
    assert found.update_ms is None  # no update shares on its lane
    # The hand-off counts from the end of the previous job on the lane (c0's update share).
    found = timeline_effects(with_updates())
    assert found.update_ms == pytest.approx(0.5 - 0.1)
    assert found.launch_ms == pytest.approx(0.2)  # median of 0.1 and 10.3 − max(10, 7.6)


def test_the_lane_is_counted_in_backward_gemms_and_never_read_from_its_own_cell():
    row = cell(WORKLOAD, 2, threaded=timeline())
    assert lane_effects([row], row, "threaded") == LaneEffects()
    gemm = 8.0 / backward_kernels(WORKLOAD)
    found = lane_effects([row, cell(WORKLOAD, 1, threaded=timeline())], row, "threaded")
    assert found.beside_kernels == pytest.approx(0.4 / gemm)
    assert found.beside_ms(gemm) == pytest.approx(0.4)
    assert found.launch_ms == pytest.approx(0.2)
    assert "1 other cells of its workload" in found.source
    # Another workload's collectives do not carry (the module says why): nothing read.
    assert lane_effects([row, cell(OTHER, 1, threaded=timeline())], row, "threaded") \
        == LaneEffects()
    # DDP's buckets differ in bytes: a difference of durations would compare unlike sizes.
    assert lane_effects([row, cell(WORKLOAD, 1, ddp=timeline())], row, "ddp").beside_ms(1) == 0


def test_update_shares_and_the_copy_engines_all_reduce_come_from_other_workloads():
    row = cell(WORKLOAD, 2)
    gemm = 8.0 / backward_kernels(OTHER)
    same = cell(WORKLOAD, 1, **{"chunked+update": with_updates()})
    other = cell(OTHER, 1, **{"chunked+update": with_updates()})
    assert lane_effects([row, same], row, "chunked+update").update_kernels == 0.0
    found = lane_effects([row, other], row, "chunked+update")
    assert found.update_kernels == pytest.approx(0.4 / gemm)
    assert found.beside_kernels == 0.0  # chunked's collectives: the overhead carries them
    # The copy-engine alone: 0.6 ms at K = 2 and 0.4 ms at K = 4 of the other workload's
    # buffer B give α + β·B/2 = 0.6, α + β·B/4 = 0.4: β = 0.8 / B, α = 0.2.
    from impl.costmodel.compute import parameter_layout

    spans, element_size = parameter_layout(OTHER)
    buffer = spans[-1][1] * element_size
    quarter = timeline()
    quarter["intervals"][-1] = interval("comm", "all-reduce c1", 1, 10.3, 10.7)
    alone = lane_effects([row, cell(OTHER, 1, **{"copy-engine": timeline()}),
                          cell(OTHER, 1, 4, **{"copy-engine": quarter})], row,
                         "copy-engine").alone
    assert alone.alpha_ms == pytest.approx(0.2)
    assert alone.beta_ms_per_byte == pytest.approx(0.8 / buffer)


def test_a_checked_cell_without_a_reading_at_its_world_size_takes_its_gpu_models():
    from impl.costmodel.heldout import cell_lane

    row = {**cell(WORKLOAD, 2), "world_size": 4}
    other = cell(OTHER, 1, **{"chunked+update": with_updates()})  # at 2 ranks
    # Nothing at 4 ranks: as a prediction does (scale.lane_for), the GPU model's other cells
    # at any world size give the update shares' wait.
    assert lane_effects([row, other], row, "chunked+update") == LaneEffects()
    found = cell_lane([row, other], row, "chunked+update")
    assert found.update_kernels == pytest.approx(0.4 / (8.0 / backward_kernels(OTHER)))
    # A reading at its own world size is kept: a share 0.8 ms beside backward, 0.1 after.
    slower = with_updates()
    slower["intervals"][-2] = interval("compute", "update c0", 0, 7.1, 7.9)
    here = {**cell(OTHER, 3, **{"chunked+update": slower}), "world_size": 4}
    found = cell_lane([row, other, here], row, "chunked+update")
    assert found == lane_effects([row, other, here], row, "chunked+update")
    assert found.update_kernels == pytest.approx(0.7 / (8.0 / backward_kernels(OTHER)))


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
    slowed = steps({("NVIDIA H200", workload, "threaded"): LaneEffects(
        beside_kernels=2.0, launch_ms=0.05, source="test")})
    assert slowed[workload, "threaded"] > plain[workload, "threaded"]
    assert slowed[workload, "chunked"] == plain[workload, "chunked"]  # only its own variant


def test_a_gpu_model_without_cells_at_a_world_size_takes_the_collectives_alone_of_another():
    """At 4 ranks the copy-engine's all-reduce ran far below the fabric file's peer copies, on
    H200 as on H100: a GPU model with no cell there takes the other's α–β, and says so; one
    with its own keeps it."""
    from impl.costmodel.fabric import Fabric
    from impl.costmodel.lanes import ANY_GPU, NO_LANE
    from impl.costmodel.scale import lane_for

    h200_alone, h100_alone = Fabric(0.05, 1e-8), Fabric(0.04, 2e-8)
    lanes = {(ANY_GPU, 4, "mlp", "copy-engine"): LaneEffects(alone=h200_alone, source="H200"),
             ("H100", 4, "mlp", "copy-engine"): NO_LANE,
             ("H100", 2, "mlp", "copy-engine"): LaneEffects(alone=h100_alone, source="own")}
    borrowed = lane_for(lanes, "H100", 4, "mlp", "copy-engine")
    assert borrowed.alone == h200_alone
    assert borrowed.source.endswith("all-reduce alone from another GPU model's cells at 4 "
                                    "ranks (H200)")
    assert lane_for(lanes, "H100", 2, "mlp", "copy-engine").alone == h100_alone
    assert lane_for(lanes, "H100", 8, "mlp", "copy-engine") == NO_LANE
