"""The overlap benchmark: every cell (workload × world size × K × profile) measured interleaved.

In each cell the strategies and their references run in the same rounds, each round in an
order shuffled with a seed every rank shares (``suite.harness.measure_interleaved``), every
variant on aliases of one set of weights restored before each of its segments, and on one
shared gradient buffer where its strategy allows (impl/memory.py): the same steps from the
same state, with the memory of one model. On a GPU the cell plans its memory first and skips,
with what it needs and what the GPU has, when it cannot fit; rows record its peak memory.

- compute-only: the same steps with communication switched off (every rank on its own);
- comm-only: the K chunks all-reduced as ``chunked`` launches them, with no compute;
- sequential: whole backward, then the all-reduces, then the update (``mpi-sequential`` under
  mpirun);
- ddp (bucket cap = gradient bytes / K) and ddp-25mb (DDP's default cap);
- the strategies asked for (threaded, chunked, mpi under mpirun).

Before timing, every strategy is checked against sequential (max |w − w_sequential| after a few
steps, asserted within tolerance). Rows: one per variant, whose statistics are its own
per-round step times (throughput and the gate), and one comparison row per cell whose
``extra_info`` keeps every per-round value and the paired figures with 95% bootstrap
intervals (impl/comparisons.py).

    nox -s bench
    torchrun --nproc-per-node 2 --local-ranks-filter 0 -m pytest suite/bench_overlap.py \\
        --workloads mlp_tiny --chunks 1,10 --results-json /tmp/r.json
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

import pytest
import torch

from impl import capabilities, comparisons, metrics
from impl.gradients import max_chunks, shared_buffers
from impl.memory import MemoryPlan, Pristine, agreed, alias_model, plan_for_cell
from impl.rows.declare import RowKind
from impl.rows.kinds import COMPARISON, METERED, PAIRED, STEP
from impl.rows.study_records import AXES, CELL_MEMORY, NARROWED
from impl.rows.write import write_row
from impl.strategies import (
    STRATEGIES,
    StrategyOptions,
    build_strategy,
    measured_by_default,
    overlapping,
)
from impl.strategies.knobs import chunking_problem, variant_strategy
from impl.strategy_check import errors_vs_sequential, weight_tolerance
from impl.strategy_records import strategy_of
from impl.workloads import DTYPES, WorkloadConfig, build_model, describe
from suite import deadline
from suite.conftest import launched_world, suite_axes, under_mpirun
from suite.harness import (
    Measurement,
    Variant,
    batches,
    measure_interleaved,
    record_round_times,
    rounds_for,
)

COPY_ENGINE = "copy-engine"  # runs only where its GPUs reach each other (capabilities.py)

COMPARE = "compare"


def compared_under_torchrun(name: str) -> bool:
    """An overlapping strategy (its role) that torchrun runs: compared against the
    references in every cell (the MPI cells compare the one that needs mpirun)."""
    return overlapping(name) and not STRATEGIES[name].needs_mpi


@dataclass(frozen=True)
class Cell:
    workload: WorkloadConfig
    chunks: int
    world_size: int
    profile: str
    strategies: tuple[str, ...]
    mpi: bool = False
    knobs: tuple[str, ...] = ()  # named variants (impl/strategy_records.py) measured beside

    @property
    def sequential(self) -> str:
        return "mpi-sequential" if self.mpi else "sequential"

    @property
    def compared(self) -> tuple[str, ...]:
        """The variants with figures of their own (everything but the references)."""
        if self.mpi:
            return ("mpi",)
        if self.world_size == 1:  # nothing to communicate: overheads against compute-only
            return tuple(s for s in self.strategies if compared_under_torchrun(s))
        return (*(s for s in self.strategies if compared_under_torchrun(s)),
                comparisons.DDP, comparisons.DDP_DEFAULT, *self.knobs)

    @property
    def variants(self) -> tuple[str, ...]:
        references = (comparisons.COMPUTE_ONLY, self.sequential)
        if self.world_size > 1:
            references = (comparisons.COMPUTE_ONLY, comparisons.COMM_ONLY, self.sequential)
        return (*references, *self.compared)

    def id(self, variant: str) -> str:
        return (f"{self.workload.name}-{variant}-K{self.chunks}-w{self.world_size}-"
                f"{self.profile}")


@dataclass(frozen=True)
class Row:
    cell: Cell
    variant: str  # a variant of the cell, or COMPARE for the cell's comparison row

    @property
    def id(self) -> str:
        return self.cell.id(self.variant)


def cells(axes: dict, world: int, mpi: bool) -> list[Cell]:
    """The cells this launch can run: world sizes up to the launched world, K up to what the
    workload allows (model sizes read on the meta device, no memory), MPI cells under mpirun.
    The cell at the knob K (``axes[AXES.knob_chunks]``) also measures the named variants."""
    found = []
    for workload in axes[AXES.workloads]:
        meta = build_model(workload, torch.device("meta"))
        limit = max_chunks(meta)
        chunks = ([k for k in axes[AXES.chunks] if k <= limit]
                  or [min(axes[AXES.chunks][0], limit)])
        for size in sorted(w for w in axes[AXES.world_sizes] if w <= world):
            if mpi and size != world:
                continue  # MPI runs over all launched ranks
            # Without communication K changes nothing: one cell at the smallest K.
            # Strategies that can never run here are not generated (copy-engine off NVLink,
            # or in a subgroup: its symmetric memory runs on the whole launch only).
            runnable = tuple(s for s in axes[AXES.strategies] if s != COPY_ENGINE
                             or not (capabilities.missing_copy_engine(axes[AXES.backend],
                                                                      axes[AXES.profile], size)
                                     or capabilities.missing_whole_world(size, world)))
            knobs = tuple(v for v in axes[AXES.knobs] if strategy_of(v) != COPY_ENGINE
                          or COPY_ENGINE in runnable)
            if not in_budget(axes.get(AXES.narrowed, {}).get(workload.name, {}), size, world):
                continue
            for k in narrowed_chunks(axes, workload.name, chunks, size, world):
                measured = ()
                knob_workloads = axes.get(AXES.knob_workloads) or (workload.name,)
                if (size > 1 and k == axes[AXES.knob_chunks] and not mpi
                        and workload.name in knob_workloads
                        and (size == world or not axes.get(AXES.knobs_on_the_whole_world))):
                    # A variant whose chunking cannot cut this model (equal layers with fewer
                    # layers than K) is left out, not failed.
                    measured = tuple(v for v in knobs
                                     if not chunking_problem(v, k, meta, workload.name))
                found.append(Cell(workload, k, size, axes[AXES.profile], runnable, mpi=mpi,
                                  knobs=measured))
    return found


def in_budget(narrowed: dict, size: int, world: int) -> bool:
    """Whether the default run's budget keeps a workload's cells at world size ``size``
    (suite/conftest.py, NARROWED_CELLS): "middle" sizes lie between 2 and the launched world,
    "two" is the 2-rank size below a larger launched world."""
    if size == 1 or size == world:
        return True
    if size == 2:
        return narrowed.get(NARROWED.two, True)
    return narrowed.get(NARROWED.middle, True)


def narrowed_chunks(axes: dict, workload: str, chunks: list[int], size: int,
                    world: int) -> list[int]:
    """The K a cell of this size runs: one K without communication, else the budget's."""
    if size == 1:
        return chunks[:1]
    narrowed = axes.get(AXES.narrowed, {}).get(workload, {})
    wanted = narrowed.get(NARROWED.middle_chunks) if 2 < size < world else None
    wanted = wanted or narrowed.get(NARROWED.chunks) or chunks
    return [k for k in chunks if k in wanted] or chunks


