"""Intervals everywhere: under every value, in the anatomy, the course study and interference."""

from __future__ import annotations

import re

from reports.format import fmt, fmt_pct
from tests.report.helpers import (
    GPU_FIXTURE,
    INTERLEAVED,
    REGIMES,
    answer_cell,
    infos,
    interval,
    section_html,
    text_of,
)


def test_result_tables_carry_an_interval_under_every_value(built):
    answers = section_html(built["html"], "cells")
    cell = answer_cell("mlp_tiny", INTERLEAVED)
    chunked = cell["strategies"]["chunked"]
    row = re.search(r"<tr><td>mlp_tiny</td><td class=\"num\">20</td><td>chunked</td>(.*?)</tr>",
                    answers, re.S).group(1)
    for key in ("step_ms", "overlap_efficiency", "bound_efficiency", "hidden_comm_fraction"):
        estimate = chunked[key]
        shown = (f"[{fmt(estimate['low'])}, {fmt(estimate['high'])}]"
                 if estimate["low"] is not None else None)
        assert fmt(estimate["value"]) in row
        if shown:
            assert f'<span class="ci">{shown}</span>' in row
    # Every efficiency without a value or interval has a footnote saying why.
    notes = text_of(answers)
    assert "DDP made 1 bucket(s), not K = 20 chunks" in notes
    assert "no interval: some resamples had no headroom" in notes


def test_anatomy_draws_every_variant_and_states_the_finding(built):
    anatomy = section_html(built["html"], "step-anatomy")
    cell = answer_cell("mlp_1024x8_b64", REGIMES)  # the drawn workload (cells.REFERENCE_...)
    assert "mlp_1024x8_b64, K = 20, 2 ranks, gloo-tcp" in text_of(anatomy)
    for variant in cell["timelines"]:
        assert f"traces/cpu-2core-mlp_1024x8_b64-K20-w2-gloo-tcp-{variant}.json" in anatomy
    best = max(cell["strategies"],
               key=lambda s: cell["strategies"][s]["vs_sequential"]["speedup"]["value"])
    hidden = cell["strategies"][best]["hidden_comm_fraction"]
    assert (f"The fastest here, {best}, hides {fmt_pct(100 * hidden['value'])} of its "
            f"communication [{fmt_pct(100 * hidden['low'])}, {fmt_pct(100 * hidden['high'])}]"
            ) in text_of(anatomy)
    lost = cell["strategies"]["chunked"]["lost_time"]
    row = re.search(r"<tr><td>chunked</td>(.*?)</tr>", anatomy, re.S).group(1)
    for part in ("exposed_comm_ms", "compute_slowdown_ms", "other_ms", "gap_ms"):
        assert f"{fmt(lost[part]['value'])}" in row
        assert f"[{fmt(lost[part]['low'])}, {fmt(lost[part]['high'])}]" in row


def test_course_study_beside_the_real_measurement_at_its_ratio(built):
    study = text_of(section_html(built["html"], "course-study"))
    nearest = min((c for path in (INTERLEAVED, REGIMES) for c in infos(path, "comparison")
                   if c["world_size"] == 2 and c["chunks"] > 1),
                  key=lambda c: abs(__import__("math").log(
                      c["references"]["compute_to_comm"]["value"] / 1.5)))
    ratio = nearest["references"]["compute_to_comm"]
    assert f"{interval(ratio)} (cpu-2core, {nearest['workload']}, K = {nearest['chunks']}" in study
    speedup = nearest["strategies"]["chunked"]["vs_sequential"]["speedup"]
    saved = [100 * (1 - 1 / speedup[k]) for k in ("value", "low", "high")]
    assert f"chunked: {fmt(saved[0])} [{fmt(saved[1])}, {fmt(saved[2])}]%" in study
    # The simulation's rows: the newer CPU run's replaced the older one's (same K).
    for row in infos(GPU_FIXTURE, "synthetic") + infos(INTERLEAVED, "synthetic"):
        assert fmt_pct(row["speedup_pct"]) in study
    # The reference workload's ratio from the old 4× H200 run, labelled as such.
    assert "measured before interleaving, no interval" in study


def test_interference_slowdowns_with_intervals(built):
    section = text_of(section_html(built["html"], "interference"))
    for row in infos(INTERLEAVED, "interference") + infos(REGIMES, "interference"):
        ratio = row["slowdown"]["all-reduce"]["ratio"]
        assert f"all-reduce {interval(ratio)} {row['slowdown']['all-reduce']['verdict']}" in section
