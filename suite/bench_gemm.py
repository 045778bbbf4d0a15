"""GEMM ladder (impl/kernels, v1-v7) against cuBLAS, its tensor-core ceilings, the seed step,
and the sweep of shape families (docs/gemm.md).

Single-GPU work. On one GPU, from the repository root:

    python -m pytest suite/bench_gemm.py -q --benchmark-json=gemm.json
    python -m pytest suite/bench_gemm.py -q -k sweep --suite-mode full   # the sweep alone

`python -m suite.run` runs it under torchrun with the rest of the suite: rank 0 measures
its rows alone, as on one GPU (marker ``one_device``, conftest.py), while the other ranks
wait. The first row builds the kernels (24 s on 2 H200, 2026-11-27); in the default mode the
ladder's two shapes and the sweep's sample took 38 s in all on one H200 with the kernels
already built (results/h200x1); --full runs every ladder shape and the sweep's 156 rows.
Ladder rows time `launches` back-to-back launches between two CUDA events per round (fixed
rounds after warmup rounds, never calibrated) and report the median per launch. Sweep rows
run cuBLAS, v6 and v7's variants interleaved in shuffled order per round, each round one CUDA graph
per variant, and keep every round and the ratio's 95% interval. Every row carries its
correctness check (max |C - C_cuBLAS|) beside the timing, and its cuBLAS baseline
measured in the same process for the same shape and dtype.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass

import pytest
import torch

from impl import stats
from impl.capabilities import missing_gpu, missing_hopper, missing_nvcc
from impl.kernels import load, ops, peaks, sweep, tiles
from impl.rows.kinds import GEMM, GEMM_SWEEP, SEED_STEP, TENSOR_CORE_CEILING
from impl.rows.write import write_row
from impl.sampler import NvmlSampler
from suite.harness import Rounds, Variant, measure_interleaved, record_round_times

SKIP = missing_gpu() or missing_nvcc()  # the kernels are built with nvcc on first use
pytestmark = [pytest.mark.gpu, pytest.mark.one_device,
              pytest.mark.skipif(SKIP is not None, reason=str(SKIP))]

ROUNDS = 5
# The fields read or set after a row is built (the peaks, where the GPU is in the peak table;
# the error check), named as each kind of row declares them.
GEMM_ROW, CEILING_ROW = GEMM.names, TENSOR_CORE_CEILING.names
SWEEP_ROW = GEMM_SWEEP.names
WARMUP_ROUNDS = 1
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
VERSIONS_BY_DTYPE = {
    "fp32": ("cublas", "v1", "v1c", "v2", "v3"),
    "bf16": ("cublas", "v4", "v5", "v6"),
}


def expected_seconds(item, mode: str) -> float:
    """For the deadline (suite/deadline.py): the kernel build on first use takes about a minute
    and may fall to whichever row runs first; a row itself takes seconds."""
    return 60.0


@dataclass(frozen=True)
class GemmShape:
    """A GEMM C[m×n] = A[m×k]·B[k×n]; ``launches`` per timed round keep rounds ≳ 1 ms."""

    name: str
    m: int
    n: int
    k: int
    launches: int


# The ladder's shapes in the default mode: the course study's layer and the reference square
# that ANCHORS.md quotes (bf16 8192^3); the others in --full (the sweep times them against
# cuBLAS in every mode).
DEFAULT_LADDER = ("seed_layer_1024x512x512", "square_8192")


def gemm_shapes(mode: str = "full") -> tuple[GemmShape, ...]:
    every = (
        GemmShape("seed_layer_1024x512x512", 1024, 512, 512, launches=50),
        GemmShape("square_4096", 4096, 4096, 4096, launches=5),
        GemmShape("square_8192", 8192, 8192, 8192, launches=2),
        # Off every tile size (3000 = 23.4 x 128, 5000 = 19.5 x 256), so the ragged-edge
        # paths are timed too.
        GemmShape("ragged_3000x5000x2000", 3000, 5000, 2000, launches=5),
    )
    return every if mode == "full" else tuple(s for s in every if s.name in DEFAULT_LADDER)


def skip_reason(version: str, shape: GemmShape) -> str | None:
    if version in ("v1", "v1c") and shape.m * shape.n * shape.k >= 8192**3:
        return (f"{version} (naive) at 8192^3 runs a second or more per launch; skipped to "
                "keep the module within ~3 minutes")
    if version in ops.HOPPER_VERSIONS:
        return missing_hopper()
    return None


def gemm_cases(mode: str) -> list:
    cases = []
    for shape in gemm_shapes(mode):
        for dtype_name, versions in VERSIONS_BY_DTYPE.items():
            for version in versions:
                reason = skip_reason(version, shape)
                marks = [pytest.mark.skip(reason=reason)] if reason else []
                cases.append(pytest.param(shape, dtype_name, version, marks=marks,
                                          id=f"{version}-{shape.name}-{dtype_name}"))
    return cases


def time_launches_ms(fn: Callable[[], object], launches: int) -> float:
    """CUDA-event time of ``launches`` back-to-back calls, per call, in ms.

    The synchronize is the round's CPU-GPU sync point: pytest-benchmark's wall-clock
    time of the round then covers the GPU work, not just the queueing.
    """
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(launches):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / launches


def timed_rounds_ms(benchmark, fn: Callable[[], object], launches: int) -> float:
    """Fixed rounds through pytest-benchmark; returns the median CUDA-event ms per call."""
    samples: list[float] = []
    benchmark.pedantic(lambda: samples.append(time_launches_ms(fn, launches)),
                       rounds=ROUNDS, warmup_rounds=WARMUP_ROUNDS, iterations=1)
    return statistics.median(samples[-ROUNDS:])  # warmup rounds come first


def untimed_rounds_ms(fn: Callable[[], object], launches: int) -> float:
    """The same measurement outside pytest-benchmark (for baselines)."""
    samples = [time_launches_ms(fn, launches) for _ in range(WARMUP_ROUNDS + ROUNDS)]
    return statistics.median(samples[WARMUP_ROUNDS:])


@pytest.fixture(scope="module", autouse=True)
def built_kernels(dist_context):
    """Build before any timing, so the JIT compile never lands inside a measurement.

    dist_context first: it makes this rank's GPU the current device ("cuda" below), and
    with it every row ends in the all-ranks barrier of the root conftest. Rank 0 alone measures
    this module (``one_device``): the other ranks build nothing.
    """
    return load() if dist_context.rank == 0 else None


@pytest.fixture(scope="module")
def device_peaks() -> peaks.DevicePeaks | None:
    """None on a GPU without a peaks row: the timings still count, the roofline is left out."""
    try:
        return peaks.lookup(torch.cuda.get_device_name())
    except peaks.UnknownDeviceError:
        return None


@functools.lru_cache(maxsize=1)  # cases run shape by shape, dtype by dtype
def baseline(shape: GemmShape, dtype_name: str) -> tuple[torch.Tensor, torch.Tensor,
                                                         torch.Tensor, float]:
    """Inputs, cuBLAS output and cuBLAS ms per launch for one shape and dtype."""
    generator = torch.Generator(device="cuda").manual_seed(0)
    dtype = DTYPES[dtype_name]
    a = torch.randn(shape.m, shape.k, device="cuda", generator=generator).to(dtype)
    b = torch.randn(shape.k, shape.n, device="cuda", generator=generator).to(dtype)
    reference = torch.matmul(a, b)
    cublas_ms = untimed_rounds_ms(lambda: torch.matmul(a, b), shape.launches)
    return a, b, reference, cublas_ms


def max_abs_err_tolerance(dtype_name: str, k: int, reference_max_abs: float) -> float:
    """How far a correct kernel may be from cuBLAS, for N(0,1) inputs.

    Both accumulate k products in fp32; random rounding errors stay below
    9·sqrt(k)·2^-24·Σ|a||b| (Higham & Mary 2019) with Σ|a||b| < k here. bf16 outputs are
    also rounded once, so two correct results may differ by one ulp of the largest entry,
    2^-7·max|C| (fp16: 2^-10·max|C|). A missed k-tile is off by about sqrt(tile depth)
    standard normals (max over the matrix ≳ 10), far above either term at these sizes.
    """
    accumulation = 9 * k**0.5 * 2.0**-24 * k
    return accumulation + OUTPUT_ULP.get(dtype_name, 0.0) * reference_max_abs


#: One unit in the last place of a 16-bit output, relative to the largest |C| (fp32 outputs
#: are not rounded again).
OUTPUT_ULP = {"bf16": 2.0**-7, "fp16": 2.0**-10}


def test_gemm(benchmark, device_peaks, shape: GemmShape, dtype_name: str, version: str) -> None:
    assert not torch.backends.cuda.matmul.allow_tf32, (
        "fp32 rows compare against true-fp32 cuBLAS; TF32 was switched on"
    )
    a, b, reference, cublas_ms = baseline(shape, dtype_name)
    benchmark.group = f"gemm-{shape.m}x{shape.n}x{shape.k}-{dtype_name}"
    launch = ops.gemm_launcher(a, b, version)  # argument checks stay out of the timed loop
    time_ms = timed_rounds_ms(benchmark, launch, shape.launches)

    out = launch()
    reference_max_abs = float(reference.float().abs().max())
    element_bytes = a.element_size()
    flops = ops.gemm_flops(shape.m, shape.n, shape.k)
    intensity = ops.arithmetic_intensity(shape.m, shape.n, shape.k, element_bytes)
    seconds = time_ms / 1e3
    info = GEMM.row(
        version=version,
        preset=shape.name,
        m=shape.m, n=shape.n, k=shape.k,
        dtype=dtype_name,
        time_ms=time_ms,
        tflops=flops / seconds / 1e12,
        cublas_ms=cublas_ms,
        pct_of_cublas=100.0 * cublas_ms / time_ms,
        arithmetic_intensity=intensity,
        achieved_gbps=ops.gemm_bytes(shape.m, shape.n, shape.k, element_bytes) / seconds / 1e9,
        device_name=torch.cuda.get_device_name(),
        peak_tflops=None,
        peak_gbps=None,
        roofline_tflops=None,
        max_abs_err=float((out.float() - reference.float()).abs().max()),
        max_abs_err_tolerance=max_abs_err_tolerance(dtype_name, shape.k, reference_max_abs),
        reference_max_abs=reference_max_abs,
        launches_per_round=shape.launches,
        rounds=ROUNDS,
        # v6 runs v5's kernel where TMA cannot address the operands: say which one ran.
        kernel_path=ops.gemm_v6_path(a, b) if version == "v6" else version,
    )
    if device_peaks is not None:
        info[GEMM_ROW.peak_tflops] = device_peaks.peak_flops(dtype_name) / 1e12
        info[GEMM_ROW.peak_gbps] = device_peaks.hbm_bytes_per_s / 1e9
        info[GEMM_ROW.roofline_tflops] = peaks.roofline(intensity, dtype_name, device_peaks) / 1e12
    write_row(benchmark, info)
    # Correctness beside the timing: a fast wrong answer fails its row.
    assert info[GEMM_ROW.max_abs_err] <= info[GEMM_ROW.max_abs_err_tolerance], info


# --- tensor-core ceilings: what each MMA instruction family can deliver at most ------------

PROBE_ITERATIONS = {"mma.sync": 4096, "wgmma": 2048}  # about 1 ms per launch on an H100/H200
SUSTAIN_S = 2.0
SUSTAIN_PERIOD_MS = 20.0


def sustained(fn: Callable[[], object], seconds: float) -> tuple[float, dict]:
    """ms per launch of ``fn`` launched back to back for about ``seconds``, and NVML's
    summary of this GPU over that time (mean power, SM clock, utilisation; energy)."""
    per_launch_ms = time_launches_ms(fn, 5)
    launches = max(5, int(seconds * 1e3 / per_launch_ms))
    uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    sampler = NvmlSampler([uuid], SUSTAIN_PERIOD_MS)
    sampler.start()
    ms = time_launches_ms(fn, launches)
    return ms, sampler.stop().summary(launches)


def probe_cases() -> list:
    cases = []
    for instruction in ops.TENSOR_CORE_INSTRUCTIONS:
        reason = missing_hopper() if instruction == "wgmma" else None
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        cases.append(pytest.param(instruction, marks=marks, id=instruction))
    return cases


@pytest.fixture(scope="module")
def cublas_tflops() -> float:
    """cuBLAS bf16 TFLOP/s at 8192^3, measured once for both ceiling rows (baseline()'s
    one-entry cache holds the last GEMM shape, so calling it per row would re-measure)."""
    big = next(shape for shape in gemm_shapes() if shape.name == "square_8192")
    cublas_ms = baseline(big, "bf16")[3]
    return ops.gemm_flops(big.m, big.n, big.k) / (cublas_ms / 1e3) / 1e12


@pytest.mark.parametrize("instruction", probe_cases())
def test_tensor_core_ceiling(benchmark, device_peaks, cublas_tflops: float,
                             instruction: str) -> None:
    """bf16 FLOP/s of back-to-back MMAs from registers/shared memory, no global memory.

    The upper bound of the tensor-core rungs: v4 (WMMA compiles to mma.sync) and v5 under
    the mma.sync ceiling, v6 under the wgmma one. Compared with cuBLAS at 8192^3 (bf16)
    measured in this process.
    """
    probe = ops.tensor_core_probe(instruction, PROBE_ITERATIONS[instruction])
    flop = probe()  # also the warm-up of the first launch
    benchmark.group = "tensor-core-ceiling-bf16"
    time_ms = timed_rounds_ms(benchmark, probe, launches=5)
    tflops = flop / (time_ms / 1e3) / 1e12
    # A few milliseconds of rounds run at boost clock; under a full tensor-core load the
    # GPU may lower its clock to stay within its power limit, so the rate is also taken
    # over SUSTAIN_S of back-to-back launches with NVML sampling clock and power.
    sustained_ms, nvml = sustained(probe, SUSTAIN_S)
    info = TENSOR_CORE_CEILING.row(
        instruction=instruction,
        dtype="bf16",
        time_ms=time_ms,
        flop_per_launch=flop,
        tflops=tflops,
        cublas_8192_tflops=cublas_tflops,
        pct_of_cublas_8192=100.0 * tflops / cublas_tflops,
        sustained_tflops=flop / (sustained_ms / 1e3) / 1e12,
        sustained_s=SUSTAIN_S,
        nvml=nvml,
        device_name=torch.cuda.get_device_name(),
        peak_tflops=None,
        pct_of_peak=None,
    )
    if device_peaks is not None:
        info[CEILING_ROW.peak_tflops] = device_peaks.peak_flops("bf16") / 1e12
        info[CEILING_ROW.pct_of_peak] = 100.0 * tflops / info[CEILING_ROW.peak_tflops]
    write_row(benchmark, info)


# --- the seed training step: own kernels vs torch/cuBLAS ops ------------------------------


@dataclass(frozen=True)
class SeedStep:
    """The course study's layer: x rows×in, W in×out, MSE loss against a target, SGD."""

    name: str = "seed_layer_1024x512"
    rows: int = 1024
    in_features: int = 512
    out_features: int = 512
    lr: float = 1e-3


