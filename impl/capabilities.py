"""What this machine can run, asked in one place.

Every check returns ``None`` when the capability is present and otherwise a
one-line reason that tests and benchmarks use verbatim as their skip reason.
No other module probes hardware or versions on its own.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil

import torch
import torch.distributed as dist


def gpu_count() -> int:
    """CUDA devices visible to this process (0 on a CPU build or without a GPU)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def default_backend() -> str:
    """nccl where CUDA is present, gloo otherwise (DESIGN.md, Launch)."""
    return "nccl" if gpu_count() > 0 and dist.is_nccl_available() else "gloo"


def default_device() -> torch.device:
    return torch.device("cuda") if gpu_count() > 0 else torch.device("cpu")


def missing_gpu(count: int = 1) -> str | None:
    present = gpu_count()
    if present >= count:
        return None
    if not torch.cuda.is_available():
        return f"needs {count} CUDA GPU(s); torch {torch.__version__} sees none"
    return f"needs {count} CUDA GPU(s); {present} present"


@functools.cache
def missing_mpi() -> str | None:
    """mpi4py importable and an MPI launcher (mpirun or mpiexec) on PATH."""
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed (pip install 'overlap-suite[mpi]')"
    if mpi_launcher() is None:
        return "no MPI launcher (mpirun or mpiexec) on PATH"
    return None


def mpi_launcher() -> str | None:
    return shutil.which("mpirun") or shutil.which("mpiexec")


def missing_hopper(device: torch.device | None = None) -> str | None:
    """A Hopper GPU (compute capability 9.0), which the sm_90a kernels (TMA, wgmma) need."""
    if gpu_count() == 0:
        return missing_gpu(1)
    capability = torch.cuda.get_device_capability(device)
    if capability != (9, 0):
        name = torch.cuda.get_device_name(device)
        return (f"needs a Hopper GPU (compute capability 9.0, sm_90a); {name} is "
                f"{capability[0]}.{capability[1]}")
    return None


def missing_nvcc() -> str | None:
    return None if shutil.which("nvcc") else "nvcc (CUDA compiler) is not on PATH"


@functools.cache
def missing_nvml() -> str | None:
    """NVML reachable through nvidia-ml-py and at least one GPU behind it."""
    if importlib.util.find_spec("pynvml") is None:
        return "nvidia-ml-py is not installed"
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        return f"NVML unavailable: {error}"
    try:
        if pynvml.nvmlDeviceGetCount() == 0:
            return "NVML sees no GPU"
    finally:
        pynvml.nvmlShutdown()
    return None


@functools.cache
def missing_sklearn() -> str | None:
    """scikit-learn importable (it ships the digits of the hybrid study), else the skip reason."""
    try:
        import sklearn.datasets  # noqa: F401
    except ImportError:
        return "scikit-learn is not installed (pip install 'overlap-suite[studies]')"
    return None


@functools.cache
def missing_pipelining() -> str | None:
    """torch.distributed.pipelining (PipelineStage, ScheduleGPipe, Schedule1F1B) importable."""
    try:
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe  # noqa: F401
    except ImportError as error:
        return f"torch {torch.__version__} has no usable torch.distributed.pipelining: {error}"
    return None


def missing_world(world_size: int, launched_world: int) -> str | None:
    """A benchmark for ``world_size`` ranks needs at least that many launched."""
    if world_size <= launched_world:
        return None
    return f"needs {world_size} ranks; this run launched {launched_world}"


def missing_copy_engine(backend: str, profile: str, world_size: int) -> str | None:
    """What the copy-engine strategy needs: CUDA GPUs of one node that all reach each other's
    memory directly (NVLink: the ``nvlink`` profile), NCCL for the process group, and
    PyTorch's symmetric memory."""
    if backend != "nccl" or gpu_count() == 0:
        return ("copy-engine moves gradients between GPUs through symmetric memory: it needs "
                f"CUDA GPUs and NCCL ({missing_gpu(max(world_size, 1)) or backend})")
    if profile != "nvlink":
        return (f"copy-engine needs peer access between the GPUs; the {profile!r} profile "
                "emulates a fabric without it")
    if world_size > gpu_count():
        return f"copy-engine runs within one node: {world_size} ranks, {gpu_count()} GPUs here"
    if importlib.util.find_spec("torch.distributed._symmetric_memory") is None:
        return f"torch {torch.__version__} has no symmetric memory"
    return missing_peer_access(world_size)


def missing_whole_world(world_size: int, launched_world: int) -> str | None:
    """Symmetric memory (the copy-engine's buffer, the fused TP ops' workspace) only on the
    whole launched world. PyTorch numbers each rendezvous's store exchange per process, not per
    group: a rendezvous in a subgroup advances its members' count alone, and the next one in
    the whole world then waits forever for keys the other ranks number differently (seen on
    4 H200: every rank in ``rendezvous`` at w = 4 after w = 2 had used it)."""
    if world_size == 1 or world_size >= launched_world:  # one rank exchanges nothing
        return None
    return (f"symmetric memory runs on the whole launch only (a rendezvous in {world_size} of "
            f"{launched_world} ranks would leave the others' exchange count behind): launch "
            f"{world_size} ranks to measure it at w = {world_size}")


def missing_peer_access(world_size: int) -> str | None:
    """Every pair of the first ``world_size`` GPUs reaches each other's memory directly."""
    blocked = [(a, b) for a in range(world_size) for b in range(world_size)
               if a != b and not torch.cuda.can_device_access_peer(a, b)]
    if blocked:
        return f"GPUs {blocked[0][0]} and {blocked[0][1]} cannot access each other's memory"
    return None


#: PyTorch's fused collective-GEMM ops over symmetric memory (the tensor-parallel peer).
SYMM_MEM_OPS = ("fused_all_gather_matmul", "fused_matmul_reduce_scatter")
#: NVLink multicast must stay off on shared machines (impl/profiles.py sets these).
MULTICAST_OFF = {"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NCCL_NVLS_ENABLE": "0"}


@functools.cache
def missing_symm_mem_ops() -> str | None:
    """torch.distributed._symmetric_memory with the fused all-gather-matmul and
    matmul-reduce-scatter ops (importing the module registers torch.ops.symm_mem)."""
    if importlib.util.find_spec("torch.distributed._symmetric_memory") is None:
        return f"torch {torch.__version__} has no torch.distributed._symmetric_memory"
    importlib.import_module("torch.distributed._symmetric_memory")
    for op in SYMM_MEM_OPS:
        if not hasattr(torch.ops.symm_mem, op):
            return f"torch {torch.__version__} lacks torch.ops.symm_mem.{op}"
    return None


def missing_fused_tp(world_size: int, backend: str) -> str | None:
    """PyTorch's fused ops for ``world_size`` ranks: the ops, CUDA GPUs of one node under
    NCCL that reach each other's memory (peer access), at least 2 of them, multicast off."""
    if reason := missing_symm_mem_ops():
        return reason
    if backend != "nccl" or gpu_count() == 0:
        return (f"needs CUDA GPUs under NCCL (symmetric memory); this run uses {backend} "
                f"with {gpu_count()} GPU(s)")
    if world_size < 2:
        return "needs 2 or more GPUs: on one GPU there is nothing to gather or scatter"
    if reason := missing_gpu(world_size):
        return reason
    if reason := missing_peer_access(world_size):
        return reason
    for name, value in MULTICAST_OFF.items():
        if os.environ.get(name) != value:
            return (f"NVLink multicast must stay off: needs {name}={value}, the environment "
                    f"has {name}={os.environ.get(name)!r}")
    return None
