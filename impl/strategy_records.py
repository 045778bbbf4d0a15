"""What each registered strategy and named variant is, for code that must not import torch
(the report, the cost model's tables): a strategy's role in the overlap benchmark, whether it
all-reduces the cell's K chunks and whether it runs only under mpirun; a named variant's
strategy and the options it changes.

The classes of impl/strategies/ declare the same (``Strategy.role``, ``Strategy.needs_mpi``,
a subclass of ``ChunkedGradientStrategy``); tests/test_strategy_records.py holds the two
together. Torch-free code that needs a set of strategies reads it from here, never from a list
of names; the benchmark reads the classes, so that a new strategy runs before it has a record
(docs/adding.md).

    from impl.strategy_records import overlaps_in_k_chunks, strategy_of
    overlaps_in_k_chunks("copy-engine")   # True: at K = 1 it has nothing to overlap
    strategy_of("chunked+priority")       # "chunked"
"""

from __future__ import annotations

from dataclasses import dataclass

# A strategy's role (Strategy.role in impl/strategies/base.py says what each means).
OVERLAPPING, REFERENCE, PEER, SIMULATION = "overlapping", "reference", "peer", "simulation"
# The order a reader meets the roles in: what is beaten, what beats it, DDP, the simulation.
ROLE_ORDER = (REFERENCE, OVERLAPPING, PEER, SIMULATION)


@dataclass(frozen=True)
class StrategyRecord:
    name: str
    role: str
    k_chunks: bool  # all-reduces K chunks of one flat gradient buffer (ChunkedGradientStrategy)
    needs_mpi: bool = False  # runs only under mpirun (the launcher's MPI pass)


STRATEGY_RECORDS: dict[str, StrategyRecord] = {record.name: record for record in (
    StrategyRecord("sequential", REFERENCE, k_chunks=True),
    StrategyRecord("threaded", OVERLAPPING, k_chunks=True),
    StrategyRecord("mpi", OVERLAPPING, k_chunks=True, needs_mpi=True),
    StrategyRecord("mpi-sequential", REFERENCE, k_chunks=True, needs_mpi=True),
    StrategyRecord("chunked", OVERLAPPING, k_chunks=True),
    StrategyRecord("copy-engine", OVERLAPPING, k_chunks=True),
    StrategyRecord("ddp", PEER, k_chunks=False),
    StrategyRecord("synthetic", SIMULATION, k_chunks=False),
)}

# Named variants of the strategies: a strategy and the StrategyOptions fields that differ from
# its defaults (impl/strategies/knobs.py applies them). The benchmark measures them side by
# side with the plain strategies in the same rounds.
VARIANTS: dict[str, tuple[str, dict]] = {
    "ddp-25mb": ("ddp", {"ddp_bucket_mb": 25.0}),  # DDP's default bucket cap
    "chunked+update": ("chunked", {"update_in_overlap": True, "check_finite": False}),
    "threaded+update": ("threaded", {"update_in_overlap": True, "check_finite": False}),
    "chunked+layers": ("chunked", {"chunk_split": "layers"}),
    "chunked+first1mb": ("chunked", {"first_chunk_mb": 1.0}),
    "chunked+priority": ("chunked", {"comm_priority": "high"}),
    "chunked+ctas8": ("chunked", {"nccl_max_ctas": 8}),
    "chunked+carveout32": ("chunked", {"cublas_sm_carveout": 32}),
    "copy-engine+update": ("copy-engine", {"update_in_overlap": True, "check_finite": False}),
}
# The variants that run only with NCCL on GPUs: an NCCL or cuBLAS knob, or copy-engine's.
GPU_VARIANTS = ("chunked+priority", "chunked+ctas8", "chunked+carveout32", "copy-engine+update")


def strategy_of(name: str) -> str:
    """The strategy a named variant belongs to (ddp-25mb is ddp's); any other name itself."""
    return VARIANTS.get(name, (name, {}))[0]


def reading_order() -> tuple[str, ...]:
    """Every strategy, each followed by its named variants, in the order a reader meets them:
    by role (ROLE_ORDER), those that need mpirun after the rest of their role (the launcher
    runs them last), else as registered."""
    plain = sorted(STRATEGY_RECORDS, key=lambda name: (
        ROLE_ORDER.index(STRATEGY_RECORDS[name].role), STRATEGY_RECORDS[name].needs_mpi))
    return tuple(found for strategy in plain for found in (
        strategy, *(name for name in VARIANTS if strategy_of(name) == strategy)))


def reading_rank(name: str) -> tuple[int, str]:
    """Sort key of ``name`` in reading_order(); a name not recorded here after every recorded
    one, by name."""
    order = reading_order()
    return (order.index(name) if name in order else len(order), name)


def overlaps_in_k_chunks(strategy: str) -> bool:
    """Whether ``strategy`` is compared in the overlap cells and communicates in their K
    chunks, so that at K = 1 its only chunk is ready when backward ends. False for a name
    not recorded here (a reference measurement, or a named variant)."""
    record = STRATEGY_RECORDS.get(strategy)
    return record is not None and record.role == OVERLAPPING and record.k_chunks


def needs_mpi(strategy: str) -> bool:
    """Whether ``strategy`` (or a named variant's strategy) runs only under mpirun."""
    record = STRATEGY_RECORDS.get(strategy_of(strategy))
    return record is not None and record.needs_mpi
