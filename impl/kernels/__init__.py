"""Hand-written CUDA kernels, built just in time for the GPU at hand.

Why ``torch.utils.cpp_extension.load`` rather than NVRTC (or CuPy's RawKernel): the
kernels and their host launchers are one ordinary C++/CUDA build (templates, a header,
``extern "C"`` launchers) compiled by nvcc, and ``bindings.cpp`` hands them torch tensors
and torch's current CUDA stream directly, so no pointer/stream glue or second runtime
is needed, and the same ``.cu`` files also compile stand-alone with ``nvcc -c``
(tests/test_kernels.py). The price is a one-off build (about a minute) on first use.

Importing this package never touches CUDA: :func:`load` compiles on first call, so the
suite imports on CPU-only machines. Builds are cached under
``$TORCH_EXTENSIONS_DIR/overlap_kernels_<key>`` (default
``~/.cache/overlap-suite/kernels/...``), the key hashing the sources, the compiler flags,
the target architecture and the torch/CUDA versions, so any change rebuilds and an
unchanged tree reloads in about a second.

Flags: ``-O3`` and ``-arch=sm_XY`` of the current device (``sm_90a`` on Hopper, for v6).
No ``--use_fast_math``: the kernels only multiply and add, so it would gain nothing,
while its flush-to-zero of denormals would make the fp32 results differ from torch's
beyond the tolerances the tests derive.

    from impl.kernels import ops
    c = ops.gemm(a, b, "v6")          # builds on the first call
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from types import ModuleType

import torch

SOURCE_DIR = Path(__file__).resolve().parent
CUDA_SOURCES = ("seed_step.cu", "gemm.cu", "gemm_hopper.cu", "gemm_v7.cu", "tc_peak.cu")
SOURCES = ("bindings.cpp", *CUDA_SOURCES)
HEADERS = ("launchers.h", "device_common.cuh", "hopper.cuh")
EXTENSION_NAME = "overlap_kernels"


def cuda_flags(capability: tuple[int, int]) -> list[str]:
    """nvcc flags for a device of compute capability ``capability`` (e.g. (9, 0))."""
    major, minor = capability
    # sm_90a, not sm_90: wgmma, setmaxnreg and TMA multicast are "architecture-specific"
    # features, compiled only for the "a" target (which then runs on sm_90 devices alone).
    arch = f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")
    # One explicit -arch also stops torch from adding its own arch list (TORCH_CUDA_ARCH_LIST).
    return ["-O3", f"-arch={arch}", "-std=c++17", "-lineinfo"]


def build_key(capability: tuple[int, int]) -> str:
    """Hash of everything the binary depends on: sources, flags, arch, torch and CUDA."""
    digest = hashlib.sha256()
    for name in (*SOURCES, *HEADERS):
        digest.update(name.encode())
        digest.update((SOURCE_DIR / name).read_bytes())
    digest.update(" ".join(cuda_flags(capability)).encode())
    digest.update(f"{torch.__version__} {torch.version.cuda}".encode())
    return f"sm{capability[0]}{capability[1]}_{digest.hexdigest()[:16]}"


def build_root() -> Path:
    """Where builds live: ``$TORCH_EXTENSIONS_DIR`` or ``~/.cache/overlap-suite/kernels``."""
    configured = os.environ.get("TORCH_EXTENSIONS_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "overlap-suite" / "kernels"


@functools.cache
def load(verbose: bool = False) -> ModuleType:
    """Build (or reload from the cache) and import the extension for the current device.

    Raises RuntimeError with the reason when it cannot: no CUDA device, no CUDA toolkit
    (nvcc / CUDA_HOME), or no ninja, which torch's JIT builder needs.
    """
    if not torch.cuda.is_available():
        raise RuntimeError(
            f"impl.kernels needs a CUDA device; torch {torch.__version__} sees none"
        )
    from torch.utils import cpp_extension  # slow import, only needed here

    if cpp_extension.CUDA_HOME is None:
        raise RuntimeError(
            "impl.kernels: no CUDA toolkit found (set CUDA_HOME or put nvcc on PATH)"
        )
    if not cpp_extension.is_ninja_available():
        raise RuntimeError("impl.kernels: torch's JIT build needs ninja (pip install ninja)")
    capability = torch.cuda.get_device_capability()
    name = f"{EXTENSION_NAME}_{build_key(capability)}"
    build_directory = build_root() / name
    build_directory.mkdir(parents=True, exist_ok=True)
    return cpp_extension.load(
        name=name,
        sources=[str(SOURCE_DIR / source) for source in SOURCES],
        extra_cflags=["-O3"],
        extra_cuda_cflags=cuda_flags(capability),
        extra_include_paths=[str(SOURCE_DIR)],
        build_directory=str(build_directory),
        verbose=verbose,
    )
