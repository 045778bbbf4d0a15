"""Frozen predictions scored against measured cells: errors, band coverage, the fastest."""

import json

from impl.costmodel import score


def comparison(workload: str, world: int, steps: dict[str, float]) -> dict:
    return {"kind": "comparison", "workload": workload, "chunks": 20, "world_size": world,
            "sequential_reference": "sequential",
            "references": {"sequential_ms": {"value": steps.pop("sequential")}},
            "strategies": {name: {"step_ms": {"value": ms}} for name, ms in steps.items()}}


def prediction(strategy: str, step: float, band: float | None = 0.05) -> dict:
    low, high = (step * (1 - band), step * (1 + band)) if band is not None else (None, None)
    return {"workload": "w", "strategy": strategy, "world_size": 4, "chunks": 20,
            "step_ms": step, "band": band, "low_ms": low, "high_ms": high}


def measured_apart() -> dict:
    """A cell measured with 95% intervals of ±1%: sequential 10.5, chunked 9.2, ddp 8.0 ms,
    every two apart."""
    def estimate(value):
        return {"value": value, "low": value * 0.99, "high": value * 1.01}

    row = comparison("w", 4, {"sequential": 10.0, "chunked": 10.0, "ddp": 8.0})
    row["references"]["sequential_ms"] = estimate(10.5)
    row["strategies"] = {"chunked": {"step_ms": estimate(9.2)}, "ddp": {"step_ms": estimate(8.0)}}
    return row


PREDICTIONS = [prediction("sequential", 11.0), prediction("chunked", 9.0),
               prediction("ddp", 10.0, band=None)]


def test_each_measured_variant_is_matched_to_its_prediction():
    rows = [comparison("w", 4, {"sequential": 10.0, "chunked": 10.0, "ddp": 8.0}),
            comparison("w", 1, {"sequential": 10.0}),  # one rank: nothing communicated
            comparison("other", 4, {"sequential": 5.0})]  # no prediction for it
    found = score.scored(PREDICTIONS, rows)
    assert [(s.variant, round(s.error, 3), s.inside) for s in found] == [
        ("sequential", 0.1, False), ("chunked", -0.1, False), ("ddp", 0.25, None)]
    text = score.lines(found)
    assert "   4 chunked              1         10.0%      10.0%      0/1" in text
    assert "band coverage: 0 of 2 measurements inside their band" in text
    # sequential's band (10.45 to 11.55) is clear of chunked's (8.55 to 9.45): one pick.
    assert text[-2] == "  w K = 20 w = 4: chunked (wrong: measured best ddp 8.00 ms)"
    # No measurement carries an interval here: no pair is apart.
    assert "ranking: 0 of 0 pairs whose measurements are apart ordered right; with the bands " \
        "apart too, 0 right and 0 wrong" in text


def test_a_pick_names_the_strategies_within_its_band_and_pairs_are_ranked():
    row = measured_apart()
    predictions = [prediction("sequential", 11.0), prediction("chunked", 9.0, band=0.15),
                   prediction("ddp", 10.0, band=0.05)]
    text = score.lines(score.scored(predictions, [row]))
    # chunked's band reaches 10.35 ms, ddp's starts at 9.5: the pick hedges, and the measured
    # best (ddp) is inside it; sequential's starts at 10.45, beyond.
    assert text[-2] == "  w K = 20 w = 4: cannot separate chunked, ddp (right)"
    # Three pairs apart: chunked < sequential right, ddp < sequential right, ddp < chunked
    # wrong. Bands apart only for chunked (top 10.35) and sequential (bottom 10.45).
    assert "ranking: 2 of 3 pairs whose measurements are apart ordered right; with the " \
        "bands apart too, 1 right and 0 wrong" in text


def test_with_a_pair_band_the_hedge_is_the_strategies_within_it_of_the_best():
    row = measured_apart()
    found = score.scored(PREDICTIONS, [row])  # predicted: chunked 9, ddp 10, sequential 11
    # Within 12% of 9 ms: chunked and ddp (10.0), not sequential (11.0).
    text = score.lines(found, pair_band=0.12)
    assert "(the strategies predicted within the pair band, ±12.0%, of the best's step cannot " \
        "be separated from it):" in text[-3]
    assert text[-2:] == ["  w K = 20 w = 4: cannot separate chunked, ddp (right)",
                         "hedges holding the cell's slowest strategy, measured apart from its "
                         "best (95% intervals): 0 of 1"]
    # Within 25%: sequential too, the slowest, its interval clear of ddp's.
    assert score.lines(found, pair_band=0.25)[-2:] == [
        "  w K = 20 w = 4: cannot separate chunked, ddp, sequential (right; holds the slowest, "
        "sequential, measured 31.2% behind ddp)",
        "hedges holding the cell's slowest strategy, measured apart from its best (95% "
        "intervals): 1 of 1"]


def test_a_file_that_is_not_frozen_predictions_is_one_line(tmp_path, capsys):
    bogus = tmp_path / "x.json"
    bogus.write_text(json.dumps({"benchmarks": []}))
    assert score.main([str(bogus), str(bogus)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {bogus}: not a file of frozen predictions ('predictions')"
