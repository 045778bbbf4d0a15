"""The study records (impl/studies.py) against what they name: every benchmark module of suite/
has one record and every record's module exists, every row kind is one study's and its module
writes it, the presets and report sections exist, and the run's plan and budget count
benchmarks under the records' names."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from impl import presets
from impl.rows.kinds import ROW_KINDS
from impl.studies import GPU_RUNS, STUDIES, of_module
from reports.context import SECTIONS
from suite import budget, run
from suite.watchdog import study_of
from tests.test_rows import kinds_built_in

ROOT = Path(__file__).resolve().parent.parent


def test_every_bench_module_has_one_record_and_every_record_a_module():
    bench_modules = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "suite").glob("bench_*.py"))
    recorded = [s.module for s in STUDIES.values()]
    assert sorted(m for m in recorded if m.startswith("suite/")) == bench_modules
    assert len(recorded) == len(set(recorded)) == 11
    assert all((ROOT / module).is_file() for module in recorded)


def test_the_launcher_collects_the_records_modules_in_their_order():
    assert run.suite_files(0) == [
        "suite/bench_overlap.py", "suite/bench_allreduce.py", "suite/bench_synthetic.py",
        "suite/bench_interference.py", "suite/bench_autotune.py", "suite/bench_pipeline.py",
        "suite/bench_hybrid.py", "suite/bench_tp.py"]
    assert run.suite_files(1)[-2:] == ["suite/bench_gemm.py", "suite/bench_sampler.py"]
    assert {s.name for s in STUDIES.values() if s.runs == GPU_RUNS} == {"GEMM", "sampler"}


def test_every_row_kind_is_one_study_s_and_its_module_writes_it():
    kinds = [kind for s in STUDIES.values() for kind in s.kinds]
    assert sorted(kinds) == sorted(ROW_KINDS)  # each once
    for study in STUDIES.values():
        source = (ROOT / study.module).read_text(encoding="utf-8")
        assert kinds_built_in(source) == set(study.kinds), study.name


def test_presets_are_listed_under_one_study_each():
    listed = [name for s in STUDIES.values() for name in s.presets]
    assert len(listed) == len(set(listed)) == len(presets.PRESETS)
    assert presets.MODELS[0] == "seed_layer_1024x512" and presets.MODELS[-1] == "gpt_study_w384_b2"


def test_each_record_names_a_section_of_the_report():
    shown = {s.name: s.section for s in STUDIES.values() if s.section}
    assert set(shown.values()) <= set(SECTIONS)
    assert shown["hybrid"] == shown["pipeline"] == "pipeline"
    assert set(STUDIES) - set(shown) == {"autotune"}  # the cost model's rows, not the report's


def test_the_plan_counts_a_benchmark_under_its_study_or_its_marked_part():
    def item(module: str, marker: str | None = None):
        marked = SimpleNamespace(args=(marker,)) if marker else None
        return SimpleNamespace(module=SimpleNamespace(__name__=module),
                               get_closest_marker=lambda name: marked)

    assert study_of(item("suite.bench_tp")) == "tensor parallel"
    assert study_of(item("suite.bench_hybrid", "coarse hybrid")) == "coarse hybrid"
    assert study_of(item("hang_workload")) == "hang_workload"  # a test's own benchmark
    assert of_module("suite.bench_gemm") is STUDIES["GEMM"]
    for study in STUDIES.values():  # a marked part is one its record names
        source = (ROOT / study.module).read_text(encoding="utf-8")
        assert set(re.findall(r'mark\.study\("([^"]+)"\)', source)) == set(study.parts)


def test_the_fitted_rates_are_keyed_by_the_records_names():
    names = {name for s in STUDIES.values() for name in (s.name, *s.parts)}
    rates = json.loads(budget.RATES_FILE.read_text())["rate"]
    for machine in ("cpu", "gpu"):
        assert set(rates[machine]) - {"*"} <= names
    assert set(rates["gpu"]) - {"*"} == names - {"gate"}  # its trials run apart from the suite


def test_the_records_are_torch_free():
    code = "import sys, impl.studies; print('torch' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                           text=True, check=True)
    assert found.stdout.strip() == "False"
