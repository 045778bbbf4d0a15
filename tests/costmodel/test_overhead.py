"""The overhead beyond the schedule (impl/costmodel/overhead.py): fitted on the other cells
only, never on the checked one."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest

from impl.costmodel import accuracy, heldout, overhead, validate
from tests.committed import RESULTS


def check(machine: str, chunks: int, variant: str, measured: float, predicted: float,
          efficiency: float | None = None) -> accuracy.Check:
    return accuracy.Check(machine, "mlp_8192x12_bf16", chunks, 2, "nvlink", variant, measured,
                          None, None, predicted, predicted, None, None, "",
                          predicted_efficiency=efficiency, limit_ms=60.0)


def cell_of(c: accuracy.Check) -> tuple:
    return heldout._check_key(c)[:-1]


def cause_of(c: accuracy.Check) -> tuple:
    """Here a machine stands for its GPU model."""
    return c.machine, c.world_size


def calibrated(checks: list[accuracy.Check]) -> list[accuracy.Check]:
    return overhead.calibrated(checks, cell_of, cause_of)


CHECKS = [check("m", 5, "sequential", 70.0, 71.0, 0.0), check("m", 5, "chunked", 66.0, 65.0, 0.5),
          check("m", 10, "sequential", 70.0, 69.0, 0.0), check("m", 10, "chunked", 67.0, 65.0, 0.5),
          check("m", 20, "sequential", 70.0, 70.0, 0.0), check("m", 20, "chunked", 69.0, 65.0, 0.5),
          check("other", 5, "chunked", 90.0, 60.0)]


def test_the_overhead_is_the_median_residual_of_the_other_cells_of_the_gpu_model():
    found = {(c.machine, c.chunks, c.variant): c for c in calibrated(CHECKS)}
    # K = 5: the other cells' chunked residuals are 2 and 4 ms (the other GPU's 30 not).
    assert found["m", 5, "chunked"].overhead_ms == pytest.approx(3.0)
    assert found["m", 5, "chunked"].predicted_ms == pytest.approx(68.0)
    assert found["m", 10, "chunked"].overhead_ms == pytest.approx(2.5)  # residuals 1 and 4
    assert found["m", 20, "chunked"].overhead_ms == pytest.approx(1.5)  # residuals 1 and 2
    assert found["other", 5, "chunked"].overhead_ms == 0.0  # no other cell of its GPU
    # Sequential is the reference: not calibrated.
    assert found["m", 5, "sequential"].predicted_ms == 71.0
    # Efficiency from the calibrated step: (71 − 68) / (71 − 60).
    assert found["m", 5, "chunked"].predicted_efficiency == pytest.approx(3 / 11)


def test_a_knob_variant_takes_its_strategys_overhead_and_none_is_negative():
    """chunked+update's overhead is chunked's, fitted on chunked's other cells (the knob's
    own cost is in the schedule: impl/costmodel/lanes.py); a model already pessimistic on
    the other cells gets none, not a negative cost."""
    checks = [*CHECKS, check("m", 20, "chunked+update", 80.0, 60.0),
              check("m", 5, "threaded", 60.0, 61.0), check("m", 10, "threaded", 60.0, 62.0),
              check("m", 20, "threaded", 60.0, 60.5)]
    found = {(c.machine, c.chunks, c.variant): c for c in calibrated(checks)}
    # K = 20's other chunked cells: residuals 1 (K = 5) and 2 (K = 10); its own 20 never.
    assert found["m", 20, "chunked+update"].overhead_ms == pytest.approx(1.5)
    # threaded's other cells at K = 5: residuals −2 and −0.5: median −1.25, so none.
    assert found["m", 5, "threaded"].overhead_ms == 0.0
    assert found["m", 5, "threaded"].predicted_ms == 61.0


def test_the_checked_cells_own_measurement_never_moves_its_overhead():
    moved = [replace(c, measured_ms=c.measured_ms + 50) if (c.chunks, c.machine) == (5, "m")
             else c for c in CHECKS]
    before, after = calibrated(CHECKS), calibrated(moved)
    assert after[1].predicted_ms == before[1].predicted_ms  # K = 5 itself: unmoved
    assert after[3].overhead_ms == pytest.approx(27.5)  # K = 10: residuals 51 and 4 now


def test_no_held_out_check_is_calibrated_on_its_own_cell():
    """On the committed H200 results: each check's overhead is the median of the residuals
    of its strategy in the other cells of its GPU model and world size (else of its GPU
    model), with inputs from those cells' own runs (heldout.OVERHEAD_SPLIT), computed here
    from the uncalibrated checks, so the checked cell's own step never enters."""
    from impl.costmodel import variant_plans
    from impl.rows.merge import merge_rows

    rows = validate.load_rows([str(RESULTS / m) for m in ("h200x2", "h200x4", "h200x1")],
                              merged=False)
    cells = [c for c in accuracy.measured_cells(merge_rows(rows)) if c.row.get("device")
             and c.row.get("backend") == "nccl"]
    raw, within = ([c for cell in cells for c in accuracy.check_cell(
        cell, rule(cell, rows), functools.partial(heldout.cell_lane, rows, cell.row))]
        for rule in (heldout.other_runs, heldout.leave_one_k_out))
    calibrated = heldout.checks_by_split(rows, cells)[heldout.HEADLINE]
    device = {heldout._cell_key(c.row): c.row.get("device") for c in cells}
    assert len(raw) == len(calibrated)
    seen = 0
    for plain, done in zip(raw, calibrated):
        if plain.predicted_ms is None or plain.variant == "sequential":
            continue
        same = [c for c in within if c.predicted_ms is not None
                and c.variant == variant_plans.variant(plain.variant)[0]
                and cell_of(c) != cell_of(plain) and device[cell_of(c)] == device[cell_of(plain)]]
        others = [c.measured_ms - c.predicted_ms for c in
                  [c for c in same if c.world_size == plain.world_size] or same]
        assert done.overhead_ms == pytest.approx(overhead.overhead_ms(others))
        assert done.predicted_ms == pytest.approx(plain.predicted_ms + done.overhead_ms)
        seen += 1
    assert seen > 60


