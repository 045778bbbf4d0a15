"""The report's inputs: the result files named (or the newest of each machine), each checked
for the suite's fields this report reads, the runs they describe, the folders' archive (logs,
gate trials) and the baseline compared against.

reports/results.py validates pytest-benchmark's part of a file; ``check_rows`` checks
``extra_info`` per kind of row: present, of the right type, finite numbers. A problem is a
BuildError naming the file and the field (exit status 2).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from reports import archive
from reports.captions import Run
from reports.results import (
    ResultsError,
    ResultsFile,
    find_result_files,
    load_results,
    newest_per_machine,
)
from reports.sections.hangs import hangs_of
from reports.sections.regression import Baseline

# The fields each kind of row must carry for the report to use it.
REQUIRED_TEXT = {
    "step": ("strategy", "workload", "profile"),
    "comparison": ("workload", "profile", "sequential_reference"),
    "interference": ("workload", "profile"),
    "allreduce": ("profile",),
    "gemm": ("version", "preset", "dtype"),
    "seed_step": ("impl",),
    "tensor_core_ceiling": ("instruction", "dtype"),
    "pipeline": ("variant", "workload"),
    "pipeline_comparison": ("workload",),
    "hybrid_step": ("study", "variant", "workload", "device"),
    "hybrid_comparison": ("study", "workload"),
    "host_adam": ("variant",),
    "digits_curve": ("variant", "device"),
    "gpt_forward": ("device",),
    "tensor_parallel": ("preset", "gemm_backend", "scaling", "schedule", "dtype"),
}


# Nested objects a row of the kind must have (their shapes are in NESTED_SHAPES).
REQUIRED_NESTED = {
    "comparison": ("references", "strategies", "measurement"),
    "interference": ("gemm", "gemm_alone_ms", "slowdown"),
}


# Text fields a row may lack (older runs) or leave null, but that must be text when given:
# the single-GPU studies are selected by device_name (analysis.newest_run_per_gpu).
OPTIONAL_TEXT = {
    "gemm": ("device_name", "kernel_path"),
    "seed_step": ("device_name",),
    "tensor_core_ceiling": ("device_name",),
}


REQUIRED_NUMBERS = {
    "step": ("chunks", "world_size", "step_ms", "samples_per_s", "compute_only_ms",
             "comm_only_ms", "sequential_ms", "limit_ms"),
    "comparison": ("chunks", "world_size"),
    "interference": ("world_size",),
    "allreduce": ("world_size", "size_bytes", "time_ms", "algbw_gbps", "busbw_gbps",
                  "wrong_elements"),
    "synthetic": ("chunks", "step_ms", "sequential_ms", "speedup_pct"),
    "gemm": ("m", "n", "k", "tflops", "arithmetic_intensity", "pct_of_cublas"),
    "seed_step": ("step_ms",),
    "tensor_core_ceiling": ("tflops", "cublas_8192_tflops", "pct_of_cublas_8192"),
    "sampler_overhead": ("overhead_pct", "step_ms_sampler_on", "step_ms_sampler_off"),
    "pipeline": ("stages", "microbatches", "step_ms", "samples_per_s", "bubble_theory"),
    "pipeline_comparison": ("stages", "microbatches"),
    "hybrid_step": ("step_ms", "samples_per_s"),
    "host_adam": ("threads", "parameters", "step_ms", "adam_gbps"),
    "digits_curve": ("epochs", "final_test_accuracy"),
    "gpt_forward": ("first_ms",),
    "tensor_parallel": ("world_size", "step_ms"),
}


# Shapes of the nested extra_info values the report reads; checked once, here, so the
# analysis can trust them. "num" is a finite number, a trailing "?" allows null, a list holds
# one shape for every element (a second element "?" lets the list be null), a dict names its
# keys (extra keys are allowed; a "?" key set to True lets the whole dict be null).
NUM, INT, TEXT = "num", "int", "str"


INTERVAL = {"lane": TEXT, "label": TEXT, "chunk": "int?", "start_ms": NUM, "end_ms": NUM}


TIMELINE = {"intervals": [INTERVAL], "notes": [TEXT]}


NVML_SERIES = {"t_s": [NUM], "series": {"*": [[NUM]]}}


# impl.stats.Estimate as JSON, and impl.comparisons.versus
ESTIMATE = {"value": "num?", "low": "num?", "high": "num?", "rounds": INT}


OPTIONAL_ESTIMATE = {**ESTIMATE, "?": True}


VERSUS = {"speedup": ESTIMATE, "difference_ms": ESTIMATE, "verdict": TEXT}


STRATEGY_FIGURES = {  # impl.comparisons.strategy_figures
    "step_ms": ESTIMATE, "vs_sequential": VERSUS, "vs_ddp?": VERSUS, "vs_ddp_25mb?": VERSUS,
    "hidden_comm_fraction?": OPTIONAL_ESTIMATE, "overlap_efficiency?": OPTIONAL_ESTIMATE,
    "bound_efficiency?": OPTIONAL_ESTIMATE,
    "lost_time": {"exposed_comm_ms": ESTIMATE, "compute_slowdown_ms": ESTIMATE,
                  "other_ms": ESTIMATE, "parts_sum_ms": ESTIMATE, "gap_ms": ESTIMATE}}


NESTED_SHAPES = {
    "timeline": TIMELINE,
    "step_ms_all": [NUM],
    "nvml": {"mean?": {"*": ["num?"]}, "energy_j?": [NUM], "gpus?": [TEXT],
             "period_ms?": "num?", "energy_per_step_j?": "num?", "reason?": "str?",
             "series?": NVML_SERIES},
    "nvml_series": NVML_SERIES,
    "blocks": {"*": [NUM]},
    "curve": {"train_loss": [NUM], "test_loss": [NUM], "test_accuracy": [NUM],
              "epoch_s": [NUM]},
    "iteration_ms": [NUM],
    # tensor_parallel rows (suite/bench_tp.py): Estimate.to_json() per figure, verdicts, GEMMs
    "estimates": {"*": ESTIMATE},
    "verdicts": {"*": TEXT},
    "gemms": [{"label": TEXT, "m": INT, "n": INT, "k": INT, "ms": "num?", "tflops": "num?",
               "arithmetic_intensity": NUM}],
    # interleaved comparisons (suite/bench_overlap.py, bench_interference.py, bench_sampler.py)
    "intervals": {"*": OPTIONAL_ESTIMATE},
    "references": {"compute_only_ms": ESTIMATE, "sequential_ms": ESTIMATE,
                   "sequential_vs_compute_only": VERSUS, "comm_only_ms?": ESTIMATE,
                   "limit_ms?": ESTIMATE, "bound_ms?": ESTIMATE, "compute_to_comm?": ESTIMATE,
                   "bound_update_in_overlap_ms?": ESTIMATE},
    "strategies": {"*": STRATEGY_FIGURES},
    "compared": [TEXT],
    "timelines": {"*": TIMELINE},
    "measurement": {"names": [TEXT], "steps_per_round": INT, "step_ms": {"*": [[NUM]]},
                    "wall_s?": {"*": [NUM]}, "energy_j?": {"*": [NUM]}},
    "ddp_bucket_counts": {"*": INT},
    "gemm": {"m": INT, "n": INT, "k": INT, "dtype": TEXT, "per_step": INT},
    "gemm_alone_ms": ESTIMATE,
    "slowdown": {"*": {"ratio": ESTIMATE, "verdict": TEXT}},
    "overhead_ratio": ESTIMATE,
}


FINGERPRINT_SHAPE = {"gpu_names?": [TEXT], "gpu_uuids?": [TEXT], "machine_label?": "str?",
                     "driver?": "str?", "cuda?": "str?", "nccl?": "str?", "torch?": "str?",
                     "mpi?": "str?", "cpu_model?": "str?", "cpu_cores?": "int?",
                     "gpu_topology?": "str?", "nccl_env?": {"*": TEXT}, "backend?": "str?",
                     "world_size?": "int?", "profile?": "str?", "git_commit?": "str?",
                     "git_dirty?": "bool?",
                     "gpu_limits?": [{"uuid?": "str?", "power_limit_w?": "num?",
                                      "max_sm_clock_mhz?": "num?", "max_mem_clock_mhz?": "num?",
                                      "sm_clock_mhz?": "num?", "mem_clock_mhz?": "num?"}, "?"]}


def _shape_error(value: object, shape: object, where: str) -> str | None:
    """Why ``value`` does not have ``shape`` (see NESTED_SHAPES), or None when it does."""
    if isinstance(shape, str):
        if shape.endswith("?"):
            return None if value is None else _shape_error(value, shape[:-1], where)
        ok = {NUM: _is_number(value) and math.isfinite(value),
              INT: isinstance(value, int) and not isinstance(value, bool),
              TEXT: isinstance(value, str), "bool": isinstance(value, bool)}[shape]
        return None if ok else f"{where} = {value!r:.60}; expected {shape}"
    if isinstance(shape, list):
        if value is None and shape[1:] == ["?"]:
            return None
        if not isinstance(value, list):
            return f"{where} is {type(value).__name__}; expected a list"
        return next((e for i, item in enumerate(value)
                     if (e := _shape_error(item, shape[0], f"{where}[{i}]"))), None)
    if value is None and shape.get("?"):
        return None
    if not isinstance(value, dict):
        return f"{where} is {type(value).__name__}; expected an object"
    for key, inner in shape.items():
        if key == "?":
            continue
        if key == "*":
            error = next((e for k, item in value.items()
                          if (e := _shape_error(item, inner, f"{where}.{k}"))), None)
        elif key.endswith("?"):
            name = key[:-1]
            error = _shape_error(value[name], inner, f"{where}.{name}") if name in value else None
        elif key not in value:
            error = f"{where} has no {key!r}"
        else:
            error = _shape_error(value[key], inner, f"{where}.{key}")
        if error:
            return error
    return None


class BuildError(Exception):
    """A problem the user can fix; printed as one line without a traceback."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_rows(results: ResultsFile) -> None:
    """The suite's fields this report reads: present, of the right type, finite numbers.

    reports/results.py validates pytest-benchmark's part; this checks extra_info per kind and
    the environment fingerprint the report prints.
    """
    if error := _shape_error(results.machine_info.get("overlap") or {}, FINGERPRINT_SHAPE,
                             "machine_info.overlap"):
        raise ResultsError(results.path, error)
    for benchmark in results.benchmarks:
        info, name = benchmark["extra_info"], benchmark["fullname"]
        kind = info.get("kind")
        for key in REQUIRED_TEXT.get(kind, ()):
            if not isinstance(info.get(key), str):
                raise ResultsError(results.path, f"benchmark {name!r} ({kind}) has "
                                                 f"extra_info.{key} = {info.get(key)!r}; "
                                                 "expected a string")
        for key in OPTIONAL_TEXT.get(kind, ()):
            if info.get(key) is not None and not isinstance(info[key], str):
                raise ResultsError(results.path, f"benchmark {name!r} ({kind}) has "
                                                 f"extra_info.{key} = {info[key]!r:.60}; "
                                                 "expected a string or null")
        for key in REQUIRED_NESTED.get(kind, ()):
            if not isinstance(info.get(key), dict):
                raise ResultsError(results.path, f"benchmark {name!r} ({kind}) has "
                                                 f"extra_info.{key} = {info.get(key)!r:.60}; "
                                                 "expected an object")
        for key in REQUIRED_NUMBERS.get(kind, ()):
            if not _is_number(info.get(key)):
                raise ResultsError(results.path, f"benchmark {name!r} ({kind}) has "
                                                 f"extra_info.{key} = {info.get(key)!r}; "
                                                 "expected a number")
        for key, shape in NESTED_SHAPES.items():
            if info.get(key) is not None and (error := _shape_error(info[key], shape,
                                                                     f"extra_info.{key}")):
                raise ResultsError(results.path, f"benchmark {name!r}: {error}")
        for key, value in info.items():  # NaN or infinity anywhere would poison a table
            if _is_number(value) and not math.isfinite(value):
                raise ResultsError(results.path, f"benchmark {name!r} has extra_info.{key} = "
                                                 f"{value!r}; expected a finite number")


