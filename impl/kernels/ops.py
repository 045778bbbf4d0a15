"""Python API of the hand-written kernels: the GEMM ladder and the seed training step.

Reference first (``"cublas"`` is ``torch.matmul``), then the ladder of gemm.cu:

    from impl.kernels import ops
    c = ops.gemm(a, b, "v3")                     # fp32, register-blocked
    c = ops.gemm(a.bfloat16(), b.bfloat16(), "v6")  # Hopper only: TMA + wgmma
    c = ops.gemm(a.half(), b.half(), "v7")          # Hopper only: persistent, any size

Every argument is checked here, in Python, before the extension is loaded or called:
version names, dtypes, layouts, shapes and size limits first, the device last, so a
mistake fails at once with a TypeError or ValueError that names the operation, the bad
value and what is allowed, on a CPU-only machine too (only the device check needs a GPU
to pass). bindings.cpp repeats the same checks with the same messages as a second line
of defence for direct calls of the extension, raising them as Python errors itself and
formatting numbers without std::ostream: on the GPU machine (torch 2.11, extension built
with another g++ than torch's) both a c10 exception (TORCH_CHECK) and any message with
an integer formatted by an std::ostream crashed the interpreter (bindings.cpp says more).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, ModuleType

import torch

from impl.capabilities import missing_hopper
from impl.kernels import load, peaks, tiles

GEMM_VERSIONS: tuple[str, ...] = ("v1", "v1c", "v2", "v3", "v4", "v5", "v6", "v7", "cublas")

#: Versions that run only on Hopper (sm_90): their kernels are built for sm_90a.
HOPPER_VERSIONS: tuple[str, ...] = ("v6", "v7")

#: Input dtypes each version accepts. The output has the input dtype; v4-v6 accumulate
#: in fp32 and round once at the end, as cuBLAS does for torch.matmul on bf16/fp16.
GEMM_DTYPES: Mapping[str, tuple[torch.dtype, ...]] = MappingProxyType({
    "v1": (torch.float32,),
    "v1c": (torch.float32,),
    "v2": (torch.float32,),
    "v3": (torch.float32,),
    "v4": (torch.bfloat16, torch.float16),
    "v5": (torch.bfloat16, torch.float16),
    "v6": (torch.bfloat16, torch.float16),
    "v7": (torch.bfloat16, torch.float16),
    "cublas": (torch.float32, torch.bfloat16, torch.float16),
})


#: Kernels index with 32-bit sizes (launchers.h): every dimension at most 2^30, every
#: operand at most INT_MAX elements. bindings.cpp enforces the same limits.
MAX_DIM = 2**30
MAX_ELEMENTS = 2**31 - 1


def _extension() -> ModuleType:
    return load()


def check_version(version: str, dtype: torch.dtype | None = None) -> None:
    """ValueError for an unknown version, TypeError for a dtype the version lacks."""
    if version not in GEMM_VERSIONS:
        raise ValueError(f"unknown GEMM version {version!r}; valid: {', '.join(GEMM_VERSIONS)}")
    if dtype is not None and dtype not in GEMM_DTYPES[version]:
        allowed = ", ".join(str(d) for d in GEMM_DTYPES[version])
        raise TypeError(f"GEMM {version} does not take {dtype}; allowed: {allowed}")


@dataclass(frozen=True)
class _Operands:
    """What an operation asks of its two tensor operands (bindings.cpp checks the same)."""

    names: tuple[str, str]
    #: Dimensions that must be equal (first operand's, second's); None: the whole shapes.
    agree: tuple[int, int] | None
    #: The requirement, as the shape error states it.
    need: str
    #: Text between "op: " and the shapes in the shape error.
    mismatch: str = ""
    #: 2-D operands (False: any shape, e.g. the weights of the SGD update).
    matrix: bool = True
    #: The output is first.shape[0] x second.shape[1] and must fit MAX_ELEMENTS.
    gemm_output: bool = False


_GEMM = _Operands(("a", "b"), (1, 0), "need a.shape[1] == b.shape[0]",
                  mismatch="inner dimensions differ: ", gemm_output=True)
_SEED_FORWARD = _Operands(("x", "w"), (1, 0), "need x.shape[1] == w.shape[0]")
_SEED_WEIGHT_GRAD = _Operands(("x", "grad_out"), (0, 0), "need the same number of rows")
_SEED_SGD = _Operands(("w", "grad"), None, "need the same shape", matrix=False)


def _validate(op: str, spec: _Operands, dtypes: tuple[torch.dtype, ...],
              first: torch.Tensor, second: torch.Tensor) -> None:
    """Raise TypeError/ValueError for operands the kernel of ``op`` cannot take.

    Order: each operand's type, dtype, layout, rank, contiguity and sizes; then the
    operands together (one dtype, agreeing shapes, output size); the devices last.
    Runs on every call, also inside the benchmarks' timed loops, so valid operands take
    the shortest path (about 2 µs for a GEMM).
    """
    for name, t in ((spec.names[0], first), (spec.names[1], second)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{op}: {name} must be a torch.Tensor; got {type(t).__name__}")
        if t.dtype not in dtypes:
            allowed = ", ".join(str(d) for d in dtypes)
            raise TypeError(f"{op}: {name} has dtype {t.dtype}; allowed: {allowed}")
        if t.layout is not torch.strided:
            raise ValueError(f"{op}: {name} must be a dense (strided) tensor; got layout "
                             f"{t.layout}")
        if spec.matrix and t.dim() != 2:
            raise ValueError(f"{op}: {name} must be 2-D (a matrix); got shape {list(t.shape)}")
        if not t.is_contiguous():
            raise ValueError(f"{op}: {name} must be contiguous (row-major); got shape "
                             f"{list(t.shape)} with strides {list(t.stride())}; call "
                             ".contiguous() first")
        numel = t.numel()
        if numel == 0 or numel > MAX_DIM:  # else no dimension can exceed MAX_DIM either
            if any(size > MAX_DIM for size in t.shape):
                raise ValueError(f"{op}: {name} has shape {list(t.shape)}; every dimension "
                                 "must be at most 2^30")
            if numel > MAX_ELEMENTS:
                raise ValueError(f"{op}: {name} has {numel} elements; at most {MAX_ELEMENTS} "
                                 "are supported")
    name1, name2 = spec.names
    if first.dtype != second.dtype:
        raise TypeError(f"{op}: {name1} and {name2} must have one dtype; got {first.dtype} "
                        f"and {second.dtype}")
    shape1, shape2 = first.shape, second.shape
    if spec.agree is None:
        agree = shape1 == shape2
    else:
        agree = shape1[spec.agree[0]] == shape2[spec.agree[1]]
    if not agree:
        raise ValueError(f"{op}: {spec.mismatch}{name1} is {list(shape1)}, {name2} is "
                         f"{list(shape2)} ({spec.need})")
    if spec.gemm_output and shape1[0] * shape2[1] > MAX_ELEMENTS:
        raise ValueError(f"{op}: output {shape1[0]}x{shape2[1]} has more than {MAX_ELEMENTS} "
                         "elements")
    if not first.is_cuda:
        raise ValueError(f"{op}: {name1} must be a CUDA tensor; got device {first.device}")
    if not second.is_cuda:
        raise ValueError(f"{op}: {name2} must be a CUDA tensor; got device {second.device}")
    if first.device != second.device:
        raise ValueError(f"{op}: operands on different devices ({first.device} and "
                         f"{second.device})")


def gemm_launcher(a: torch.Tensor, b: torch.Tensor, version: str) -> Callable[[], torch.Tensor]:
    """Check ``a``, ``b`` and ``version`` once; the returned call only launches the kernel.

    For timing loops: the checks cost microseconds, as much as a small GEMM, and must not
    be timed with it.
    """
    if version == "cublas":
        check_version(version, a.dtype)
        return lambda: torch.matmul(a, b)
    check_version(version)
    _validate(f"gemm {version}", _GEMM, GEMM_DTYPES[version], a, b)
    if version in HOPPER_VERSIONS:
        _require_hopper(f"gemm {version}", a.device)
    if version == "v7":
        return v7_launcher(a, b)
    kernel = getattr(_extension(), f"gemm_{version}")
    return lambda: kernel(a, b)


def _require_hopper(op: str, device: torch.device) -> None:
    reason = missing_hopper(device)
    if reason is not None:
        raise RuntimeError(f"{op}: {reason}")


def gemm_v6_path(a: torch.Tensor, b: torch.Tensor) -> str:
    """Which kernel ``gemm(a, b, "v6")`` runs: ``"tma"`` (v6's own) or ``"v5"``.

    v6 reads its operands with TMA, which needs row strides that are multiples of 16
    bytes (k and n multiples of 8) and 16-byte aligned pointers; otherwise it runs v5's
    kernel, which takes any size.
    """
    _validate("gemm v6", _GEMM, GEMM_DTYPES["v6"], a, b)
    _require_hopper("gemm v6", a.device)
    return "tma" if _extension().gemm_v6_tma_path(a, b) else "v5"


@dataclass(frozen=True)
class V7Plan:
    """How v7 runs one GEMM: its tile width and the copies that give TMA the rows it needs.

    TMA reads rows whose strides are multiples of 16 bytes (8 elements) from 16-byte aligned
    bases, and reads them fastest when each row starts on a 128-byte line (64 elements).
    v7 reads each operand through its own row stride, over its real k (and B over its real
    n), TMA's zero fill padding the tiles past them. An operand is copied first onto rows of
    whole lines (one memory-bound pass, timed with the GEMM) where its stride is not a
    multiple of 8 or its base is misaligned, or where ``tiles.copies_onto_lines`` finds the
    copy worth it; the other operand is read in place.
    """

    block_n: int  # tile width: 128 or 256 (the plan's), or a forced V7_UNFITTED_WIDTHS one
    copy_a: bool
    copy_b: bool
    splits: int = 1  # split-K parts (tiles.choose_splits); > 1: fp32 partials, then a sum
    stream_k_tiles: int = 0  # tiles shared out stream-K (tiles.chooses_stream_k); 0: none
    #: CTAs sharing each SM: 1, or 2 (block_n 128 without stream-K, each CTA with half the
    #: shared-memory ring, so that one's epilogue overlaps the other's main loop). Only
    #: forced: it ran slower than one CTA on most shapes of the first sweep that timed it
    #: (docs/gemm.md), so the plan never picks 2 itself.
    ctas_per_sm: int = 1

    @property
    def row_multiple(self) -> int:
        """What the copied operands' row strides are multiples of: whole lines (64) where
        one is copied, else TMA's minimum (8), which both then meet in place."""
        return tiles.LINE_ELEMENTS if self.copy_a or self.copy_b else 8


#: CTAs per SM v7 can run; 2 only at this tile width and without stream-K (gemm_v7.cu).
V7_CTAS_PER_SM = (1, 2)
V7_PAIR_BLOCK_N = 128
#: Tile widths v7 has a kernel for but tiles.TILE_RATES no rate: run only where forced, and
#: then unsplit and without stream-K unless those are forced too (both choices need the
#: width's rate). 192 fits wave counts and narrow n between 128 and 256.
V7_UNFITTED_WIDTHS = (192,)
V7_WIDTHS = tuple(sorted((*tiles.TILE_RATES, *V7_UNFITTED_WIDTHS)))


def _check_ctas_per_sm(ctas_per_sm: int, block_n: int | None, stream_k: bool | None) -> None:
    """ValueError for a CTAs-per-SM count v7 has no kernel for (with what was forced)."""
    if ctas_per_sm not in V7_CTAS_PER_SM:
        raise ValueError(f"gemm v7: ctas_per_sm {ctas_per_sm} is not allowed; allowed: 1 or 2 "
                         f"(2 only at block_n {V7_PAIR_BLOCK_N} without stream-K)")
    if ctas_per_sm == 2 and (block_n not in (None, V7_PAIR_BLOCK_N) or stream_k):
        forced = f"block_n {block_n}" if block_n not in (None, V7_PAIR_BLOCK_N) else "stream-K"
        raise ValueError(f"gemm v7: ctas_per_sm 2 is not allowed with {forced}; allowed: 1 or "
                         f"2, and 2 only at block_n {V7_PAIR_BLOCK_N} without stream-K")


def v7_plan(m: int, n: int, k: int, sms: int, ridge_flop_per_byte: float | None,
            a_aligned: bool = True, b_aligned: bool = True, block_n: int | None = None,
            to_lines: bool | None = None, splits: int | None = None,
            stream_k: bool | None = None, ctas_per_sm: int | None = None) -> V7Plan:
    """The plan for an m×n×k GEMM on ``sms`` multiprocessors of roofline ridge point
    ``ridge_flop_per_byte`` (None: a device without a peaks row, whose operands are then
    copied only where TMA cannot read them in place, and which neither splits K nor runs
    stream-K). ``block_n``,
    ``to_lines``, ``splits``, ``stream_k`` and ``ctas_per_sm`` force the choices they name
    (stream-K forced on runs unsplit, and only where ``tiles.stream_k_tiles`` finds a
    partial wave; ``ctas_per_sm`` 2 runs at block_n 128 without stream-K, and is never the
    plan's own choice; a width of V7_UNFITTED_WIDTHS runs unsplit and without stream-K
    unless those are forced)."""
    if ctas_per_sm is None:
        ctas_per_sm = 1
    _check_ctas_per_sm(ctas_per_sm, block_n, stream_k)
    if ctas_per_sm == 2:
        block_n, stream_k = V7_PAIR_BLOCK_N, False
    if block_n is None:
        block_n = tiles.choose_block_n(m, n, k, sms)
    elif block_n not in V7_WIDTHS:
        raise ValueError(f"gemm v7: block_n {block_n} is not a tile width; allowed: "
                         f"{', '.join(map(str, V7_WIDTHS))}")
    fitted = block_n in tiles.TILE_RATES
    if to_lines is None and ridge_flop_per_byte is not None:
        lines = tiles.copies_onto_lines(m, n, k, block_n, ridge_flop_per_byte)
    else:  # forced (every operand off the lines copied onto them, or none), or no peaks row
        lines = (bool(to_lines) and k % tiles.LINE_ELEMENTS != 0,
                 bool(to_lines) and n % tiles.LINE_ELEMENTS != 0)
    if stream_k is None:  # a forced split stays as forced
        stream_k = fitted and splits is None and tiles.chooses_stream_k(
            m, n, k, block_n, tiles.choose_splits(m, n, k, block_n, sms, ridge_flop_per_byte),
            sms, ridge_flop_per_byte)
    if splits is None:
        splits = tiles.choose_splits(m, n, k, block_n, sms, ridge_flop_per_byte) if fitted else 1
    elif not 1 <= splits <= tiles.MAX_SPLITS:
        raise ValueError(f"gemm v7: splits {splits} is out of range; allowed: 1 to "
                         f"{tiles.MAX_SPLITS}")
    shared = tiles.stream_k_tiles(tiles.tiles(m, n, block_n),
                                  -(-k // tiles.BLOCK_K), sms) if stream_k else 0
    # TMA cannot read rows whose stride is not a multiple of 8 elements, or a misaligned base.
    return V7Plan(block_n, copy_a=lines[0] or k % 8 != 0 or not a_aligned,
                  copy_b=lines[1] or n % 8 != 0 or not b_aligned,
                  splits=1 if shared else splits, stream_k_tiles=shared,
                  ctas_per_sm=ctas_per_sm)


def ridge_point(device: torch.device) -> float | None:
    """The bf16 roofline ridge (peak FLOP/s over HBM bytes/s) of ``device``, or None for a
    GPU without a row in impl/kernels/peaks.py."""
    try:
        device_peaks = peaks.lookup(torch.cuda.get_device_name(device))
    except peaks.UnknownDeviceError:
        return None
    return device_peaks.peak_flops("bf16") / device_peaks.hbm_bytes_per_s


def _aligned16(t: torch.Tensor) -> bool:
    return t.data_ptr() % 16 == 0


def onto_lines(t: torch.Tensor) -> torch.Tensor:
    """``t``'s rows copied onto rows of whole 128-byte lines (``tiles.LINE_ELEMENTS`` a
    multiple of their stride, on a fresh allocation, so 16-byte aligned): a view of the
    copy's first ``t.shape[1]`` columns. Each element is written once and nothing is zeroed:
    v7 reads no further than the view (TMA zero-fills past it), where the former zero-padded
    copy also wrote the padding (ncu on 3000×5000×2000: v7's GEMM kernel 120 µs against
    cuBLAS's 110, the copies most of the rest)."""
    rows, cols = t.shape
    lines = tiles.LINE_ELEMENTS
    view = t.new_empty(rows, -(-cols // lines) * lines)[:, :cols]
    return view.copy_(t)


def v7_launcher(a: torch.Tensor, b: torch.Tensor, block_n: int | None = None,
                out: torch.Tensor | None = None, to_lines: bool | None = None,
                splits: int | None = None, stream_k: bool | None = None,
                ctas_per_sm: int | None = None) -> Callable[[], torch.Tensor]:
    """A launcher of v7 for ``a`` @ ``b`` (checked once, as ``gemm_launcher``).

    ``block_n``, ``to_lines``, ``splits``, ``stream_k`` and ``ctas_per_sm`` force the plan's
    choices (default: ``v7_plan``'s); ``out``
    (m×n, the operands' dtype) receives the result instead of a fresh tensor, so a check can
    poison it. The launcher's ``plan`` attribute is the plan it runs.
    """
    if ctas_per_sm is not None:  # before the device, as the other argument checks
        _check_ctas_per_sm(ctas_per_sm, block_n, stream_k)
    _validate("gemm v7", _GEMM, GEMM_DTYPES["v7"], a, b)
    _require_hopper("gemm v7", a.device)
    (m, k), n = a.shape, b.shape[1]
    if out is not None and (out.shape != (m, n) or out.dtype != a.dtype
                            or out.device != a.device or not out.is_contiguous()
                            or not _aligned16(out)):
        raise ValueError(f"gemm v7: out must be a contiguous, 16-byte aligned {m}x{n} "
                         f"{a.dtype} tensor on {a.device}; got {list(out.shape)} {out.dtype} "
                         f"on {out.device} at address {out.data_ptr():#x}")
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    plan = v7_plan(m, n, k, sms, ridge_point(a.device), _aligned16(a), _aligned16(b), block_n,
                   to_lines, splits, stream_k, ctas_per_sm)
    kernel = _extension().gemm_v7
    # Split-K's parts or stream-K's planes, of whole tiles (no bounds checks in the stores).
    partial_floats = _extension().v7_workspace_floats(m, n, k, plan.block_n, plan.splits,
                                                      plan.stream_k_tiles)

    def launch() -> torch.Tensor:
        a_in = onto_lines(a) if plan.copy_a else a
        b_in = onto_lines(b) if plan.copy_b else b
        c = torch.empty(m, n, dtype=a.dtype, device=a.device) if out is None else out
        partials = torch.empty(partial_floats, dtype=torch.float32, device=a.device)
        kernel(a_in, b_in, c, plan.block_n, plan.splits, plan.stream_k_tiles, partials,
               plan.ctas_per_sm)
        return c

    launch.plan = plan  # type: ignore[attr-defined]  # what ran, for the benchmark's row
    return launch


#: Tensor-core instruction families the ceiling probe (tc_peak.cu) measures.
TENSOR_CORE_INSTRUCTIONS: tuple[str, ...] = ("mma.sync", "wgmma")


def tensor_core_probe(instruction: str, iterations: int) -> Callable[[], int]:
    """A launcher of the bf16 tensor-core ceiling probe for ``instruction``.

    Each call launches once on the current device and stream and returns the FLOP that
    launch executes; time it with CUDA events. ``"wgmma"`` needs Hopper.
    """
    if instruction not in TENSOR_CORE_INSTRUCTIONS:
        raise ValueError(f"unknown tensor-core instruction {instruction!r}; valid: "
                         f"{', '.join(TENSOR_CORE_INSTRUCTIONS)}")
    if not 1 <= iterations <= 2**20:
        raise ValueError(f"iterations must be in [1, 1048576]; got {iterations}")
    if instruction == "wgmma":
        _require_hopper("tensor_core_probe wgmma", torch.device("cuda"))
    probe = _extension().tensor_core_probe
    return lambda: probe(instruction, iterations)


def gemm(a: torch.Tensor, b: torch.Tensor, version: str) -> torch.Tensor:
    """C = a @ b for 2-D row-major ``a`` (m×k) and ``b`` (k×n) with the chosen kernel.

    ``"cublas"`` is ``torch.matmul`` (any device); v1-v7 need CUDA tensors, v6 and v7 a
    Hopper GPU.
    """
    return gemm_launcher(a, b, version)()


def seed_forward(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """y = x @ w (fp32), the seed's naive kernel: one thread per row of y."""
    _validate("seed_forward", _SEED_FORWARD, (torch.float32,), x, w)
    return _extension().seed_forward(x, w)


def seed_weight_grad(x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    """grad_w = x.T @ grad_out (fp32), one thread per element of grad_w."""
    _validate("seed_weight_grad", _SEED_WEIGHT_GRAD, (torch.float32,), x, grad_out)
    return _extension().seed_weight_grad(x, grad_out)


def seed_sgd_(w: torch.Tensor, grad: torch.Tensor, lr: float) -> torch.Tensor:
    """w -= lr * grad in place (fp32), one thread per element; returns ``w``."""
    _validate("seed_sgd_", _SEED_SGD, (torch.float32,), w, grad)
    _extension().seed_sgd_(w, grad, float(lr))
    return w


def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOP of one GEMM: 2·m·n·k (one multiply and one add per term)."""
    return 2 * m * n * k


def gemm_bytes(m: int, n: int, k: int, element_bytes: int) -> int:
    """Bytes of A, B and C each moved once: element_bytes · (m·k + k·n + m·n)."""
    return element_bytes * (m * k + k * n + m * n)


def arithmetic_intensity(m: int, n: int, k: int, element_bytes: int) -> float:
    """FLOP per byte: 2mnk / (element_bytes · (mk + kn + mn)), the roofline's x axis."""
    return gemm_flops(m, n, k) / gemm_bytes(m, n, k, element_bytes)
