"""Tensor-parallel MLP block: sync vs overlapped vs PyTorch's fused ops, strong and weak
scaling, per GEMM backend (impl/tensor_parallel/: layers.py, schedules.py, metrics.py).

A cell is one preset and one GEMM backend. All its variants run in the same rounds, in an order
shuffled per round (suite/harness.py, measure_interleaved): the block on 1 rank, and for every
larger world size launched, the strong-scaling block (the same layer) and the weak-scaling block
(each rank keeps the 1-rank shape) under each schedule. Smaller world sizes run on the subgroup
of ranks [0, n); the other ranks skip that variant's step but meet at every round's barrier on
the whole group. Each variant is checked against the single-device block before timing.

One row per variant (its round times fill the pytest-benchmark stats) and one comparison row
per cell holding every per-round value and the paired figures with 95% intervals.

    nox -s bench                                        # CPU: 2 gloo ranks, tiny presets
    python -m pytest suite/bench_tp.py --results-json r.json      # one GPU: world size 1
    torchrun --nproc-per-node 4 --local-ranks-filter 0 -m pytest suite/bench_tp.py \\
        --results-json r.json                           # 1, 2 and 4 GPUs in the same rounds
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pytest
import torch
import torch.distributed as dist

from impl import capabilities
from impl.kernels import ops, peaks
from impl.presets import preset
from impl.rows.kinds import GEMM, TENSOR_PARALLEL, TENSOR_PARALLEL_COMPARISON
from impl.rows.write import write_row
from impl.tensor_parallel.layers import (
    TpMlpConfig,
    TpMlpRunner,
    check_runner,
    gemm_shapes,
    reference_outputs,
)
from impl.tensor_parallel.metrics import (
    SINGLE,
    TpVariant,
    layer_flops,
    timeline_figures,
    variant_figures,
)
from impl.tensor_parallel.schedules import (
    FUSED_FORM_ONLY,
    SCHEDULES,
    Gemm,
    build_schedule,
    missing_gemm_backend,
)
from impl.workloads import DTYPES
from suite.conftest import launched_world, suite_axes
from suite.harness import Measurement, Variant, measure_interleaved, record_round_times
from suite.study_rows import round_seconds

DEFAULT_PRESETS = {
    # (gpu?, mode) -> presets
    (False, "quick"): ["tp_mlp_h256_t512_fp32"],
    (False, "default"): ["tp_mlp_h256_t512_fp32", "tp_mlp_h512_f128_t1024_fp32"],
    (False, "full"): ["tp_mlp_h256_t512_fp32", "tp_mlp_h512_f128_t1024_fp32",
                      "tp_mlp_ar_h256_t512_fp32"],
    (True, "quick"): ["tp_mlp_h8192_f1024_t8192_bf16"],
    # The default run's budget: the bf16 layers users train with; fp32 in --full.
    (True, "default"): ["tp_mlp_h8192_t8192_bf16", "tp_mlp_h8192_f1024_t8192_bf16"],
    (True, "full"): ["tp_mlp_h8192_t8192_bf16", "tp_mlp_h8192_f1024_t8192_bf16",
                     "tp_mlp_h4096_t4096_fp32", "tp_mlp_ar_h8192_t8192_bf16"],
}
BACKENDS_BY_DTYPE = {"fp32": ("torch", "v3"), "bf16": ("torch", "v5", "v6")}
# The GPU default run's budget: cuBLAS (through torch) alone; the hand-written GEMM backends in
# --full (suite/bench_gemm.py times them against cuBLAS in every mode).
DEFAULT_GPU_BACKENDS = ("torch",)
SCALINGS = ("strong", "weak")
# Where a cell ran, the checks and the figures are named as the tensor-parallel row declares them.
ROW = TENSOR_PARALLEL.names
# Each GEMM of a layer (the row's ``gemms``) is described with a GEMM row's fields of its shape,
# rate and roofline: the report draws it on the GEMM rows' roofline.
GEMM_ROW = GEMM.names


@dataclass(frozen=True)
class Row:
    config: TpMlpConfig
    backend: str
    variant: TpVariant | None  # None: the cell's comparison row

    @property
    def id(self) -> str:
        what = self.variant.name if self.variant else "comparison"
        return f"{self.config.name}-{what}-{self.backend}"


def cell_variants(world_sizes: list[int]) -> list[TpVariant]:
    return [SINGLE] + [TpVariant(scaling, schedule, world) for world in world_sizes if world > 1
                       for scaling in SCALINGS for schedule in SCHEDULES]


def world_sizes(config) -> list[int]:
    """The world sizes of the run's axes that this launch can run (no rows for the others)."""
    return [w for w in suite_axes(config)["world_sizes"] if w <= launched_world()]


