"""Every kind of row the suite writes, declared once: what a row is, what makes two rows the
same measurement, and each field with its unit, definition and shape.

The benchmarks write through these (impl.rows.write_row); the report, the gate and the cost
model read through them (impl.rows.files). Adding a kind of row is one RowKind below, added
to ROW_KINDS.
"""

from __future__ import annotations

from dataclasses import replace

from impl.rows.declare import Declared, Field, RowKind, ranged_fields
from impl.rows.metric_fields import ALLREDUCE_FIELDS, STEP_FIELDS
from impl.rows.shapes import (
    ANY,
    BOOL,
    ESTIMATE,
    INT,
    LIST,
    MEASUREMENT,
    NUM,
    NVML,
    NVML_SERIES,
    OBJ,
    OPTIONAL_ESTIMATE,
    TEXT,
    TIMELINE,
    VERSUS,
    nullable,
)


def measured(fields: tuple[Field, ...], name: str, shape: object = "num?",
             is_required: bool = False) -> Field:
    """A field defined in impl/rows/metric_fields.py, with the shape it has in a row."""
    found = next(f for f in fields if f.name == name)
    return replace(found, shape=shape, required=is_required)


def _f(name: str, shape: object, unit: str = "", definition: str = "",
       higher_is_better: bool | None = None, **flags) -> Field:
    return Field(name, unit, definition, higher_is_better, shape=shape, **flags)


# --- fields several kinds share -------------------------------------------------------------

WORKLOAD = _f("workload", TEXT, "", "The workload preset (impl/presets.py) the row measured.",
              required=True)
WORLD_SIZE = _f("world_size", INT, "ranks", "Ranks that took part.", required=True, range="count")
PROFILE = _f("profile", TEXT, "", "Interconnect profile (nvlink, shm, socket, gloo-tcp).",
             required=True)
BACKEND = _f("backend", "str?", "", "torch.distributed backend (nccl or gloo).")
DEVICE = _f("device", "str?", "", "Device name as torch reports it, or cpu.")
DEVICE_NAME = _f("device_name", "str?", "", "GPU name as torch reports it (null on the CPU); "
                 "the single-GPU studies are chosen by it.")
CONFIG = _f("config", "obj?", "", "The workload's full configuration (asdict of its preset).")
CHUNKS = _f("chunks", INT, "", "K: gradient chunks each step all-reduces.", required=True,
            range="count")
REAL = _f("real", "bool?", "", "False only for the labelled sleep-based simulation.")
ROUND_PLAN = _f("rounds", "obj?", "", "The round plan: warm-up, rounds, steps per round.")
ORDER_SEED = _f("order_seed", "int?", "", "Seed of the per-round shuffled order of variants.")
MEMORY = _f("memory", "obj?", "", "The cell's memory plan (impl/memory.py), or null.")
STEP_MS = _f("step_ms", NUM, "ms", "Median time of one step.", False, required=True,
             range="positive")
STEP_ESTIMATE = _f("step_ms_estimate", nullable(ESTIMATE), "ms",
                   "Median step with its 95% bootstrap interval over rounds.")
ROUND_MS = _f("round_ms", ["num"], "ms", "Per-round step times, every round kept.")
SAMPLES_PER_S = _f("samples_per_s", NUM, "1/s", "Samples per second: batch / step time.", True,
                   required=True, range="positive")
TOLERANCE = _f("tolerance", "num?", "", "Largest error the correctness check accepts.")
FIELDS_LIST = _f("fields", [TEXT], "", "Names of the study's metric fields, in table order.")
OPTIONS = _f("options", "obj?", "", "The schedule's options (asdict).")
STAGE_TIMELINES = _f("stage_timelines", [nullable(TIMELINE)], "",
                     "One timeline of compute and communication intervals per stage.")
COMPARISONS = _f("comparisons", [OBJ], "", "Paired comparisons (impl.comparisons.versus) of "
                 "the variants measured in the same rounds.")
ORDERS = _f("orders", LIST, "", "The shuffled order of the variants in each round.")
VARIANTS = _f("variants", [TEXT], "", "The variants measured in the same rounds.")


STEP = RowKind(
    "step", "One strategy's step at one cell (workload, K, ranks, profile), with the cell's "
    "references and its figures copied from the cell's comparison row.",
    # Interleaved and older step rows of one setting are different measurements.
    ("workload", "chunks", "world_size", "profile", "sequential_reference", "strategy",
     "has intervals"),
    (WORKLOAD, CHUNKS, WORLD_SIZE, PROFILE, BACKEND, DEVICE, CONFIG, REAL, ROUND_PLAN,
     ORDER_SEED, MEMORY,
     _f("strategy", TEXT, "", "The strategy (impl/strategies).", required=True),
     _f("sequential_reference", "str?", "", "The sequential strategy of its references "
        "(sequential, or mpi-sequential for MPI)."),
     measured(STEP_FIELDS, "step_ms", NUM, True),
     measured(STEP_FIELDS, "samples_per_s", NUM, True),
     measured(STEP_FIELDS, "compute_only_ms", NUM, True),
     measured(STEP_FIELDS, "comm_only_ms", NUM, True),
     measured(STEP_FIELDS, "sequential_ms", NUM, True),
     measured(STEP_FIELDS, "limit_ms", NUM, True),
     measured(STEP_FIELDS, "bound_ms"),
     measured(STEP_FIELDS, "overlap_efficiency"),
     measured(STEP_FIELDS, "bound_efficiency"),
     measured(STEP_FIELDS, "hidden_comm_fraction"),
     measured(STEP_FIELDS, "max_abs_err_vs_sequential"),
     measured(STEP_FIELDS, "energy_per_step_j"),
     measured(STEP_FIELDS, "samples_per_joule"),
     _f("energy_left_out", "str?", "", "Why energy_per_step_j and samples_per_joule are null, "
        "in words a footnote quotes: no NVML energy counter in the run, or the counter did "
        "not advance in every segment of the variant (impl.metrics.energy_left_out); null "
        "where they hold a value, absent in rows written before it."),
     TOLERANCE,
     _f("step_ms_rounds", ["num"], "ms", "Per-round median step times."),
     _f("step_ms_all", ["num"], "ms", "Every timed step."),
     _f("samples_per_round", "int?", "", "Samples over all ranks in one round."),
     _f("intervals", {"*": OPTIONAL_ESTIMATE}, "", "95% intervals of the step and of its "
        "efficiencies (impl.stats.Estimate)."),
     _f("timeline", nullable(TIMELINE), "", "One step's compute and communication intervals."),
     _f("ddp_bucket_count", "int?", "", "Buckets DDP's reducer made (DDP rows only)."),
     _f("speedup_vs_sequential", "num?", "", "Sequential step / this step, paired by round.",
        True),
     _f("speedup_vs_ddp", "num?", "", "DDP's step / this step, paired by round.", True),
     _f("speedup_vs_ddp_25mb", "num?", "", "DDP (25 MB buckets) step / this step.", True),
     _f("verdict_vs_ddp", "str?", "", "faster, slower or no difference: whether the 95% "
        "interval of the difference excludes zero."),
     _f("verdict_vs_ddp_25mb", "str?", "", "As verdict_vs_ddp, against 25 MB buckets."),
     _f("nvml", nullable(NVML), "", "NVML means, energy and series over the timed rounds."),
     _f("nvml_series", nullable(NVML_SERIES), "", "NVML samples over time (older runs).",
        written=False),
     _f("wall_step_ms", "num?", "ms", "Wall-clock median step (older runs).", written=False,
        range="positive"),
     _f("wall_vs_event_rel_diff", "num?", "", "Wall clock against CUDA events, relative "
        "(older runs).", written=False)))


