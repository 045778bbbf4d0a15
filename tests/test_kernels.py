"""impl/kernels: every .cu compiles stand-alone, every kernel matches a float64 reference.

    python -m pytest tests/test_kernels.py -q            # CPU: compile-only + API checks
    python -m pytest tests/test_kernels.py -q -m gpu     # GPU machine (first run builds, ~1 min)

Tolerances are error bounds, not guesses; c is compared elementwise with the float64
product of the same inputs, and mag = |a| @ |b| (float64).
- fp32 (v1-v3, seed kernels): a k-term dot product with round-to-nearest has
  |error| <= k·u·mag for any summation order (Higham, Accuracy and Stability of Numerical
  Algorithms, eq. 3.5), u = 2^-24; that grows like k, while rounding errors of random data
  grow like sqrt(k): Higham & Mary (SIAM J. Sci. Comput. 2019) bound them by
  λ·sqrt(k)·u·mag with probability > 1 - 2k·exp(-λ²/2), negligible at λ = 9 even over
  16M elements. The tests use min(2k, 9·sqrt(k))·u·mag.
- bf16/fp16 (v4-v6): tensor cores multiply exactly into fp32 but may truncate while
  accumulating (biased, so no sqrt(k) argument): 2·k·u·mag, plus the one rounding of the
  output to 16 bits, u16·|exact| with u16 = 2^-8 (bf16) or 2^-11 (fp16), plus 2^-24
  absolute for fp16 subnormals.
A real bug (wrong index, missed tile, stale pipeline stage) gives errors of the size of
the entries (about sqrt(k)), well above these bounds at every tested k.
"""

from __future__ import annotations

import math
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from impl.capabilities import missing_gpu, missing_hopper, missing_nvcc
from impl.kernels import CUDA_SOURCES, SOURCE_DIR, build_key, cuda_flags, ops, peaks

ROOT = Path(__file__).resolve().parent.parent
CU_FILES = sorted(SOURCE_DIR.glob("*.cu"))
# What torch's JIT build adds to every nvcc command (torch.utils.cpp_extension's
# COMMON_NVCC_FLAGS): the kernels must not rely on implicit half/bfloat16 conversions.
TORCH_NVCC_DEFINES = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
)

NVCC_SKIP = missing_nvcc()
GPU_SKIP = missing_gpu() or missing_nvcc()  # the JIT build needs nvcc too
TWO_GPU_SKIP = missing_gpu(2) or missing_nvcc()
HOPPER_SKIP = missing_hopper() or missing_nvcc()

U32 = 2.0**-24
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}

# (m, n, k): the seed's layer, a quick square, a big square, and ragged sizes that are
# not multiples of any tile: k % 8 != 0 (unaligned copy paths), k and n multiples of 8
# but m, n, k off-tile (aligned paths with partial tiles), tiny, and an empty k.
SHAPES = [
    (1024, 512, 512),
    (128, 128, 128),
    (4096, 4096, 4096),
    (1000, 520, 333),
    (1000, 520, 328),
    (17, 33, 65),
    (1, 7, 3),
    (4, 5, 0),
]
FP32_VERSIONS = ("v1", "v1c", "v2", "v3")
TENSOR_CORE_VERSIONS = ("v4", "v5", "v6", "v7")


def hopper_only(version: str):
    """The version as a parameter, skipped with the reason off Hopper if it needs sm_90a."""
    marks = []
    if version in ops.HOPPER_VERSIONS and HOPPER_SKIP is not None:
        marks = [pytest.mark.skip(reason=HOPPER_SKIP)]
    return pytest.param(version, marks=marks, id=version)


def shape_id(shape: tuple[int, int, int]) -> str:
    return "x".join(map(str, shape))


# --- compile-only: runs wherever nvcc is, GPU or not -------------------------------------


@pytest.mark.skipif(NVCC_SKIP is not None, reason=str(NVCC_SKIP))
@pytest.mark.parametrize("defines", [(), TORCH_NVCC_DEFINES], ids=["bare", "torch-jit-defines"])
@pytest.mark.parametrize("source", CU_FILES, ids=lambda path: path.name)
def test_cu_compiles_for_sm90(source: Path, defines: tuple[str, ...], tmp_path: Path) -> None:
    # The loader's own flags for an H100/H200 (sm_90a), so the Hopper kernels are compiled
    # for real here, not reduced to their empty off-Hopper bodies.
    obj = tmp_path / f"{source.stem}.o"
    command = ["nvcc", *cuda_flags((9, 0)), *defines, "-c", "-o", str(obj), str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stderr}"
    assert obj.stat().st_size > 0


