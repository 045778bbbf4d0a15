"""The analysis and the formatting of numbers."""

from __future__ import annotations

import pytest

from reports import analysis, cells
from reports.format import fmt


def cell_like(chunks: int, world: int = 2, **strategies: float) -> dict:
    """A comparison row with the given strategies' median speedups over sequential."""
    estimate = lambda v: {"value": v, "low": v - 0.1, "high": v + 0.1, "rounds": 12}
    return {"kind": "comparison", "machine": "m", "profile": "p", "world_size": world,
            "workload": "w", "chunks": chunks, "sequential_reference": "sequential",
            "compared": list(strategies), "ddp_bucket_counts": {},
            "measurement": {"step_ms": {s: [[1.0]] for s in strategies}},
            "strategies": {s: {"vs_sequential": {"speedup": estimate(v)},
                               "overlap_efficiency": estimate(0.5)}
                           for s, v in strategies.items()}}


def test_answer_is_read_at_the_default_k_not_the_best_one():
    group = [cell_like(1, chunked=1.0), cell_like(5, chunked=1.4),
             cell_like(20, chunked=1.1, ddp=1.05), cell_like(50, chunked=1.2)]
    cell, why = cells.answer_cell(group)
    assert cell["chunks"] == 20 and "fixed before the data were seen" in why
    assert cells.best_strategy(cell) == "chunked"
    cell, why = cells.answer_cell([group[0], group[1], group[3]])
    assert cell["chunks"] == 50 and "nearest the default K = 20" in why  # |log 50/20| < |log 5/20|
    cell, why = cells.answer_cell([group[0]])
    assert cell["chunks"] == 1 and "nothing can overlap" in why


def test_efficiency_notes_say_why():
    cell = cell_like(20, chunked=1.1, ddp=1.2)
    cell["ddp_bucket_counts"] = {"ddp": 12}
    assert cells.efficiency_note(cell, "ddp").startswith("DDP made 12 bucket(s), not K = 20")
    assert cells.efficiency_note(cell, "chunked") is None
    cell["strategies"]["chunked"]["overlap_efficiency"] = {"value": -0.4, "low": -0.9,
                                                           "high": 0.1, "rounds": 12}
    assert cells.efficiency_note(cell, "chunked") == ("negative: the step was slower than "
                                                      "sequential")
    cell["strategies"]["chunked"]["overlap_efficiency"]["value"] = 1.3
    assert cells.efficiency_note(cell, "chunked").startswith("above 1: the step beat")
    cell["strategies"]["chunked"]["overlap_efficiency"] = {"value": 0.3, "low": None,
                                                           "high": None, "rounds": 12}
    assert cells.efficiency_note(cell, "chunked").startswith("no interval")
    assert cells.efficiency_note(cell_like(1, chunked=1.0), "chunked").startswith("K = 1")
    # Every overlapping strategy that all-reduces K chunks, the copy-engine one included.
    k1 = cell_like(1, **{"copy-engine": 1.0, "threaded": 1.0, "mpi": 1.0, "ddp": 1.0})
    for strategy in ("copy-engine", "threaded", "mpi"):
        assert cells.efficiency_note(k1, strategy).startswith("K = 1"), strategy
    assert cells.efficiency_note(k1, "ddp") is None
    assert cells.efficiency_note(cell_like(1, world=1, chunked=1.0), "chunked").startswith(
        "world size 1")


def test_old_format_efficiency_notes():
    base = {"kind": "step", "world_size": 4, "chunks": 20, "overlap_efficiency": 0.5,
            "sequential_reference": "sequential"}
    note = lambda **row: analysis.note_for("overlap_efficiency", {**base, **row})
    assert note(strategy="sequential").startswith("sequential against its own reference")
    assert note(strategy="chunked", chunks=1) == "K = 1: nothing can overlap"
    assert note(strategy="copy-engine", chunks=1) == "K = 1: nothing can overlap"
    assert note(strategy="ddp", ddp_bucket_count=12).startswith("DDP made 12 bucket(s)")
    assert note(strategy="mpi").startswith("MPI against the torch.distributed references")
    assert note(strategy="chunked", overlap_efficiency=-4.55).startswith("negative")
    assert note(strategy="chunked") is None


def test_regime_points_leave_out_other_chunking_and_k_one():
    cell = cell_like(20, chunked=1.1, ddp=1.9)
    cell["ddp_bucket_counts"] = {"ddp": 3}
    cell["references"] = {"compute_to_comm": {"value": 1.5, "low": 1.2, "high": 1.8,
                                              "rounds": 12}}
    single = {**cell_like(1, chunked=1.0), "references": cell["references"]}
    assert [p["strategy"] for p in cells.regime_points([cell, single])] == ["chunked"]


def test_energy_check_pairs_energy_with_power_times_step():
    cell = cell_like(20, chunked=1.0)
    cell["measurement"] = {"steps_per_round": 2, "step_ms": {"chunked": [[10.0, 10.0]] * 4},
                           "energy_j": {"chunked": [6.0] * 4}}
    cell["nvml"] = {"mean": {"power_w": [100.0, 200.0]}}
    row = cells.energy_check(cell)[0]
    # 3 J per step against 300 W × 10 ms = 3 J.
    assert row["energy_per_step_j"]["value"] == pytest.approx(3.0)
    assert row["power_times_step_j"]["value"] == pytest.approx(3.0)
    assert row["ratio"]["value"] == pytest.approx(1.0)