def load_inputs(paths: Sequence[str]) -> list[ResultsFile]:
    """Validated result files, oldest first (so newer rows win when merged)."""
    found = find_result_files(paths) if paths else newest_per_machine("results")
    if not found:
        raise BuildError(f"no result files in {' '.join(paths) if paths else 'results/'}")
    loaded = [load_results(path) for path in found]
    for results in loaded:
        check_rows(results)
    return sorted(loaded, key=lambda r: (r.sort_time, r.path.name))


def load_archive(paths: Sequence[str], inputs: Sequence[ResultsFile]) -> archive.Archive:
    """Every result file the paths name (default: all of results/), validated like the
    inputs, with the logs and gate trials of their folders (reports/archive.py)."""
    found = archive.scan(paths, inputs)
    for results in found.files:
        check_rows(results)
    return found


def describe_run(index: int, results: ResultsFile) -> Run:
    suite = results.data.get("suite") or {}
    command = suite.get("command") or "pytest (no suite record)"
    launcher = suite.get("launcher_command") or command
    created = results.created.isoformat(timespec="seconds") if results.created else None
    passes = suite.get("passes") if isinstance(suite.get("passes"), list) else []
    kinds = Counter(str(b["extra_info"].get("kind")) for b in results.benchmarks)
    return Run(index, results.label, str(results.path), command, launcher, suite.get("mode"),
               results.partial, created, results.fingerprint,
               tuple(suite.get("failed_passes") or ()), suite.get("note"),
               tuple(p for p in passes if isinstance(p, dict)), tuple(sorted(kinds.items())),
               tuple(hangs_of(suite)))


def load_baseline(path: str, inputs: Sequence[ResultsFile]) -> Baseline:
    """The baseline file and the candidate benchmarks comparable with it, chosen by the gate's
    own rules (same machine label, then reports/gate/loading.py's comparable_files: same GPUs,
    driver, world size, backend and profile), so the report's table and the gate cannot
    disagree."""
    from reports.gate.loading import GateError, comparable_files, merge_benchmarks

    baseline = load_results(path)
    check_rows(baseline)
    candidates = [r for r in inputs if r.label == baseline.label]
    if not candidates:
        loaded = ", ".join(sorted({r.label for r in inputs}))
        raise BuildError(f"{path}: baseline of machine {baseline.label!r}, but no loaded result "
                         f"file is of that machine (loaded: {loaded})")
    try:
        _, kept, notes = comparable_files([baseline], candidates)
    except GateError as error:
        raise BuildError(f"--baseline {path}: {error}") from None
    return Baseline(str(path), baseline.label, merge_benchmarks([baseline]),
                    merge_benchmarks(kept), notes)
