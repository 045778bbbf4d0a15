"""What the report shows, and what it leaves out."""

from __future__ import annotations

import re

from tests.report.helpers import (
    section_html,
    text_of,
)


def test_sections_with_data_only_and_in_the_contents(built):
    html = built["html"]
    shown = re.findall(r'<section id="([^"]+)"', html)
    assert shown == ["abstract", "methodology", "overlap", "reproducibility", "step-anatomy",
                     "interference", "course-study", "allreduce", "gemm", "prediction",
                     "regression", "environment", "runs", "before-interleaving", "cells",
                     "detail", "tables", "topology", "definitions"]
    toc = re.search(r'<nav class="toc">(.*?)</nav>', html, re.S).group(1)
    assert re.findall(r'href="#([^"]+)"', toc) == shown
    # Nothing of the studies without data, not even a "no data" line.
    for absent in ("tensor-parallel", "pipeline", "energy", "No tensor-parallel results"):
        assert absent not in toc and f'id="{absent}"' not in html
    runs = section_html(html, "runs")
    assert ("Left out for lack of data: Power and energy, Tensor parallelism, Pipeline and CPU-GPU "
            "hybrid training.") in text_of(runs)


def test_figures_of_every_chapter(built):
    figure_ids = re.findall(r'<figure class="fig" id="([^"]+)">', built["html"])
    assert sorted(figure_ids) == sorted([
        "fig-headline", "fig-speedup-k-0", "fig-gantt-0", "fig-steps-0", "fig-lost-0",
        "fig-interference-cpu-2core", "fig-regime", "fig-synthetic", "fig-synthetic-gantt",
        "fig-allreduce", "fig-gemm-h200x4", "fig-roofline-h200x4"])
    # The fixture's GPU run predates interleaving: "Beyond this machine" predicts from
    # interleaved cells only, so it shows the model's errors and no predicted curves.
    sources = re.findall(r'<img src="([^"]+)"', built["html"])
    assert len(sources) == len(figure_ids)
    assert all(s.startswith(("data:image/svg+xml;base64,", "data:image/png;base64,"))
               for s in sources)


def test_html_quotes_metric_definitions_from_code(built):
    from markupsafe import escape  # what Jinja's autoescape uses

    from impl.metrics import ideal_speedup, lost_time_ms
    from impl.rows.metric_fields import ALLREDUCE_FIELDS, STEP_FIELDS

    for field in (*STEP_FIELDS, *ALLREDUCE_FIELDS):
        assert str(escape(field.definition)) in built["html"], field.name
    for function in (lost_time_ms, ideal_speedup):
        assert " ".join(function.__doc__.split()) in built["text"]