STRATEGY_FIGURES = {  # impl.comparisons.strategy_figures
    "step_ms": ESTIMATE, "vs_sequential": VERSUS, "vs_ddp?": VERSUS, "vs_ddp_25mb?": VERSUS,
    "hidden_comm_fraction?": OPTIONAL_ESTIMATE, "overlap_efficiency?": OPTIONAL_ESTIMATE,
    "bound_efficiency?": OPTIONAL_ESTIMATE,
    "lost_time": {"exposed_comm_ms": ESTIMATE, "compute_slowdown_ms": ESTIMATE,
                  "other_ms": ESTIMATE, "parts_sum_ms": ESTIMATE, "gap_ms": ESTIMATE}}

REFERENCES = {"compute_only_ms": ESTIMATE, "sequential_ms": ESTIMATE,
              "sequential_vs_compute_only": VERSUS, "comm_only_ms?": ESTIMATE,
              "limit_ms?": ESTIMATE, "bound_ms?": ESTIMATE, "compute_to_comm?": ESTIMATE,
              "bound_update_in_overlap_ms?": ESTIMATE}
# A comparison row's reference names as attributes: cell[CELL.references][REFERENCE.limit_ms].
REFERENCE = Declared.keys("comparison (references)", REFERENCES)
# The keys of a paired comparison (impl.comparisons.versus), of a measurement (every
# per-round time, suite.harness.Measurement) and of a step's timeline (impl.timeline.Timeline)
# as attributes, as REFERENCE names the references: versus[PAIRED.verdict],
# cell[CELL.measurement][MEASURED.step_ms], timeline[STEP_TIMELINE.intervals].
PAIRED = Declared.keys("paired comparison", VERSUS)
MEASURED = Declared.keys("measurement", MEASUREMENT)
STEP_TIMELINE = Declared.keys("timeline", TIMELINE)
# The keys of a row's NVML summary (impl.sampler.Samples.summary), as attributes:
# row[STEP.names.nvml][METERED.mean].
METERED = Declared.keys("nvml", NVML)


def is_older_step(row: dict) -> bool:
    """A step row written before interleaving existed: each strategy and its references were
    measured at other moments. bench_overlap.py gives every interleaved step row its
    ``intervals`` (the "has intervals" of STEP's identity); older rows have none."""
    return STEP.holds(row) and "intervals" not in row


COMPARISON = RowKind(
    "comparison", "One overlap cell: every strategy and reference interleaved in the same "
    "rounds, with paired figures and 95% intervals.",
    ("workload", "chunks", "world_size", "profile", "sequential_reference"),
    (WORKLOAD, CHUNKS, WORLD_SIZE, PROFILE, BACKEND, DEVICE, CONFIG, REAL, ROUND_PLAN,
     ORDER_SEED, MEMORY, VARIANTS,
     _f("sequential_reference", TEXT, "", "The sequential strategy of the references.",
        required=True),
     _f("compared", [TEXT], "", "The strategies compared against the references."),
     _f("references", REFERENCES, "ms", "compute-only, comm-only, sequential, the limit and "
        "the schedule bound, each with its interval.", required=True),
     _f("strategies", {"*": STRATEGY_FIGURES}, "", "Per strategy: its step, its speedups with "
        "verdicts, its efficiencies and where its time beyond compute-only went.",
        required=True),
     _f("bound_ms_rounds", ["num", "?"], "ms", "The schedule bound per round."),
     _f("checks", "obj?", "", "Per strategy: its largest weight error against sequential and "
        "the tolerance."),
     _f("ddp_bucket_counts", {"*": INT}, "", "Buckets DDP's reducer made, per DDP variant."),
     _f("measurement", MEASUREMENT, "ms", "Every per-round, per-step time of every variant.",
        required=True),
     _f("timelines", {"*": nullable(TIMELINE)}, "", "One step's timeline per variant."),
     _f("nvml", nullable(NVML), "", "NVML means, energy and series over the rounds.")))


# One kind of concurrent traffic's slowdown, its keys as attributes as PAIRED names a paired
# comparison's: row[INTERFERENCE.names.slowdown][kind][SLOWDOWN.ratio].
BESIDE = {"ratio": ESTIMATE, "verdict": TEXT}
SLOWDOWN = Declared.keys("interference slowdown", BESIDE)