def test_energy_check_leaves_out_a_variant_whose_counter_did_not_advance_in_every_segment():
    # NVML's counter steps about 64 J on an H100: segments shorter than a step read 0 or 64 J.
    cell = cell_like(20, chunked=1.0, threaded=1.0, sequential=1.0)
    cell["measurement"] = {"steps_per_round": 2,
                           "step_ms": {v: [[100.0, 100.0]] * 2
                                       for v in ("chunked", "threaded", "sequential")},
                           "energy_j": {"chunked": [64.0, 0.0], "threaded": [0.0, 0.0],
                                        "sequential": [128.0, 128.0]}}
    cell["nvml"] = {"mean": {"power_w": [640.0]}}
    assert [row["variant"] for row in cells.energy_check(cell)] == ["sequential"]
    cell["measurement"]["energy_j"]["sequential"] = [128.0, 0.0]
    assert cells.energy_check(cell) == []


def test_the_appendix_leaves_out_an_older_row_whose_counter_did_not_advance():
    # results/h100x1/20261121T234900Z.json: seed_layer_1024x512's timed rounds took 6 ms and
    # read 0 J, which the appendix showed as 0 J per step, 100% below power × step.
    def older(strategy: str, joules: list[float], per_step: float) -> dict:
        return {"kind": "step", "machine": "h100x1", "workload": "seed_layer_1024x512",
                "world_size": 1, "chunks": 1, "strategy": strategy, "step_ms": 1.25,
                "energy_per_step_j": per_step,
                "nvml": {"energy_j": joules, "mean": {"power_w": [131.0]}}}

    rows = [older("sequential", [0.0], 0.0), older("chunked", [12.6], 2.52)]
    table = analysis.energy_before_interleaving(rows)
    assert [row["strategy"] for row in table] == ["chunked"]
    assert table[0]["power_times_step_j"] == pytest.approx(131.0 * 1.25 / 1e3)
    assert table[0]["disagreement_pct"] == pytest.approx(100 * (2.52 / 0.16375 - 1))
    # a row of several GPUs is left out where one of them read nothing
    assert analysis.energy_before_interleaving([older("chunked", [12.6, 0.0], 2.52)]) == []


@pytest.mark.parametrize(("value", "text"), [(0.39598, "0.396"), (62.99, "63.0"),
                                             (353.7, "354"), (7379.27, "7,380"),
                                             (0.000122, "1.22e-04"), (9.996, "10.0"),
                                             (None, "n/a"), (0, "0"), (-0.0477, "-0.0477")])
def test_three_significant_digits(value, text):
    assert fmt(value) == text


def test_estimates_print_with_their_interval():
    from reports.format import fmt_estimate, fmt_times

    assert fmt_estimate({"value": 1.694, "low": 1.21, "high": 2.2, "rounds": 12}) == (
        "1.69 [1.21, 2.20]")
    assert fmt_estimate({"value": 0.5, "low": None, "high": None, "rounds": 2}) == (
        "0.500 (no interval)")
    assert fmt_estimate(None) == "n/a"
    assert fmt_times({"value": 1.694, "low": 1.21, "high": 2.2, "rounds": 12}) == (
        "1.69× [1.21, 2.20]")


def test_a_missing_energy_says_whether_the_run_had_no_counter_or_too_short_segments():
    from reports.analysis import note_for

    stepped = {"kind": "step", "intervals": {}, "energy_per_step_j": None,
               "nvml": {"energy_j": [640.0], "mean": {"power_w": [640.0]}}}
    assert note_for("energy_per_step_j", stepped) == (
        "NVML's energy counter did not advance in every segment of this variant: its "
        "segments are shorter than the counter's step")
    without = {"kind": "step", "intervals": {}, "energy_per_step_j": None,
               "nvml": {"reason": "no NVIDIA GPU"}}
    assert note_for("energy_per_step_j", without) == \
        "no NVML energy counter in this run (no NVIDIA GPU)"
    assert note_for("energy_per_step_j", {"kind": "step", "energy_per_step_j": None}) == \
        "no NVML energy counter in this run"


def test_a_missing_energy_quotes_the_reason_its_row_was_written_with():
    from reports.analysis import note_for

    # the row's own words first, even where its NVML summary would be read otherwise
    written = {"kind": "step", "intervals": {}, "energy_per_step_j": None,
               "samples_per_joule": None, "nvml": {"energy_j": [640.0]},
               "energy_left_out": "the counter was read by a test"}
    assert note_for("energy_per_step_j", written) == "the counter was read by a test"
    assert note_for("samples_per_joule", written) == "the counter was read by a test"
    # the NVML means are not what energy_left_out explains
    assert note_for("mean_power_w", written) == (
        "NVML's energy counter did not advance in every segment of this variant: its "
        "segments are shorter than the counter's step")
    assert note_for("energy_per_step_j", {**written, "energy_per_step_j": 45.0}) is None
