"""Runs measured before interleaving: listed, labelled, never headlined."""

from __future__ import annotations

import json
import re

from tests.report.helpers import (
    ALL,
    CPU_FIXTURE,
    GPU_FIXTURE,
    INTERLEAVED,
    infos,
    section_html,
    text_of,
)


def test_appendix_lists_every_run_and_how_it_is_used(built):
    runs = text_of(section_html(built["html"], "runs"))
    for path in ALL:
        assert str(path) in runs
    assert runs.count("· before interleaving ·") == 2 and runs.count("· interleaved ·") == 2
    old_steps = len(infos(GPU_FIXTURE, "step"))
    assert (f"step: {old_steps} row(s); {old_steps} measured before interleaving, shown only "
            "in the appendix 'Step rows measured before interleaving'") in runs
    assert f"comparison: {len(infos(INTERLEAVED, 'comparison'))} row(s)" in runs
    # Per-pass command lines and the commit with its dirty flag.
    passes = json.loads(INTERLEAVED.read_text())["suite"]["passes"]
    assert passes[0]["command"] in runs
    commit = json.loads(INTERLEAVED.read_text())["machine_info"]["overlap"]["git_commit"]
    assert f"commit {commit[:12]} (dirty: tracked files differed from it)" in runs
    assert "docs/ANCHORS.md" in runs


def test_old_format_rows_appear_only_in_their_appendix(built):
    html = built["html"]
    before = section_html(html, "before-interleaving")
    tables = re.findall(r'id="(tab-before-[^"]+)"', html)
    assert tables and all(f'id="{t}"' in before for t in tables)
    groups = {(r["workload"], r["world_size"], r["profile"])
              for path in (GPU_FIXTURE, CPU_FIXTURE) for r in infos(path, "step")}
    assert len([t for t in tables if t != "tab-before-energy"]) == len(groups)
    captions = re.findall(r"<caption>(.*?)</caption>", before, re.S)
    assert all(c.startswith("Measured before interleaving: references measured at other "
                            "moments, no intervals.") for c in captions)
    # Their notes say why an old efficiency cannot be read as one.
    notes = text_of(before)
    assert "sequential against its own reference measured at another moment" in notes
    assert "K = 1: nothing can overlap" in notes
