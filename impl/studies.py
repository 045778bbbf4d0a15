"""Every study of the suite, declared once: its name, title, benchmark module, the kinds of row
it writes, its workload presets and the report section that shows it.

The launcher collects the modules (suite/run.py), the run's plan counts each benchmark under
its study's name (suite/watchdog.py, suite/budget.py), the preset registry lists the presets
by study (impl/presets.py) and the abstract gives its title (reports/sections/studies.py).
Torch-free, so every layer reads it. Adding a study is one Study below (docs/adding.md);
tests/test_study_records.py checks the records against the modules, kinds, presets and
sections they name.

    from impl.studies import STUDIES
    STUDIES["pipeline"].module             # 'suite/bench_pipeline.py'
"""

from __future__ import annotations

from dataclasses import dataclass

# Where a study's benchmarks run: in every run of python -m suite.run, in its runs with GPUs
# only, or in runs of their own (not in the suite's passes).
EVERY_RUN, GPU_RUNS, OWN_RUNS = "every run", "GPU runs", "own runs"


@dataclass(frozen=True)
class Study:
    """``name``: what the run's plan counts its benchmarks under; results files keep it (each
    benchmark's ``study`` in ``suite.passes[].timing``) and suite/budget_rates.json keys its
    rates by it. ``parts``: names of its benchmarks the plan counts apart (their ``study``
    marker), timed on their own. ``module``: the benchmark module, from the repository root.
    ``kinds``: the row kinds it writes (impl/rows/kinds.py). ``presets``: the workload presets
    listed under it (impl/presets.py), in docs/workloads.md's order. ``section``: the id of
    the report section that shows it (reports/context.py), None where the report does not."""

    name: str
    title: str
    module: str
    kinds: tuple[str, ...]
    presets: tuple[str, ...] = ()
    section: str | None = None
    runs: str = EVERY_RUN
    parts: tuple[str, ...] = ()

    @property
    def module_name(self) -> str:
        """The module as Python imports it: suite.bench_tp."""
        return self.module.removesuffix(".py").replace("/", ".")


# In the order the launcher collects their modules.
STUDIES: dict[str, Study] = {s.name: s for s in (
    Study("data parallel", "Data parallel (gradient all-reduce behind backward, against "
          "sequential)", "suite/bench_overlap.py", ("comparison", "step"),
          ("seed_layer_1024x512", "seed_layer_1024x512_kernels", "mlp_tiny", "mlp_1024x8",
           "mlp_1024x8_b64", "mlp_1024x8_b16", "mlp_8192x12_bf16", "mlp_8192x12_b2048_bf16",
           "mlp_8192x12_b1024_bf16", "mlp_16384_gpu40pct_bf16", "gpt_tiny", "gpt_small_bf16"),
          "overlap"),
    Study("all-reduce", "All-reduce bandwidth (algbw and busbw per size)",
          "suite/bench_allreduce.py", ("allreduce",), section="allreduce"),
    Study("synthetic", "The course study's sleep-based simulation", "suite/bench_synthetic.py",
          ("synthetic",), section="course-study"),
    Study("interference", "Interference (a GEMM alone and beside all-reduce traffic)",
          "suite/bench_interference.py", ("interference",), section="interference"),
    # Its rows are the cost model's, not the report's (reports/analysis.py, REPORTED_KINDS).
    Study("autotune", "Autotune (the cost model's K against the measured best)",
          "suite/bench_autotune.py", ("autotune",)),
    Study("pipeline", "Pipeline (bubble against (p − 1)/(m + p − 1), ours against the library)",
          "suite/bench_pipeline.py", ("pipeline", "pipeline_comparison"), section="pipeline"),
    Study("hybrid", "CPU–GPU hybrid (offload against GPU-only)", "suite/bench_hybrid.py",
          ("hybrid_step", "hybrid_comparison", "offload_only", "offload_crossover", "host_adam",
           "digits_curve", "gpt_forward"),
          ("mlp_4096x8_b8192", "mlp_4096x24_b4096_bf16", "mlp_8192x16_b2048_bf16",
           "gpt_medium_fp16", "gpt_1b_bf16", "mlp_256x8_b1024", "gpt_study_w384_b2"),
          "pipeline", parts=("coarse hybrid",)),
    Study("tensor parallel", "Tensor parallel (overlapped and fused against sync)",
          "suite/bench_tp.py", ("tensor_parallel", "tensor_parallel_comparison"),
          ("tp_mlp_h8192_t8192_bf16", "tp_mlp_h8192_f1024_t8192_bf16",
           "tp_mlp_ar_h8192_t8192_bf16", "tp_mlp_h4096_t4096_fp32", "tp_mlp_h256_t512_fp32",
           "tp_mlp_h512_f128_t1024_fp32", "tp_mlp_ar_h256_t512_fp32", "tp_mlp_h32_t64_fp32"),
          "tensor-parallel"),
    Study("GEMM", "GEMM ladder (% of cuBLAS)", "suite/bench_gemm.py",
          ("gemm", "gemm_sweep", "tensor_core_ceiling", "seed_step"), section="gemm",
          runs=GPU_RUNS),
    Study("sampler", "The NVML sampler's cost (steps with it off and on)",
          "suite/bench_sampler.py", ("sampler_overhead",), section="energy", runs=GPU_RUNS),
    # Its trials write files of their own (gate-trials.json), not rows (reports/gate/trials.py).
    Study("gate", "Regression gate (false alarms and detections, with --confirm)",
          "tests/gate_bench/gate_workload.py", (), ("gate_mlp_512x8", "gate_mlp_4096x8_bf16"),
          "regression", runs=OWN_RUNS),
)}


def modules(runs: str) -> tuple[str, ...]:
    """The benchmark modules of the studies that run in ``runs``, in collection order."""
    return tuple(s.module for s in STUDIES.values() if s.runs == runs)


def of_module(name: str) -> Study | None:
    """The study whose benchmark module Python imported as ``name`` (suite.bench_tp), or None."""
    return next((s for s in STUDIES.values() if s.module_name == name), None)