@pytest.mark.skipif(NVCC_SKIP is not None, reason=str(NVCC_SKIP))
def test_hopper_kernels_fit_their_register_budget(tmp_path: Path) -> None:
    # v6's consumers hold 128 fp32 accumulators per thread; a spill to local memory
    # would cost more than the tensor cores gain. ptxas reports spills per kernel.
    source = SOURCE_DIR / "gemm_hopper.cu"
    command = ["nvcc", *cuda_flags((9, 0)), *TORCH_NVCC_DEFINES, "-Xptxas", "-v", "-c", "-o",
               str(tmp_path / "v6.o"), str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    spills = [line for line in result.stderr.splitlines() if "spill" in line]
    assert len(spills) == 2, result.stderr  # bf16 and fp16 kernels
    assert all("0 bytes spill stores, 0 bytes spill loads" in line for line in spills), spills


@pytest.mark.skipif(NVCC_SKIP is not None, reason=str(NVCC_SKIP))
def test_v7_kernels_fit_their_register_budget(tmp_path: Path) -> None:
    # Every v7 GEMM kernel without spills; the two-CTAs-per-SM ones (BN = 128, 288 threads)
    # within 96 registers a thread, so that two of them fit an SM's register file.
    command = ["nvcc", *cuda_flags((9, 0)), *TORCH_NVCC_DEFINES, "-Xptxas", "-v", "-c", "-o",
               str(tmp_path / "v7.o"), str(SOURCE_DIR / "gemm_v7.cu")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    # ptxas prints, per kernel: its name, then its stack and spills, then its registers.
    kernels = re.findall(r"Function properties for (\S*gemm_v7_kernel\S*)\n\s*(.*)\n.*?Used "
                         r"(\d+) registers", result.stderr)
    assert len(kernels) == 8, result.stderr  # bf16 and fp16 at 256/1, 192/1, 128/1, 128/2
    assert all("0 bytes spill stores, 0 bytes spill loads" in spills
               for _, spills, _ in kernels), kernels
    registers = {name: int(count) for name, _, count in kernels}
    pairs = [count for name, count in registers.items() if "Li128ELi2E" in name]
    assert len(pairs) == 2 and all(count <= 96 for count in pairs), registers


def test_cuda_flags_target_sm90a_on_hopper_only() -> None:
    assert "-arch=sm_90a" in cuda_flags((9, 0))
    assert "-arch=sm_80" in cuda_flags((8, 0))


def test_loader_builds_every_cu_file() -> None:
    assert sorted(CUDA_SOURCES) == [path.name for path in CU_FILES]


def test_build_key_depends_on_arch_and_is_stable() -> None:
    assert build_key((9, 0)) == build_key((9, 0))
    assert build_key((9, 0)) != build_key((8, 0))
    assert build_key((9, 0)).startswith("sm90_")


# --- Python API, no GPU needed ------------------------------------------------------------


def test_unknown_version_names_value_and_choices() -> None:
    a = torch.ones(2, 2)
    with pytest.raises(ValueError, match=r"'v9'.*v1, v1c, v2, v3, v4, v5, v6, v7, cublas"):
        ops.gemm(a, a, "v9")


def test_version_rejects_dtype_it_lacks() -> None:
    a = torch.ones(2, 2)
    with pytest.raises(TypeError, match=r"gemm v4: a has dtype torch.float32; allowed: "
                                        r"torch.bfloat16, torch.float16"):
        ops.gemm(a, a, "v4")
    with pytest.raises(TypeError, match=r"gemm v1: a has dtype torch.bfloat16; allowed: "
                                        r"torch.float32"):
        ops.gemm(a.bfloat16(), a.bfloat16(), "v1")
    with pytest.raises(TypeError, match=r"cublas does not take torch.float64.*torch.float32"):
        ops.gemm(a.double(), a.double(), "cublas")
    with pytest.raises(TypeError, match=r"v4 does not take torch.float32.*torch.bfloat16"):
        ops.check_version("v4", torch.float32)


def test_every_version_has_dtypes() -> None:
    assert set(ops.GEMM_DTYPES) == set(ops.GEMM_VERSIONS)
    assert all(ops.GEMM_DTYPES[v] for v in ops.GEMM_VERSIONS)


def test_cublas_version_is_torch_matmul() -> None:
    a, b = torch.randn(5, 3), torch.randn(3, 4)
    assert torch.equal(ops.gemm(a, b, "cublas"), torch.matmul(a, b))


def test_arithmetic_intensity_formula() -> None:
    # 2·8·8·8 FLOP over 2 bytes · 3·64 elements
    assert ops.arithmetic_intensity(8, 8, 8, 2) == pytest.approx(1024 / 384)
    assert ops.gemm_bytes(2, 3, 4, 4) == 4 * (8 + 12 + 6)


def test_peaks_lookup_and_roofline() -> None:
    h200 = peaks.lookup("NVIDIA H200")
    assert h200.peak_flops("bf16") == pytest.approx(989e12)
    assert h200.hbm_bytes_per_s == pytest.approx(4.8e12)
    # Below the ridge (989e12 / 4.8e12 ≈ 206 FLOP/B) memory-bound, above it compute-bound.
    assert peaks.roofline(10.0, "bf16", h200) == pytest.approx(48e12)
    assert peaks.roofline(1000.0, "bf16", h200) == pytest.approx(989e12)
    assert peaks.lookup("NVIDIA H100 80GB HBM3").peak_flops("tf32") == pytest.approx(494.7e12)


def test_peaks_unknown_device_lists_known_names() -> None:
    with pytest.raises(peaks.UnknownDeviceError, match=r"'Nope GPU'.*NVIDIA H200"):
        peaks.lookup("Nope GPU")


# --- GPU correctness ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ext():
    from impl.kernels import load

    return load()


def random_matrix(rows: int, cols: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(rows, cols, device="cuda", generator=generator).to(dtype)


def assert_within_bound(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """c ≈ a @ b within the bound for c's dtype (module docstring), elementwise."""
    k = a.shape[1]
    exact = a.double() @ b.double()
    magnitude = a.abs().double() @ b.abs().double()
    if c.dtype == torch.float32:
        bound = min(2 * k, 9 * math.sqrt(k)) * U32 * magnitude
    else:
        bound = 2 * k * U32 * magnitude + UNIT_ROUNDOFF[c.dtype] * exact.abs() + U32
    error = (c.double() - exact).abs()
    worst = int(torch.argmax(error - bound))
    assert bool((error <= bound).all()), (
        f"{tuple(a.shape)}@{tuple(b.shape)} {c.dtype}: error {error.flatten()[worst]:.3e} > "
        f"bound {bound.flatten()[worst]:.3e} at flat index {worst}; "
        f"max error {error.max():.3e}, max |exact| {exact.abs().max():.3e}"
    )


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("version", FP32_VERSIONS)
@pytest.mark.usefixtures("ext")
@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_gemm_fp32_matches_float64(version: str, shape: tuple[int, int, int]) -> None:
    m, n, k = shape
    a, b = random_matrix(m, k, torch.float32, 1), random_matrix(k, n, torch.float32, 2)
    a_before, b_before = a.clone(), b.clone()
    c = ops.gemm(a, b, version)
    assert c.shape == (m, n) and c.dtype == torch.float32 and c.is_contiguous()
    assert_within_bound(c, a, b)
    assert torch.equal(a, a_before) and torch.equal(b, b_before), "inputs were written"


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("version", [hopper_only(v) for v in TENSOR_CORE_VERSIONS])
@pytest.mark.usefixtures("ext")
@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_gemm_tensor_cores_match_float64(
    version: str, dtype: torch.dtype, shape: tuple[int, int, int]
) -> None:
    m, n, k = shape
    a, b = random_matrix(m, k, dtype, 3), random_matrix(k, n, dtype, 4)
    a_before, b_before = a.clone(), b.clone()
    c = ops.gemm(a, b, version)
    assert c.shape == (m, n) and c.dtype == dtype and c.is_contiguous()
    assert_within_bound(c, a, b)
    assert torch.equal(a, a_before) and torch.equal(b, b_before), "inputs were written"


@pytest.mark.parametrize("version", ["v3", "v4", "v5", hopper_only("v6"), hopper_only("v7")])
@pytest.mark.usefixtures("ext")
@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_gemm_misaligned_pointer_takes_fallback_path(version: str) -> None:
    # Sizes the vector paths accept, but `a` starts one element past a 16-byte boundary,
    # so only the pointer check can route it to the scalar path.
    m, n, k = 256, 264, 320
    dtype = torch.float32 if version == "v3" else torch.bfloat16
    flat = random_matrix(1, m * k + 1, dtype, 5).flatten()
    a = flat[1:].view(m, k)
    assert a.is_contiguous() and a.data_ptr() % 16 != 0
    b = random_matrix(k, n, dtype, 6)
    assert_within_bound(ops.gemm(a, b, version), a, b)


@pytest.mark.parametrize(
    ("shape", "offset", "path"),
    [
        ((1024, 512, 512), 0, "tma"),
        ((1000, 520, 328), 0, "tma"),   # ragged M, N, K: TMA's zero fill covers the edges
        ((1000, 520, 333), 0, "v5"),    # k % 8 != 0: row stride not a multiple of 16 bytes
        ((17, 33, 64), 0, "v5"),        # n % 8 != 0
        ((256, 264, 320), 1, "v5"),     # a one element past a 16-byte boundary
        ((4, 5, 0), 0, "v5"),           # empty k: no box to copy
    ],
    ids=["seed", "ragged", "k-odd", "n-odd", "misaligned", "empty-k"],
)
@pytest.mark.usefixtures("ext")
@pytest.mark.gpu
@pytest.mark.skipif(HOPPER_SKIP is not None, reason=str(HOPPER_SKIP))
def test_gemm_v6_path_and_result(shape: tuple[int, int, int], offset: int, path: str) -> None:
    # The TMA kernel must really run where it can (a silent fallback would pass every
    # correctness test while measuring v5), and both paths must be right.
    m, n, k = shape
    flat = random_matrix(1, m * k + offset, torch.bfloat16, 9).flatten()
    a = flat[offset:].view(m, k)
    b = random_matrix(k, n, torch.bfloat16, 10)
    assert ops.gemm_v6_path(a, b) == path
    assert_within_bound(ops.gemm(a, b, "v6"), a, b)


@pytest.mark.parametrize("instruction", [
    "mma.sync",
    pytest.param("wgmma", marks=pytest.mark.skipif(HOPPER_SKIP is not None,
                                                   reason=str(HOPPER_SKIP))),
])
@pytest.mark.usefixtures("ext")
@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_tensor_core_probe_reports_its_work(instruction: str) -> None:
    probe = ops.tensor_core_probe(instruction, 16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    per_sm = {"mma.sync": 4 * 8 * 8 * 16 * 2 * 16 * 8 * 16, "wgmma": 2 * 4 * 16 * 2 * 64 * 256 * 16}
    assert probe() == sms * per_sm[instruction]
    torch.cuda.synchronize()


def test_tensor_core_probe_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"unknown tensor-core instruction 'hmma'; valid: "
                                         r"mma.sync, wgmma"):
        ops.tensor_core_probe("hmma", 10)
    with pytest.raises(ValueError, match=r"iterations must be in \[1, 1048576\]; got 0"):
        ops.tensor_core_probe("mma.sync", 0)


@pytest.mark.skipif(missing_gpu() is None, reason="checks the message on a machine without GPU")
def test_hopper_only_version_names_what_is_missing() -> None:
    a = torch.ones(8, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"gemm v6: a must be a CUDA tensor"):
        ops.gemm(a, a, "v6")
    assert "needs 1 CUDA GPU" in str(missing_hopper())


@pytest.mark.parametrize("version", [hopper_only(v) for v in ops.GEMM_VERSIONS])
@pytest.mark.usefixtures("ext")
@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_gemm_runs_on_current_stream(version: str) -> None:
    # Launched on torch's current stream: work queued there before it is seen, and
    # synchronising that stream alone is enough to read the result.
    dtype = ops.GEMM_DTYPES[version][0]
    a, b = random_matrix(300, 200, dtype, 7), random_matrix(200, 100, dtype, 8)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.cuda._sleep(20_000_000)  # ~10 ms of GPU time, so a GEMM on another stream
        a2 = a * 2                     # would read a2 before it is written
        c = ops.gemm(a2, b, version)
    stream.synchronize()
    assert_within_bound(c, a2, b)


@pytest.mark.parametrize("shape", [(1024, 512, 512), (37, 19, 23)], ids=shape_id)
@pytest.mark.usefixtures("ext")
@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_seed_forward_and_weight_grad(shape: tuple[int, int, int]) -> None:
    rows, out_features, in_features = shape
    x = random_matrix(rows, in_features, torch.float32, 9)
    w = random_matrix(in_features, out_features, torch.float32, 10)
    y = ops.seed_forward(x, w)
    assert y.shape == (rows, out_features)
    assert_within_bound(y, x, w)

    grad_out = random_matrix(rows, out_features, torch.float32, 11)
    grad_w = ops.seed_weight_grad(x, grad_out)
    assert grad_w.shape == (in_features, out_features)
    assert_within_bound(grad_w, x.t(), grad_out)


@pytest.mark.usefixtures("ext")
@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_seed_sgd_updates_in_place() -> None:
    w = random_matrix(512, 512, torch.float32, 12)
    grad = random_matrix(512, 512, torch.float32, 13)
    lr = 1e-3
    expected = w.double() - torch.tensor(lr, dtype=torch.float32).item() * grad.double()
    storage = w.data_ptr()
    assert ops.seed_sgd_(w, grad, lr) is w
    assert w.data_ptr() == storage
    # At most one rounding of the product and one of the difference (or one, fused).
    bound = 2 * U32 * (expected.abs() + lr * grad.double().abs())
    assert bool(((w.double() - expected).abs() <= bound).all())


@pytest.mark.usefixtures("ext")
@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_seed_step_matches_float64_step() -> None:
    # The whole seed step (MSE loss against a target, SGD with lr 1e-3) in fp32 through
    # the own kernels, against the same step in float64.
    lr = 1e-3
    x = random_matrix(1024, 512, torch.float32, 14)
    target = random_matrix(1024, 512, torch.float32, 15)
    w = random_matrix(512, 512, torch.float32, 16)
    x64, w64 = x.double(), w.double()
    grad_w64 = x64.t() @ ((2.0 / target.numel()) * (x64 @ w64 - target.double()))
    expected = w64 - lr * grad_w64

    y = ops.seed_forward(x, w)
    grad_out = (2.0 / y.numel()) * (y - target)  # d mean((y - target)^2) / dy
    ops.seed_sgd_(w, ops.seed_weight_grad(x, grad_out), lr)

    # Dominant error: rounding the new weights (2 roundings of |w|); the gradient's own
    # fp32 error is ~1e-6 relative, i.e. ~1e-12 absolute after the lr.
    bound = 2 * U32 * expected.abs() + 1e-10
    assert bool(((w.double() - expected).abs() <= bound).all())
    # The check can see the update: a typical step is far above the bound.
    assert float((lr * grad_w64).abs().median()) > 10 * float(bound.median())


# --- bad input: ops.py's checks everywhere, the extension's own checks on the GPU ------------


def _ones(device: str, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.ones(*shape, device=device, dtype=dtype)


def _meta(*shape: int) -> torch.Tensor:
    """Shape and dtype without storage: the size limits, without allocating 8 GiB."""
    return torch.empty(*shape, device="meta")


BF16, F16, F64 = torch.bfloat16, torch.float16, torch.float64
# (ops function, its arguments made on a device, exception, message pattern). ops.py
# checks the device last, so each case raises the same error whether its tensors are made
# on the CPU or on a GPU: CI runs them all on the CPU, the GPU machine on both.
# bindings.cpp makes the same checks in the same order with the same messages
# (test_raw_extension_*).
BAD_INPUTS = [
    ("gemm", lambda d: (_ones(d, 4, 4, dtype=F64), _ones(d, 4, 4, dtype=F64), "v1"),
     TypeError, r"gemm v1: a has dtype torch.float64; allowed: torch.float32"),
    ("gemm", lambda d: (_ones(d, 4, 4), _ones(d, 4, 4), "v4"),
     TypeError, r"gemm v4: a has dtype torch.float32; allowed: torch.bfloat16, torch.float16"),
    ("gemm", lambda d: (_ones(d, 4, 4), _ones(d, 4, 4, dtype=BF16), "v1"),
     TypeError, r"gemm v1: b has dtype torch.bfloat16; allowed: torch.float32"),
    ("gemm", lambda d: (_ones(d, 4, 4, dtype=BF16), _ones(d, 4, 4, dtype=F16), "v5"),
     TypeError, r"gemm v5: a and b must have one dtype; got torch.bfloat16 and torch.float16"),
    ("gemm", lambda d: (_ones(d, 4, 6).t(), _ones(d, 4, 4), "v2"),
     ValueError, r"gemm v2: a must be contiguous \(row-major\); got shape \[6, 4\] with "
                 r"strides \[1, 6\]; call \.contiguous\(\) first"),
    ("gemm", lambda d: (_ones(d, 4, 5), _ones(d, 6, 7), "v3"),
     ValueError, r"gemm v3: inner dimensions differ: a is \[4, 5\], b is \[6, 7\] "
                 r"\(need a\.shape\[1\] == b\.shape\[0\]\)"),
    ("gemm", lambda d: (_ones(d, 8, dtype=BF16), _ones(d, 8, 8, dtype=BF16), "v4"),
     ValueError, r"gemm v4: a must be 2-D \(a matrix\); got shape \[8\]"),
    ("gemm", lambda d: (_ones(d, 4, 4), _ones(d, 4, 4).to_sparse(), "v1"),
     ValueError, r"gemm v1: b must be a dense \(strided\) tensor; got layout torch.sparse_coo"),
    ("gemm", lambda d: (_meta(2**30 + 1, 1), _meta(1, 1), "v1"),
     ValueError, r"gemm v1: a has shape \[1073741825, 1\]; every dimension must be at most 2\^30"),
    ("gemm", lambda d: (_meta(2**16, 2**16), _meta(2**16, 1), "v3"),
     ValueError, r"gemm v3: a has 4294967296 elements; at most 2147483647 are supported"),
    ("gemm", lambda d: (_meta(2**16, 1), _meta(1, 2**16), "v2"),
     ValueError, r"gemm v2: output 65536x65536 has more than 2147483647 elements"),
    ("gemm", lambda d: (torch.ones(4, 4), torch.ones(4, 4), "v1"),
     ValueError, r"gemm v1: a must be a CUDA tensor; got device cpu"),
    ("gemm", lambda d: (_meta(4, 4), _meta(4, 4), "v3"),
     ValueError, r"gemm v3: a must be a CUDA tensor; got device meta"),
    ("seed_forward", lambda d: (_ones(d, 8, 4), _ones(d, 5, 4)),
     ValueError, r"seed_forward: x is \[8, 4\], w is \[5, 4\] "
                 r"\(need x\.shape\[1\] == w\.shape\[0\]\)"),
    ("seed_forward", lambda d: (_ones(d, 8, 4, dtype=BF16), _ones(d, 4, 4)),
     TypeError, r"seed_forward: x has dtype torch.bfloat16; allowed: torch.float32"),
    ("seed_weight_grad", lambda d: (_ones(d, 8, 4), _ones(d, 7, 4)),
     ValueError, r"seed_weight_grad: x is \[8, 4\], grad_out is \[7, 4\] \(need the same number "
                 r"of rows\)"),
    ("seed_sgd_", lambda d: (_ones(d, 8, 4), _ones(d, 4, 8), 0.1),
     ValueError, r"seed_sgd_: w is \[8, 4\], grad is \[4, 8\] \(need the same shape\)"),
    ("seed_sgd_", lambda d: (_ones(d, 8, 4), _ones(d, 8, 4).t(), 0.1),
     ValueError, r"seed_sgd_: grad must be contiguous"),
]
BAD_INPUT_IDS = [f"{case[0]}-{i}" for i, case in enumerate(BAD_INPUTS)]


def _not_reached() -> None:
    raise AssertionError("ops.py called the extension with arguments it should have rejected")


@pytest.mark.parametrize(("function", "make_args", "error", "pattern"), BAD_INPUTS,
                         ids=BAD_INPUT_IDS)
def test_ops_reject_bad_input_on_cpu(function, make_args, error, pattern,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # The extension is never loaded: ops.py rejects every case itself.
    monkeypatch.setattr(ops, "_extension", _not_reached)
    with pytest.raises(error, match=pattern):
        getattr(ops, function)(*make_args("cpu"))


@pytest.mark.parametrize(("function", "make_args", "error", "pattern"), BAD_INPUTS,
                         ids=BAD_INPUT_IDS)
@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_ops_reject_bad_input_on_cuda(function, make_args, error, pattern,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops, "_extension", _not_reached)
    with pytest.raises(error, match=pattern):
        getattr(ops, function)(*make_args("cuda"))


def test_ops_reject_a_non_tensor() -> None:
    with pytest.raises(TypeError, match=r"seed_forward: w must be a torch.Tensor; got list"):
        ops.seed_forward(torch.ones(2, 2), [[1.0, 0.0], [0.0, 1.0]])


@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_ops_reject_operand_left_on_the_cpu() -> None:
    with pytest.raises(ValueError, match=r"gemm v1: b must be a CUDA tensor; got device cpu"):
        ops.gemm(_ones("cuda", 4, 4), torch.ones(4, 4), "v1")


@pytest.mark.gpu
@pytest.mark.skipif(TWO_GPU_SKIP is not None, reason=str(TWO_GPU_SKIP))
def test_ops_reject_operands_on_two_gpus() -> None:
    with pytest.raises(ValueError, match=r"seed_forward: operands on different devices "
                                         r"\(cuda:0 and cuda:1\)"):
        ops.seed_forward(_ones("cuda:0", 4, 4), _ones("cuda:1", 4, 4))


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter at the repository root, with faulthandler on: a
    crash of the extension fails the calling test instead of killing pytest."""
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def _exit_report(result: subprocess.CompletedProcess[str]) -> str:
    if result.returncode < 0:
        try:
            how = f"killed by {signal.Signals(-result.returncode).name}"
        except ValueError:
            how = f"killed by signal {-result.returncode}"
    else:
        how = f"exit status {result.returncode}"
    return (f"subprocess {how}\n--- stdout ---\n{result.stdout[-4000:]}"
            f"\n--- stderr ---\n{result.stderr[-4000:]}")


@pytest.mark.usefixtures("ext")  # built here first, so the subprocess only loads it
@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_raw_extension_raises_type_error_for_bad_dtype() -> None:
    # The case that segfaulted the interpreter while bindings.cpp threw c10 errors
    # (TORCH_CHECK_TYPE): the extension itself, past ops.py's checks, must raise a
    # TypeError and leave the process healthy.
    result = _run_python("""
        import torch
        from impl.kernels import load

        ext = load()
        a = torch.ones(4, 4, device="cuda", dtype=torch.float64)
        try:
            ext.gemm_v1(a, a)
        except TypeError as error:
            print(f"TypeError: {error}")
        else:
            raise SystemExit("gemm_v1 accepted float64 operands")
        b = torch.ones(4, 4, device="cuda")
        assert torch.equal(ext.gemm_v1(b, b), b @ b), "gemm_v1 is wrong after the error"
        print("valid call ok")
    """)
    assert result.returncode == 0, _exit_report(result)
    assert "TypeError: gemm v1: a has dtype torch.float64; allowed: torch.float32" in (
        result.stdout), _exit_report(result)
    assert "valid call ok" in result.stdout, _exit_report(result)


def _raw_call(ext, function: str, args: tuple):
    """The extension's function behind ``ops.<function>(*args)``, called directly."""
    if function == "gemm":
        *operands, version = args
        return getattr(ext, f"gemm_{version}")(*operands)
    return getattr(ext, function)(*args)


@pytest.mark.usefixtures("ext")
@pytest.mark.gpu
@pytest.mark.skipif(GPU_SKIP is not None, reason=str(GPU_SKIP))
def test_raw_extension_rejects_bad_input_like_ops() -> None:
    # bindings.cpp's checks, the second line of defence, raise what ops.py raises: same
    # exception types, same messages, for every case of BAD_INPUTS made on the GPU.
    result = _run_python("""
        import re
        from impl.kernels import load
        from tests.test_kernels import BAD_INPUT_IDS, BAD_INPUTS, _raw_call

        ext = load()
        for case_id, (function, make_args, error, pattern) in zip(BAD_INPUT_IDS, BAD_INPUTS):
            print(case_id, end=": ", flush=True)
            try:
                _raw_call(ext, function, make_args("cuda"))
            except Exception as raised:
                ok = type(raised) is error and re.search(pattern, str(raised))
                print("ok" if ok else f"MISMATCH {type(raised).__name__}: {raised}", flush=True)
            else:
                print("MISMATCH no exception", flush=True)
    """)
    assert result.returncode == 0, _exit_report(result)
    lines = result.stdout.splitlines()
    assert len(lines) == len(BAD_INPUTS), _exit_report(result)
    assert all(line.endswith(": ok") for line in lines), _exit_report(result)