def seed_step_own(x, w, target, lr: float) -> None:
    y = ops.seed_forward(x, w)
    grad_out = (2.0 / y.numel()) * (y - target)  # d mean((y - target)^2) / dy
    ops.seed_sgd_(w, ops.seed_weight_grad(x, grad_out), lr)


def seed_step_torch(x, w, target, lr: float) -> None:
    y = x @ w
    grad_out = (2.0 / y.numel()) * (y - target)
    w.sub_(x.t() @ grad_out, alpha=lr)


SEED_IMPLS = {"own_kernels": (seed_step_own, 3), "torch": (seed_step_torch, 50)}


@pytest.mark.parametrize("impl", sorted(SEED_IMPLS))
def test_seed_step(benchmark, impl: str) -> None:
    cfg = SeedStep()
    step, steps_per_round = SEED_IMPLS[impl]
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(cfg.rows, cfg.in_features, device="cuda", generator=generator)
    target = torch.randn(cfg.rows, cfg.out_features, device="cuda", generator=generator)
    w0 = torch.randn(cfg.in_features, cfg.out_features, device="cuda", generator=generator)

    # Correctness first: one step from the same weights through both implementations.
    # They may differ by rounding: one ulp of the new weight (|w|·2^-23, doubled for
    # safety) plus 1% of the largest update; a missing or wrong update exceeds that.
    w_impl, w_torch = w0.clone(), w0.clone()
    step(x, w_impl, target, cfg.lr)
    seed_step_torch(x, w_torch, target, cfg.lr)
    error = (w_impl - w_torch).abs()
    update = float((w_torch - w0).abs().max())
    assert bool((error <= 2.0**-22 * w_torch.abs() + 0.01 * update).all()), (
        f"{impl}: weights differ from torch's step by up to {float(error.max()):.3e}"
    )

    benchmark.group = f"seed_step-{cfg.name}"
    w = w0.clone()
    step_ms = timed_rounds_ms(benchmark, lambda: step(x, w, target, cfg.lr), steps_per_round)
    write_row(benchmark, SEED_STEP.row(
        impl=impl,
        step_ms=step_ms,
        steps_per_round=steps_per_round,
        rounds=ROUNDS,
        max_abs_err_vs_torch=float(error.max()),
        max_update=update,
        device_name=torch.cuda.get_device_name(),
        **asdict(cfg),
    ))