INTERFERENCE = RowKind(
    "interference", "How much a GEMM slows down beside concurrent all-reduce traffic, "
    "interleaved with the GEMM alone.",
    ("workload", "world_size", "profile"),
    (WORKLOAD, WORLD_SIZE, PROFILE, BACKEND, DEVICE,
     _f("gemm", {"m": INT, "n": INT, "k": INT, "dtype": TEXT, "per_step": INT}, "",
        "The GEMM's shape, dtype and launches per step.", required=True),
     _f("traffic_bytes", "int?", "B", "Bytes each concurrent all-reduce moves."),
     _f("gemm_alone_ms", ESTIMATE, "ms", "Median step of the GEMMs alone.", required=True),
     _f("slowdown", {"*": BESIDE}, "", "Per kind of concurrent "
        "traffic: step beside it / step alone, its verdict and the repeats.", required=True),
     _f("measurement", MEASUREMENT, "ms", "Every per-round time of every variant."),
     _f("seconds", "num?", "s", "Wall time the measurement took.")))


ALLREDUCE = RowKind(
    "allreduce", "One all-reduce size at one world size and profile (nccl-tests' figures).",
    ("world_size", "profile", "size_bytes"),
    (WORLD_SIZE, PROFILE, BACKEND, DEVICE,
     _f("dtype", "str?", "", "Element type."),
     _f("ops_per_round", "int?", "", "All-reduces launched back to back per round."),
     *(measured(ALLREDUCE_FIELDS, f.name, NUM if f.name != "size_bytes" else INT, True)
       for f in ALLREDUCE_FIELDS)))


SYNTHETIC = RowKind(
    "synthetic", "The course study's sleep-based simulation, labelled and never mixed with "
    "real measurements.",
    ("chunks",),
    (CHUNKS, REAL,
     _f("strategy", "str?", "", "Always synthetic."),
     _f("scale", "num?", "", "Factor applied to the course study's simulated durations."),
     _f("step_ms", NUM, "ms", "Median simulated overlapped step.", False, required=True,
        range="positive"),
     _f("sequential_ms", NUM, "ms", "Median simulated sequential step.", False,
        required=True, range="positive"),
     _f("speedup_pct", NUM, "%", "(sequential − step) / sequential · 100.", True,
        required=True),
     _f("timeline", nullable(TIMELINE), "", "The overlapped step's intervals."),
     _f("predicted_ms", "num?", "ms", "The cost model's overlapped step from the sequential "
        "run's measured sleeps, median over rounds."),
     _f("prediction_error_pct", "num?", "%", "(predicted − measured step) / measured · 100.")))


PEAKS = (_f("peak_tflops", "num?", "TFLOP/s", "The GPU's peak for the dtype "
            "(impl/kernels/peaks.py), null for a GPU not in the table."),
         _f("peak_gbps", "num?", "GB/s", "The GPU's memory bandwidth from the peak table."))

GEMM = RowKind(
    "gemm", "One rung of the GEMM ladder (or cuBLAS) at one shape and dtype, on one GPU.",
    ("version", "preset", "dtype"),
    (DEVICE_NAME, *PEAKS,
     _f("version", TEXT, "", "The ladder's kernel (v1 … v6) or cublas.", required=True),
     _f("preset", TEXT, "", "The shape's preset name.", required=True),
     _f("m", INT, "", "Rows of A and C.", required=True),
     _f("n", INT, "", "Columns of B and C.", required=True),
     _f("k", INT, "", "Columns of A, rows of B.", required=True),
     _f("dtype", TEXT, "", "Operand type (fp32, bf16).", required=True),
     _f("time_ms", "num?", "ms", "Median time of one GEMM.", False, range="positive"),
     _f("tflops", NUM, "TFLOP/s", "2·m·n·k / time.", True, required=True, range="positive"),
     _f("cublas_ms", "num?", "ms", "cuBLAS's time at the same shape, same process.", False),
     _f("pct_of_cublas", NUM, "%", "cuBLAS time / this time · 100.", True, required=True),
     _f("arithmetic_intensity", NUM, "FLOP/B", "FLOPs / bytes of A, B and C.", required=True),
     _f("achieved_gbps", "num?", "GB/s", "Bytes of A, B and C / time.", True),
     _f("roofline_tflops", "num?", "TFLOP/s", "min(peak, intensity · bandwidth)."),
     _f("max_abs_err", "num?", "", "Largest absolute difference to the fp32 reference."),
     _f("max_abs_err_tolerance", "num?", "", "Accumulation and rounding bound on that error."),
     _f("reference_max_abs", "num?", "", "Largest absolute entry of the reference."),
     _f("launches_per_round", "int?", "", "GEMMs launched back to back per round."),
     _f("rounds", "int?", "", "Timed rounds."),
     _f("kernel_path", "str?", "", "The kernel that ran (v6 falls back to v5 where TMA cannot "
        "address the operands).")))


# Per variant of the sweep: cublas, v6, v7 (what ops.gemm runs), v7_bn128 and v7_bn256 (the
# tile widths the plan chooses between), v7_bn128x2 (width 128, two CTAs per SM) and v7_bn192
# (unsplit; both in full sweeps only), v7_nosplit where v7 splits K, v7_rows8 (no copy TMA
# does not need) and v7_lines (every operand off the lines copied onto them) where they differ
# from v7's copies, v7_stream_k / v7_no_stream_k where a partial last wave could run stream-K.
BY_VARIANT = {"*": NUM}

