"""NCCL's all-reduce cost model: ring and tree, each with its LL, LL128 and Simple protocols,
the fastest chosen per message size as NCCL's tuner does (src/graph/tuning.cc of
github.com/NVIDIA/nccl, read at commit 01afd20: ``ncclTopoTuneModel`` and
``ncclTopoGetAlgoTime``; the constants below are that file's).

For an all-reduce of b bytes per rank among n ranks on N nodes (p = n/N per node), with B
the Simple ring's bus bandwidth (nccl-tests' busbw: the node's inside one or two nodes, the
NICs' beyond), per algorithm a and protocol p:

    time = latency + b / algbw                                         (µs, bytes, GB/s·1e3)
    ring latency = base + (2(n−1) − 2(N−1)) · hw_intra + 2(N−1) · hw_net
                   (× 1.9 for Simple across nodes once b ≥ n/16 · 64 KiB: the ring's plateau)
    tree latency = base + 2 · ((p − 1) · hw_intra + ⌊log2 N⌋ · hw_net)
    ring algbw = bus · n / (2(n−1));  tree algbw = bus · 0.5 (× the size correction below 256 MiB)
    bus: ring Simple B, ring LL B/4, ring LL128 min(0.92 B, 16.7 · channels);
         tree min(0.9 B, 110 GB/s up to 2 nodes, 80 beyond), LL × 1/3.8, LL128 × 7/9 (one node)
         or 0.915, capped at 16.7 · channels · 7/9

``hw_intra`` is NVLink's or PCI's per-step latency (LL's × 1.8 across nodes), ``hw_net`` the
network's. Two levels are explicit: the steps inside a node pay NVLink's latency, those
between nodes the network's. LL128 is taken as enabled, as newer NCCL enables it on Hopper
with NVLink (the version read enables it on Volta and Ampere only): an assumption.

NVLS (NVLink SHARP: the NVSwitch reduces), where a fabric file gives its bandwidth (H100 and
H200 SXM nodes on NVSwitch have it; the suite itself keeps it off, NCCL_NVLS_ENABLE=0), with
the constants of a later tuning.cc (commit b647562, NCCL 2.19+), Simple protocol only:

    one node (NVLS):        latency = 23 µs (hwLat NVLink NVLS),  algbw = A
    N nodes (NVLS tree):    latency = 23 + 2 · ⌊log2 N⌋ · 14 µs (hwLat net NVLSTree),
                            algbw = 5/6 · min(6/5 · A, net (N ≤ 2) or net / 2)

NCCL's tuner writes algbw = 5/6 · busBw with busBw its NVLS graph's channels × bandwidth,
limited across nodes by the network's (halved beyond two nodes); A, the algbw inside a node,
is the fabric file's (nccl-tests' measured one), and ``net`` the node's NICs' bandwidth, as
for the ring.

CollNet (in-network reduction in the network's switches, SHARP, through NCCL's CollNet
plugin), across nodes where a fabric file gives the bandwidth a NIC reaches with it
(``collnet_gbps``), with the same tuning.cc (b647562), Simple protocol only, p GPUs and q
NICs per node:

    CollNet Direct: latency = 2 · (min(1, p − 1) · 3.7 + (p − 1) · 0.4) + 31 µs,
                    algbw = 0.5 · 0.85 · B_c / f,  f = (p/q + 1) / 2  (p ≤ 8, NVSwitch only)
    CollNet Chain:  latency = 2 · (p − 1) · 2.8 + 30 µs,  algbw = 0.5 · B_c

with B_c = min(q · collnet_gbps, the node's busbw): the channels' bandwidth through the NICs,
which NVLink caps inside the node (an NCCL maintainer: with 8 NICs, NVLink limits CollNet to
~110 GB/s algbw on A100, github.com/NVIDIA/nccl issue 320). 3.7 and 2.8 µs are hwLat
[NVLink][CollNet Direct, Chain][Simple], 31 and 30 µs hwLat[net][...], 0.4 µs the arity
serialisation per local GPU, 0.85 the Hopper correction (compute capability ≥ 9.0, as every
file with CollNet); the latency does not grow with the node count: the switches reduce in
one pass. Cited, not measured: no machine here has SHARP.

``launch_us`` is added to every all-reduce: what a call through torch.distributed costs
beyond NCCL's own latency (the host's enqueue, the stream's event), which NCCL's tuner does
not model; a fabric file carries one fitted, with the bus bandwidth, to the suite's
all-reduce sweep (``calibrate``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

PROTOCOLS = ("LL", "LL128", "Simple")
ALGORITHMS = ("tree", "ring")
BASE_LAT_US = {"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4)}
HW_LAT_US = {  # per step: NVLink, PCI, network
    "nvlink": {"tree": (0.52, 1.2, 28.0), "ring": (0.47, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 50.0), "ring": (2.7, 4.0, 9.6)},
}
LL128_MAX_BW_PER_CHANNEL = 16.7  # GB/s, all-reduce
TREE_CORRECTION = {  # by log2(bytes / 64), powers of two from 64 B: trees below 256 MiB
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
           1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8,
              .9, .9, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7,
               .8, .9),
}
CHANNELS = 16  # NCCL's rings on an 8-GPU NVSwitch node (LL128's cap per channel needs a count)
NVLS_LAT_US = 23.0  # hwLat[NVLink][NVLS][Simple], and [NVLink][NVLSTree][Simple]
NVLS_TREE_NET_LAT_US = 14.0  # hwLat[net][NVLSTree][Simple], per tree level, each way
NVLS_ALGBW_RATIO = 5 / 6  # algbw / busBw of NVLS and NVLS tree
COLLNET_LAT_US = {"collnet-direct": (3.7, 31.0), "collnet-chain": (2.8, 30.0)}  # NVLink, net
COLLNET_ARITY_US = 0.4  # CollNet Direct: serialisation per local GPU
COLLNET_DIRECT_HOPPER = 0.85  # busBw correction on compute capability ≥ 9.0
COLLNET_DIRECT_MAX_LOCAL = 8  # CollNet Direct: at most 8 GPUs per node


@dataclass(frozen=True)
class Choice:
    """The fastest algorithm and protocol for one all-reduce, and its time."""

    time_us: float
    algorithm: str
    protocol: str


def _bus_gbps(algorithm: str, protocol: str, bus: float, nodes: int) -> float:
    if algorithm == "ring":
        return {"Simple": bus, "LL": bus / 4,
                "LL128": min(bus * 0.92, LL128_MAX_BW_PER_CHANNEL * CHANNELS)}[protocol]
    tree = min(bus * 0.9, 80.0 if nodes > 2 else 110.0)
    return {"Simple": tree, "LL": tree / 3.8,
            "LL128": min(tree * (7 / 9 if nodes == 1 else 0.915),
                         LL128_MAX_BW_PER_CHANNEL * CHANNELS * 7 / 9)}[protocol]


def _latency_us(algorithm: str, protocol: str, ranks: int, nodes: int, intra: str) -> float:
    p = PROTOCOLS.index(protocol)
    intra_lat = HW_LAT_US[intra][algorithm][p] * (1.8 if nodes > 1 and protocol == "LL" else 1)
    net_lat = HW_LAT_US["net"][algorithm][p]
    if algorithm == "ring":
        steps, inter_steps = 2 * (ranks - 1), 2 * (nodes - 1)
        return BASE_LAT_US["ring"][p] + (steps - inter_steps) * intra_lat \
            + inter_steps * net_lat
    per_node = ranks // nodes
    return BASE_LAT_US["tree"][p] + 2 * ((per_node - 1) * intra_lat
                                         + int(math.log2(nodes)) * net_lat)


def time_us(size_bytes: float, ranks: int, nodes: int, bus_gbps: float, algorithm: str,
            protocol: str, intra: str = "nvlink") -> float:
    """One algorithm and protocol's all-reduce time as NCCL's tuner models it."""
    latency = _latency_us(algorithm, protocol, ranks, nodes, intra)
    bus = _bus_gbps(algorithm, protocol, bus_gbps, nodes)
    if algorithm == "ring":
        algbw = bus * ranks / (2 * (ranks - 1))
        if protocol == "Simple" and nodes > 1 and size_bytes >= ranks / 16 * 65536:
            latency *= 1.9
    else:
        algbw = bus * 0.5
        log_size = int(math.log2(max(size_bytes, 64) / 64))
        if log_size < len(TREE_CORRECTION[protocol]):
            algbw *= TREE_CORRECTION[protocol][log_size]
    return latency + size_bytes / (1e3 * algbw)


def nvls_time_us(size_bytes: float, nodes: int, nvls_algbw_gbps: float,
                 net_gbps: float | None = None) -> float:
    """NVLS's all-reduce time (one node), or the NVLS tree's across ``nodes`` joined by a
    network of ``net_gbps`` per node, as NCCL's tuner models them (module docstring)."""
    if nodes == 1:
        return NVLS_LAT_US + size_bytes / (1e3 * nvls_algbw_gbps)
    if net_gbps is None:
        raise ValueError(f"NVLS across {nodes} nodes needs the network's bandwidth")
    bus = min(nvls_algbw_gbps / NVLS_ALGBW_RATIO, net_gbps if nodes <= 2 else net_gbps / 2)
    latency = NVLS_LAT_US + 2 * int(math.log2(nodes)) * NVLS_TREE_NET_LAT_US
    return latency + size_bytes / (1e3 * NVLS_ALGBW_RATIO * bus)