# --- the sweep: v6 and v7 against cuBLAS over the shape families of impl/kernels/sweep.py ---

SWEEP_ROUNDS = {"quick": 3, "default": 7, "full": 15}
SWEEP_ROUND_MS = 2.0  # each variant's segment of a round: one graph of about this length
SWEEP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
V7_WIDTHS = tuple(sorted(tiles.TILE_RATES))  # the widths the plan chooses between


def sweep_cases(config) -> list:
    cases = []
    for shape in sweep.shapes_for(config.option.suite_mode):
        for dtype_name in SWEEP_DTYPES:
            marks = [pytest.mark.skip(reason=missing_hopper())] if missing_hopper() else []
            cases.append(pytest.param(shape, dtype_name, marks=marks,
                                      id=f"sweep-{shape.name}-{dtype_name}"))
    return cases


def pytest_generate_tests(metafunc) -> None:
    if "version" in metafunc.fixturenames:
        metafunc.parametrize(("shape", "dtype_name", "version"),
                             gemm_cases(metafunc.config.option.suite_mode))
    if "sweep_shape" in metafunc.fixturenames:
        metafunc.parametrize(("sweep_shape", "sweep_dtype"), sweep_cases(metafunc.config))


# The modes whose sweep also times the tiles the plan does not choose (v7_bn128x2, and the
# widths of ops.V7_UNFITTED_WIDTHS): the whole sweep, where their rates are measured; the
# default run's sample keeps to what the plan chooses and the alternatives of those choices.
UNCHOSEN_MODES = ("full",)


