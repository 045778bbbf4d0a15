"""Reading the benchmark logs kept beside the results (reports/runlogs.py), on the committed
logs of real device runs: the 2x H200 pipeline run that hung, the tensor-parallel run that
finished, a run whose overlap benchmarks failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports.runlogs import (
    is_bench_log,
    pass_targets,
    read_log,
    selection_of,
    selects,
    targets,
    unfinished,
)
from tests.committed import RESULTS

LOGS = RESULTS / "h200x2" / "logs"
HUNG = LOGS / "20261123T0957-pipeline-bench-hung.log"
TP = LOGS / "20261123T100132Z-tp-bench.log"
FAILED = LOGS / "20261123T091135Z-bench.log"
PIPELINE = ("bench_pipeline", ("test_pipeline", "test_pipeline_comparison"))
HYBRID = ("bench_hybrid", ("test_offload", "test_coarse"))
TENSOR_PARALLEL = ("bench_tp", ("test_tp",))


def log_of(path: Path):
    return read_log(path.read_text(), str(path))


def test_a_hung_run_names_the_benchmark_it_hung_in_and_the_timeout():
    log = log_of(HUNG)
    assert log.header.startswith("2x H200 (nvidia-h200-x2)")
    assert log.selection == "bench_pipeline or bench_hybrid"
    assert log.timeout_s == 250 and log.signal == 15
    assert log.wrote is None and log.summary is None and not log.finished
    assert log.last_test == "suite/bench_pipeline.py::test_pipeline[mlp_8192x12_bf16-p2-m1-gpipe]"
    assert log.ended == ("stopped by signal 15 (timeout 250 s) during the pipeline benchmark "
                         "mlp_8192x12_bf16-p2-m1-gpipe")
    # It meant to measure the pipeline and the hybrid, not tensor parallelism.
    assert targets(log, *PIPELINE) and targets(log, *HYBRID)
    assert not targets(log, *TENSOR_PARALLEL)
    assert unfinished(log, "bench_pipeline") == log.ended
    assert unfinished(log, "bench_hybrid") == (f"{log.ended}, before any bench_hybrid "
                                               "benchmark started")


def test_a_finished_run_wrote_its_file_and_left_nothing_unfinished():
    log = log_of(TP)
    assert log.finished and log.ended == "finished"
    assert log.wrote == "/root/out/results/h200x2/20261123T100132Z.json" and not log.partial
    assert log.summary.startswith("20 passed, 4 skipped, 116 deselected")
    assert targets(log, *TENSOR_PARALLEL) and not targets(log, *PIPELINE)
    assert unfinished(log, "bench_tp") is None


def test_failed_benchmarks_and_a_partial_file():
    log = log_of(FAILED)
    assert log.partial and not log.finished
    assert len(log.failed) == 13
    assert log.ended == ("13 benchmark(s) failed, first the overlap benchmark "
                         "mlp_8192x12_b1024_bf16-compute-only-K20-w2-nvlink")
    # The pipeline did not exist in that run's collection: it did not mean to measure it.
    assert "bench_pipeline" not in log.modules and not targets(log, *PIPELINE)


def test_only_logs_of_the_launcher_are_bench_logs():
    assert is_bench_log(HUNG.read_text())
    tests_log = LOGS / "20261123T0909-tests-engine-gpu.log"
    assert not is_bench_log(tests_log.read_text())


@pytest.mark.parametrize(("expression", "selected"), [
    (None, True), ("", True), ("bench_pipeline", True), ("BENCH_PIPELINE", True),
    ("bench_tp", False), ("not bench_gemm and not sampler", True),
    ("not bench_pipeline", False), ("bench_overlap or autotune", False),
    ("(bench_tp or pipeline) and not hybrid", True), ("not (pipeline or tp)", False),
    ("test_pipeline", True),
])
def test_k_expressions_as_pytest_reads_them(expression, selected):
    assert selects(expression, "bench_pipeline.py", "test_pipeline") is selected


@pytest.mark.parametrize(("expression", "message"), [
    ("bench_tp or", "-k 'bench_tp or': ends where a name was expected"),
    ("(bench_tp", "-k '(bench_tp': a '(' is never closed"),
    ("bench_tp )", "-k 'bench_tp )': unexpected ')'"),
])
def test_a_broken_k_expression_is_named(expression, message):
    with pytest.raises(ValueError) as error:
        selects(expression, "bench_tp.py")
    assert str(error.value) == message


def test_selection_and_collection_of_a_pass_command():
    command = ("python -m pytest suite/bench_overlap.py suite/bench_tp.py -p no:cacheprovider "
               "-k 'bench_tp and not fused' --results-json r.json")
    assert selection_of(command) == "bench_tp and not fused"
    assert selection_of("python -m pytest -k bench_tp -v") == "bench_tp"
    assert selection_of("python -m pytest suite/") is None
    assert pass_targets(command, *TENSOR_PARALLEL)
    assert not pass_targets(command, *PIPELINE)  # not collected by that pass
