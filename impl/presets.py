"""Every named workload of the suite, in one registry: the models that data parallelism, the
pipeline, the interference and autotune benchmarks, the hybrid and the cost model train or
read, the tensor-parallel MLP blocks, and the regression gate's own workload.

A preset is a named function returning a frozen dataclass (impl/workloads.py's configs,
impl/tensor_parallel/layers.py's TpMlpConfig): its name is the benchmark id, and
``asdict(config)`` goes into ``extra_info``, so a result is reproducible from its name alone.
A benchmark resolves a name once, where it reads its axes, and its cells hold the config.

    from impl.presets import preset
    preset("mlp_tiny")                     # MLPConfig(name='mlp_tiny', width=256, depth=8, ...)
    python -m impl.presets --markdown      # the table of docs/workloads.md
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, replace

import torch

from impl.studies import STUDIES
from impl.tensor_parallel.layers import TpMlpConfig
from impl.workloads import DTYPES, GPTConfig, MLPConfig, SeedLayerConfig, WorkloadConfig

# --- data parallelism (suite/bench_overlap.py and the studies that train its models) --------


def seed_layer_1024x512() -> SeedLayerConfig:
    return SeedLayerConfig("seed_layer_1024x512")


def seed_layer_1024x512_kernels() -> SeedLayerConfig:
    """The course study's phase 1 for real: its own naive CUDA kernels (GPU only)."""
    return SeedLayerConfig("seed_layer_1024x512_kernels", kernel="seed")


def mlp_tiny() -> MLPConfig:
    """CPU-sized: 8 layers of 256, batch 64; a 5-step test takes well under a second."""
    return MLPConfig("mlp_tiny", width=256, depth=8, batch=64)


def mlp_1024x8() -> MLPConfig:
    """The CPU reference of docs/ANCHORS.md: 8 × Linear(1024), batch 256, fp32."""
    return MLPConfig("mlp_1024x8", width=1024, depth=8, batch=256)


def mlp_8192x12_bf16() -> MLPConfig:
    """docs/ANCHORS.md's reference: 805M parameters, 1.5 GiB of bf16 gradients, batch 8192."""
    return MLPConfig("mlp_8192x12_bf16", width=8192, depth=12, batch=8192, dtype="bf16")


def mlp_8192x12_b2048_bf16() -> MLPConfig:
    """The reference MLP at a quarter of its batch: compute 18 ms, all-reduce 6 ms on 2 H200
    (docs/ANCHORS.md), between the compute-bound and the balanced regime."""
    return MLPConfig("mlp_8192x12_b2048_bf16", width=8192, depth=12, batch=2048, dtype="bf16")


def mlp_8192x12_b1024_bf16() -> MLPConfig:
    """The balanced regime over NVLink: compute 10.3 ms, all-reduce 6.1 ms on 2 H200."""
    return MLPConfig("mlp_8192x12_b1024_bf16", width=8192, depth=12, batch=1024, dtype="bf16")


GPU_SHARE_OF_COPY = 0.4  # mlp_16384_gpu40pct_bf16: weights and gradients, of the GPU's memory