def pytest_generate_tests(metafunc):
    if "row" not in metafunc.fixturenames:
        return
    mpi = under_mpirun()
    wanted = [s for s in suite_axes(metafunc.config)[AXES.strategies]
              if STRATEGIES[s].needs_mpi == mpi and s in measured_by_default()]
    if not wanted:  # nothing of this launcher's kind was asked for
        metafunc.parametrize("row", [])
        return
    axes = {**suite_axes(metafunc.config), AXES.strategies: wanted}
    rows = [Row(cell, v) for cell in cells(axes, launched_world(), mpi)
            for v in (*cell.variants, COMPARE)]
    metafunc.parametrize("row", rows, ids=[r.id for r in rows])


def measurement_key(item) -> Cell:
    """The rows of a cell are measured together (the first one measures, the rest read)."""
    return item.callspec.params["row"].cell


def expected_seconds(item, mode: str) -> float:
    """The whole cell (its first row measures it): every compared variant's check and the
    sequential reference's, then warm-up and timed rounds of every variant (suite/deadline.py)."""
    cell = measurement_key(item)
    device = deadline.suite_device()
    rounds = rounds_for(mode, device)
    checks = (len(cell.compared) + 1) * rounds.check_steps
    timed = (rounds.warmup + rounds.rounds) * rounds.steps_per_round * len(cell.variants)
    builds = len(cell.compared) + len(cell.variants) + 2
    staged = deadline.MPI_STAGED if cell.mpi and device.type == "cuda" else None
    return deadline.expected_s(cell.workload, checks + timed, builds, cell.world_size,
                               device, staged)