GEMM_SWEEP = RowKind(
    "gemm_sweep", "One shape of the GEMM sweep (impl/kernels/sweep.py): every variant checked "
    "against cuBLAS, then timed interleaved with it, beside the roofline bound.",
    ("preset", "dtype"),
    (DEVICE_NAME, *PEAKS,
     _f("preset", TEXT, "", "The shape's name in the sweep.", required=True),
     _f("family", TEXT, "", "The shape's family (impl/kernels/sweep.py FAMILIES): square, "
        "transformer, small_k, skinny_m, ragged, unaligned, held_out, held_out_2 or fresh.",
        required=True),
     _f("draw_seed", "int?", "", "The seed the fresh family was drawn with in this run "
        "(impl/kernels/sweep.py SEED_VARIABLE); none for the listed families."),
     _f("dtype", TEXT, "", "Operand type (bf16, fp16).", required=True),
     _f("m", INT, "", "Rows of A and C.", required=True),
     _f("n", INT, "", "Columns of B and C.", required=True),
     _f("k", INT, "", "Columns of A, rows of B.", required=True),
     _f("rounds", INT, "", "Timed rounds (interleaved, order shuffled per round)."),
     _f("launches_per_round", INT, "", "GEMMs per variant per round (one CUDA graph)."),
     _f("round_ms", {"*": [NUM]}, "ms", "Per variant, the time of one GEMM in each round."),
     _f("time_ms", BY_VARIANT, "ms", "Per variant, the median over rounds.", False,
        range="positive"),
     _f("tflops", BY_VARIANT, "TFLOP/s", "Per variant, 2·m·n·k / median time.", True,
        required=True, range="positive"),
     _f("vs_cublas", {"*": ESTIMATE}, "×", "Per variant, cuBLAS's time over the variant's "
        "(above 1: faster than cuBLAS), 95% bootstrap interval over rounds.", True,
        required=True),
     _f("max_abs_err", BY_VARIANT, "", "Per variant, max |C − C_cuBLAS| on fresh inputs."),
     _f("max_abs_err_tolerance", NUM, "", "Accumulation and rounding bound on that error."),
     _f("v7_block_n", INT, "", "The tile width v7's plan chose (impl/kernels/tiles.py)."),
     _f("v7_best_block_n", INT, "", "The faster of the two widths in this row's rounds."),
     _f("v7_splits", INT, "", "K split into this many parts (1: no split)."),
     _f("v7_stream_k_tiles", INT, "", "Tiles of the last partial wave shared out stream-K "
        "(0: none)."),
     _f("v7_row_multiple", INT, "", "Rows of the copied operands rounded to this multiple."),
     _f("v7_copies", [TEXT], "", "Operands v7 copies before the GEMM (a, b)."),
     _f("v6_path", "str?", "", "The kernel v6 ran (v5 where TMA cannot address the operands)."),
     _f("arithmetic_intensity", NUM, "FLOP/B", "FLOPs / bytes of A, B and C."),
     _f("sms", INT, "", "Streaming multiprocessors of the GPU."),
     _f("roofline_tflops", "num?", "TFLOP/s", "min(peak, intensity · bandwidth)."),
     _f("roofline_bound", "str?", "", "Which roof binds: compute or memory.")))


TENSOR_CORE_CEILING = RowKind(
    "tensor_core_ceiling", "The bf16 FLOP/s of one tensor-core instruction family, back-to-"
    "back MMAs without global memory, against cuBLAS at 8192³.",
    ("instruction", "dtype"),
    (DEVICE_NAME, PEAKS[0],
     _f("instruction", TEXT, "", "mma.sync or wgmma.", required=True),
     _f("dtype", TEXT, "", "Operand type (bf16).", required=True),
     _f("time_ms", "num?", "ms", "Median time of one launch.", False, range="positive"),
     _f("flop_per_launch", "int?", "FLOP", "FLOPs one launch performs."),
     _f("tflops", NUM, "TFLOP/s", "FLOPs per launch / time.", True, required=True,
        range="positive"),
     _f("cublas_8192_tflops", NUM, "TFLOP/s", "cuBLAS bf16 at 8192³, same process.",
        required=True),
     _f("pct_of_cublas_8192", NUM, "%", "tflops / cublas_8192_tflops · 100.", required=True),
     _f("sustained_tflops", "num?", "TFLOP/s", "The rate over sustained_s of back-to-back "
        "launches (the clock may drop under power)."),
     _f("sustained_s", "num?", "s", "Length of the sustained run."),
     _f("pct_of_peak", "num?", "%", "tflops / peak · 100."),
     _f("nvml", nullable(NVML), "", "SM clock and power sampled over the sustained run.")))


SEED_STEP = RowKind(
    "seed_step", "The course study's layer (y = xW, MSE, SGD) per implementation, on one GPU.",
    ("impl",),
    (DEVICE_NAME,
     _f("impl", TEXT, "", "The implementation (own kernels or torch).", required=True),
     _f("step_ms", NUM, "ms", "Median time of one training step.", False, required=True,
        range="positive"),
     _f("steps_per_round", "int?", "", "Steps per timed round."),
     _f("rounds", "int?", "", "Timed rounds."),
     _f("max_abs_err_vs_torch", "num?", "", "Largest weight difference to torch's step."),
     _f("max_update", "num?", "", "Largest weight change of torch's step."),
     _f("name", "str?", "", "The layer's preset name."),
     _f("rows", "int?", "", "Rows of x (the batch)."),
     _f("in_features", "int?", "", "Columns of x, rows of W."),
     _f("out_features", "int?", "", "Columns of W."),
     _f("lr", "num?", "", "SGD learning rate.")))


SAMPLER_OVERHEAD = RowKind(
    "sampler_overhead", "The NVML sampler's cost: one workload with the sampler on and off, "
    "interleaved.",
    ("workload",),
    (replace(WORKLOAD, required=False, shape="str?"),
     _f("period_ms", "num?", "ms", "Sampling period."),
     _f("step_ms_sampler_off", NUM, "ms", "Median step without the sampler.", False,
        required=True, range="positive"),
     _f("step_ms_sampler_on", NUM, "ms", "Median step with the sampler.", False, required=True,
        range="positive"),
     _f("overhead_pct", NUM, "%", "(on / off − 1) · 100, paired by round.", False,
        required=True),
     _f("overhead_ratio", ESTIMATE, "", "on / off with its 95% interval."),
     _f("verdict", "str?", "", "faster, slower or no difference."),
     _f("blocks", {"*": [NUM]}, "", "Per-block step times (older runs).", written=False),
     _f("measurement", MEASUREMENT, "ms", "Every per-round time of both variants.")))


