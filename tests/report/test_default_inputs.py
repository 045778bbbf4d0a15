"""Which result files the report reads by default."""

from __future__ import annotations

import json
from pathlib import Path

from reports import build
from reports.results import newest_per_machine
from tests.report.helpers import (
    CPU_FIXTURE,
    GPU_FIXTURE,
    INTERLEAVED,
    REGIMES,
    section_html,
    text_of,
)


def copy_as(source: Path, target: Path, **suite) -> Path:
    document = json.loads(source.read_text())
    document["suite"].update(suite)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document))
    return target


def test_default_inputs_are_the_strongest_run_per_machine_and_fabric(tmp_path):
    gpu = copy_as(GPU_FIXTURE, tmp_path / "h200x4" / "a.json", mode="default", partial=False)
    copy_as(GPU_FIXTURE, tmp_path / "h200x4" / "newer-quick.json", mode="quick",
            created="2030-01-01T00:00:00+00:00")
    copy_as(CPU_FIXTURE, tmp_path / "cpu-2core" / "old-default.json", mode="default")
    fresh = copy_as(INTERLEAVED, tmp_path / "cpu-2core" / "fresh-quick.json", mode="quick")
    regimes = copy_as(REGIMES, tmp_path / "cpu-2core" / "regimes.json", mode="quick",
                      created="2020-01-01T00:00:00+00:00")
    # A newer quick GPU run does not displace the default one; an interleaved CPU run beats
    # an old-format default one; a run of workloads no chosen run measured joins them.
    assert newest_per_machine(tmp_path) == sorted([fresh, regimes]) + [gpu]


def test_cpu_only_report_leaves_out_the_gpu_chapters(tmp_path):
    document = json.loads(INTERLEAVED.read_text())
    document["machine_info"]["overlap"]["gpu_limits"] = None  # today's fingerprint without NVML
    source = tmp_path / "cpu.json"
    source.write_text(json.dumps(document))
    written = build.build([str(source)], tmp_path / "out", pdf=False)
    html = written["html"].read_text()
    assert "power limit" not in text_of(section_html(html, "environment"))
    assert 'id="gemm"' not in html and 'id="before-interleaving"' not in html
    assert 'id="regression"' not in html and "No baseline given" not in html
    assert "No NVLink result over several GPUs was loaded" in text_of(html)
    assert not (tmp_path / "out" / "report.pdf").exists()
    assert {p.name for p in written["traces"]} == {p.name
                                                   for p in (tmp_path / "out" / "traces").iterdir()}
