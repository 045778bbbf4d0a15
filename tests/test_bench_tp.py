"""suite/bench_tp.py's cells on gloo ranks: world sizes interleaved in the same rounds through
subgroups, every variant checked and summarised, and a failed check stopping the cell on every
rank (no rank left waiting in a collective)."""

from __future__ import annotations

import pytest

from impl.presets import preset
from suite import bench_tp
from suite.harness import Rounds
from tests.multirank import run_ranks

PRESET = "tp_mlp_h32_t64_fp32"
ROUNDS = Rounds(warmup=1, rounds=4)


def one_cell(context):
    return bench_tp.measure_cell(bench_tp.Row(preset(PRESET), "torch", None), context, ROUNDS,
                                 [1, 2, 4])


def cell_with_a_bad_rank(context):
    """Rank 1's checks fail (tolerance 0); the other ranks' pass."""
    real, bad = bench_tp.check_runner, context.rank == 1

    # The stand-in keeps no reference to the context: a process group kept alive by a module
    # global until the interpreter exits aborts the process in gloo's teardown.
    def check(runner, reference):
        result = real(runner, reference)
        return {**result, "tolerance": 0.0} if bad else result

    bench_tp.check_runner = check
    try:
        return bench_tp.measure_cell(bench_tp.Row(preset(PRESET), "torch", None), context, ROUNDS,
                                     [1, 2])
    finally:
        bench_tp.check_runner = real


@pytest.fixture(scope="module")
def cells():
    return run_ranks(one_cell, 4)


def test_every_world_size_runs_in_every_round(cells):
    names = cells[0].measurement.names
    expected = {"single-sync-w1"} | {f"{scaling}-{schedule}-w{world}"
                                     for scaling in ("strong", "weak")
                                     for schedule in ("sync", "overlapped") for world in (2, 4)}
    assert set(names) == expected  # fused skips on CPU
    orders = cells[0].measurement.orders
    assert len(orders) == ROUNDS.rounds
    assert all(sorted(order) == sorted(names) for order in orders)
    assert len({tuple(order) for order in orders}) > 1  # shuffled per round
    assert all(cell.measurement.orders == orders for cell in cells)  # the same on every rank


def test_rank_zero_reports_every_variant_and_outside_ranks_only_their_own(cells):
    info = cells[0].info
    for name in cells[0].measurement.names:
        row = info[name]
        assert row["max_rel_err"] <= row["tolerance"], row
        assert row["estimates"]["step_ms"]["rounds"] == ROUNDS.rounds
        assert len(row["step_ms_rounds"]) == ROUNDS.rounds
        if row["world_size"] > 1:
            low, high = (row["estimates"]["scaling_efficiency"][k] for k in ("low", "high"))
            assert 0 < low <= row["scaling_efficiency"] <= high
            assert row["timeline"]["intervals"]
    assert info["strong-overlapped-w2"]["verdicts"]["overlap_speedup"] in (
        "faster", "slower", "no significant difference")
    assert info["weak-sync-w4"]["ffn"] == 4 * 128 and info["strong-sync-w4"]["ffn"] == 128
    assert info["comparison"]["variants"] == cells[0].measurement.names
    # Ranks 2 and 3 are outside the 1- and 2-rank groups: they only took part in the barriers.
    assert set(cells[3].info) == {"comparison"} | {n for n in cells[0].measurement.names
                                                   if n.endswith("-w4")}


def test_a_failed_check_on_one_rank_stops_the_cell_on_every_rank():
    cells = run_ranks(cell_with_a_bad_rank, 2)
    assert all(cell.measurement is None for cell in cells)
    assert cells[0].error == f"{PRESET} with torch: a check failed on another rank"
    assert cells[1].error.startswith(f"{PRESET} with torch: strong-sync-w2: max relative "
                                     "error ")
    assert "> tolerance 0 (" in cells[1].error