AUTOTUNE = RowKind(
    "autotune", "The chunk count K the cost model recommends for the chunked strategy, "
    "against every candidate K measured interleaved.",
    ("name",),
    (WORKLOAD, WORLD_SIZE, PROFILE, BACKEND,
     _f("strategy", TEXT, "", "The strategy tuned (chunked)."),
     _f("fabric", {"alpha_ms": NUM, "beta_ms_per_byte": NUM, "bandwidth_gbps": "num?",
                   "comm_only_ms": {"*": NUM}, "total_bytes": INT}, "",
        "The fabric fitted from comm-only times per K: latency α, time per byte β."),
     _f("interference_rate", "num?", "", "Compute slowdown per unit of concurrent traffic."),
     _f("ready_profile", OBJ, "", "When each chunk's gradient becomes ready."),
     _f("predictions", [OBJ], "ms", "Per K: predicted step, measured step (interval) and "
        "relative error."),
     _f("candidates", [INT], "", "The K measured.", range="count"),
     _f("recommended_chunks", INT, "", "The K the model recommends.", range="count"),
     _f("best_measured_chunks", INT, "", "The K with the lowest measured median step.",
        range="count"),
     _f("recommended_vs_best", OPTIONAL_ESTIMATE, "", "Step at the recommended K / step at "
        "the best measured K, paired by round.", False),
     _f("within_2pct_of_best", BOOL, "", "Whether that ratio is at most 1.02."),
     _f("predicted_within_5pct", INT, "", "Candidates predicted within 5% of the measured "
        "step."),
     _f("measurement", MEASUREMENT, "ms", "Every per-round time of every candidate.")))


PIPELINE = RowKind(
    "pipeline", "One pipeline schedule (GPipe, 1F1B, recompute, or torch's) at one setting.",
    ("name",),
    (WORKLOAD, BACKEND, DEVICE, CONFIG, OPTIONS, STEP_ESTIMATE, ROUND_MS, TOLERANCE,
     STAGE_TIMELINES, FIELDS_LIST,
     # The study's figures (impl/pipeline/measure.py's PIPELINE_FIELDS, quoted by the report).
     Field("step_ms", "ms", "Median time of one pipeline step (every micro-batch's forward and "
           "backward, the messages between stages, the SGD update): per round the slowest "
           "stage's median step, then the median over rounds.", False, shape=NUM, required=True,
           range="positive"),
     Field("samples_per_s", "1/s", "Samples per second through the pipeline: batch / step "
           "time.", True, shape=NUM, required=True, range="positive"),
     Field("bubble_fraction", "", "bubble = (step − busy) / step, averaged over the stages: busy "
           "is the union of a stage's compute intervals in its timeline (forwards, backwards, "
           "recomputes, update), step the pipeline's step time, so a stage that finishes early "
           "idles until the slowest one is done.", False, shape="num?"),
     Field("bubble_theory", "", "(p − 1) / (m + p − 1) for p stages and m micro-batches: the idle "
           "share of GPipe and 1F1B when every stage's forward and backward take the same time "
           "and messages take none.", False, shape=NUM, required=True),
     Field("peak_memory_mib", "MiB", "Memory one step adds on each stage: "
           "torch.cuda.max_memory_allocated during a step run after the timed rounds, minus "
           "the memory allocated before it (activations kept for backward, gradients, message "
           "buffers); n/a on CPU.", False, shape=["num?"]),
     Field("max_abs_err_vs_single", "", "Largest absolute weight difference to the same training "
           "on one device (whole batch, same SGD step) after the check's steps, over all "
           "stages.", False, shape="num?"),
     _f("variant", TEXT, "", "The schedule variant.", required=True),
     _f("schedule", "str?", "", "The schedule it runs."),
     _f("recompute", "bool?", "", "Whether activations are recomputed in backward."),
     _f("stages", INT, "", "Pipeline stages.", required=True, range="count"),
     _f("microbatches", INT, "", "Micro-batches per step.", required=True, range="count"),
     _f("bubble_estimate", OPTIONAL_ESTIMATE, "", "The bubble with its 95% interval."),
     _f("bubble_per_stage", ["num", "?"], "", "Median bubble per stage.")))



PIPELINE_COMPARISON = RowKind(
    "pipeline_comparison", "The pipeline schedules of one setting, paired by round.",
    ("name",),
    (WORKLOAD, BACKEND, COMPARISONS, ORDERS,
     _f("stages", INT, "", "Pipeline stages.", required=True, range="count"),
     _f("microbatches", INT, "", "Micro-batches per step.", required=True, range="count"),
     _f("round_ms", {"*": [NUM]}, "ms", "Per-round step times per variant."),
     _f("seed", "int?", "", "Seed of the per-round order."),
     _f("skipped", {"*": TEXT}, "", "Variants that did not run, and why.")))


HYBRID_DTYPE = _f("dtype", "str?", "", "The model's weights and gradients on the device (fp32, "
                  "bf16, fp16); master and Adam state stay fp32.")
HYBRID_RATES = _f("rates", "obj?", "", "Rates measured in the same run for the bounds: host "
                  "Adam and the copies each way (GB/s), its threads and parameters.")

# The offload's one-GPU studies (the only-offload model, the crossover ladders).
ON_GPU = _f("device", TEXT, "", "The GPU it ran on.", required=True)
MODEL_PARAMETERS = _f("parameters", INT, "", "Parameters of the model.", required=True)

