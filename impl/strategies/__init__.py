"""Strategy registry: a new strategy is one file in this package plus one line here."""

from __future__ import annotations

import sys

import torch.distributed as dist
from torch import nn

from impl.strategies.base import Strategy
from impl.strategies.chunked import ChunkedStrategy
from impl.strategies.copy_engine import CopyEngineStrategy
from impl.strategies.ddp import DDPStrategy
from impl.strategies.mpi import MPISequentialStrategy, MPIStrategy
from impl.strategies.options import StrategyOptions
from impl.strategies.sequential import SequentialStrategy
from impl.strategies.synthetic import SyntheticStrategy
from impl.strategies.threaded import ThreadedStrategy
from impl.strategy_records import OVERLAPPING, REFERENCE, SIMULATION, VARIANTS
from impl.workloads import WorkloadConfig

STRATEGIES: dict[str, type[Strategy]] = {
    "sequential": SequentialStrategy,
    "threaded": ThreadedStrategy,
    "mpi": MPIStrategy,
    "mpi-sequential": MPISequentialStrategy,
    "chunked": ChunkedStrategy,
    "copy-engine": CopyEngineStrategy,
    "ddp": DDPStrategy,
    "synthetic": SyntheticStrategy,
}
REAL_STRATEGIES = tuple(name for name, cls in STRATEGIES.items() if cls.real)


def overlapping(name: str) -> bool:
    """Whether the overlap benchmark compares ``name`` against the references (its role)."""
    return name in STRATEGIES and STRATEGIES[name].role == OVERLAPPING


def measured_by_default() -> list[str]:
    """The strategies ``nox -s bench`` measures when --strategies is not given: every
    registered one but the simulation and the references the benchmark adds itself
    (mpi-sequential), those that need mpirun last (they run in the launcher's MPI pass)."""
    names = [name for name, cls in STRATEGIES.items() if cls.role != SIMULATION
             and not (cls.role == REFERENCE and cls.needs_mpi)]
    return sorted(names, key=lambda name: STRATEGIES[name].needs_mpi)


def check_strategy(name: str) -> str:
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)}")
    return name


def summary(name: str) -> str:
    """What ``name``, a strategy or a named variant, does, in one line for a reader: the
    first line of its class's own docstring, else of its module's ("Chunked: each chunk's
    all-reduce starts ..."), after the name; a variant is its strategy and options."""
    strategy, fields = VARIANTS.get(name, (name, {}))
    cls = STRATEGIES[check_strategy(strategy)]
    doc = cls.__dict__.get("__doc__") or sys.modules[cls.__module__].__doc__
    text = doc.strip().split("\n")[0].split(": ", 1)[-1].rstrip(".")
    options = ", ".join(f"{key}={value!r}" for key, value in fields.items()
                        if key != "check_finite")
    return f"{strategy} with {options}" if options else text


def build_strategy(name: str, model: nn.Module, workload: WorkloadConfig,
                   group: dist.ProcessGroup | None, options: StrategyOptions) -> Strategy:
    return STRATEGIES[check_strategy(name)](model, workload, group, options)


__all__ = ["STRATEGIES", "REAL_STRATEGIES", "Strategy", "StrategyOptions", "build_strategy",
           "check_strategy", "measured_by_default", "overlapping", "summary"]
