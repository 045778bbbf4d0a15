"""Frozen predictions: every strategy at each world size and K, with bands, in one file."""

import json

from impl.costmodel import freeze

FITTED_ON = "results/h200x2/20261123T094012Z.json"  # a committed 2 × H200 run


def test_freeze_writes_every_strategy_at_each_world_and_k(tmp_path):
    out = tmp_path / "frozen.json"
    assert freeze.main([FITTED_ON, "--device", "H200", "--worlds", "2", "4",
                        "--chunks", "5", "20", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["frozen"]["fabric"] == "nvlink-h200x8"
    assert document["frozen"]["fitted_on"] == [FITTED_ON]
    predictions = document["predictions"]
    cells = {(p["workload"], p["world_size"], p["chunks"]) for p in predictions}
    workloads = {p["workload"] for p in predictions}
    assert len(cells) == 4 * len(workloads)
    assert {p["strategy"] for p in predictions} == set(freeze.scale.PREDICTED_VARIANTS)
    sequential = {(p["workload"], p["world_size"], p["chunks"]): p["step_ms"]
                  for p in predictions if p["strategy"] == "sequential"}
    # More ranks move more bytes per rank in a ring (2(w − 1)/w): the step cannot shrink.
    for (workload, world, k), step in sequential.items():
        if world == 4:
            assert step >= sequential[workload, 2, k]
    for p in predictions:
        if p["band"] is not None:
            assert p["low_ms"] < p["step_ms"] < p["high_ms"]
    # One run: no cell is predicted from another run's inputs, so no pair error; score then
    # hedges by the overlap of two steps' bands.
    assert document["pair_band"] is None


def test_freeze_refuses_a_device_with_no_rows(tmp_path, capsys):
    assert freeze.main([FITTED_ON, "--device", "B200", "--worlds", "2",
                        "--out", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --device 'B200': no row of {FITTED_ON} was measured on it")
    assert not (tmp_path / "x.json").exists()


def test_no_efficiency_where_the_headroom_is_inside_the_band():
    """E = (S − T)/(S − L) is refused, with the reason, where the step's band is wider than
    S − L; a narrow band keeps it."""
    from impl.costmodel import scale, validate
    from impl.costmodel.fabric_file import load_fabric

    (source, *_) = scale.sources(validate.load_rows([FITTED_ON]))
    fabric = load_fabric("nvlink-h200x8")
    kept = scale.predict_one(source, "chunked", 2, fabric, 20, held_out=0.0)
    assert kept.overlap_efficiency is not None
    refused = scale.predict_one(source, "chunked", 2, fabric, 20, held_out=0.5)
    assert refused.overlap_efficiency is None and refused.step_ms == kept.step_ms
    assert refused.note == scale.NO_EFFICIENCY
