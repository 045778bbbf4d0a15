"""The fabric: how long one all-reduce of b bytes per rank takes, measured or from a file.

Two forms, each with one formula:

- ``Fabric`` (α–β): t(b) = α + β·b per all-reduce, fitted by least squares on measured
  comm-only times (``fit_fabric``): the validation on measured cells and autotune use it, at
  the world size it was measured at.
- ``MeasuredSweep``: the suite's own all-reduce sweep (suite/bench_allreduce.py rows: time
  by message size at one world size), read between its sizes: t(b) is linear in b between
  two measured sizes, and beyond the sweep the line through its two nearest sizes (never
  below the smallest size's time): what held-out validation times each collective with.
- ``NodeFabric`` (a fabric file, ``fabrics/<name>.toml``): nodes of G GPUs joined by NICs,
  for any world size n: NCCL's own cost model (impl/costmodel/nccl.py: ring and tree, LL,
  LL128 and Simple, the fastest per size, two levels across nodes) with the Simple ring's bus
  bandwidth B = the node's busbw inside a node, and across N = ⌈n/G⌉ nodes
  B = min(busbw_node, nics · nic_gbps) (the bytes of a node leave through its NICs), plus the
  file's launch cost per call. busbw is nccl-tests' bus bandwidth (algbw · 2(n−1)/n), so a
  file's numbers are read off nccl-tests or the suite's all-reduce rows directly. Where the
  file gives NVLS's algbw (NVLink SHARP on an NVSwitch node), NVLS, or the NVLS tree across
  nodes, joins the tuner's candidates (nccl.nvls_time_us); where it gives the bandwidth a
  NIC reaches with in-network reduction (CollNet, SHARP), CollNet Direct and Chain join
  them across nodes (nccl.collnet_time_us).

The copy-engine strategy moves each chunk with peer copies (a reduce-scatter then an
all-gather, each (n−1)/n · b per rank) inside one node only: t = launch + 2(n−1)/n · b /
copy_gbps.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from impl.costmodel import nccl
from impl.rows.kinds import ALLREDUCE

SWEEP_ROW = ALLREDUCE.names  # a sweep's all-reduce rows: row[SWEEP_ROW.size_bytes]


@dataclass(frozen=True)
class Fabric:
    """t(b) = alpha_ms + beta_ms_per_byte · b: one all-reduce of b bytes per rank."""

    alpha_ms: float
    beta_ms_per_byte: float

    def all_reduce_ms(self, size_bytes: float) -> float:
        return self.alpha_ms + self.beta_ms_per_byte * size_bytes

    @property
    def bandwidth_gbps(self) -> float:
        """1/β as algbw in GB/s (nccl-tests' algbw: bytes per rank over time)."""
        return 1e-6 / self.beta_ms_per_byte if self.beta_ms_per_byte > 0 else float("inf")


def fit_fabric(launches: Sequence[int], total_bytes: Sequence[float],
               times_ms: Sequence[float]) -> Fabric:
    """Least-squares α and β from measurements of ``launches[i]`` all-reduces moving
    ``total_bytes[i]`` bytes per rank in ``times_ms[i]``: time = launches·α + bytes·β.

    Both are kept ≥ 0 (a negative one would only mean the measurements cannot see it).
    """
    design = np.column_stack([np.asarray(launches, float), np.asarray(total_bytes, float)])
    times = np.asarray(times_ms, float)
    if np.linalg.matrix_rank(design) < 2:
        raise ValueError("fitting α and β needs measurements at two or more chunk counts "
                         f"(launches {sorted(set(launches))})")
    (alpha, beta), *_ = np.linalg.lstsq(design, times, rcond=None)
    if alpha < 0:
        alpha, beta = 0.0, float(times @ design[:, 1] / (design[:, 1] @ design[:, 1]))
    if beta < 0:
        alpha, beta = float(times @ design[:, 0] / (design[:, 0] @ design[:, 0])), 0.0
    return Fabric(float(alpha), float(beta))


@dataclass(frozen=True)
class MeasuredSweep:
    """All-reduce time by size, measured (module docstring); ``source`` says whence."""

    sizes_bytes: tuple[float, ...]
    times_ms: tuple[float, ...]
    source: str

    def __post_init__(self):
        if len(self.sizes_bytes) < 2 or list(self.sizes_bytes) != sorted(set(self.sizes_bytes)):
            raise ValueError(f"a sweep needs two or more distinct sizes in increasing order, "
                             f"got {self.sizes_bytes}")

    def all_reduce_ms(self, size_bytes: float) -> float:
        sizes, times = self.sizes_bytes, self.times_ms
        upper = min(max(bisect.bisect_left(sizes, size_bytes), 1), len(sizes) - 1)
        (b0, b1), (t0, t1) = sizes[upper - 1:upper + 1], times[upper - 1:upper + 1]
        return max(times[0], t0 + (t1 - t0) * (size_bytes - b0) / (b1 - b0))

    @property
    def alpha_ms(self) -> float:
        """The line through the two smallest sizes at zero bytes: one launch's latency."""
        (b0, b1), (t0, t1) = self.sizes_bytes[:2], self.times_ms[:2]
        return max(0.0, t0 - (t1 - t0) * b0 / (b1 - b0))


def measured_sweep(rows: Sequence[dict], source: str) -> MeasuredSweep:
    """The sweep of all-reduce rows of one world size, backend and profile (median time per
    size: a size measured in several runs counts once)."""
    by_size: dict[float, list[float]] = {}
    for row in rows:
        size = float(row[SWEEP_ROW.size_bytes])
        by_size.setdefault(size, []).append(float(row[SWEEP_ROW.time_ms]))
    sizes = sorted(by_size)
    return MeasuredSweep(tuple(sizes), tuple(float(np.median(by_size[b])) for b in sizes),
                         source)


PCIE_GBPS = 64  # PCIe 5.0 x16 per direction: a node busbw above it runs on NVLink


@dataclass(frozen=True)
class NodeFabric:
    """A fabric file's numbers (impl/costmodel/fabric_file.py: each one's meaning and unit)."""

    name: str
    description: str
    gpus_per_node: int
    busbw_node_gbps: float
    launch_us: float
    copy_gbps: float | None = None  # peer copies (copy-engine strategy); None: not given
    nics_per_node: int | None = None  # None: one node only, no network
    nic_gbps: float | None = None
    nvls_algbw_gbps: float | None = None  # NVLink SHARP's algbw in a node; None: no NVLS
    collnet_gbps: float | None = None  # per NIC with in-network reduction; None: no CollNet
    sources: tuple[tuple[str, str], ...] = ()  # (field, where its number comes from)

    @property
    def max_gpus(self) -> int | None:
        """The largest world this fabric describes: one node without a network."""
        return self.gpus_per_node if self.nics_per_node is None else None

    @property
    def intra(self) -> str:
        """NCCL's link class inside a node, for its per-step latencies: NVLink or PCI."""
        return "nvlink" if self.busbw_node_gbps > PCIE_GBPS else "pci"

    def bandwidth_gbps(self, world: int) -> float:
        """The Simple ring's busbw at ``world`` ranks: the node's, or the NICs' across nodes
        when they are slower."""
        if world <= self.gpus_per_node:
            return self.busbw_node_gbps
        return min(self.busbw_node_gbps, self.nics_per_node * self.nic_gbps)

    def choice(self, size_bytes: float, world: int) -> nccl.Choice:
        """NCCL's pick (algorithm, protocol) and time for one all-reduce at ``world`` ranks."""
        self.check_world(world)
        nodes = math.ceil(world / self.gpus_per_node)
        network = None if self.nics_per_node is None else self.nics_per_node * self.nic_gbps
        collnet = None if self.collnet_gbps is None else (
            self.collnet_gbps, self.nics_per_node, self.busbw_node_gbps)
        return nccl.all_reduce(size_bytes, world, nodes, self.bandwidth_gbps(world), self.intra,
                               self.launch_us, self.nvls_algbw_gbps, network, collnet)

    def all_reduce_ms(self, size_bytes: float, world: int) -> float:
        """One all-reduce of ``size_bytes`` per rank among ``world`` ranks (module docstring)."""
        return self.choice(size_bytes, world).time_us / 1e3

    def copy_all_reduce_ms(self, size_bytes: float, world: int) -> float | None:
        """The copy-engine all-reduce; None where it cannot run (no copy bandwidth given, or
        more GPUs than one node: peer copies need every buffer mapped into every GPU)."""
        if self.copy_gbps is None or world > self.gpus_per_node:
            return None
        moved = 2 * (world - 1) / world * size_bytes
        return self.launch_us / 1e3 + moved / (self.copy_gbps * 1e6)

    def copy_alpha_beta(self, world: int) -> Fabric | None:
        """The copy-engine all-reduce at ``world`` ranks as an α–β pair, or None where it
        cannot run (``copy_all_reduce_ms``)."""
        alpha = self.copy_all_reduce_ms(0.0, world)
        if alpha is None:
            return None
        return Fabric(alpha, (self.copy_all_reduce_ms(1e9, world) - alpha) / 1e9)

    def check_world(self, world: int) -> None:
        if isinstance(world, bool) or not isinstance(world, int) or world < 1:
            raise ValueError(f"world size {world!r}: choose an integer ≥ 1")
        if self.max_gpus is not None and world > self.max_gpus:
            raise ValueError(f"world size {world}: fabric {self.name!r} is one node of "
                             f"{self.max_gpus} GPUs with no network; choose 1 to "
                             f"{self.max_gpus} or a fabric with [network]")

    def at_world(self, world: int) -> AtWorld:
        """This fabric at ``world`` ranks, timing any size (what the schedule model takes)."""
        self.check_world(world)
        return AtWorld(self, world)


@dataclass(frozen=True)
class AtWorld:
    """A fabric file's all-reduce at one world size: ``all_reduce_ms(bytes)``."""

    fabric: NodeFabric
    world: int

    def all_reduce_ms(self, size_bytes: float) -> float:
        return self.fabric.all_reduce_ms(size_bytes, self.world)
