"""How the tensor-parallel layer's collectives meet its GEMMs: one contract, three schedules.

impl/tensor_parallel/layers.py writes the layer with four collective-GEMM primitives and plain
GEMMs; a schedule decides how each primitive runs and records a timeline (compute and comm lanes):

    all_gather_matmul(x_shard, w)   -> (x, x·w)     x: every rank's rows of x_shard, in rank order
    matmul_reduce_scatter(a, w)     -> this rank's rows of Σ_ranks a·w
    matmul_all_reduce(a, w)         -> Σ_ranks a·w
    matmul_all_gather(x, w)         -> [x·w_0 | … | x·w_{p-1}] (every rank's output columns)

``sync``: the collective, then the GEMM (or the GEMM, then the collective), one stream.
``overlapped``: the collective-matmul pattern. The collective is split into pieces (rows of
each peer, ``pieces_per_peer`` pieces each: per-peer broadcasts for the all-gather, per-peer
reduces for the reduce-scatter, per-chunk all-reduces and all-gathers otherwise) issued
asynchronously, and the GEMM of each piece runs as soon as its rows are present (all-gather) or
its piece is sent as soon as its GEMM is done (reduce-scatter): on GPU the collectives are issued
from a communication stream ordered with CUDA events; on CPU (gloo) they are async work handles.
Every rank issues the pieces in the same order (collectives must match across ranks).
``fused``: PyTorch's own ops over symmetric memory, ``torch.ops.symm_mem.fused_all_gather_matmul``
and ``fused_matmul_reduce_scatter`` (cuBLAS inside, so only with the ``torch`` GEMM backend, and
only the two primitives of the sequence-parallel form). Their communication runs inside the op:
the timeline shows each call as one compute interval.

Each primitive overlaps only its own pieces and returns with its collective finished (in
stream order), the same scope as the fused ops, so the three compare like for like.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
import torch.distributed as dist

from impl import capabilities
from impl.kernels import ops
from impl.timeline import LateMark, TimelineRecorder

GEMM_BACKENDS: tuple[str, ...] = ("torch", "v3", "v5", "v6")
ROW_MAJOR_COPY = "row-major copy"  # timeline label of a transposed operand's copy
SCHEDULES: tuple[str, ...] = ("sync", "overlapped", "fused")

# torch 2.13 renamed the tensor forms of all-gather and reduce-scatter (the old names warn);
# torch 2.11, on the GPU machines, has only the old ones.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_single = (getattr(dist, "reduce_scatter_single", None)
                          or dist.reduce_scatter_tensor)


def missing_gemm_backend(backend: str) -> str | None:
    """Why ``backend`` cannot run here (None when it can): the project's kernels need a CUDA
    GPU and nvcc to build them, v6 a Hopper GPU."""
    if backend == "torch":
        return None
    reason = capabilities.missing_gpu() or capabilities.missing_nvcc()
    if reason is None and backend in ops.HOPPER_VERSIONS:
        reason = capabilities.missing_hopper()
    return reason


class Gemm:
    """C = A·B with one backend: ``torch`` (cuBLAS on GPU, the CPU BLAS on CPU) or one of this
    project's kernels (``v3`` fp32; ``v5``, ``v6`` bf16), which take row-major operands only:
    transposed operands (the backward's Wᵀ, Xᵀ) are copied first, a cost of those backends."""

    def __init__(self, backend: str, dtype: torch.dtype):
        if backend not in GEMM_BACKENDS:
            raise ValueError(f"unknown GEMM backend {backend!r}; choose one of "
                             f"{', '.join(GEMM_BACKENDS)}")
        if backend != "torch":
            ops.check_version(backend, dtype)
        self.backend = backend

    def __call__(self, a: torch.Tensor, b: torch.Tensor,
                 out: torch.Tensor | None = None) -> torch.Tensor:
        if self.backend == "torch":
            return torch.matmul(a, b, out=out)
        c = ops.gemm(a.contiguous(), b.contiguous(), self.backend)
        return c if out is None else out.copy_(c)


def row_pieces(rows_per_rank: int, world: int, per_peer: int) -> list[tuple[int, slice]]:
    """(owner rank, rows) of every piece, owner by owner: ``per_peer`` equal pieces each."""
    if rows_per_rank % per_peer:
        raise ValueError(f"{rows_per_rank} rows do not split into {per_peer} equal pieces "
                         f"(tokens must be a multiple of world size × pieces per peer)")
    size = rows_per_rank // per_peer
    return [(owner, slice(owner * rows_per_rank + i * size, owner * rows_per_rank + (i + 1) * size))
            for owner in range(world) for i in range(per_peer)]


def columns_of(gathered: torch.Tensor, world: int) -> torch.Tensor:
    """[p·T, n] stacked by rank -> [T, p·n] with rank r's output in columns r·n … (r+1)·n."""
    rows, cols = gathered.shape[0] // world, gathered.shape[1]
    return gathered.view(world, rows, cols).permute(1, 0, 2).reshape(rows, world * cols)


class _Pending:
    """A piece in flight: ``wait`` orders the current stream after it (GPU) or blocks (CPU)."""

    def __init__(self, event: torch.cuda.Event | None = None, future=None):
        self.event, self.future = event, future

    def wait(self) -> None:
        if self.event is not None:
            torch.cuda.current_stream().wait_event(self.event)
        else:
            self.future.wait()


class Schedule(ABC):
    """The contract: the four primitives and local GEMMs, each recorded on ``recorder``.

    With one rank every primitive is its GEMM alone (no collective, nothing to record on the
    comm lane), whatever the schedule.
    """

    name = ""

    def __init__(self, group: dist.ProcessGroup | None, gemm: Gemm, device: torch.device,
                 pieces_per_peer: int = 1):
        if pieces_per_peer < 1:
            raise ValueError(f"pieces_per_peer must be at least 1; got {pieces_per_peer}")
        self.group, self.gemm, self.device = group, gemm, device
        self.world = dist.get_world_size(group) if group is not None else 1
        self.rank = dist.get_rank(group) if group is not None else 0
        self.pieces_per_peer = pieces_per_peer
        self.recorder = TimelineRecorder(device)
        self.cuda = device.type == "cuda"
        if self.world == 1:
            self.recorder.notes.append("world size 1: no communication")

    # --- local work, on the compute lane --------------------------------------------------

    def row_major(self, t: torch.Tensor) -> torch.Tensor:
        """The operand as the backend takes it: the project's kernels read row-major operands
        only, so a transposed view (Wᵀ, Xᵀ) is copied, once per primitive rather than once per
        piece, as its own interval on the compute lane."""
        if self.gemm.backend == "torch" or t.is_contiguous():
            return t
        start = self.recorder.mark()
        t = t.contiguous()
        self.recorder.add("compute", ROW_MAJOR_COPY, None, start, self.recorder.mark())
        return t

    def matmul(self, a: torch.Tensor, b: torch.Tensor, label: str,
               out: torch.Tensor | None = None, piece: int | None = None) -> torch.Tensor:
        a, b = self.row_major(a), self.row_major(b)
        start = self.recorder.mark()
        c = self.gemm(a, b, out)
        self.recorder.add("compute", label, piece, start, self.recorder.mark())
        return c

    def _collective(self, label: str, run: Callable[[], object]) -> None:
        """A blocking collective on the current stream, on the comm lane."""
        start = self.recorder.mark()
        run()
        self.recorder.add("comm", label, None, start, self.recorder.mark())

    # --- the four primitives ----------------------------------------------------------------

    def all_gather_matmul(self, x_shard: torch.Tensor, w: torch.Tensor,
                          label: str) -> tuple[torch.Tensor, torch.Tensor]:
        if self.world == 1:
            return x_shard, self.matmul(x_shard, w, label)
        return self._all_gather_matmul(self.row_major(x_shard), self.row_major(w), label)

    def matmul_reduce_scatter(self, a: torch.Tensor, w: torch.Tensor, label: str) -> torch.Tensor:
        if self.world == 1:
            return self.matmul(a, w, label)
        return self._matmul_reduce_scatter(self.row_major(a), self.row_major(w), label)

    def matmul_all_reduce(self, a: torch.Tensor, w: torch.Tensor, label: str) -> torch.Tensor:
        if self.world == 1:
            return self.matmul(a, w, label)
        return self._matmul_all_reduce(self.row_major(a), self.row_major(w), label)

    def matmul_all_gather(self, x: torch.Tensor, w: torch.Tensor, label: str) -> torch.Tensor:
        if self.world == 1:
            return self.matmul(x, w, label)
        return self._matmul_all_gather(self.row_major(x), self.row_major(w), label)

    @abstractmethod
    def _all_gather_matmul(self, x_shard, w, label) -> tuple[torch.Tensor, torch.Tensor]: ...

    @abstractmethod
    def _matmul_reduce_scatter(self, a, w, label) -> torch.Tensor: ...

    @abstractmethod
    def _matmul_all_reduce(self, a, w, label) -> torch.Tensor: ...

    @abstractmethod
    def _matmul_all_gather(self, x, w, label) -> torch.Tensor: ...


class SyncSchedule(Schedule):
    """The whole collective, then the whole GEMM (or the reverse), on one stream."""

    name = "sync"

    def _all_gather_matmul(self, x_shard, w, label):
        x = x_shard.new_empty(self.world * x_shard.shape[0], x_shard.shape[1])
        self._collective("all-gather", lambda: _all_gather_single(x, x_shard, group=self.group))
        return x, self.matmul(x, w, label)

    def _matmul_reduce_scatter(self, a, w, label):
        partial = self.matmul(a, w, label)
        out = partial.new_empty(partial.shape[0] // self.world, partial.shape[1])
        self._collective("reduce-scatter",
                         lambda: _reduce_scatter_single(out, partial, group=self.group))
        return out

    def _matmul_all_reduce(self, a, w, label):
        partial = self.matmul(a, w, label)
        self._collective("all-reduce", lambda: dist.all_reduce(partial, group=self.group))
        return partial

    def _matmul_all_gather(self, x, w, label):
        local = self.matmul(x, w, label)
        gathered = local.new_empty(self.world * local.shape[0], local.shape[1])
        self._collective("all-gather", lambda: _all_gather_single(gathered, local,
                                                                  group=self.group))
        return columns_of(gathered, self.world)


class OverlappedSchedule(Schedule):
    """Collective pieces in flight while the GEMM of pieces already present runs."""

    name = "overlapped"

    def __init__(self, group, gemm, device, pieces_per_peer=1):
        super().__init__(group, gemm, device, pieces_per_peer)
        self.comm_stream = torch.cuda.Stream(device) if self.cuda else None

    def _ready(self) -> torch.cuda.Event | None:
        """GPU: an event after the work queued so far on the compute stream."""
        if not self.cuda:
            return None
        event = torch.cuda.Event()
        event.record()
        return event

    def _launch(self, label: str, piece: int, start: Callable[[], dist.Work],
                after: torch.cuda.Event | None) -> _Pending:
        """Issue one piece's collective asynchronously, after ``after`` (its data is ready)."""
        if not self.cuda:
            begin, end = self.recorder.mark(), LateMark()
            # Wait on the chained future, not the work: its callback has then surely run.
            future = start().get_future().then(end.set_now)
            self.recorder.add("comm", label, piece, begin, end)
            return _Pending(future=future)
        with torch.cuda.stream(self.comm_stream):
            self.comm_stream.wait_event(after)
            begin = self.recorder.mark(self.comm_stream)
            start().wait()  # the comm stream waits for NCCL's; the host does not block
            end = self.recorder.mark(self.comm_stream)
            done = torch.cuda.Event()
            done.record(self.comm_stream)
        self.recorder.add("comm", label, piece, begin, end)
        return _Pending(event=done)

    def _peer(self, owner: int) -> int:
        return dist.get_global_rank(self.group, owner)

    def _all_gather_matmul(self, x_shard, w, label):
        rows = x_shard.shape[0]
        x = x_shard.new_empty(self.world * rows, x_shard.shape[1])
        y = x_shard.new_empty(self.world * rows, w.shape[1])
        x[self.rank * rows:(self.rank + 1) * rows].copy_(x_shard)
        ready = self._ready()
        pieces = row_pieces(rows, self.world, self.pieces_per_peer)
        pending = [self._launch("all-gather piece", i, lambda s=s, o=o: dist.broadcast(
            x[s], src=self._peer(o), group=self.group, async_op=True), ready)
            for i, (o, s) in enumerate(pieces)]
        # This rank's own rows are already here: their GEMMs run while the others arrive.
        order = sorted(range(len(pieces)), key=lambda i: pieces[i][0] != self.rank)
        for i in order:
            owner, rows_of_piece = pieces[i]
            if owner != self.rank:
                pending[i].wait()
            self.matmul(x[rows_of_piece], w, label, out=y[rows_of_piece], piece=i)
        for i, (owner, _) in enumerate(pieces):
            if owner == self.rank:
                pending[i].wait()  # this rank's sends are done before x is handed on
        return x, y

    def _matmul_reduce_scatter(self, a, w, label):
        partial = a.new_empty(a.shape[0], w.shape[1])
        rows = a.shape[0] // self.world
        pending = []
        for i, (owner, s) in enumerate(row_pieces(rows, self.world, self.pieces_per_peer)):
            self.matmul(a[s], w, label, out=partial[s], piece=i)
            pending.append(self._launch("reduce-scatter piece", i, lambda s=s, o=owner: dist.reduce(
                partial[s], dst=self._peer(o), op=dist.ReduceOp.SUM, group=self.group,
                async_op=True), self._ready()))
        for piece in pending:
            piece.wait()
        return partial[self.rank * rows:(self.rank + 1) * rows]  # summed here by the reduces

    def _row_chunks(self, rows: int) -> list[slice]:
        """As many row chunks as the per-peer primitives have pieces: world × pieces_per_peer."""
        return [s for _, s in row_pieces(rows, 1, self.world * self.pieces_per_peer)]

    def _matmul_all_reduce(self, a, w, label):
        partial = a.new_empty(a.shape[0], w.shape[1])
        pending = []
        for i, s in enumerate(self._row_chunks(a.shape[0])):
            self.matmul(a[s], w, label, out=partial[s], piece=i)
            pending.append(self._launch("all-reduce piece", i, lambda s=s: dist.all_reduce(
                partial[s], group=self.group, async_op=True), self._ready()))
        for piece in pending:
            piece.wait()
        return partial

    def _matmul_all_gather(self, x, w, label):
        y = x.new_empty(x.shape[0], self.world * w.shape[1])
        chunks, gathered, pending = self._row_chunks(x.shape[0]), [], []
        for i, s in enumerate(chunks):
            local = self.matmul(x[s], w, label, piece=i)
            gathered.append(local.new_empty(self.world * local.shape[0], local.shape[1]))
            pending.append(self._launch("all-gather piece", i, lambda g=gathered[-1], v=local:
                                        _all_gather_single(g, v, group=self.group,
                                                           async_op=True), self._ready()))
        for piece, s, stacked in zip(pending, chunks, gathered):
            piece.wait()
            y[s] = columns_of(stacked, self.world)
        return y


class FusedSchedule(Schedule):
    """PyTorch's fused ops over symmetric memory (sequence-parallel primitives only).

    ``fused_ops`` replaces the pair (all_gather_matmul, matmul_reduce_scatter) with functions of
    the same signatures; the tests pass PyTorch's own reference implementations of the ops
    (``_fused_*_fallback``) to check this schedule's arguments on CPU.
    """

    name = "fused"

    def __init__(self, group, gemm, device, pieces_per_peer=1,
                 fused_ops: tuple[Callable, Callable] | None = None):
        super().__init__(group, gemm, device, pieces_per_peer)
        if gemm.backend != "torch":
            raise ValueError(f"fused runs cuBLAS inside PyTorch's ops; GEMM backend "
                             f"{gemm.backend!r} is not available to it (use 'torch')")
        if fused_ops is None and self.world > 1:
            if reason := (capabilities.missing_fused_tp(self.world, dist.get_backend(group))
                          or capabilities.missing_whole_world(self.world,
                                                              dist.get_world_size())):
                raise RuntimeError(f"fused schedule: {reason}")
            import torch.distributed._symmetric_memory as symm_mem

            fused_ops = (torch.ops.symm_mem.fused_all_gather_matmul,
                         torch.ops.symm_mem.fused_matmul_reduce_scatter)
            if not symm_mem.is_symm_mem_enabled_for_group(group.group_name):
                with warnings.catch_warnings():  # newer torch: deprecated, no longer needed
                    warnings.simplefilter("ignore", FutureWarning)
                    symm_mem.enable_symm_mem_for_group(group.group_name)
        self.fused_ops = fused_ops
        self.group_name = group.group_name if group is not None else ""

    def _fused(self, label: str, run: Callable[[], torch.Tensor]):
        start = self.recorder.mark()
        result = run()
        self.recorder.add("compute", f"fused {label}", None, start, self.recorder.mark())
        return result

    def _all_gather_matmul(self, x_shard, w, label):
        x, (y,) = self._fused(label, lambda: self.fused_ops[0](
            x_shard, [w], 0, self.group_name, return_A=True))
        return x, y

    def _matmul_reduce_scatter(self, a, w, label):
        return self._fused(label, lambda: self.fused_ops[1](a, w, "sum", 0, self.group_name))

    def _matmul_all_reduce(self, a, w, label):
        raise NotImplementedError(FUSED_FORM_ONLY)

    def _matmul_all_gather(self, x, w, label):
        raise NotImplementedError(FUSED_FORM_ONLY)


FUSED_FORM_ONLY = ("PyTorch's fused ops cover all-gather-matmul and matmul-reduce-scatter, the "
                   "sequence-parallel form; the all-reduce form has no fused peer")

_SCHEDULES = {s.name: s for s in (SyncSchedule, OverlappedSchedule, FusedSchedule)}


def build_schedule(name: str, group: dist.ProcessGroup | None, gemm: Gemm,
                   device: torch.device, pieces_per_peer: int = 1, **options) -> Schedule:
    if name not in _SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; choose one of {', '.join(SCHEDULES)}")
    return _SCHEDULES[name](group, gemm, device, pieces_per_peer, **options)
