"""Process groups from torchrun's (or mpirun's) environment, with deliberate timeouts.

One node:    torchrun --nproc-per-node 4 -m pytest suite/
Many nodes:  torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
                 --rdzv-endpoint head:29500 -m pytest suite/
Slurm:       srun --nodes 2 --ntasks-per-node 1 torchrun --nnodes 2 --nproc-per-node 8 \\
                 --rdzv-backend c10d --rdzv-endpoint $(hostname):29500 -m pytest suite/
MPI:         mpirun -n 2 python -m pytest suite/ -k mpi   (RANK etc. taken from OpenMPI/PMI)
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist

from impl import capabilities
from impl.profiles import DEFAULT_PROFILE, PROFILE_ENV, apply_profile, recorded_profile
from impl.settings import BACKENDS, selected_backend

# A collective that waits longer than this ends the run with an error instead of a hang.
# Long enough for the slowest benchmark round (socket profile, 1.5 GiB), short enough that a
# dead peer is noticed within minutes. OVERLAP_PG_TIMEOUT_S overrides it.
DEFAULT_TIMEOUT_S = 300
SUBGROUP_SIZES = (1, 2, 4, 8, 16, 32, 64)

_MPI_ENV = (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
            ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"))


def env_int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"{name}={value} must be at least {minimum}")
    return value


def _adopt_mpi_environment() -> None:
    """Under mpirun there is no RANK/WORLD_SIZE: take them from the MPI launcher."""
    if "RANK" in os.environ:
        return
    for rank_key, size_key, local_key in _MPI_ENV:
        if rank_key in os.environ:
            os.environ["RANK"] = os.environ[rank_key]
            os.environ["WORLD_SIZE"] = os.environ[size_key]
            os.environ["LOCAL_RANK"] = os.environ.get(local_key, os.environ[rank_key])
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29511")
            return


@dataclass
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: torch.device
    profile: str
    timeout_s: int
    _groups: dict[int, dist.ProcessGroup | None] = field(default_factory=dict, repr=False)
    _idle_meetings: int = field(default=0, repr=False)

    def group(self, world_size: int) -> dist.ProcessGroup | None:
        """The group of ranks [0, world_size); None on ranks outside it."""
        if world_size not in self._groups:
            raise ValueError(f"world size {world_size} is not available in this run of "
                             f"{self.world_size} ranks; choose one of {sorted(self._groups)}")
        return self._groups[world_size]

    @property
    def world_sizes(self) -> list[int]:
        return sorted(self._groups)


def group_sizes(world_size: int) -> list[int]:
    """The groups a launch of ``world_size`` ranks builds: the SUBGROUP_SIZES below it and the
    whole world, whatever its size (3 ranks are allowed: benchmarks of the launched world, such
    as autotune and interference, run on it)."""
    return [*(size for size in SUBGROUP_SIZES if size < world_size), world_size]


def init_distributed(timeout_s: int | None = None) -> DistContext:
    """Start (or join) the default process group from the launcher's environment.

    Without a launcher this is a world of one. Backend nccl where CUDA is present, gloo
    otherwise; with nccl the interconnect profile (OVERLAP_PROFILE) is applied before NCCL
    starts.
    """
    _adopt_mpi_environment()
    timeout_s = timeout_s or env_int("OVERLAP_PG_TIMEOUT_S", DEFAULT_TIMEOUT_S, minimum=1)
    rank = env_int("RANK", 0)
    world_size = env_int("WORLD_SIZE", 1, minimum=1)
    local_rank = env_int("LOCAL_RANK", 0)
    local_world = env_int("LOCAL_WORLD_SIZE", world_size, minimum=1)
    backend = selected_backend()
    if backend not in BACKENDS:
        raise ValueError(f"OVERLAP_BACKEND={backend!r}: choose {' or '.join(BACKENDS)}")
    if backend == "nccl":
        if reason := capabilities.missing_gpu(local_world):
            raise ValueError(f"world size {local_world} on this node with nccl: {reason}")
        # Profiles are NCCL settings: applied before NCCL starts, and only for NCCL.
        apply_profile(os.environ.get(PROFILE_ENV, DEFAULT_PROFILE))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        # Errors on one rank abort the communicator so the others fail instead of hanging.
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    else:
        device = torch.device("cpu")
    profile = recorded_profile(backend)

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29510")
        kwargs = {"device_id": device} if backend == "nccl" else {}
        dist.init_process_group(backend, rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout_s), **kwargs)
    context = DistContext(rank, world_size, local_rank, backend, device, profile, timeout_s)
    # new_group is collective over all ranks: create every subgroup once, in the same order,
    # and with NCCL the named variants' groups with options too (a cell in a subgroup runs on
    # its members only and could not make them; impl/strategies/knobs.py).
    for size in group_sizes(world_size):
        group = dist.group.WORLD if size == world_size else dist.new_group(list(range(size)))
        context._groups[size] = group if rank < size else None
    if backend == "nccl":
        from impl.strategies.knobs import make_variant_groups

        make_variant_groups(group_sizes(world_size))
    return context


IDLE_POLL_S = 0.02  # how often a rank waiting in idle_barrier looks at the store


def idle_barrier(context: DistContext) -> None:
    """Every rank meets here, the waiting ones asleep. NCCL's barrier waits on the GPU stream
    with the host spinning: ranks that wait while rank 0 measures a study of one device (the
    offload family, host Adam) each kept a core busy, and rank 0's OpenMP threads, one per
    core, then waited at every parallel region for the thread sharing a core with them (on
    4 H200, test_digits[cpu] took 173 s against 2.4 s on one GPU). Here each rank counts
    itself in on the launch's store and sleeps until all have. Every rank calls it the same
    number of times, so the n-th meeting has the n-th key."""
    if context.world_size == 1:
        return
    context._idle_meetings += 1
    key = f"overlap/idle-barrier/{context._idle_meetings}"
    count_in(key)
    if not all_counted(context, key, context.timeout_s):
        raise TimeoutError(f"{key}: {counted(key)} of {context.world_size} ranks arrived "
                           f"within the group timeout ({context.timeout_s} s)")
    # Every rank is here: the group's own barrier now costs nothing, and keeps a rank (rank 0
    # hosts the store) from leaving while another still reads the count.
    barrier(context)


def count_in(key: str) -> None:
    """This rank has arrived at ``key`` (a count on the launch's store; no waiting)."""
    dist.distributed_c10d._get_default_store().add(key, 1)


def counted(key: str) -> int:
    return int(dist.distributed_c10d._get_default_store().add(key, 0))


def all_counted(context: DistContext, key: str, timeout_s: float) -> bool:
    """Whether every rank has counted in at ``key`` within ``timeout_s``, asleep meanwhile."""
    deadline = time.monotonic() + timeout_s
    while counted(key) < context.world_size:
        if time.monotonic() > deadline:
            return False
        time.sleep(IDLE_POLL_S)
    return True


def slowest(values: Sequence[float], group: dist.ProcessGroup | None,
            device: torch.device) -> list[float]:
    """Each of ``values`` at its largest over the ranks of ``group``. A collective ends when its
    slowest rank does, and every rank then decides from the same numbers: decisions from each
    rank's own timings can differ, and with them the collectives that follow (on 4 H100, two
    ranks of four failed in autotune while the other two waited in its measurement)."""
    if group is None or dist.get_world_size(group) == 1:
        return list(values)
    tensor = torch.tensor(list(values), dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=group)
    return tensor.tolist()


def barrier(context: DistContext) -> None:
    if context.world_size > 1:
        if context.backend == "nccl":
            dist.barrier(device_ids=[context.local_rank])
        else:
            dist.barrier()