def sweep_variants(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None,
                   with_unchosen: bool = False) -> dict[str, Callable[[], torch.Tensor]]:
    """cuBLAS, v6 and v7 at each tile width (each at its own split-K factor), and, with
    ``with_unchosen``, the tiles the plan does not choose: v7 at width 128 with two CTAs per
    SM (``v7_bn128x2``: its plan's split-K, never stream-K) and at each width without a
    fitted rate (``v7_bn192``: unsplit, no stream-K), whose rates these rows measure. At v7's
    own width, where their copies onto 128-byte lines differ from its own, v7 with no copy
    TMA does not need (``v7_rows8``) and with every operand off the lines copied
    (``v7_lines``); where it splits K, v7 unsplit (``v7_nosplit``); where a last partial
    wave could run stream-K, v7 with stream-K if the plan has none (``v7_stream_k``) or
    without it if it has (``v7_no_stream_k``): every choice is measured. ``out`` (v7 only)
    takes the poisoned output."""
    variants: dict[str, Callable[[], torch.Tensor]] = {
        "cublas": lambda: torch.matmul(a, b), "v6": ops.gemm_launcher(a, b, "v6")}
    for width in V7_WIDTHS:
        variants[f"v7_bn{width}"] = ops.v7_launcher(a, b, block_n=width, out=out)
    if with_unchosen:
        variants["v7_bn128x2"] = ops.v7_launcher(a, b, block_n=ops.V7_PAIR_BLOCK_N, out=out,
                                                 stream_k=False, ctas_per_sm=2)
        for width in ops.V7_UNFITTED_WIDTHS:
            variants[f"v7_bn{width}"] = ops.v7_launcher(a, b, block_n=width, out=out)
    plan = ops.v7_launcher(a, b).plan
    for name, to_lines in (("v7_rows8", False), ("v7_lines", True)):
        forced = ops.v7_launcher(a, b, block_n=plan.block_n, out=out, to_lines=to_lines)
        if (forced.plan.copy_a, forced.plan.copy_b) != (plan.copy_a, plan.copy_b):
            variants[name] = forced
    if plan.splits > 1:
        variants["v7_nosplit"] = ops.v7_launcher(a, b, block_n=plan.block_n, out=out, splits=1)
    if plan.stream_k_tiles:
        variants["v7_no_stream_k"] = ops.v7_launcher(a, b, block_n=plan.block_n, out=out,
                                                     stream_k=False)
    else:
        stream_k = ops.v7_launcher(a, b, block_n=plan.block_n, out=out, stream_k=True)
        if stream_k.plan.stream_k_tiles:
            variants["v7_stream_k"] = stream_k
    return variants