def collnet_time_us(size_bytes: float, ranks: int, nodes: int, algorithm: str,
                    collnet_gbps: float, nics: int, node_bus_gbps: float) -> float:
    """CollNet Direct's or Chain's all-reduce time across ``nodes`` whose ``nics`` NICs each
    reach ``collnet_gbps`` with in-network reduction, as NCCL's tuner models them (module
    docstring)."""
    if nodes < 2:
        raise ValueError(f"CollNet reduces in the network's switches: {nodes} node has none")
    per_node = ranks // nodes
    intra, net = COLLNET_LAT_US[algorithm]
    bus = min(nics * collnet_gbps, node_bus_gbps)
    if algorithm == "collnet-direct":
        latency = 2 * (min(1, per_node - 1) * intra + (per_node - 1) * COLLNET_ARITY_US) + net
        gpus_per_nic = per_node / nics
        bus *= COLLNET_DIRECT_HOPPER / (gpus_per_nic - (gpus_per_nic - 1) / 2)
    else:
        latency = 2 * (per_node - 1) * intra + net
    return latency + size_bytes / (1e3 * 0.5 * bus)


def all_reduce(size_bytes: float, ranks: int, nodes: int, bus_gbps: float,
               intra: str = "nvlink", launch_us: float = 0.0,
               nvls_algbw_gbps: float | None = None, net_gbps: float | None = None,
               collnet: tuple[float, int, float] | None = None) -> Choice:
    """The fastest of ring and tree × LL, LL128, Simple (and NVLS, Simple, where
    ``nvls_algbw_gbps`` is given; CollNet Direct and Chain across nodes where ``collnet``,
    (GB/s per NIC, NICs per node, the node's busbw), is), as NCCL's tuner picks, plus the
    call's launch cost; one rank: no all-reduce, 0."""
    if ranks <= 1:
        return Choice(0.0, "none", "none")
    candidates = [Choice(time_us(size_bytes, ranks, nodes, bus_gbps, a, p, intra), a, p)
                  for a in ALGORITHMS for p in PROTOCOLS]
    if nvls_algbw_gbps is not None:
        candidates.append(Choice(nvls_time_us(size_bytes, nodes, nvls_algbw_gbps, net_gbps),
                                 "nvls" if nodes == 1 else "nvls-tree", "Simple"))
    if collnet is not None and nodes > 1:
        algorithms = ["collnet-chain"]
        if ranks // nodes <= COLLNET_DIRECT_MAX_LOCAL:
            algorithms.append("collnet-direct")
        candidates += [Choice(collnet_time_us(size_bytes, ranks, nodes, a, *collnet), a,
                              "Simple") for a in algorithms]
    best = min(candidates, key=lambda c: c.time_us)
    return Choice(best.time_us + launch_us, best.algorithm, best.protocol)


def calibrate(sizes_bytes, times_ms, ranks: int, intra: str = "nvlink") -> tuple[float, float]:
    """(bus bandwidth GB/s, launch µs) that fit one node's measured all-reduce sweep best
    (least squares on log time over every size: the relative error is what matters)."""
    sizes, measured = np.asarray(sizes_bytes, float), np.asarray(times_ms, float) * 1e3

    def residuals(x):
        bus, launch = math.exp(x[0]), x[1]
        return [math.log(all_reduce(b, ranks, 1, bus, intra, launch).time_us / t)
                for b, t in zip(sizes, measured)]

    start = [math.log(max(sizes) * 2 * (ranks - 1) / ranks / (1e3 * max(measured))), 0.0]
    fit = least_squares(residuals, start, diff_step=1e-3, bounds=([-10, 0], [10, 1e4]))
    return float(math.exp(fit.x[0])), float(fit.x[1])