HYBRID_STEP = RowKind(
    "hybrid_step", "One variant of a CPU–GPU hybrid study (fine- or coarse-grained).",
    ("name",),
    (WORKLOAD, CONFIG, OPTIONS, STEP_ESTIMATE, ROUND_MS, SAMPLES_PER_S, TOLERANCE,
     STAGE_TIMELINES, FIELDS_LIST,
     # The study's figures (impl/hybrid's HYBRID_FIELDS, quoted by the report).
     Field("step_ms", "ms", "Median time of one training step (forward, backward, Adam update, "
           "and for the hybrids the copies and the host's work) over the timed rounds.", False,
           shape=NUM, required=True, range="positive"),
     Field("residual_imbalance", "", "imbalance = |t_gpu − t_cpu| / max(t_gpu, t_cpu) of the "
           "two workers' forward-and-backward times per step after the shares were balanced "
           "(median over rounds).", False, shape="num?"),
     Field("gradient_error", "", "Largest |g − g_ref| / max|g_ref| over the check's steps and "
           "tensors: the trainer's gradients against a backward at the reference's weights, "
           "IEEE fp32 for an fp32 model, rounded to the model's dtype for bf16/fp16 "
           "(impl/hybrid/trainer_check.py).", False, shape="num?"),
     Field("weight_error", "", "Largest |w − w_ref| over the check's steps: the trainer's "
           "weights against Adam (fp32) applied to the trainer's own gradients, update_delay "
           "steps late (impl/hybrid/trainer_check.py).", False, shape="num?"),
     Field("hidden_host_fraction", "", "1 − exposed / total host work of the offload's step: "
           "host work is the copies to and from the host and host Adam, exposed the part of it "
           "in the step that no GPU compute covers (impl/hybrid/measure.py).", False,
           shape=nullable(OPTIONAL_ESTIMATE)),
     _f("study", TEXT, "", "fine-grained or coarse-grained.", required=True),
     _f("variant", TEXT, "", "The variant.", required=True),
     _f("device", TEXT, "", "The device(s) it ran on.", required=True),
     _f("update_delay", "int?", "steps", "Steps by which the update lags its gradients."),
     _f("check", "obj?", "", "The correctness check against the reference."),
     _f("check_rows", "int?", "", "Batch rows of the correctness check."),
     _f("checks", [OBJ, "?"], "", "Per worker: the correctness checks (coarse)."),
     _f("max_abs_err_vs_reference", "num?", "", "Largest weight error (older runs).",
        written=False),
     _f("parameters", "int?", "", "Parameters of the model."),
     _f("host_adam_bytes", "int?", "B", "Bytes host Adam reads and writes per step."),
     *(_f(name, nullable(OPTIONAL_ESTIMATE), unit, definition) for name, unit, definition in (
         ("exposed_adam_ms", "ms", "Host Adam time not hidden."),
         ("exposed_copies_ms", "ms", "Copy time not hidden."),
         ("carried_ms", "ms", "Host work carried into the next step."),
         ("tail_ms", "ms", "Time after the GPU's backward until the step ends."),
         ("host_adam_ms", "ms", "Host Adam's time."),
         ("host_adam_gbps", "GB/s", "Host Adam's bytes / time."))),
     _f("shares", ["num", "?"], "", "Each worker's share of the batch (coarse)."),
     _f("balance", "obj?", "", "How the batch was split between the workers (coarse)."),
     _f("residual_imbalance_estimate", OPTIONAL_ESTIMATE, "", "It, with its interval."),
     _f("worker_compute_ms", [[NUM], "?"], "ms", "Each worker's compute per round, alone "
        "(coarse)."),
     HYBRID_DTYPE, HYBRID_RATES,
     _f("bound_ms", "num?", "ms", "The variant's physical bound from the measured rates "
        "(impl/hybrid/bounds.py): DPU max(GPU step, host Adam + copies); overlap the GPU step "
        "plus the tail that ordering exposes."),
     _f("bound_ratio", "num?", "×", "bound_ms / fused GPU Adam's step."),
     _f("goal_ratio", "num?", "×", "The variant's goal against fused GPU Adam's step."),
     _f("meets_goal", "bool?", "", "ratio ≤ max(goal, 1.10 × bound_ratio)."),
     _f("measure_phases_s", "obj?", "s", "Seconds of the member's checks, builds, timed "
        "rounds and rate measurement."),
     _f("step_calls", "obj?", "", "What the offload paid in its last timed step: buckets "
        "launched, gradient hooks, host Adam calls, copies to the host and to the device "
        "(impl/hybrid/offload.py, impl/hybrid/buckets.py).")))


HYBRID_COMPARISON = RowKind(
    "hybrid_comparison", "The variants of a hybrid study, paired by round.",
    ("name",),
    (WORKLOAD, DEVICE, COMPARISONS,
     _f("study", TEXT, "", "fine-grained or coarse-grained.", required=True),
     _f("measurement", "obj?", "ms", "Every per-round time of every variant (fine)."),
     _f("round_ms", {"*": [NUM]}, "ms", "Per-round step times per variant (coarse)."),
     _f("orders", LIST, "", "The order of the variants in each round (coarse)."),
     _f("residual_imbalance_per_round", ["num?"], "", "The coarse hybrid's imbalance per "
        "round."),
     HYBRID_DTYPE, HYBRID_RATES,
     _f("parameters", "int?", "", "Parameters of the model."),
     _f("bounds", "obj?", "ms", "Per offload variant, its physical bound (bound_ms).")))


OFFLOAD_ONLY = RowKind(
    "offload_only", "The model only the offload can train (impl/hybrid/largest.py): the "
    "smallest MLP of the capacity plan that GPU-only Adam cannot hold, one checked step and "
    "timed steps of the overlapped offload.",
    ("name",),
    (WORKLOAD, CONFIG, STEP_MS, STEP_ESTIMATE, ROUND_MS, HYBRID_DTYPE,
     ON_GPU, MODEL_PARAMETERS,
     _f("plan", OBJ, "", "The capacity plan (impl/hybrid/capacity.py): layers each trainer "
        "holds at this width and batch, and what bounds the offload."),
     _f("gpu_only_attempt", TEXT, "", "What one fused-GPU-Adam step of the model did: ran, or "
        "the GPU's out-of-memory message.", required=True),
     _f("gpu_only_attempts", [OBJ], "", "Every model size tried with fused GPU Adam from the "
        "plan's limit up: layers, parameters and what the step did."),
     _f("check", OBJ, "", "The first step's check (impl/hybrid/trainer_check.py, "
        "check_first_step)."),
     _f("model_tflops", NUM, "TFLOP/s", "6 · parameters · batch rows / step time.", True,
        required=True),
     _f("peak_tflops", NUM, "TFLOP/s", "cuBLAS's bf16 rate on an 8192³ matmul on the same GPU, "
        "measured in the same process.", True),
     _f("fraction_of_peak", NUM, "", "model_tflops / peak_tflops.", True)))