def test_the_overhead_for_predictions_is_fitted_on_inputs_from_the_cells_own_run():
    """Beyond the measured cells, a strategy's overhead is the median residual of its cells
    whose compute and communication inputs came from their own run (heldout.OVERHEAD_SPLIT):
    across runs, the residual also carries one run's compute step against another's."""
    from impl.costmodel import variant_plans
    from impl.costmodel.lanes import lane_effects
    from impl.rows.merge import merge_rows

    rows = validate.load_rows([str(RESULTS / m) for m in ("h200x2", "h200x4", "h200x1")],
                              merged=False)
    cells = heldout.gpu_cells(merge_rows(rows))
    within = [c for cell in cells for c in accuracy.check_cell(
        cell, heldout.leave_one_k_out(cell, rows),
        functools.partial(lane_effects, rows, cell.row))]
    device = {heldout._cell_key(c.row): c.row.get("device") for c in cells}
    found = heldout.validate_held_out(rows, merge_rows(rows)).overheads
    compared = 0
    for variant in ("chunked", "threaded", "ddp", "copy-engine"):
        for world in (2, 4):
            residuals = [c.measured_ms - c.predicted_ms for c in within
                         if c.predicted_ms is not None and c.world_size == world
                         and variant_plans.variant(c.variant)[0] == variant == c.variant
                         and device[cell_of(c)] == "NVIDIA H200"]
            if residuals:
                assert found["NVIDIA H200", world, variant] == pytest.approx(
                    overhead.overhead_ms(residuals)), (variant, world)
                compared += 1
    assert compared >= 4


def test_a_prediction_at_scale_adds_its_strategys_overhead_and_no_other():
    from impl.costmodel import scale
    from impl.costmodel.fabric_file import load_fabric

    rows = validate.load_rows([str(RESULTS / "h200x2")])
    fabric = load_fabric("ib400-h200x8")
    device = "NVIDIA H200"
    plain = {(p.workload, p.strategy, p.world_size): p
             for p in scale.predict(rows, fabric, worlds=[8])[1]}
    added = {(p.workload, p.strategy, p.world_size): p for p in scale.predict(
        rows, fabric, worlds=[8], overheads={(device, "chunked"): 1.5, ("other", "ddp"): 9.0,
                                    (device, 16, "chunked"): 4.0})[1]}
    for key, before in plain.items():
        after = added[key]
        extra = 1.5 if key[1] == "chunked" else 0.0
        assert after.overhead_ms == extra
        assert after.step_ms == pytest.approx(before.step_ms + extra)


def test_two_machines_of_one_gpu_model_share_their_overhead_and_world_sizes_do_not():
    """The overhead follows its causes, not the machine's label: cells of one GPU model on two
    machines pool; a world size with cells of its own uses only those."""
    def at(machine, world, chunks, variant, measured, predicted):
        return replace(check(machine, chunks, variant, measured, predicted), world_size=world)

    checks = [at("a", 2, 5, "chunked", 62.0, 60.0), at("b", 2, 10, "chunked", 64.0, 60.0),
              at("a", 4, 5, "chunked", 70.0, 60.0), at("b", 4, 20, "chunked", 69.0, 60.0),
              at("b", 2, 20, "chunked", 61.0, 60.0)]
    found = overhead.calibrated(checks, cell_of, lambda c: ("H200", c.world_size))
    assert found[4].overhead_ms == pytest.approx(3.0)  # machine a's and b's at 2: 2 and 4
    assert found[2].overhead_ms == pytest.approx(9.0)  # only the other 4-rank cell
    assert overhead.overhead_for({("H200", 2, "chunked"): 1.0, ("H200", "chunked"): 5.0},
                                 "H200", 8, "chunked") == 5.0
