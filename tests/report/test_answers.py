"""The answers, in the overlap chapter (the abstract has the headline table)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from impl import stats
from reports import build, cells
from reports.format import fmt
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


def round_medians(cell: dict, variant: str) -> list[float]:
    import statistics

    return [statistics.median(s) for s in cell["measurement"]["step_ms"][variant]]


@pytest.mark.parametrize(("workload", "path"), [("mlp_tiny", INTERLEAVED),
                                                 ("gpt_tiny", INTERLEAVED),
                                                 ("mlp_1024x8_b64", REGIMES)])
def test_chapter_answers_each_workload_with_intervals_and_verdicts(built, workload, path):
    cell = answer_cell(workload, path)
    speedups = {s: f["vs_sequential"]["speedup"] for s, f in cell["strategies"].items()}
    best = max(speedups, key=lambda s: speedups[s]["value"])
    line = text_of(re.search(r"<li>" + re.escape(workload) + r", read.*?</li>",
                             section_html(built["html"], "overlap"), re.S).group(0))
    assert f"read at K = {cells.ANSWER_CHUNKS}, the suite's default chunk count" in line
    assert f"{best} is fastest, {interval(speedups[best]).replace(' [', '× [')} over " \
           f"sequential" in line
    hidden = cell["strategies"][best]["hidden_comm_fraction"]
    assert f"hidden communication fraction {interval(hidden)}" in line
    # Every other strategy of the cell, compared in the same rounds (paired bootstrap).
    for other in speedups:
        if other == best:
            continue
        verdict = stats.verdict(stats.difference(round_medians(cell, best),
                                                 round_medians(cell, other)))
        expected = (f"no significant difference from {other}" if verdict ==
                    stats.NO_DIFFERENCE else f"{verdict} than {other}")
        assert expected in line, (other, line)
    buckets = cell["ddp_bucket_counts"].get(best)
    if buckets is not None and buckets != cell["chunks"]:
        assert f"no overlap efficiency: it made {buckets} bucket(s)" in line
    else:
        assert f"overlap efficiency {interval(cell['strategies'][best]['overlap_efficiency'])}" \
            in line


def test_no_nvlink_answer_is_said_and_old_files_named(built):
    chapter = text_of(section_html(built["html"], "overlap"))
    assert ("There is no interleaved NVLink result over several GPUs yet, so this report gives "
            f"no NVLink answer. The NVLink files loaded ({GPU_FIXTURE}) were "
            "measured before interleaving") in chapter
    abstract = text_of(section_html(built["html"], "abstract"))
    assert ("Not in the table: h200x4 (4× NVIDIA H200), measured before interleaving: its "
            "step rows are in the appendix.") in abstract
    # The old-format 4-GPU numbers are nowhere in the abstract.
    for row in infos(GPU_FIXTURE, "step"):
        if row["overlap_efficiency"] is not None:
            assert f"{fmt(row['overlap_efficiency'])} (" not in abstract


def test_chapter_checks_one_rank_cells(built):
    abstract = text_of(section_html(built["html"], "overlap"))
    single = [c for path in (INTERLEAVED, REGIMES) for c in infos(path, "comparison")
              if c["world_size"] == 1]
    assert f"an interval containing 0 in {len(single)} of {len(single)} cells" in abstract
    for cell in single:
        difference = cell["references"]["sequential_vs_compute_only"]["difference_ms"]
        assert f"{cell['workload']}: {interval(difference)} ms" in abstract


def nvlink_run(path: Path) -> Path:
    """A made-up 2-GPU NVLink run: the interleaved CPU fixture relabelled (its numbers are
    the CPU's), with made-up NVML power and per-round energy for the energy check."""
    document = json.loads(INTERLEAVED.read_text())
    document["suite"].update(label="h200x2", profile="nvlink")
    document["machine_info"]["overlap"].update(
        machine_label="h200x2", gpu_names=["NVIDIA H200"] * 2, backend="nccl",
        profile="nvlink",
        gpu_limits=[{"uuid": uuid, "power_limit_w": 700.0, "max_sm_clock_mhz": 1980}
                    for uuid in ("GPU-a", "GPU-b")])
    for benchmark in document["benchmarks"]:
        info = benchmark["extra_info"]
        if "profile" in info:
            info.update(profile="nvlink", backend="nccl")
        if info.get("kind") == "comparison":
            steps = info["measurement"]["step_ms"]
            info["measurement"]["energy_j"] = {v: [0.5 * sum(r) for r in rounds]
                                               for v, rounds in steps.items()}
            info["nvml"] = {"available": True, "gpus": ["a", "b"], "period_ms": 50.0,
                            "energy_j": [1.0, 1.0], "mean": {"power_w": [240.0, 260.0]}}
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="module")
def nvlink_built(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("nvlink")
    written = build.build([str(nvlink_run(folder / "h200x2.json"))], folder / "out", pdf=False)
    html = written["html"].read_text()
    return {"html": html, "text": text_of(html), "written": written}


def test_nvlink_answer_heads_the_table_when_an_interleaved_nvlink_run_exists(nvlink_built):
    cell = answer_cell("mlp_tiny", INTERLEAVED)
    best = max(cell["strategies"],
               key=lambda s: cell["strategies"][s]["vs_sequential"]["speedup"]["value"])
    speedup = cell["strategies"][best]["vs_sequential"]["speedup"]
    table = re.search(r'id="tab-headline">.*?<tbody>(.*?)</tbody>', nvlink_built["html"],
                      re.S).group(1)
    first = text_of(re.search(r"<tr>(.*?)</tr>", table, re.S).group(1))
    assert first.startswith(f" 1 2× NVIDIA H200, NVLink mlp_tiny {best} "
                            f"{interval(speedup).replace(' [', '× [')}")
    chapter = text_of(section_html(nvlink_built["html"], "overlap"))
    assert "h200x2 (2× NVIDIA H200) · nvlink · 2 GPUs (nccl) mlp_tiny, read at K = 20" in chapter
    assert f"{best} is fastest, {interval(speedup).replace(' [', '× [')}" in chapter
    assert "no NVLink answer" not in chapter
    assert "is a CPU machine" not in chapter


def test_power_limit_clocks_and_energy_check(nvlink_built):
    environment = text_of(section_html(nvlink_built["html"], "environment"))
    assert "power limit (W) 700 (×2)" in environment
    assert "max SM clock (MHz) 1,980 (×2)" in environment
    assert "max memory clock" not in environment  # not recorded: no row
    # The energy table has a row per variant: the section says it is in the detail tables.
    assert ("The table of energy per step against mean power × step time is in Appendix"
            in text_of(section_html(nvlink_built["html"], "energy")))
    energy = section_html(nvlink_built["html"], "detail")
    # energy per step is 0.5 J per ms of step: against 500 W × step, a ratio of exactly 1.
    assert "energy / (power × step)" in energy and "1.00" in energy
    assert "the counter advances in steps (about 64 J every 100 ms on one H100" in text_of(energy)