OFFLOAD_CROSSOVER = RowKind(
    "offload_crossover", "Where offload stops costing (impl/hybrid/crossover.py): one model's "
    "batch walked until the delayed-update offload comes within 1.10× of fused GPU Adam.",
    ("name",),
    (WORKLOAD, CONFIG, HYBRID_DTYPE, HYBRID_RATES,
     ON_GPU, MODEL_PARAMETERS,
     _f("tokens_per_row", INT, "", "Tokens per batch row: the decoder's sequence, 1 for an MLP.",
        required=True),
     _f("batches", [OBJ], "", "Per batch, in the order measured: its rows and tokens per step, "
        "fused GPU Adam's and the delayed update's median steps (ms), their ratio paired by "
        "round with its 95% interval, the delayed update's bound over fused GPU Adam's step, "
        "the check's largest errors; or why the batch could not run.", required=True),
     _f("within", NUM, "×", "The ratio to fused GPU Adam the crossover is judged at.",
        required=True),
     _f("crossover_tokens", "int?", "", "The fewest tokens per step measured with the ratio's "
        "95% interval inside ``within``; null where none was."),
     _f("outside_tokens", "int?", "", "The most tokens per step measured below the crossover "
        "with the ratio outside ``within``; null where none was."),
     _f("bound_crossover_tokens", "num?", "", "Where the bound max(GPU step, host work) comes "
        "within ``within``: the tokens at which a line through fused GPU Adam's measured steps "
        "reaches host work / within."),
     _f("host_work_ms", "num?", "ms", "Host Adam and both copies of a step at the run's rates "
        "(impl/hybrid/bounds.py)."),
     _f("verdict", TEXT, "", "The crossover in words.", required=True)))

HOST_ADAM = RowKind(
    "host_adam", "Adam on the host, one implementation and thread layout, against the "
    "memory bandwidth measured in the same rounds.",
    ("name",),
    (DEVICE, STEP_MS, STEP_ESTIMATE, ROUND_MS,
     _f("variant", TEXT, "", "Implementation and thread layout.", required=True),
     _f("threads", INT, "", "Threads it used.", required=True),
     _f("parameters", INT, "", "Parameters updated.", required=True),
     _f("adam_gbps", NUM, "GB/s", "Adam's bytes read and written / step time.", True,
        required=True),
     _f("bandwidth_round_ms", ["num"], "ms", "Per-round time of the bandwidth stream."),
     _f("bandwidth_gbps", "num?", "GB/s", "The stream's bytes / its median time.", True),
     _f("fraction_of_bandwidth", OPTIONAL_ESTIMATE, "", "Adam's rate / the stream's, paired "
        "by round.", True),
     _f("vs_alone", OPTIONAL_ESTIMATE, "", "Beside the rest of an offloaded step "
        "(impl/hybrid/contention.py): its rate / the same engine's alone on fp32 gradients in "
        "the same rounds, paired by round.", True),
     _f("copy_round_ms", ["num"], "ms", "Per-round copy times (older runs).", written=False),
     _f("copy_gbps", "num?", "GB/s", "Copy bandwidth (older runs).", written=False),
     _f("fraction_of_copy_bandwidth", OPTIONAL_ESTIMATE, "", "Adam's rate / the copy's "
        "(older runs).", written=False)))


DIGITS_CURVE = RowKind(
    "digits_curve", "Training curves of the digits study on one device.",
    ("name",),
    (CONFIG,
     _f("variant", TEXT, "", "Device or hybrid variant.", required=True),
     _f("device", TEXT, "", "The device(s) it ran on.", required=True),
     _f("threads", "int?", "", "CPU threads."),
     _f("thread_probe_ms", "obj?", "ms", "Per thread count tried: the median training step; "
        "the fastest count is the one used (CPU rows on a machine with a GPU)."),
     _f("epochs", INT, "", "Epochs trained.", required=True),
     _f("study_epochs", "int?", "", "Epochs of the original study."),
     _f("data", "str?", "", "Where the digits came from."),
     _f("train_rows", "int?", "", "Training examples."),
     _f("test_rows", "int?", "", "Test examples."),
     _f("curve", {"train_loss": [NUM], "test_loss": [NUM], "test_accuracy": [NUM],
                  "epoch_s": [NUM]}, "", "Per epoch: losses, accuracy and time."),
     _f("final_test_accuracy", NUM, "", "Test accuracy after the last epoch.", True,
        required=True),
     _f("balance", "obj?", "", "The hybrid's split of the batch."),
     _f("loss_curve_max_diff_vs_cpu", "num?", "", "Largest difference of the training loss "
        "curve to the CPU's, in units of its first-epoch loss."),
     _f("loss_curve_tolerance", "num?", "", "Largest such difference accepted.")))


GPT_FORWARD = RowKind(
    "gpt_forward", "The study's GPT forward pass on one device.",
    ("name",),
    (CONFIG, DEVICE_NAME,
     _f("device", TEXT, "", "cpu or cuda.", required=True),
     _f("threads", "int?", "", "CPU threads."),
     _f("iterations", "int?", "", "Forward passes timed."),
     _f("iteration_ms", [NUM], "ms", "Each forward pass."),
     _f("first_ms", NUM, "ms", "The first pass (with warm-up).", False, required=True),
     _f("steady_ms", "num?", "ms", "Median of the passes after the first.", False),
     _f("study", ANY, "", "The original study's figures for the device.")))