def pytest_generate_tests(metafunc):
    if "tp_row" not in metafunc.fixturenames:
        return
    worlds = world_sizes(metafunc.config)
    gpu = capabilities.gpu_count() > 0
    mode = metafunc.config.option.suite_mode
    # A backend this machine lacks gets one row, skipped with the reason, not one per variant.
    rows = [Row(config, backend, variant)
            for config in map(preset, DEFAULT_PRESETS[gpu, mode])
            for backend in BACKENDS_BY_DTYPE[config.dtype]
            if not (gpu and mode == "default") or backend in DEFAULT_GPU_BACKENDS
            for variant in [*(cell_variants(worlds)
                              if missing_gemm_backend(backend) is None else []), None]]
    metafunc.parametrize("tp_row", rows, ids=[r.id for r in rows])


def skip_reason(row: Row, context) -> str | None:
    if reason := missing_gemm_backend(row.backend):
        return f"GEMM backend {row.backend}: {reason}"
    variant = row.variant
    if variant is None:
        return None
    if reason := capabilities.missing_world(variant.world_size, context.world_size):
        return reason
    if variant.schedule == "fused":
        if not row.config.sequence_parallel:
            return FUSED_FORM_ONLY
        if row.backend != "torch":
            return "fused runs cuBLAS inside PyTorch's ops: measured in the torch-backend cell"
        return (capabilities.missing_fused_tp(variant.world_size, context.backend)
                or capabilities.missing_whole_world(variant.world_size, context.world_size))
    return None


@dataclass
class Cell:
    """An interleaved measurement of one cell and what each variant's row reports."""

    measurement: Measurement | None  # None when a check failed: nothing was timed
    variants: list[TpVariant]
    info: dict[str, dict] = field(default_factory=dict)  # variant name -> row extra_info
    error: str | None = None


def device_info(context) -> dict:
    cuda = context.device.type == "cuda"
    name = torch.cuda.get_device_name(context.device) if cuda else None
    try:
        device_peaks = peaks.lookup(name) if name else None
    except peaks.UnknownDeviceError:
        device_peaks = None
    return {ROW.device_name: name, ROW.device: name or "cpu", ROW.backend: context.backend,
            ROW.profile: context.profile, ROW.launched_world: context.world_size,
            "device_peaks": device_peaks}


def gemm_rows(layer: TpMlpConfig, world: int, gemm_ms: dict[str, float], dtype: str,
              device_peaks) -> list[dict]:
    """Each GEMM of a rank's step: shape, median time, TFLOP/s and roofline position."""
    element_bytes = torch.tensor([], dtype=DTYPES[dtype]).element_size()
    rows = []
    for label, (m, n, k) in gemm_shapes(layer, world).items():
        ms = gemm_ms.get(label)
        intensity = ops.arithmetic_intensity(m, n, k, element_bytes)
        rows.append({"label": label, GEMM_ROW.m: m, GEMM_ROW.n: n, GEMM_ROW.k: k, "ms": ms,
                     GEMM_ROW.tflops: ops.gemm_flops(m, n, k) / ms / 1e9 if ms else None,
                     GEMM_ROW.arithmetic_intensity: intensity,
                     GEMM_ROW.roofline_tflops: peaks.roofline(intensity, dtype,
                                                              device_peaks) / 1e12
                     if device_peaks else None})
    return rows


def checked_runners(row: Row, variants: list[TpVariant], context) -> tuple[dict, dict, dict]:
    """Each variant built on its subgroup and checked against the single-device block (one
    reference per scaling and world size). Ranks outside a subgroup build nothing for it."""
    config = row.config
    gemm = Gemm(row.backend, DTYPES[config.dtype])
    runners, layers, checks = {}, {}, {}
    for scaling, world in dict.fromkeys((v.scaling, v.world_size) for v in variants):
        layer = config.scaled(world, scaling)
        group = context.group(world)
        if group is None:
            continue
        reference = reference_outputs(layer, context.device)
        for v in variants:
            if (v.scaling, v.world_size) == (scaling, world):
                schedule = build_schedule(v.schedule, group, gemm, context.device,
                                          layer.pieces_per_peer)
                runners[v.name], layers[v.name] = TpMlpRunner(layer, schedule), layer
                checks[v.name] = check_runner(runners[v.name], reference)
        del reference
    return runners, layers, checks


def any_rank(flag: bool, context) -> bool:
    """True on every rank when ``flag`` is True on one: all ranks then take the same path."""
    if context.world_size == 1:
        return flag
    shared = torch.tensor([int(flag)], device=context.device)
    dist.all_reduce(shared, op=dist.ReduceOp.MAX)
    return bool(shared.item())


def measure(runners: dict, variants: list[TpVariant], rounds,
            context) -> tuple[Measurement, dict]:
    """Every variant in the same rounds; after each round, its step's timeline figures."""
    timelines = {}

    def after_round(name: str) -> dict | None:
        if name not in runners:  # outside the subgroup
            return None
        timelines[name] = runners[name].timeline()
        return timeline_figures(timelines[name])

    harness = [Variant(v.name, runners[v.name].step if v.name in runners else (lambda: None),
                       lambda n=v.name: after_round(n)) for v in variants]
    measurement = measure_interleaved(harness, rounds, context.device,
                                      context.group(context.world_size))
    return measurement, timelines


