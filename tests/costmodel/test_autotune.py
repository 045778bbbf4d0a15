"""The K cost model (impl/costmodel/autotune.py) on known answers and on recorded data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from impl import metrics
from impl.chunking import chunk_bounds
from impl.costmodel import autotune

RECORDED = Path(__file__).parent.parent / "data" / "autotune-cpu-mlp_tiny.json"


def test_alpha_beta_fit_recovers_a_known_fabric():
    # 0.05 ms per launch, 10 GB/s: K launches over 64 MiB.
    true = autotune.Fabric(0.05, 1e-7)
    counts, total = [1, 2, 5, 10, 20, 50], 64 * 2**20
    times = [k * true.alpha_ms + total * true.beta_ms_per_byte for k in counts]
    fitted = autotune.fit_fabric(counts, [total] * len(counts), times)
    assert fitted.alpha_ms == pytest.approx(0.05)
    assert fitted.beta_ms_per_byte == pytest.approx(1e-7)
    assert fitted.bandwidth_gbps == pytest.approx(10.0)


def test_fit_needs_two_chunk_counts():
    with pytest.raises(ValueError, match=r"two or more chunk counts \(launches \[5\]\)"):
        autotune.fit_fabric([5, 5], [100, 100], [1.0, 1.1])


def test_equal_chunk_ends_match_the_gradient_buffer_cut():
    spans = [(0, 1000), (1000, 70000), (70000, 131072)]
    for k in (1, 3, 7, 64):
        assert autotune.equal_chunk_ends(131072, k) == chunk_bounds(spans, k)[1:]


def profile(backward_ms: float = 8.0, update_ms: float = 1.0) -> autotune.ReadyProfile:
    """Gradients produced evenly over backward (which starts at 2 ms), 1 MiB of fp32."""
    fine, total = 64, 262144
    ends = tuple(autotune.equal_chunk_ends(total, fine))
    ready = tuple(2.0 + backward_ms * (i + 1) / fine for i in range(fine))
    return autotune.ReadyProfile(ends, ready, 2.0 + backward_ms, update_ms, 4)


def test_without_interference_the_prediction_is_the_schedule_bound():
    fabric = autotune.Fabric(0.2, 4e-6)
    for k in (1, 4, 16):
        prediction = autotune.predict_step_ms(profile(), fabric, k)
        assert prediction["predicted_ms"] == pytest.approx(prediction["bound_ms"])
    # K = 1: nothing overlaps; the step is backward end + one all-reduce + update.
    one = autotune.predict_step_ms(profile(), fabric, 1)
    assert one["predicted_ms"] == pytest.approx(10.0 + 0.2 + 4e-6 * 2**20 + 1.0)
    assert one["overlapped_comm_ms"] == 0.0


def test_interference_slows_backward_by_the_overlapped_communication():
    fabric = autotune.Fabric(0.0, 1e-6)
    calm = autotune.predict_step_ms(profile(), fabric, 8)
    busy = autotune.predict_step_ms(profile(), fabric, 8, interference_rate=0.1)
    assert busy["overlapped_comm_ms"] > 0
    assert busy["predicted_ms"] >= calm["predicted_ms"]
    assert busy["predicted_ms"] <= calm["predicted_ms"] + 0.1 * busy["overlapped_comm_ms"] + 1e-9


def test_recommendation_balances_launch_cost_against_overlap():
    # Expensive launches favour few chunks; cheap ones favour many.
    costly = [autotune.predict_step_ms(profile(), autotune.Fabric(2.0, 4e-6), k)
              for k in (1, 2, 4, 8, 16)]
    cheap = [autotune.predict_step_ms(profile(), autotune.Fabric(0.01, 4e-6), k)
             for k in (1, 2, 4, 8, 16)]
    assert autotune.recommend(costly)["chunks"] <= 2
    assert autotune.recommend(cheap)["chunks"] >= 8


def test_recorded_cpu_run_is_reproduced_from_its_inputs():
    """The committed autotune row's inputs give its schedule bounds again, and predictions
    that lie between the bound and the bound with the whole overlapped all-reduce time
    stretched by the interference (the row was recorded with that first-order stretch,
    before the model integrated compute progress piecewise: impl/costmodel/schedule.py)."""
    recorded = json.loads(RECORDED.read_text())
    ready = recorded["ready_profile"]
    measured_profile = autotune.ReadyProfile(tuple(ready["ends"]), tuple(ready["ready_ms"]),
                                             ready["backward_end_ms"], ready["update_ms"],
                                             ready["element_size"])
    fabric = autotune.Fabric(recorded["fabric"]["alpha_ms"],
                             recorded["fabric"]["beta_ms_per_byte"])
    rate = recorded["interference_rate"]
    for row in recorded["predictions"]:
        again = autotune.predict_step_ms(measured_profile, fabric, row["chunks"], rate)
        assert again["bound_ms"] == pytest.approx(row["bound_ms"])
        assert again["bound_ms"] - 1e-9 <= again["predicted_ms"]
        assert again["predicted_ms"] <= row["bound_ms"] + rate * row["overlapped_comm_ms"] + 1e-9
        assert again["bound_ms"] >= metrics.limit_ms(ready["backward_end_ms"], 0.0)
    assert recorded["recommended_chunks"] == autotune.recommend(recorded["predictions"])["chunks"]
