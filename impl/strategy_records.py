"""What each registered strategy is, for code that must not import torch (the report): its role
in the overlap benchmark and whether it all-reduces the cell's K chunks.

The classes of impl/strategies/ declare the same (``Strategy.role``, a subclass of
``ChunkedGradientStrategy``); tests/test_strategy_records.py holds the two together.

    from impl.strategy_records import overlaps_in_k_chunks
    overlaps_in_k_chunks("copy-engine")   # True: at K = 1 it has nothing to overlap
"""

from __future__ import annotations

from dataclasses import dataclass

# A strategy's role (Strategy.role in impl/strategies/base.py says what each means).
OVERLAPPING, REFERENCE, PEER, SIMULATION = "overlapping", "reference", "peer", "simulation"


@dataclass(frozen=True)
class StrategyRecord:
    name: str
    role: str
    k_chunks: bool  # all-reduces K chunks of one flat gradient buffer (ChunkedGradientStrategy)


STRATEGY_RECORDS: dict[str, StrategyRecord] = {record.name: record for record in (
    StrategyRecord("sequential", REFERENCE, k_chunks=True),
    StrategyRecord("threaded", OVERLAPPING, k_chunks=True),
    StrategyRecord("mpi", OVERLAPPING, k_chunks=True),
    StrategyRecord("mpi-sequential", REFERENCE, k_chunks=True),
    StrategyRecord("chunked", OVERLAPPING, k_chunks=True),
    StrategyRecord("copy-engine", OVERLAPPING, k_chunks=True),
    StrategyRecord("ddp", PEER, k_chunks=False),
    StrategyRecord("synthetic", SIMULATION, k_chunks=False),
)}


def overlaps_in_k_chunks(strategy: str) -> bool:
    """Whether ``strategy`` is compared in the overlap cells and communicates in their K
    chunks, so that at K = 1 its only chunk is ready when backward ends. False for a name
    not recorded here (a reference measurement, or a named variant)."""
    record = STRATEGY_RECORDS.get(strategy)
    return record is not None and record.role == OVERLAPPING and record.k_chunks