def variant_info(row: Row, v: TpVariant, layer: TpMlpConfig, check: dict,
                 measurement: Measurement, timeline, where: dict, device_peaks) -> dict:
    """A variant row's extra_info: what ran, its figures with intervals, its check."""
    figures = variant_figures(measurement, v, layer_flops(layer.tokens, layer.hidden, layer.ffn),
                              set(measurement.names))
    return TENSOR_PARALLEL.row(
        preset=row.config.name, gemm_backend=row.backend,
        scaling=v.scaling, schedule=v.schedule, world_size=v.world_size,
        form="sequence-parallel" if layer.sequence_parallel else "all-reduce",
        tokens=layer.tokens, hidden=layer.hidden, ffn=layer.ffn,
        ffn_per_rank=layer.ffn // v.world_size, dtype=layer.dtype,
        pieces_per_peer=layer.pieces_per_peer, **where,
        **{key: estimate["value"] for key, estimate in figures[ROW.estimates].items()},
        **figures, step_ms_rounds=measurement.round_ms(v.name),
        max_rel_err=check[ROW.max_rel_err], rel_errors=check["errors"],
        tolerance=check[ROW.tolerance], timeline=timeline.to_json() if timeline else None,
        gemms=gemm_rows(layer, v.world_size, figures[ROW.gemm_ms], layer.dtype, device_peaks),
        peak_tflops=device_peaks.peak_flops(layer.dtype) / 1e12 if device_peaks else None,
        peak_gbps=device_peaks.hbm_bytes_per_s / 1e9 if device_peaks else None,
        measured_with=measurement.names, config=asdict(layer),
    )


def measure_cell(row: Row, context, rounds, world_sizes: list[int]) -> Cell:
    variants = [v for v in cell_variants(world_sizes)
                if skip_reason(Row(row.config, row.backend, v), context) is None]
    runners, layers, checks = checked_runners(row, variants, context)
    failed = [f"{name}: max relative error {c['max_rel_err']:.3g} > tolerance "
              f"{c['tolerance']:.3g} ({c['errors']})" for name, c in checks.items()
              if not c[ROW.max_rel_err] <= c[ROW.tolerance]]
    # A fast wrong answer is a failure: nothing is timed and every row of the cell says so.
    if any_rank(bool(failed), context):
        return Cell(None, variants, error=f"{row.config.name} with {row.backend}: "
                    + ("; ".join(failed) or "a check failed on another rank"))
    measurement, timelines = measure(runners, variants, rounds, context)
    cell = Cell(measurement, variants)
    where = device_info(context)
    device_peaks = where.pop("device_peaks")
    where[ROW.kernel_path] = (v6_kernel_path(runners[SINGLE.name])
                            if row.backend == "v6" and SINGLE.name in runners else row.backend)
    for v in variants:
        if v.name in runners:
            cell.info[v.name] = variant_info(row, v, layers[v.name], checks[v.name],
                                             measurement, timelines.get(v.name), where,
                                             device_peaks)
    cell.info["comparison"] = TENSOR_PARALLEL_COMPARISON.row(
        preset=row.config.name,
        gemm_backend=row.backend, dtype=row.config.dtype, **where,
        variants=measurement.names, measurement=measurement.to_json(), checks=checks,
        config=asdict(row.config),
    )
    runners.clear()
    if context.device.type == "cuda":
        torch.cuda.empty_cache()
    return cell


def v6_kernel_path(runner: TpMlpRunner) -> str:
    """Which kernel v6 ran for the forward W1 GEMM ("tma", or "v5" where TMA cannot)."""
    x = runner.x.detach()
    if runner.config.sequence_parallel:
        x = x.repeat(runner.schedule.world, 1)
    return f"v6 ({ops.gemm_v6_path(x.contiguous(), runner.w1.detach())})"


@pytest.fixture(scope="module")
def tp_cells() -> dict:
    """Cells measured so far in this module, by (preset, backend): every row of a cell reads
    the one interleaved measurement made for its first row."""
    return {}


def test_tp(benchmark, tp_row: Row, dist_context, rounds, tp_cells, pytestconfig) -> None:
    context = dist_context
    if reason := skip_reason(tp_row, context):
        pytest.skip(reason)
    key = (tp_row.config, tp_row.backend)
    if key not in tp_cells:
        tp_cells[key] = measure_cell(tp_row, context, rounds, world_sizes(pytestconfig))
    cell = tp_cells[key]
    if cell.error:
        pytest.fail(cell.error)
    benchmark.group = f"tp-{tp_row.config.name}-{tp_row.backend}"
    if tp_row.variant is None:
        walls = [sum(cell.measurement.wall_s[name][r] for name in cell.measurement.names)
                 for r in range(len(cell.measurement.orders))]
        record_round_times(benchmark, walls)  # the whole interleaved round, every variant
        write_row(benchmark, cell.info["comparison"])
    else:
        name = tp_row.variant.name
        record_round_times(benchmark, round_seconds(cell.measurement.round_ms(name)))
        if name in cell.info:  # absent outside the variant's subgroup
            write_row(benchmark, cell.info[name])
