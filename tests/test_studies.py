"""The abstract's study lines (reports/sections/studies.py): each study's result with machine,
interval and run, or why it has none, read from the result files, the bench logs and the gate
trials.

Real data: the 2x H200 tensor-parallel run and the log of its pipeline run that hung (results/
h200x2/), the CPU pipeline and hybrid run (tests/data/pipeline-cpu-2core.json), the gate trials
(results/*/gate-trials.json). Made-up, and said so where it is made: GPU hybrid rows (the CPU
rows relabelled as a 1-GPU machine, with a fourth variant), a partial results file.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from impl import stats
from impl.rows.files import load_results
from impl.rows.merge import benchmark_rows, merge_rows
from reports import archive, loading
from reports.format import fmt, fmt_estimate, fmt_times
from reports.gate import trial_rates as regression
from reports.sections import studies
from reports.view import View
from tests.committed import RESULTS

ROOT = Path(__file__).parent.parent
HUNG_LOG = RESULTS / "h200x2" / "logs" / "20261123T0957-pipeline-bench-hung.log"
TP_RUN = RESULTS / "h200x2" / "20261123T100132Z.json"
CPU_STUDIES = Path(__file__).parent / "data" / "pipeline-cpu-2core.json"
VERDICT = {"no significant difference": "n.s."}


def loaded(folder: Path):
    """(rows, runs, archive) of every result file under ``folder``, as reports.build has them."""
    found = archive.scan([str(folder)])
    inputs = sorted(found.files, key=lambda r: (r.sort_time, r.path.name))
    runs = [loading.describe_run(i, r) for i, r in enumerate(inputs)]
    rows = merge_rows(row for run, r in zip(runs, inputs)
                               for row in benchmark_rows(r.label, run.index,
                                                                  r.benchmarks))
    return rows, runs, found


def gpu_hybrid_run(path: Path) -> Path:
    """Made up: the CPU run's fine-grained hybrid rows as if a 1-GPU machine had measured them,
    with a fourth variant, offload-overlap-dpu, whose rounds are offload-overlap's × 0.9."""
    document = json.loads(CPU_STUDIES.read_text())
    document["suite"].update(label="h200x1")
    document["machine_info"]["overlap"].update(machine_label="h200x1",
                                               gpu_names=["NVIDIA H200"], backend="nccl")
    kept = [b for b in document["benchmarks"] if b["extra_info"]["kind"] == "hybrid_step"
            and b["extra_info"]["study"] == "fine-grained"]
    for benchmark in kept:
        benchmark["extra_info"]["device"] = "NVIDIA H200"
    dpu = copy.deepcopy(next(b for b in kept if b["extra_info"]["variant"] == "offload-overlap"))
    dpu["name"] = dpu["fullname"] = "test_offload[offload-overlap-dpu]"
    dpu["extra_info"]["variant"] = "offload-overlap-dpu"
    dpu["extra_info"]["round_ms"] = [0.9 * t for t in dpu["extra_info"]["round_ms"]]
    document["benchmarks"] = [*kept, dpu]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    """results/-like folders: 2x H200 (the TP run and the hung pipeline log), the CPU."""
    root = tmp_path_factory.mktemp("results")
    (root / "h200x2" / "logs").mkdir(parents=True)
    shutil.copy(TP_RUN, root / "h200x2" / TP_RUN.name)
    shutil.copy(HUNG_LOG, root / "h200x2" / "logs" / HUNG_LOG.name)
    (root / "cpu-2core").mkdir()
    shutil.copy(CPU_STUDIES, root / "cpu-2core" / CPU_STUDIES.name)
    return root


def infos(path: Path, kind: str) -> list[dict]:
    return [b["extra_info"] for b in json.loads(path.read_text())["benchmarks"]
            if b["extra_info"].get("kind") == kind]


def test_tensor_parallel_line_gives_the_gpu_result_with_its_run(folders):
    rows, runs, found = loaded(folders)
    line = studies.study_line("tensor parallel", View.of(rows, runs, found))
    tp = [i for i in infos(TP_RUN, "tensor_parallel") if i["gemm_backend"] == "torch"
          and i["scaling"] == "strong" and i["world_size"] == 2]
    by_schedule = {i["schedule"]: i for i in tp}
    expected = [f"{s} {fmt_times(by_schedule[s]['estimates']['overlap_speedup'])} "
                f"({VERDICT.get(v := by_schedule[s]['verdicts']['overlap_speedup'], v)})"
                for s in ("overlapped", "fused")]
    assert line.startswith(f"h200x2 ({tp[0]['preset']}, torch GEMMs, strong scaling to 2 ranks)"
                           f", speed against sync: {expected[0]} and {expected[1]} "
                           f"(quick run of 2026-11-23, 09676a9)")
    assert "no GPU result" not in line