def sweep_errors(shape, dtype, with_unchosen: bool) -> tuple[float, dict[str, float]]:
    """max |C_cuBLAS| (the tolerance scales with it), and max |C − C_cuBLAS| of every variant on
    fresh inputs, v7 into a NaN-poisoned output (an element it failed to write stays NaN, and
    NaN fails every tolerance)."""
    generator = torch.Generator(device="cuda").manual_seed(shape.m * 31 + shape.n * 7 + shape.k)
    a = torch.randn(shape.m, shape.k, device="cuda", generator=generator).to(dtype)
    b = torch.randn(shape.k, shape.n, device="cuda", generator=generator).to(dtype)
    reference = torch.matmul(a, b).float()
    out = torch.empty(shape.m, shape.n, dtype=dtype, device="cuda")
    reference_max_abs, errors = float(reference.abs().max()), {}
    for name, launch in sweep_variants(a, b, out, with_unchosen).items():
        out.fill_(float("nan"))
        errors[name] = float((launch().float() - reference).abs().max().nan_to_num(float("inf")))
    return reference_max_abs, errors


def graphed(fn: Callable[[], object], launches: int) -> Callable[[], None]:
    """``launches`` calls of ``fn`` captured in one CUDA graph: replaying it times the GPU
    work without the host's per-launch cost, which exceeds a small GEMM's own time."""
    fn()  # outside the capture: first-call set-up (function attributes, workspaces)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            fn()
    return graph.replay