TP_WHERE = (DEVICE_NAME, *PEAKS,
            _f("device", "str?", "", "GPU name, or cpu."),
            _f("backend", "str?", "", "torch.distributed backend."),
            _f("profile", "str?", "", "Interconnect profile."),
            _f("launched_world", "int?", "ranks", "Ranks launched (a variant may use fewer)."),
            _f("kernel_path", "str?", "", "The GEMM kernel that ran."),
            CONFIG)

TENSOR_PARALLEL = RowKind(
    "tensor_parallel", "One tensor-parallel MLP variant (schedule, ranks, GEMM backend), "
    "interleaved with its cell's other variants.",
    ("name",),
    (*TP_WHERE,
     _f("preset", TEXT, "", "The layer's preset.", required=True),
     _f("gemm_backend", TEXT, "", "The GEMM implementation (cublas or a ladder rung).",
        required=True),
     _f("scaling", TEXT, "", "strong or weak scaling.", required=True),
     _f("schedule", TEXT, "", "sync, overlapped or fused.", required=True),
     _f("world_size", NUM, "ranks", "Ranks of the variant.", required=True, range="count"),
     _f("dtype", TEXT, "", "Operand type.", required=True),
     _f("form", "str?", "", "all-reduce or sequence-parallel."),
     _f("tokens", INT, "", "Tokens of the layer's input.", range="count"),
     _f("hidden", INT, "", "Hidden size.", range="count"),
     _f("ffn", INT, "", "Feed-forward size.", range="count"),
     _f("ffn_per_rank", "int?", "", "Feed-forward columns per rank."),
     _f("pieces_per_peer", "int?", "", "Pieces each peer's transfer is cut into."),
     # The study's figures (impl/tensor_parallel/metrics.py's TP_FIELDS, quoted by the report).
     Field("step_ms", "ms", "Median over rounds of each round's median time of one step, the "
           "block's forward and backward: CUDA events on GPU, perf_counter on CPU.",
           False, shape=NUM, required=True, range="positive"),
     Field("tflops", "TFLOP/s", "Layer FLOP / step time, the whole group's rate: 12·tokens·hidden·"
           "ffn (forward 2 GEMMs, backward 4, each 2·tokens·hidden·ffn) / step.",
           True, shape="num?", range="positive"),
     Field("tflops_per_gpu", "TFLOP/s", "tflops / world size.", True, shape="num?"),
     Field("comm_fraction", "", "Communication not hidden by compute / step time, from the step's "
           "timeline: (comm − comm ∩ compute) / step. 0 on one rank; not observable for the fused "
           "ops, whose communication runs inside the op.", False, shape="num?"),
     Field("hidden_comm_fraction", "", "Communication time overlapped by compute / communication "
           "time, from the step's timeline (Holistic Trace Analysis's definition).",
           True, shape="num?"),
     Field("overlap_speedup", "×", "sync step / this schedule's step, rounds paired: above 1 is "
           "faster than the sync schedule at the same world size and scaling.", True, shape="num?"),
     Field("speedup_vs_fused", "×", "fused step / this schedule's step, rounds paired: above 1 is "
           "faster than PyTorch's fused symmetric-memory ops.", True, shape="num?"),
     Field("scaling_efficiency", "", "Strong scaling (the same block on p ranks): T(1) / (p·T(p)); "
           "weak scaling (each rank keeps the 1-rank shape, ffn grows p-fold): T(1) / T(p); T(1) "
           "is the 1-rank block measured in the same rounds.", True, shape="num?"),
     Field("max_rel_err", "", "max |output − reference| / max |reference| over Y, dX, dW1, dW2 "
           "and the group's ranks, against the single-device block by torch autograd (fp64 on "
           "CPU, fp32 on GPU), checked before timing.", False, shape="num?"),
     _f("estimates", {"*": ESTIMATE}, "", "Each figure above with its 95% interval."),
     _f("verdicts", {"*": TEXT}, "", "Verdicts of the paired comparisons."),
     _f("gemm_ms", "obj?", "ms", "Median time per GEMM of the layer."),
     _f("gemms", [{"label": TEXT, "m": INT, "n": INT, "k": INT, "ms": "num?",
                   "tflops": "num?", "arithmetic_intensity": NUM}], "",
        "Each GEMM of the layer with its shape and rate."),
     _f("step_ms_rounds", ["num"], "ms", "Per-round median steps."),
     _f("rel_errors", "obj?", "", "Relative error per output."),
     TOLERANCE,
     _f("timeline", nullable(TIMELINE), "", "One step's intervals."),
     _f("measured_with", [TEXT], "", "The variants measured in the same rounds.")))


TENSOR_PARALLEL_COMPARISON = RowKind(
    "tensor_parallel_comparison", "One tensor-parallel cell: its variants interleaved.",
    ("name",),
    (*TP_WHERE, VARIANTS,
     _f("preset", "str?", "", "The layer's preset."),
     _f("gemm_backend", "str?", "", "The GEMM implementation."),
     _f("dtype", "str?", "", "Operand type."),
     _f("measurement", MEASUREMENT, "ms", "Every per-round time of every variant."),
     _f("checks", "obj?", "", "Per variant: its relative errors and tolerance.")))


ROW_KINDS: dict[str, RowKind] = {kind.name: kind for kind in (
    STEP, COMPARISON, INTERFERENCE, ALLREDUCE, SYNTHETIC, GEMM, GEMM_SWEEP, TENSOR_CORE_CEILING,
    SEED_STEP, SAMPLER_OVERHEAD, AUTOTUNE, TENSOR_PARALLEL, TENSOR_PARALLEL_COMPARISON, PIPELINE,
    PIPELINE_COMPARISON, HYBRID_STEP, HYBRID_COMPARISON, OFFLOAD_ONLY, OFFLOAD_CROSSOVER, HOST_ADAM,
    DIGITS_CURVE, GPT_FORWARD)}

# The fields whose numbers have a range, by name: impl/rows/files.py judges every number of a
# row, at any depth and of any kind, by the field its nearest key names.
RANGED_FIELDS: dict[str, Field] = ranged_fields(ROW_KINDS.values())