def mlp_16384_gpu40pct_bf16() -> MLPConfig:
    """Sized to the GPU it runs on: as many Linear(16384, 16384) layers as make its weights and
    gradients (1 GiB per layer in bf16) 40% of the GPU's memory, batch 1024 (31 layers on an
    80 GB H100, 55 on an H200). One copy per variant would not fit a cell; the cell's shared
    weights and gradients do (impl/memory.py). Needs a CUDA GPU."""
    from impl import capabilities

    if reason := capabilities.missing_gpu(1):
        raise ValueError("workload 'mlp_16384_gpu40pct_bf16' sizes itself to 40% of the GPU's "
                         f"memory: it {reason}")
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    per_layer = 2 * 16384 * 16384 * DTYPES["bf16"].itemsize  # weights and gradients
    depth = max(1, int(GPU_SHARE_OF_COPY * total // per_layer))
    return MLPConfig("mlp_16384_gpu40pct_bf16", width=16384, depth=depth, batch=1024,
                     dtype="bf16")


def mlp_1024x8_b64() -> MLPConfig:
    """mlp_1024x8 at a quarter of the batch: compute about as long as the all-reduce on 2
    gloo ranks of the CPU machine (the course study's regime)."""
    return MLPConfig("mlp_1024x8_b64", width=1024, depth=8, batch=64)


def mlp_1024x8_b16() -> MLPConfig:
    """Communication-bound on gloo: compute a fraction of the all-reduce."""
    return MLPConfig("mlp_1024x8_b16", width=1024, depth=8, batch=16)


def gpt_tiny() -> GPTConfig:
    return GPTConfig("gpt_tiny", layers=2, heads=2, width=64, context=32, batch=4)


def gpt_small_bf16() -> GPTConfig:
    """GPT-2-small shape with the pipeline study's 10k vocabulary: about 93M parameters."""
    return GPTConfig("gpt_small_bf16", layers=12, heads=12, width=768, context=1024, batch=16,
                     dtype="bf16")



# --- CPU–GPU hybrid training (suite/bench_hybrid.py) -----------------------------------------


def mlp_4096x8_b8192() -> MLPConfig:
    """The offload comparison's GPU shape: 134M fp32 parameters. On one H200 its forward takes
    about 44 ms and its backward 81 ms at batch 8192; host Adam moves 3.8 GB (32 ms at the
    117 GB/s the fused update reached on that machine's cores, test_host_adam) and the copies
    0.5 GB each way (about 10 ms at PCIe's 55 GB/s): less than backward, so an overlap can
    hide all of it but the last layer's update."""
    return MLPConfig("mlp_4096x8_b8192", width=4096, depth=8, batch=8192)


def mlp_4096x24_b4096_bf16() -> MLPConfig:
    """The family's bf16 MLP: 403M parameters, ZeRO-Offload's mixed-precision mode. Fused GPU
    Adam's step is about 15 ms on one H100; host Adam alone on its fp32 master and state
    (11.3 GB at 28 bytes a parameter) about 85 ms: the host bounds every offload here."""
    return MLPConfig("mlp_4096x24_b4096_bf16", width=4096, depth=24, batch=4096, dtype="bf16")


def mlp_8192x16_b2048_bf16() -> MLPConfig:
    """The family's largest member (--suite-mode full): 1.07B bf16 parameters."""
    return MLPConfig("mlp_8192x16_b2048_bf16", width=8192, depth=16, batch=2048, dtype="bf16")


def gpt_medium_fp16() -> GPTConfig:
    """The family's fp16 decoder (--suite-mode full): GPT-2-medium's shape with the 10k
    vocabulary, 324M parameters in 293 tensors, 8 × 1024 tokens a step."""
    return GPTConfig("gpt_medium_fp16", layers=24, heads=16, width=1024, context=1024, batch=8,
                     dtype="fp16")


def gpt_1b_bf16() -> GPTConfig:
    """The family's decoder over 1B parameters (--suite-mode full): 24 layers of width 2048,
    1.25B bf16 parameters, 8 × 1024 tokens a step; host Adam over its fp32 master moves 35 GB
    a step."""
    return GPTConfig("gpt_1b_bf16", layers=24, heads=16, width=2048, context=1024, batch=8,
                     dtype="bf16")


def mlp_256x8_b1024() -> MLPConfig:
    """mlp_tiny at 16 times its batch: on two CPU workers of the 2-core machine its compute is
    several times the gradient exchange, the split side of the coarse-grained crossover."""
    return MLPConfig("mlp_256x8_b1024", width=256, depth=8, batch=1024)


def gpt_study_w384_b2() -> GPTConfig:
    """The GPT of the forward-pass study (impl/hybrid/gpt_forward.py): width 384, batch 2."""
    return GPTConfig("gpt_study_w384_b2", layers=10, heads=1, width=384, context=1000, batch=2,
                     vocab=10000, dropout=0.2)



# --- tensor parallelism (suite/bench_tp.py) ---------------------------------------------------


def tp_mlp_h8192_t8192_bf16() -> TpMlpConfig:
    """A transformer MLP block at hidden 8192 (4× expansion), 8192 tokens: GEMM-dominated."""
    return TpMlpConfig("tp_mlp_h8192_t8192_bf16", 8192, 8192, 32768, "bf16", pieces_per_peer=4)


def tp_mlp_h8192_f1024_t8192_bf16() -> TpMlpConfig:
    """The same tokens and hidden with a narrow ffn: as much communication, 1/32 of the GEMMs."""
    return TpMlpConfig("tp_mlp_h8192_f1024_t8192_bf16", 8192, 8192, 1024, "bf16",
                       pieces_per_peer=4)


def tp_mlp_ar_h8192_t8192_bf16() -> TpMlpConfig:
    """tp_mlp_h8192_t8192_bf16 with X replicated: all-reduces instead of gather and scatter."""
    return TpMlpConfig("tp_mlp_ar_h8192_t8192_bf16", 8192, 8192, 32768, "bf16",
                       sequence_parallel=False, pieces_per_peer=4)


def tp_mlp_h4096_t4096_fp32() -> TpMlpConfig:
    """fp32 on GPU: cuBLAS against this project's v3."""
    return TpMlpConfig("tp_mlp_h4096_t4096_fp32", 4096, 4096, 16384, "fp32", pieces_per_peer=2)


def tp_mlp_h256_t512_fp32() -> TpMlpConfig:
    """CPU size (gloo, one thread per rank): tens of milliseconds per step."""
    return TpMlpConfig("tp_mlp_h256_t512_fp32", 512, 256, 1024, pieces_per_peer=2)


def tp_mlp_h512_f128_t1024_fp32() -> TpMlpConfig:
    """CPU size with a narrow ffn: communication-dominated."""
    return TpMlpConfig("tp_mlp_h512_f128_t1024_fp32", 1024, 512, 128, pieces_per_peer=2)


def tp_mlp_ar_h256_t512_fp32() -> TpMlpConfig:
    """tp_mlp_h256_t512_fp32 with X replicated (all-reduces)."""
    return TpMlpConfig("tp_mlp_ar_h256_t512_fp32", 512, 256, 1024, sequence_parallel=False,
                       pieces_per_peer=2)


def tp_mlp_h32_t64_fp32() -> TpMlpConfig:
    """The tests' size."""
    return TpMlpConfig("tp_mlp_h32_t64_fp32", 64, 32, 128, pieces_per_peer=2)


# --- the regression gate's trials (reports/gate/trials.py, tests/gate_bench/) ---------------


def gate_mlp_512x8() -> MLPConfig:
    """The gate workload on the CPU: about 30 ms a step on one core of the 2-core machine."""
    return MLPConfig("gate_mlp_512x8", width=512, depth=8, batch=128)


def gate_mlp_4096x8_bf16() -> MLPConfig:
    """The gate workload on one GPU: large enough that a step's GEMMs fill the chip (6.4 ms a
    step on the H200), small enough that a block is mostly the start of Python and CUDA (about
    10 s a process there)."""
    return MLPConfig("gate_mlp_4096x8_bf16", width=4096, depth=8, batch=4096, dtype="bf16")


# --- the registry -----------------------------------------------------------------------------

Config = WorkloadConfig | TpMlpConfig
# Every preset by name, in the order the studies list them (impl/studies.py), which is the
# order of docs/workloads.md's table: a name no function here defines fails on import.
PRESETS: dict[str, Callable[[], Config]] = {
    name: globals()[name] for study in STUDIES.values() for name in study.presets}
# The models a data-parallel strategy trains (--workloads) and the cost model reads: the
# studies' models, not the TP blocks nor the gate's own workload (timed in its trials only).
MODELS: tuple[str, ...] = (*STUDIES["data parallel"].presets, *STUDIES["hybrid"].presets)

# Presets whose config depends on the machine that builds them: the table gives their rule.
SIZED_ON_THEIR_MACHINE = (mlp_16384_gpu40pct_bf16,)

EXTRA_COMPUTE_ENV = "OVERLAP_EXTRA_COMPUTE"


def preset(name: str) -> Config:
    """The preset called ``name``; a ValueError lists the valid names.

    OVERLAP_EXTRA_COMPUTE=f gives MLP presets ``extra_compute=f``: real extra work in every
    step, for testing the regression gate (reports/gate/trials.py) on a known slowdown. The
    config, and so every benchmark row's ``extra_info["config"]``, records it.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown workload {name!r}; choose one of {sorted(PRESETS)}")
    config = PRESETS[name]()
    extra = float(os.environ.get(EXTRA_COMPUTE_ENV) or 0)
    if extra and isinstance(config, MLPConfig):
        config = replace(config, extra_compute=extra)
    return config


def shape_text(name: str) -> str:
    """A preset's config as ``field=value`` pairs (not its name), or, where the config depends
    on the machine (SIZED_ON_THEIR_MACHINE), its docstring up to the first colon: the same
    text on every machine."""
    if PRESETS[name] in SIZED_ON_THEIR_MACHINE:
        return PRESETS[name].__doc__.split(":")[0]
    return ", ".join(f"{key}={value}" for key, value in asdict(PRESETS[name]()).items()
                     if key not in ("name", "kind"))


def markdown() -> str:
    """The table of every preset, by study: docs/workloads.md quotes it."""
    lines = ["| preset | study | config |", "|---|---|---|"]
    lines += [f"| `{name}` | {study.name} | {shape_text(name)} |"
              for study in STUDIES.values() for name in study.presets]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The suite's workload presets.")
    parser.add_argument("--markdown", action="store_true",
                        help="print the table docs/workloads.md quotes (default: the names)")
    args = parser.parse_args(argv)
    sys.stdout.write(markdown() if args.markdown else "\n".join(PRESETS) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