def skip_reason(cell: Cell) -> str | None:
    kernel = getattr(cell.workload, "kernel", "cublas")
    if kernel != "cublas" and (reason := capabilities.missing_gpu()):
        return f"{cell.workload.name} runs hand-written CUDA kernels: {reason}"
    if cell.mpi and (reason := capabilities.missing_mpi()):
        return reason
    return None


# --- measuring a cell ---------------------------------------------------------------------


def build_variant(name: str, cell: Cell, group, data, weights: Pristine) -> tuple[Variant, object]:
    """A variant on aliases of the cell's one set of weights (impl/memory.py), restored to the
    same state before each of its segments, ready to step."""
    workload = cell.workload
    options = StrategyOptions(chunks=cell.chunks, check_finite=False)
    model = alias_model(weights.model, workload)
    if name == comparisons.COMPUTE_ONLY:
        runner = build_strategy(cell.sequential, model, workload, None, options)
    elif name == comparisons.COMM_ONLY:
        runner = build_strategy("mpi" if cell.mpi else "chunked", model, workload, group,
                                options)
        # The flat buffer is the one the other variants zero: random data for every segment
        # (timing on zeros can flatter a reduction).
        return Variant(name, runner.communicate_only, runner.finish_timeline,
                       before_round=runner.flat.buffer.normal_), runner
    else:
        strategy, variant_options = variant_strategy(name, cell.chunks)
        runner = build_strategy(strategy, model, workload, group, variant_options)
    rotation = itertools.cycle(data)
    return Variant(name, lambda: runner.step(next(rotation)), runner.finish_timeline,
                   before_round=weights.restore), runner


def check_cell(cell: Cell, group, context, rounds) -> dict[str, dict]:
    """Correctness before timing: each compared strategy's weights against sequential's."""
    workload = cell.workload
    candidates = {}
    for name in cell.compared:
        candidates[name] = variant_strategy(name, cell.chunks, check_finite=True)
    if not candidates:
        return {}
    errors = errors_vs_sequential(candidates, workload, group, context.device,
                                  steps=rounds.check_steps)
    model = build_model(workload, context.device)
    largest = max(p.detach().abs().max().item() for p in model.parameters())
    tolerance = weight_tolerance(DTYPES[workload.dtype], largest)
    for name, error in errors.items():
        assert error <= tolerance, (f"{cell.id(name)}: weights differ from sequential by "
                                    f"{error:.3g} (tolerance {tolerance:.3g})")
    return {name: {STEP_ROW.max_abs_err_vs_sequential: error, STEP_ROW.tolerance: tolerance}
            for name, error in errors.items()}


@dataclass
class CellResult:
    measurement: Measurement
    figures: dict
    checks: dict[str, dict]
    timelines: dict[str, dict]  # the median round's timeline of each variant, as JSON
    bucket_counts: dict[str, int]
    nvml: dict | None
    memory: dict | None  # GPU: the cell's peak (torch.cuda.max_memory_allocated) and its plan


@dataclass(frozen=True)
class CellSkipped:
    reason: str  # one line: what the cell needs and what the GPU has


def plan_memory(cell: Cell, group, context, data) -> MemoryPlan | None:
    """The cell's memory plan on this GPU (None on the CPU), agreed by the group's ranks."""
    if context.device.type != "cuda":
        return None
    plan = plan_for_cell(cell.workload, list(cell.variants), list(cell.compared),
                         cell.chunks, cell.world_size, context.device, data[0])
    return agreed(plan, group, context.device)


