"""Figures a reader can tell apart: no two series of one figure share colour and marker, in
a colour-blind-safe palette, for the twelve series the overlap figures draw at most."""

from __future__ import annotations

import pytest
from matplotlib.colors import to_hex

from impl.strategies import STRATEGIES
from impl.strategy_records import STRATEGY_RECORDS, VARIANTS, strategy_of
from reports import figures
from reports.sections import headline

# Every strategy and named variant the overlap benchmark can measure, and one it cannot know.
TWELVE = ["sequential", "threaded", "chunked", "copy-engine", "ddp", "ddp-25mb",
          "chunked+update", "threaded+update", "chunked+layers", "chunked+first1mb",
          "chunked+priority", "chunked+ctas8"]
EVERY = [*dict.fromkeys([*STRATEGIES, *VARIANTS, "comm-only", "compute-only", "new-strategy"])]


def drawn_series(monkeypatch, draw) -> list[tuple[str, str, str]]:
    """(label, colour, marker) of every series the figure ``draw`` makes on its first panel:
    its labelled error-bar series, or where it labels none its legend's entries."""
    made = []
    monkeypatch.setattr(figures, "_save", lambda fig, kind="svg": made.append(fig))
    draw()
    (fig,) = made
    lines = [(c.get_label(), c.lines[0]) for c in fig.axes[0].containers
             if not c.get_label().startswith("_")]  # matplotlib's name for an unlabelled one
    if not lines:
        legend = fig.legends[0]
        lines = [(t.get_text(), h) for h, t in zip(legend.legend_handles, legend.texts)]
    figures.plt.close(fig)
    return [(label, to_hex(line.get_color()), line.get_marker()) for label, line in lines]


def assert_told_apart(series):
    looks = [(colour, marker) for _, colour, marker in series]
    assert len(set(looks)) == len(looks), series


def test_every_strategy_and_variant_has_its_own_colour_and_marker():
    styles = figures.series_styles(EVERY)
    assert list(styles) == EVERY
    looks = [(s.color, s.marker) for s in styles.values()]
    assert len(set(looks)) == len(looks)
    palette = {*figures.OKABE_ITO.values(), figures.REFERENCE_GREY}
    assert {s.color for s in styles.values()} <= palette


def test_a_variant_keeps_its_strategys_colour_with_another_marker_and_line():
    styles = figures.series_styles(["chunked+priority", "chunked", "ddp-25mb", "ddp"])
    assert styles["chunked"] == figures.SeriesStyle(figures.OKABE_ITO["blue"], "o", "-")
    assert styles["chunked+priority"].color == figures.OKABE_ITO["blue"]
    assert styles["chunked+priority"].marker == "s"
    assert styles["chunked+priority"].linestyle != "-"
    assert styles["ddp-25mb"].color == styles["ddp"].color == figures.OKABE_ITO["green"]


@pytest.mark.parametrize("count", [1, 6, 12])
def test_speedup_by_chunks_draws_twelve_series_apart(monkeypatch, count):
    estimate = {"value": 1.1, "low": 1.0, "high": 1.2}
    lines = {s: [(5, estimate), (20, estimate)] for s in TWELVE[:count]}
    series = drawn_series(monkeypatch, lambda: figures.speedup_by_chunks(
        [{"title": "a", "lines": lines}, {"title": "b", "lines": dict(reversed(lines.items()))}]))
    assert [label for label, _, _ in series] == TWELVE[:count]
    assert_told_apart(series)


def test_regime_draws_twelve_series_apart(monkeypatch):
    estimate = {"value": 1.1, "low": 1.0, "high": 1.2}
    points = [{"strategy": s, "ratio": estimate, "speedup": estimate} for s in TWELVE]
    series = drawn_series(monkeypatch, lambda: figures.regime([{"title": "a",
                                                                 "points": points}], 1.5))
    assert [label for label, _, _ in series] == TWELVE
    assert_told_apart(series)


def test_figure_1_tells_its_strategies_apart(monkeypatch):
    estimate = {"value": 1.1, "low": 1.0, "high": 1.2}
    entries = [{"best": s, "speedup": estimate, "efficiency": estimate} for s in TWELVE]
    series = drawn_series(monkeypatch, lambda: headline.figure(entries))
    assert [label for label, _, _ in series] == TWELVE
    assert_told_apart(series)


def test_every_recorded_strategy_has_a_colour_its_variants_share():
    for name in [*STRATEGY_RECORDS, *VARIANTS]:
        assert figures.family_color(name) is not None, name
        assert figures.family_color(name) == figures.family_color(strategy_of(name)), name
    assert figures.color("mpi-sequential") == figures.color("sequential") == figures.REFERENCE_GREY
    assert figures.family_color("new-strategy") is None
    assert figures.color("new-strategy") == figures.OKABE_ITO["black"]
