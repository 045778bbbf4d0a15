"""The overlap benchmark end to end on 2 gloo ranks: cells, rows, per-round values, summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from impl import capabilities
from suite.run import free_port, is_open_mpi
from suite.summary import WIDTH, summary_table

QUICK_ROUNDS = 6


def run_bench(tmp_path, *extra: str, launcher: list[str] | None = None) -> dict:
    out = tmp_path / "results.json"
    command = [*(launcher or [sys.executable, "-m", "torch.distributed.run", "--standalone",
                              "--nproc-per-node=2", "--local-ranks-filter=0"]),
               *(["-m", "pytest"] if launcher is None else [sys.executable, "-m", "pytest"]),
               "suite/bench_overlap.py", "-p", "no:cacheprovider", "-q", "--suite-mode", "quick",
               "--workloads", "mlp_tiny", "--results-json", str(out), *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OVERLAP_BACKEND": "gloo",
           "MASTER_PORT": str(free_port())}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    return run_bench(tmp_path_factory.mktemp("bench"), "--chunks", "1,5",
                     "--world-sizes", "1,2,4", "--strategies", "sequential,chunked,ddp")


def rows(document: dict, kind: str) -> list[dict]:
    return [b for b in document["benchmarks"] if b["extra_info"]["kind"] == kind]


def test_cells_cover_the_launched_world_only(document):
    ids = {b["name"] for b in document["benchmarks"]}
    cells = {(b["extra_info"]["chunks"], b["extra_info"]["world_size"])
             for b in rows(document, "comparison")}
    assert cells == {(1, 1), (1, 2), (5, 2)}  # no 4-rank cells on 2 ranks, one K at 1 rank
    variants = {"compute-only", "comm-only", "sequential", "chunked", "ddp", "ddp-25mb"}
    for variant in variants | {"compare"}:
        assert f"test_overlap[mlp_tiny-{variant}-K5-w2-gloo-tcp]" in ids
    assert "test_overlap[mlp_tiny-comm-only-K1-w1-gloo-tcp]" not in ids


def test_variant_rows_hold_their_own_rounds(document):
    for bench in rows(document, "step"):
        info = bench["extra_info"]
        assert len(bench["stats"]["data"]) == QUICK_ROUNDS
        assert len(info["step_ms_rounds"]) == QUICK_ROUNDS
        # One step per round in the CPU quick mode: each round's time is that step's.
        assert bench["stats"]["data"] == pytest.approx([ms / 1e3 for ms in info["step_ms_all"]])


def test_comparison_rows_keep_every_round_in_a_shared_order(document):
    for bench in rows(document, "comparison"):
        info = bench["extra_info"]
        measurement = info["measurement"]
        assert len(measurement["orders"]) == QUICK_ROUNDS
        for order in measurement["orders"]:
            assert sorted(order) == sorted(info["variants"])
        for variant in info["variants"]:
            assert len(measurement["step_ms"][variant]) == QUICK_ROUNDS
            assert variant in info["timelines"]


def test_strategies_were_checked_before_timing(document):
    for bench in rows(document, "comparison"):
        info = bench["extra_info"]
        for name in info["compared"]:
            check = info["checks"][name]
            assert check["max_abs_err_vs_sequential"] <= check["tolerance"]


def test_figures_carry_intervals_and_verdicts(document):
    (cell,) = [b["extra_info"] for b in rows(document, "comparison")
               if b["extra_info"]["chunks"] == 5]
    references = cell["references"]
    for key in ("compute_only_ms", "comm_only_ms", "sequential_ms", "limit_ms", "bound_ms"):
        estimate = references[key]
        assert estimate["low"] <= estimate["value"] <= estimate["high"], key
    chunked = cell["strategies"]["chunked"]
    assert chunked["vs_sequential"]["verdict"] in ("faster", "slower",
                                                   "no significant difference")
    assert set(chunked["lost_time"]) >= {"exposed_comm_ms", "compute_slowdown_ms", "other_ms",
                                         "gap_ms", "parts_sum_ms"}
    assert cell["timelines"]["ddp"]["intervals"], "DDP's communication is observed"
    assert any(i["lane"] == "comm" for i in cell["timelines"]["ddp"]["intervals"])


def test_one_rank_cell_compares_sequential_with_compute_only(document):
    (cell,) = [b["extra_info"] for b in rows(document, "comparison")
               if b["extra_info"]["world_size"] == 1]
    assert "comm_only_ms" not in cell["references"]
    assert cell["references"]["sequential_vs_compute_only"]["verdict"]


def test_summary_fits_the_terminal_and_explains_itself(document):
    text = summary_table(document)
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert "mlp_tiny · K=5 · 2 rank(s) · gloo-tcp" in text
    assert "n.s. = no significant difference" in text


@pytest.mark.mpi
@pytest.mark.skipif(capabilities.missing_mpi() is not None,
                    reason=capabilities.missing_mpi() or "")
def test_mpi_cell_under_mpirun(tmp_path):
    launcher = capabilities.mpi_launcher()
    extra = ["--allow-run-as-root", "--oversubscribe"] if is_open_mpi(launcher) else []
    document = run_bench(tmp_path, "--strategies", "mpi", "--chunks", "5",
                         launcher=[launcher, *extra, "-n", "2"])
    (cell,) = [b["extra_info"] for b in rows(document, "comparison")]
    assert cell["variants"] == ["compute-only", "comm-only", "mpi-sequential", "mpi"]
    assert cell["world_size"] == 2
    assert "Iallreduce" in json.dumps(cell["timelines"]["comm-only"])


def test_knob_variants_that_cannot_cut_the_model_are_left_out():
    from impl.presets import preset
    from suite.bench_overlap import cells

    axes = {"workloads": [preset("mlp_tiny")], "chunks": [5, 20], "world_sizes": [2],
            "profile": "gloo", "backend": "gloo", "strategies": ["sequential", "chunked"],
            "knob_chunks": 20, "knobs": ["chunked+update", "chunked+layers"]}
    knob_cell, = [cell for cell in cells(axes, world=2, mpi=False) if cell.chunks == 20]
    # mlp_tiny has 8 parameter tensors: 20 chunks of whole layers cannot exist
    assert knob_cell.knobs == ("chunked+update",)
    assert "chunked+layers" not in knob_cell.variants


def test_a_variants_energy_is_left_out_where_the_counter_did_not_advance_in_every_segment():
    # NVML's counter advances in steps of about 64 J on an H100: short segments read 0 or a
    # whole step (the threaded variant of a 7 Dec H100 run read 0 J in all 12 rounds).
    from types import SimpleNamespace

    from suite.bench_overlap import energy
    from suite.harness import Measurement

    cell = SimpleNamespace(world_size=2)
    stepped = Measurement(["threaded", "chunked"], 0, 3,
                          energy_j={"threaded": [0.0, 0.0], "chunked": [64.7, 0.0]})
    unresolved = ("NVML's energy counter did not advance in every segment of this variant: "
                  "its segments are shorter than the counter's step")
    assert energy(stepped, "threaded", cell, 8) == {
        "energy_per_step_j": None, "samples_per_joule": None, "energy_left_out": unresolved}
    assert energy(stepped, "chunked", cell, 8) == {
        "energy_per_step_j": None, "samples_per_joule": None, "energy_left_out": unresolved}
    beside = Measurement(["threaded", "chunked"], 0, 3,
                         energy_j={"threaded": [140.0, 130.0], "chunked": [0.0, 150.0]})
    assert energy(beside, "threaded", cell, 8) == {
        "energy_per_step_j": 45.0, "samples_per_joule": 16 / 45.0, "energy_left_out": None}
    assert energy(beside, "chunked", cell, 8)["energy_left_out"] == unresolved


def test_a_variants_energy_without_a_counter_says_so_with_the_samplers_reason():
    from types import SimpleNamespace

    from suite.bench_overlap import energy
    from suite.harness import Measurement

    cell = SimpleNamespace(world_size=2)
    unmetered = Measurement(["threaded", "chunked"], 0, 3)  # no meter: no energy per segment
    assert energy(unmetered, "threaded", cell, 8) == {
        "energy_per_step_j": None, "samples_per_joule": None,
        "energy_left_out": "no NVML energy counter in this run"}
    assert energy(unmetered, "threaded", cell, 8, "NVML unavailable: no driver") == {
        "energy_per_step_j": None, "samples_per_joule": None,
        "energy_left_out": "no NVML energy counter in this run (NVML unavailable: no driver)"}


def test_a_written_step_row_with_its_reason_passes_the_row_check():
    from impl.rows.kinds import STEP
    from suite.bench_overlap import STEP_ROW

    field = STEP.field.energy_left_out
    assert field.name == STEP_ROW.energy_left_out == "energy_left_out"
    assert STEP.field_problem({"energy_left_out": "no NVML energy counter in this run"},
                              field) is None
    assert STEP.field_problem({"energy_left_out": None}, field) is None
    assert STEP.field_problem({}, field) is None  # rows written before it
    assert STEP.field_problem({"energy_left_out": 0.0}, field) is not None
