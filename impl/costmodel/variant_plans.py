"""Every strategy and named variant of the suite as a ``schedule.Plan``.

A variant is read from the one table that defines it (impl/strategy_records.py's VARIANTS:
a strategy and its options), then:

- how the gradient buffer is cut: K chunks (``bytes``, or ``layers``, or a 1 MB first chunk),
  or DDP's buckets of whole parameters (cap = gradient bytes / K, or the variant's cap);
- when a collective may start: at backward's end (sequential), when its data is final, or
  after the host's hand-off (threaded: a thread waits for each chunk, then launches);
- which fabric times it (NCCL or gloo all-reduce; peer copies for copy-engine) and which
  interference slows compute beside it (``Interference``);
- whether each chunk's update follows its collective (``update_in_overlap``).

Options the model cannot see (the communication stream's priority, NCCL's CTA cap, a cuBLAS
SM carve-out) are named by ``unmodelled``: their cells are predicted as the plain strategy
and listed with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from impl.chunking import first_chunk_elements
from impl.costmodel.compute import ReadyProfile, bucket_ends, chunk_ends
from impl.costmodel.fabric import Fabric
from impl.costmodel.schedule import Collective, Plan
from impl.strategy_records import (
    PEER,
    REFERENCE,
    SIMULATION,
    STRATEGY_RECORDS,
    VARIANTS,
)

# The references all-reduce after backward ends; every other strategy as its data is final.
AFTER_BACKWARD = tuple(name for name, record in STRATEGY_RECORDS.items()
                       if record.role == REFERENCE)
# What the model can cut: the K chunks of a ChunkedGradientStrategy (record.k_chunks), DDP's
# buckets (the peer) and the simulation's K chunks of sleep.
MODELLED = tuple(name for name, record in STRATEGY_RECORDS.items()
                 if record.k_chunks or record.role in (PEER, SIMULATION))
MIB = 2**20


@dataclass(frozen=True)
class Interference:
    """Compute slowdown (time beside / time alone, ≥ 1) while each kind of traffic runs,
    with where each number comes from; 1 where nothing was measured."""

    all_reduce: float = 1.0
    copy: float = 1.0
    source: str = "none: compute assumed unslowed"

    def for_strategy(self, strategy: str) -> float:
        return self.copy if strategy == "copy-engine" else self.all_reduce


def variant(name: str) -> tuple[str, dict]:
    """(base strategy, options that differ from its defaults) of a strategy or named variant."""
    return VARIANTS.get(name, (name, {}))


def unmodelled(name: str) -> str | None:
    """What of variant ``name`` the model cannot see, or None."""
    strategy, options = variant(name)
    if strategy not in MODELLED:
        return f"strategy {strategy!r} has no model"
    seen = []
    if options.get("comm_priority", "normal") != "normal":
        seen.append("a high-priority communication stream")
    if options.get("nccl_max_ctas") is not None:
        seen.append(f"NCCL capped at {options['nccl_max_ctas']} CTAs (no comm-only time "
                    "was measured with that cap)")
    if options.get("cublas_sm_carveout") is not None:
        seen.append(f"a cuBLAS carve-out of {options['cublas_sm_carveout']} SMs")
    return "; ".join(seen) or None


def collective_ends(name: str, chunks: int, spans: tuple[tuple[int, int], ...],
                    element_size: int) -> list[int]:
    """Where each collective of variant ``name`` ends in the flat gradient buffer."""
    strategy, options = variant(name)
    if strategy == "ddp":
        total = spans[-1][1] * element_size
        cap = options["ddp_bucket_mb"] * MIB if options.get("ddp_bucket_mb") else total / chunks
        return bucket_ends(spans, element_size, cap)
    first = first_chunk_elements(options.get("first_chunk_mb"), element_size)
    return chunk_ends(spans, chunks, options.get("chunk_split", "bytes"), first)


def collectives(profile: ReadyProfile, ends: list[int], fabric: Fabric,
                spans: tuple[tuple[int, int], ...] | None = None) -> tuple[Collective, ...]:
    """One collective per range of the buffer ending at ``ends``: ready when its data is
    final (``ReadyProfile.ready_of``), lasting what ``fabric`` says for its bytes."""
    starts = [0, *ends[:-1]]
    return tuple(Collective(profile.ready_of(end, spans), fabric.all_reduce_ms(size), size)
                 for start, end in zip(starts, ends)
                 if (size := (end - start) * profile.element_size) > 0)


def plan(name: str, profile: ReadyProfile, chunks: int, spans: tuple[tuple[int, int], ...],
         comm: Fabric, copy: Fabric | None = None, interference: Interference = Interference(),
         handoff_ms: float = 0.0, beside_ms: float = 0.0, update_beside_ms: float = 0.0
         ) -> Plan:
    """The Plan of variant ``name`` at K = ``chunks``: ``comm`` times its all-reduces, ``copy``
    the copy-engine's, ``handoff_ms`` is the host's hand-off of the threaded strategy,
    ``beside_ms`` what a collective launched beside backward adds, ``update_beside_ms`` what
    an update share does (impl/costmodel/lanes.py)."""
    strategy, options = variant(name)
    if strategy not in MODELLED:
        raise ValueError(f"strategy {strategy!r} has no model; modelled: "
                         f"{', '.join(MODELLED)} and their variants")
    fabric = comm
    if strategy == "copy-engine":
        if copy is None:
            raise ValueError("copy-engine needs the copy engines' bandwidth (node.copy_gbps "
                             "of a fabric file)")
        fabric = copy
    ends = collective_ends(name, chunks, spans, profile.element_size)
    return Plan(collectives(profile, ends, fabric, spans),
                after_backward=strategy in AFTER_BACKWARD,
                update_in_overlap=bool(options.get("update_in_overlap")),
                slowdown=interference.for_strategy(strategy),
                handoff_ms=handoff_ms if strategy == "threaded" else 0.0,
                beside_ms=0.0 if strategy in AFTER_BACKWARD else beside_ms,
                update_beside_ms=update_beside_ms if options.get("update_in_overlap") else 0.0)