def test_pipeline_line_says_there_is_no_gpu_result_and_why_from_the_hung_log(folders):
    rows, runs, found = loaded(folders)
    line = studies.study_line("pipeline", View.of(rows, runs, found))
    assert line.startswith("no GPU result: on h200x2 the run stopped by signal 15 (timeout "
                           "250 s) during the pipeline benchmark mlp_8192x12_bf16-p2-m1-gpipe "
                           "(from its console log); CPU check of the method: cpu-2core "
                           "(mlp_tiny, p = 2, m = 8): bubble gpipe ")
    at = {i["variant"]: i for i in infos(CPU_STUDIES, "pipeline")
          if (i["stages"], i["microbatches"]) == (2, 8)}
    for variant in ("gpipe", "gpipe+recompute", "1f1b"):
        assert f"{variant} {fmt_estimate(at[variant]['bubble_estimate'])}" in line
    assert f"against (p − 1)/(m + p − 1) = {fmt(at['gpipe']['bubble_theory'])}" in line
    compared = next(i for i in infos(CPU_STUDIES, "pipeline_comparison")
                    if i["microbatches"] == 8)["comparisons"]
    for pair in compared:
        text = f"{pair['candidate']} {fmt_times(pair['speedup'])}"
        assert (text in line) is pair["reference"].startswith("torch-"), pair


def test_hybrid_line_without_gpu_rows_names_the_run_that_never_reached_it(folders):
    rows, runs, found = loaded(folders)
    line = studies.study_line("hybrid", View.of(rows, runs, found))
    assert line.startswith("no GPU result: on h200x2 the run stopped by signal 15 (timeout "
                           "250 s) during the pipeline benchmark mlp_8192x12_bf16-p2-m1-gpipe, "
                           "before any bench_hybrid benchmark started (")
    assert "CPU check of the method: cpu-2core (mlp_tiny, the CPU, 1 thread), speed against " \
           "device-adam: " in line


def test_hybrid_line_works_from_whatever_offload_variants_a_gpu_run_has(folders, tmp_path):
    shutil.copytree(folders, tmp_path / "results")
    made_up = gpu_hybrid_run(tmp_path / "results" / "h200x1" / "hybrid.json")
    rows, runs, found = loaded(tmp_path / "results")
    line = studies.study_line("hybrid", View.of(rows, runs, found))
    steps = {i["variant"]: i["round_ms"] for i in infos(made_up, "hybrid_step")}
    reference = steps.pop("device-adam")
    assert set(steps) == {"offload-after-backward", "offload-overlap", "offload-overlap-dpu"}
    assert line.startswith("h200x1 (mlp_tiny, NVIDIA H200), speed against device-adam: ")
    # Page 1 quotes the overlapped offloads; the one without overlap is in the chapter.
    assert "offload-after-backward" not in line
    for variant in ("offload-overlap", "offload-overlap-dpu"):
        round_ms = steps[variant]
        verdict = stats.verdict(stats.difference(round_ms, reference))
        assert (f"{variant} {fmt_times(stats.ratio(reference, round_ms).to_json())} "
                f"({VERDICT.get(verdict, verdict)})") in line
    assert "no GPU result" not in line and "CPU check" not in line
    # The hung 2x H200 run still counts as unfinished.
    assert "; unfinished: on h200x2 the run stopped by signal 15" in line


def test_a_partial_results_file_without_a_log_is_named(folders, tmp_path):
    """Made up: the TP run as if its pass had failed before writing a tensor-parallel row
    (one overlap row kept: the suite writes no results file without a benchmark)."""
    document = json.loads(TP_RUN.read_text())
    document["suite"].update(partial=True, failed_passes=["torchrun nvlink"])
    overlap_run = json.loads((TP_RUN.parent / "20261123T091135Z.json").read_text())
    document["benchmarks"] = overlap_run["benchmarks"][:1]
    path = tmp_path / "h200x2" / "20261123T120000Z.json"
    path.parent.mkdir()
    path.write_text(json.dumps(document))
    found = archive.Archive(files=[load_results(path)])
    assert studies.attempts(found, "bench_tp", ("test_tp",)) == [
        "on h200x2 the pass torchrun nvlink did not finish (a partial run, appendix on runs)"]
    assert studies.attempts(found, "bench_pipeline", ("test_pipeline",)) == []


def test_gate_line_gives_each_machines_current_trials_with_intervals():
    found = archive.Archive(trials=regression.load_trials(regression.find_trials(RESULTS))[0])
    line = studies.gate_line(found)
    for path in sorted(RESULTS.glob("*/gate-trials.json")):
        pairs = json.loads(path.read_text())["pairs"]
        unchanged = [p for p in pairs if p["kind"] == "unchanged"]
        slowed = [p for p in pairs if p["kind"] == "slowed"]
        alarms = sum(bool(p["regressed"]) for p in unchanged)
        detected = sum(bool(p["regressed"]) for p in slowed)
        assert (f"{path.parent.name}: false alarms "
                f"{regression.rate_text(alarms, len(unchanged))}, detections "
                f"{regression.rate_text(detected, len(slowed))}") in line
    assert "results/" not in line  # paths go to the regression chapter
    others = len(regression.find_trials(RESULTS)) - len(list(RESULTS.glob(
        "*/gate-trials.json")))
    assert line.endswith(f"; {others} more trials file(s) of earlier gate settings.")
    assert studies.gate_line(archive.Archive()).startswith("no gate trials")


def test_a_cpu_device_reads_in_words():
    from reports.format import device_words

    assert device_words("cpu (1 threads)") == "the CPU, 1 thread"  # rows written before
    assert device_words("cpu (1 thread)") == "the CPU, 1 thread"
    assert device_words("cpu (16 threads)") == "the CPU, 16 threads"
    assert device_words("NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB HBM3"