@pytest.fixture(scope="module")
def sweep_rounds(pytestconfig) -> int:
    return SWEEP_ROUNDS[pytestconfig.option.suite_mode]


def test_gemm_sweep(benchmark, device_peaks, sweep_rounds: int, sweep_shape, sweep_dtype: str,
                    pytestconfig) -> None:
    """One shape of the sweep: every variant checked against cuBLAS on fresh inputs, then
    timed interleaved (shuffled order per round) with its ratio to cuBLAS and its interval."""
    shape, dtype = sweep_shape, SWEEP_DTYPES[sweep_dtype]
    with_unchosen = pytestconfig.option.suite_mode in UNCHOSEN_MODES
    reference_max_abs, errors = sweep_errors(shape, dtype, with_unchosen)
    tolerance = max_abs_err_tolerance(sweep_dtype, shape.k, reference_max_abs)
    wrong = {name: err for name, err in errors.items() if not err <= tolerance}
    assert not wrong, f"{shape.name} {sweep_dtype}: max |C - C_cuBLAS| {wrong} > {tolerance:.3g}"

    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(shape.m, shape.k, device="cuda", generator=generator).to(dtype)
    b = torch.randn(shape.k, shape.n, device="cuda", generator=generator).to(dtype)
    variants = sweep_variants(a, b, with_unchosen=with_unchosen)
    flops = ops.gemm_flops(shape.m, shape.n, shape.k)
    # Graph length from cuBLAS at a guessed 500 TFLOP/s: about SWEEP_ROUND_MS per segment.
    launches = max(1, min(200, round(SWEEP_ROUND_MS * 1e-3 * 500e12 / flops)))
    steps = [Variant(name, graphed(fn, launches)) for name, fn in variants.items()]
    measurement = measure_interleaved(steps, Rounds(warmup=1, rounds=sweep_rounds),
                                      torch.device("cuda"), None, seed=shape.m + shape.n)
    round_ms = {name: [ms / launches for ms in measurement.round_ms(name)]
                for name in variants}
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    plan = ops.v7_launcher(a, b).plan
    round_ms["v7"] = round_ms[f"v7_bn{plan.block_n}"]  # what ops.gemm(a, b, "v7") runs
    # pytest-benchmark's own statistics (the gate's input) are v7's seconds per launch.
    record_round_times(benchmark, [ms / 1e3 for ms in round_ms["v7"]])
    benchmark.group = "gemm-sweep"
    median_ms = {name: statistics.median(ms) for name, ms in round_ms.items()}
    best_width = min(V7_WIDTHS, key=lambda width: median_ms[f"v7_bn{width}"])
    element_bytes = a.element_size()
    intensity = ops.arithmetic_intensity(shape.m, shape.n, shape.k, element_bytes)
    info = GEMM_SWEEP.row(
        preset=shape.name, family=shape.family,
        draw_seed=sweep.run_seed() if shape.family == sweep.FRESH else None,
        m=shape.m, n=shape.n, k=shape.k, dtype=sweep_dtype,
        rounds=sweep_rounds, launches_per_round=launches,
        round_ms=round_ms,
        time_ms=median_ms,
        tflops={name: flops / (ms / 1e3) / 1e12 for name, ms in median_ms.items()},
        # cuBLAS's time over the variant's: above 1 the variant is faster.
        vs_cublas={name: stats.ratio(round_ms["cublas"], ms).to_json()
                   for name, ms in round_ms.items() if name != "cublas"},
        v7_block_n=plan.block_n, v7_best_block_n=best_width, v7_splits=plan.splits,
        v7_stream_k_tiles=plan.stream_k_tiles,
        v7_row_multiple=plan.row_multiple, v7_copies=[
            name for name, copied in (("a", plan.copy_a), ("b", plan.copy_b)) if copied],
        v6_path=ops.gemm_v6_path(a, b),
        max_abs_err=errors,
        max_abs_err_tolerance=tolerance,
        arithmetic_intensity=intensity,
        device_name=torch.cuda.get_device_name(), sms=sms,
        peak_tflops=None, peak_gbps=None, roofline_tflops=None, roofline_bound=None,
    )
    if device_peaks is not None:
        info[SWEEP_ROW.peak_tflops] = device_peaks.peak_flops(sweep_dtype) / 1e12
        info[SWEEP_ROW.peak_gbps] = device_peaks.hbm_bytes_per_s / 1e9
        info[SWEEP_ROW.roofline_tflops] = (
            peaks.roofline(intensity, sweep_dtype, device_peaks) / 1e12)
        info[SWEEP_ROW.roofline_bound] = peaks.binding_roof(intensity, sweep_dtype, device_peaks)
    write_row(benchmark, info)
