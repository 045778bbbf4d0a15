"""The definitions of the step and all-reduce metrics, each field's name, unit and meaning once.

The step and all-reduce rows (impl/rows/kinds.py) declare their measured fields from these,
and the report's definitions appendix quotes them (reports/sections/methodology.py), so the
JSON and the report cannot disagree on names, units or meaning. The formulas that compute
them live in impl/metrics.py.
"""

from __future__ import annotations

from impl.rows.declare import Field

STEP_FIELDS: tuple[Field, ...] = (
    Field("step_ms", "ms", "Median time of one training step (forward, backward, gradient "
          "averaging, SGD update): CUDA events on GPU, perf_counter on CPU.", False,
          range="positive", label="step"),
    Field("samples_per_s", "1/s", "Samples per second over all ranks: "
          "world_size · batch / step time.", True, range="positive"),
    Field("compute_only_ms", "ms", "Median step time of the same workload on one rank with "
          "communication switched off.", False, range="positive", label="compute-only"),
    Field("comm_only_ms", "ms", "Median time to all-reduce the same gradient chunks, launched "
          "back to back, with no compute.", False, range="non_negative", label="comm-only"),
    Field("sequential_ms", "ms", "Median step time of the sequential strategy (whole backward, "
          "then the all-reduce of every chunk) at the same chunking.", False, range="positive",
          label="sequential"),
    Field("limit_ms", "ms", "limit = max(compute_only, comm_only): no overlap scheme can be "
          "faster.", False, range="positive", label="limit"),
    Field("bound_ms", "ms", "schedule bound: the step of a perfect overlap with zero "
          "interference. Each chunk's all-reduce (its comm-only duration) starts at "
          "max(the chunk's ready time in the compute-only run, the end of the previous "
          "all-reduce); the step ends at max(backward end, last all-reduce end) plus the "
          "update.", False),
    Field("bound_update_in_overlap_ms", "ms", "schedule bound with the update inside the "
          "overlap: each chunk's share of the update (update / K) follows its all-reduce, and "
          "the step ends at max(backward end, end of the last chunk's update). The bound of "
          "the strategies run with update_in_overlap; it can be below compute-only.", False),
    Field("overlap_efficiency", "", "overlap efficiency = (sequential − step) / "
          "(sequential − limit): 0 is no gain over sequential, 1 is perfect overlap.", True,
          label="overlap eff."),
    Field("bound_efficiency", "", "efficiency against the schedule bound = (sequential − "
          "step) / (sequential − bound): 1 is the best any overlap of this chunking can do.",
          True),
    Field("hidden_comm_fraction", "", "Communication time overlapped by compute / communication "
          "time, from the step's timeline (Holistic Trace Analysis's definition).", True,
          label="hidden comm."),
    Field("max_abs_err_vs_sequential", "", "Largest absolute weight difference to the "
          "sequential strategy after the correctness check's steps, over all ranks.", False,
          label="max\u00a0|Δw|"),
    Field("energy_per_step_j", "J", "NVML total-energy counter difference over the timed "
          "rounds, summed over the GPUs of the run, divided by the steps.", False),
    Field("samples_per_joule", "1/J", "world_size · batch / energy per step.", True),
)

ALLREDUCE_FIELDS: tuple[Field, ...] = (
    Field("size_bytes", "B", "Message size per rank.", None, range="positive"),
    Field("time_ms", "ms", "Median time of one all-reduce (CUDA events on GPU).", False,
          range="positive", label="time"),
    Field("algbw_gbps", "GB/s", "algbw = size / time (nccl-tests' definition, GB = 1e9 B).",
          True, range="positive", label="algbw"),
    Field("busbw_gbps", "GB/s", "busbw = algbw · 2(n−1)/n for all-reduce (nccl-tests' "
          "definition): comparable across rank counts.", True, label="busbw"),
    Field("wrong_elements", "", "Elements differing from the expected sum after the timed "
          "rounds (nccl-tests' #wrong).", False, label="#wrong"),
)