def measure_cell(cell: Cell, context, rounds, sampler) -> CellResult | CellSkipped:
    group = context.group(cell.world_size)
    data = batches(cell.workload, context.device, context.rank)
    plan = plan_memory(cell, group, context, data)
    if plan is not None and not plan.fits:
        return CellSkipped(f"{cell.id('*')} {plan.line()}")
    if plan is not None:
        torch.cuda.reset_peak_memory_stats(context.device)
    checks = check_cell(cell, group, context, rounds)
    weights = Pristine(build_model(cell.workload, context.device),
                       on_device=plan is None or plan.pristine_on == "device")
    with shared_buffers():
        built = [build_variant(name, cell, group, data, weights) for name in cell.variants]
    if sampler is not None:
        sampler.start()
    try:
        measurement = measure_interleaved([v for v, _ in built], rounds, context.device,
                                          group, meter=sampler.energy_j if sampler else None)
    finally:
        samples = sampler.stop() if sampler is not None else None
        bucket_counts = {v.name: r.bucket_count for v, r in built if hasattr(r, "bucket_count")}
        for _, runner in built:
            runner.close()
    timelines = {name: [extra for extra in measurement.extras[name]] for name in cell.variants}
    round_ms = {name: measurement.round_ms(name) for name in cell.variants}
    other_chunking = [name for name, count in bucket_counts.items() if count != cell.chunks]
    figures = comparisons.cell_figures(round_ms, timelines, cell.sequential, cell.compared,
                                       other_chunking)
    representative = {name: timelines[name][comparisons.median_round(round_ms[name])].to_json()
                      for name in cell.variants}
    measurement.extras = {}  # timelines are summarised above; the JSON keeps the median ones
    nvml = None
    if samples is not None:
        nvml = samples.summary(measurement.steps_per_round * len(round_ms[cell.sequential]))
        if samples.available:
            nvml["series"] = samples.to_json()
    memory = None
    if plan is not None:
        memory = {CELL_MEMORY.peak_bytes: torch.cuda.max_memory_allocated(context.device),
                  CELL_MEMORY.plan: plan.to_json()}
    return CellResult(measurement, figures, checks, representative, bucket_counts, nvml, memory)


@pytest.fixture(scope="module")
def cell_results():
    """The measured cells of this module, by cell; the previous cell is freed on the next."""
    return {}


def result_for(cell: Cell, cache: dict, context, rounds, sampler_factory) -> CellResult:
    if cell not in cache:
        cache.clear()  # one cell's results at a time: the rows of a cell are consecutive
        sampler = sampler_factory(cell.world_size) if context.rank == 0 else None
        try:
            cache[cell] = measure_cell(cell, context, rounds, sampler)
        except Exception as error:
            # Kept, so that the cell's other rows fail with it instead of measuring it again
            # (each attempt runs collectives the ranks may no longer agree on).
            cache[cell] = error
            raise
    if isinstance(cache[cell], Exception):
        pytest.fail(f"the cell {cell.id('*')} failed: {cache[cell]}", pytrace=False)
    if isinstance(cache[cell], CellSkipped):
        pytest.skip(cache[cell].reason)
    return cache[cell]


# --- the rows -------------------------------------------------------------------------------


def test_overlap(benchmark, row, dist_context, rounds, cell_results, sampler_factory):
    cell, context = row.cell, dist_context
    if reason := skip_reason(cell):
        pytest.skip(reason)
    if context.group(cell.world_size) is None:
        pytest.skip(f"rank {context.rank} is outside the {cell.world_size}-rank group")
    result = result_for(cell, cell_results, context, rounds, sampler_factory)
    benchmark.group = f"{cell.workload.name}-K{cell.chunks}-w{cell.world_size}-{cell.profile}"
    kind = COMPARISON if row.variant == COMPARE else STEP
    info = common_info(kind, cell, context, rounds)
    if row.variant == COMPARE:
        round_s = [sum(segment) for segment in zip(*result.measurement.wall_s.values())]
        record_round_times(benchmark, round_s)
        info.update(comparison_info(cell, result))
    else:
        steps = result.measurement.step_ms[row.variant]
        record_round_times(benchmark, [sum(s) / 1e3 for s in steps])
        info.update(variant_info(row.variant, cell, result))
    info[kind.names.memory] = result.memory
    write_row(benchmark, info)


def common_info(kind: RowKind, cell: Cell, context, rounds) -> dict:
    """What a comparison row and a step row of the cell both hold."""
    workload = cell.workload
    device = (torch.cuda.get_device_name(context.device) if context.device.type == "cuda"
              else capabilities.default_device().type)
    return kind.row(real=True, workload=cell.workload.name, chunks=cell.chunks,
                    world_size=cell.world_size, profile=context.profile,
                    backend=context.backend, device=device, config=describe(workload),
                    rounds=asdict(rounds), order_seed=0)


def comparison_info(cell: Cell, result: CellResult) -> dict:
    return COMPARISON.row(
        sequential_reference=cell.sequential, variants=list(cell.variants),
        compared=list(cell.compared), **result.figures, checks=result.checks,
        ddp_bucket_counts=result.bucket_counts, measurement=result.measurement.to_json(),
        timelines=result.timelines, nvml=result.nvml)


def _value(estimate: dict | None) -> float | None:
    return None if estimate is None else estimate["value"]


# A variant's step row names its fields as STEP declares them; the comparison's references
# and a strategy's figures carry the same names (copied below). A cell's checks are named as
# the step rows they are copied into.
STEP_ROW, CELL_ROW = STEP.names, COMPARISON.names
# The figures with an interval in a comparison, a step row's value and its interval.
INTERVAL_FIGURES = (STEP_ROW.overlap_efficiency, STEP_ROW.bound_efficiency,
                    STEP_ROW.hidden_comm_fraction)


def variant_info(variant: str, cell: Cell, result: CellResult) -> dict:
    """A variant's row: its own step times, and its figures copied from the comparison."""
    workload = cell.workload
    measurement = result.measurement
    steps = [ms for segment in measurement.step_ms[variant] for ms in segment]
    round_ms = measurement.round_ms(variant)
    references = result.figures[CELL_ROW.references]
    figures = result.figures[CELL_ROW.strategies].get(variant, {})
    step_estimate = comparisons.stats.median(round_ms)
    step_ms = step_estimate.value
    info = STEP.row(
        strategy=variant, sequential_reference=cell.sequential,
        step_ms=step_ms, step_ms_rounds=round_ms, step_ms_all=steps,
        samples_per_s=metrics.samples_per_s(cell.world_size, workload.batch, step_ms),
        samples_per_round=cell.world_size * workload.batch * measurement.steps_per_round,
        intervals={STEP_ROW.step_ms: step_estimate.to_json(), **{
            key: figures[key] for key in INTERVAL_FIGURES if figures.get(key)}},
        timeline=result.timelines[variant],
        ddp_bucket_count=result.bucket_counts.get(variant),
        **result.checks.get(variant, dict.fromkeys((STEP_ROW.max_abs_err_vs_sequential,
                                                    STEP_ROW.tolerance))),
    )
    for key in (STEP_ROW.compute_only_ms, STEP_ROW.comm_only_ms, STEP_ROW.sequential_ms,
                STEP_ROW.limit_ms, STEP_ROW.bound_ms):
        info[key] = _value(references.get(key)) \
            if key != STEP_ROW.comm_only_ms or cell.world_size > 1 else 0.0
    if info[STEP_ROW.limit_ms] is None:
        info[STEP_ROW.limit_ms] = info[STEP_ROW.compute_only_ms]
    for key in INTERVAL_FIGURES:
        info[key] = _value(figures.get(key))
    vs = figures.get("vs_sequential")
    info[STEP_ROW.speedup_vs_sequential] = _value(vs[PAIRED.speedup]) if vs else None
    for peer in ("ddp", "ddp_25mb"):
        versus = figures.get(f"vs_{peer}")
        info[f"speedup_vs_{peer}"] = _value(versus[PAIRED.speedup]) if versus else None
        info[f"verdict_vs_{peer}"] = versus[PAIRED.verdict] if versus else None
    info.update(energy(measurement, variant, cell, workload.batch,
                       (result.nvml or {}).get(METERED.reason)))
    return info


def energy(measurement: Measurement, variant: str, cell: Cell, batch: int,
           no_counter: str | None = None) -> dict:
    """Energy of the variant's segments (NVML counter read around each), per step; none where
    the counter did not advance in every segment of the variant (metrics.energy_counter_resolved:
    on one H100, 3 steps of 10.7 ms read 0 J in all 12 rounds of one variant and 64 J in 6 of
    12 of another doing the same work), and then why, in energy_left_out (metrics.energy_left_out;
    ``no_counter``: the sampler's reason where the run had no counter)."""
    joules = measurement.energy_j.get(variant)
    if left_out := metrics.energy_left_out(joules, no_counter):
        return {STEP_ROW.energy_per_step_j: None, STEP_ROW.samples_per_joule: None,
                STEP_ROW.energy_left_out: left_out}
    per_step = metrics.energy_per_step_j(sum(joules), len(joules) * measurement.steps_per_round)
    return {STEP_ROW.energy_per_step_j: per_step,
            STEP_ROW.samples_per_joule: metrics.samples_per_joule(cell.world_size, batch,
                                                                  per_step),
            STEP_ROW.energy_left_out: None}
