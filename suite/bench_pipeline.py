"""The pipeline benchmark: this suite's GPipe (with and without recompute) and 1F1B beside
torch.distributed.pipelining's ScheduleGPipe and Schedule1F1B, per (workload, stages p, m).

The five variants of a setting run interleaved in the same rounds (each on its own copy of the
model, same seed), after each was checked against single-device training. Per variant a row:
the pipeline's step time (per round the slowest stage's median step), throughput, the bubble
measured from every stage's timeline beside (p − 1)/(m + p − 1), the memory a step adds per
stage; per setting a comparison row: ours against the library's, with intervals and verdicts.

    nox -s bench                                   # CPU: 2 gloo ranks, p = 2
    torchrun --nproc-per-node 4 --local-ranks-filter 0 -m pytest suite/bench_pipeline.py \\
        --results-json /tmp/r.json                 # 4 GPUs: p = 2 and 4
"""

from __future__ import annotations

import itertools
import os
import statistics
from dataclasses import asdict, dataclass

import pytest
import torch
import torch.distributed as dist

from impl import capabilities, stats
from impl.pipeline import SCHEDULES, PipelineOptions, build_schedule, cut_stage
from impl.pipeline.measure import PIPELINE_FIELDS, bubble_fraction, bubble_theory
from impl.pipeline.plans import MICROBATCH_COUNTS
from impl.pipeline.schedule_check import max_abs_err_vs_single, single_device_weights
from impl.presets import preset
from impl.rows.kinds import PIPELINE, PIPELINE_COMPARISON
from impl.rows.study_records import AXES, ROUND_EXTRA
from impl.rows.write import write_row
from impl.strategy_check import weight_tolerance
from impl.workloads import DTYPES, MLPConfig, build_model, describe
from suite import deadline
from suite.conftest import launched_world, suite_axes
from suite.harness import Variant, batches, measure_interleaved, record_round_times, rounds_for
from suite.study_rows import comparison, round_seconds

VARIANTS = ("gpipe", "gpipe+recompute", "1f1b", "torch-gpipe", "torch-1f1b")
PEERS = (("gpipe", "torch-gpipe"), ("1f1b", "torch-1f1b"), ("gpipe+recompute", "gpipe"))
WORKLOADS = {False: "mlp_tiny", True: "mlp_8192x12_bf16"}  # gpu? -> preset
MICROBATCHES = {  # (gpu?, mode) -> m values; the CPU default stays well under a minute
    (False, "quick"): (1, 4), (False, "default"): (1, 2, 4, 8),
    (False, "full"): MICROBATCH_COUNTS, (True, "quick"): (4, 16),
    (True, "default"): (2, 8, 32), (True, "full"): MICROBATCH_COUNTS,
}


SKIPPED_S = 0.1  # what a setting this launch cannot run costs: its skip


@dataclass(frozen=True)
class Setting:
    workload: MLPConfig
    stages: int
    microbatches: int

    @property
    def id(self) -> str:
        return f"{self.workload.name}-p{self.stages}-m{self.microbatches}"


def settings(config) -> list[Setting]:
    # GPU presets only where the stages are GPUs: a gloo run on a GPU machine pipelines CPUs.
    gpu = (os.environ.get("OVERLAP_BACKEND") or capabilities.default_backend()) == "nccl"
    axes = suite_axes(config)
    workloads = [w for w in map(preset, config.suite_choices["workloads"] or [WORKLOADS[gpu]])
                 if w.kind == "mlp"]
    stages = [p for p in axes[AXES.world_sizes] if p >= 2] or [2]
    if gpu and config.option.suite_mode == "default":
        # The default run's budget: the deepest pipeline this launch can run (one stage per
        # GPU), where the bubble matters most; --full runs every depth.
        stages = [max((p for p in stages if p <= launched_world()), default=stages[0])]
    return [Setting(w, p, m) for w in workloads for p in stages
            for m in MICROBATCHES[gpu, config.option.suite_mode]]


def pytest_generate_tests(metafunc):
    if "setting" not in metafunc.fixturenames:
        return
    cases = settings(metafunc.config)
    metafunc.parametrize("setting", cases, ids=[c.id for c in cases])


def measurement_key(item) -> Setting:
    """Every row of a setting reads the one measurement its first row made."""
    return item.callspec.params["setting"]


def expected_seconds(item, mode: str) -> float:
    """The whole setting (its first row measures it): the single-device reference, each
    variant's check and its warm-up and timed rounds, one pipeline step costing a whole
    model's step (suite/deadline.py)."""
    setting = measurement_key(item)
    if capabilities.missing_world(setting.stages, launched_world()):
        return SKIPPED_S  # skipped at once: more stages than ranks
    device = deadline.suite_device()
    rounds = rounds_for(mode, device)
    per_variant = rounds.check_steps + (rounds.warmup + rounds.rounds) * rounds.steps_per_round
    steps = rounds.check_steps + len(VARIANTS) * (per_variant + 1)
    return deadline.expected_s(setting.workload, steps, 2 * len(VARIANTS) + 1, 1,
                               device)


def skip_reason(setting: Setting, context) -> str | None:
    if reason := capabilities.missing_world(setting.stages, context.world_size):
        return f"{reason} (one pipeline stage per rank)"
    if setting.microbatches > setting.workload.batch:
        return f"m={setting.microbatches} exceeds the batch of {setting.workload.name}"
    if context.group(setting.stages) is None:
        return f"rank {context.rank} is outside the {setting.stages}-stage pipeline"
    return None


def variant_options(variant: str, microbatches: int) -> tuple[str, PipelineOptions]:
    schedule = variant.split("+")[0]
    return schedule, PipelineOptions(microbatches=microbatches,
                                     recompute=variant.endswith("+recompute"))


def runnable(variant: str, setting: Setting) -> str | None:
    """Why the variant does not run in this setting, or None."""
    schedule = variant.split("+")[0]
    if schedule.startswith("torch-") and (reason := capabilities.missing_pipelining()):
        return reason
    return SCHEDULES[schedule].unsupported(setting.stages, setting.microbatches)


def step_peak_mib(schedule, batch, device: torch.device) -> float | None:
    """Memory one step adds on top of what is resident (its activations, gradients and
    message buffers): max_memory_allocated during the step minus memory_allocated before."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    schedule.step(batch)
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


@dataclass(frozen=True)
class StageMeasured:
    """One stage's part of a setting's measurement, gathered from every stage."""

    round_ms: dict[str, list[float]]  # per variant, as this stage timed it
    busy_ms: dict[str, list[float | None]]  # per variant, per round: this stage's compute
    timeline: dict[str, dict]  # per variant: this stage's last timed step, as JSON
    peak_mib: dict[str, float | None]  # per variant: step_peak_mib


@dataclass(frozen=True)
class SettingMeasured:
    """One setting's measurement (measure), which its variant rows and its comparison read."""

    names: list[str]  # the variants measured
    skipped: dict[str, str]  # variant -> why it cannot run here
    errors: dict[str, float]  # variant -> max |w - w_single| of its check
    tolerance: float
    stages: list[StageMeasured]
    orders: list  # the variants' order in each round
    seed: int  # of those orders


@dataclass(frozen=True)
class PipelineFigures:
    """A variant's per-round step (its slowest stage's) and bubbles (pipeline_figures)."""

    round_ms: list[float]
    bubbles: dict | None  # per round and per stage; None where a stage's busy time is unknown
    theory: float


def measure(setting: Setting, context, rounds) -> SettingMeasured:
    """Check, then time every runnable variant of ``setting`` interleaved; on every stage."""
    workload = setting.workload
    group, device = context.group(setting.stages), context.device
    index = dist.get_rank(group)
    data = batches(workload, device, rank=0)  # every stage reads the same batches
    skipped = {v: reason for v in VARIANTS if (reason := runnable(v, setting))}
    names = [v for v in VARIANTS if v not in skipped]
    reference = single_device_weights(workload, device, PipelineOptions().lr, rounds.check_steps)
    tolerance = weight_tolerance(DTYPES[workload.dtype],
                                 max(w.abs().max().item() for w in reference))
    errors, schedules = {}, {}
    for name in names:
        schedule, options = variant_options(name, setting.microbatches)
        # Correctness first: a fast wrong answer is a failure.
        errors[name] = max_abs_err_vs_single(schedule, workload, group, device, options,
                                             steps=rounds.check_steps, reference=reference)
        assert errors[name] <= tolerance, (f"{setting.id} {name}: weights differ from "
                                           f"single-device training by {errors[name]:.3g} "
                                           f"(tolerance {tolerance:.3g})")
        stage = cut_stage(build_model(workload, device), workload, setting.stages, index)
        schedules[name] = build_schedule(schedule, stage, workload, group, options)

    def variant(name: str) -> Variant:
        runner, rotation = schedules[name], itertools.cycle(data)

        def after_round() -> dict:
            runner.finish_timeline()
            return {ROUND_EXTRA.busy_ms: runner.busy_ms(),
                    ROUND_EXTRA.timeline: runner.timeline.to_json()}

        return Variant(name, lambda: runner.step(next(rotation)), after_round)

    result = measure_interleaved([variant(n) for n in names], rounds, device, group)
    peaks = {n: step_peak_mib(schedules[n], data[0], device) for n in names}
    for runner in schedules.values():
        runner.close()
    mine = StageMeasured(round_ms={n: result.round_ms(n) for n in names},
                         busy_ms={n: [e[ROUND_EXTRA.busy_ms] for e in result.extras[n]]
                                  for n in names},
                         timeline={n: result.extras[n][-1][ROUND_EXTRA.timeline] for n in names},
                         peak_mib=peaks)
    per_stage: list = [None] * setting.stages  # each stage's StageMeasured, once gathered
    dist.all_gather_object(per_stage, mine, group=group)
    return SettingMeasured(names=names, skipped=skipped, errors=errors, tolerance=tolerance,
                           stages=per_stage, orders=result.orders, seed=result.seed)


def pipeline_figures(measured: SettingMeasured, name: str, stages: int,
                     microbatches: int) -> PipelineFigures:
    """The pipeline's per-round step (slowest stage) and bubbles from every stage."""
    per_stage = measured.stages
    round_ms = [max(s.round_ms[name][r] for s in per_stage)
                for r in range(len(per_stage[0].round_ms[name]))]
    busy = [s.busy_ms[name] for s in per_stage]
    bubbles = None
    if all(b is not None for stage_busy in busy for b in stage_busy):
        by_round = [[bubble_fraction(step, stage_busy[r]) for stage_busy in busy]
                    for r, step in enumerate(round_ms)]
        bubbles = {"per_round": [statistics.fmean(b) for b in by_round],
                   "per_stage": [statistics.median(b[s] for b in by_round)
                                 for s in range(stages)]}
    return PipelineFigures(round_ms=round_ms, bubbles=bubbles,
                           theory=bubble_theory(stages, microbatches))


_measured: dict[Setting, SettingMeasured] = {}


def measured_setting(setting: Setting, context, rounds) -> SettingMeasured:
    if setting not in _measured:
        _measured.clear()  # one setting's models at a time
        _measured[setting] = measure(setting, context, rounds)
    return _measured[setting]


@pytest.mark.parametrize("variant", VARIANTS)
def test_pipeline(benchmark, setting, variant, dist_context, rounds):
    context = dist_context
    if reason := skip_reason(setting, context):
        pytest.skip(reason)
    measured = measured_setting(setting, context, rounds)
    if variant in measured.skipped:
        pytest.skip(measured.skipped[variant])
    workload = setting.workload
    figures = pipeline_figures(measured, variant, setting.stages, setting.microbatches)
    step = stats.median(figures.round_ms)
    bubbles = figures.bubbles
    bubble = stats.median(bubbles["per_round"]) if bubbles else None
    benchmark.group = f"pipeline-{setting.id}"
    record_round_times(benchmark, round_seconds(figures.round_ms))
    schedule, options = variant_options(variant, setting.microbatches)
    write_row(benchmark, PIPELINE.row(
        variant=variant, schedule=schedule,
        recompute=options.recompute, workload=setting.workload.name,
        stages=setting.stages, microbatches=setting.microbatches,
        backend=context.backend, device=torch.cuda.get_device_name(context.device)
        if context.device.type == "cuda" else "cpu",
        step_ms=step.value, step_ms_estimate=step.to_json(),
        round_ms=figures.round_ms,
        samples_per_s=workload.batch / (step.value / 1e3),
        bubble_fraction=bubble.value if bubble else None,
        bubble_estimate=bubble.to_json() if bubble else None,
        bubble_per_stage=bubbles["per_stage"] if bubbles else None,
        bubble_theory=figures.theory,
        peak_memory_mib=[s.peak_mib[variant] for s in measured.stages],
        max_abs_err_vs_single=measured.errors[variant],
        tolerance=measured.tolerance,
        stage_timelines=[s.timeline[variant] for s in measured.stages],
        config=describe(workload), options=asdict(options),
        fields=[f.name for f in PIPELINE_FIELDS],
    ))


def test_pipeline_comparison(benchmark, setting, dist_context, rounds):
    """Ours against torch.distributed.pipelining (and recompute against plain GPipe)."""
    context = dist_context
    if reason := skip_reason(setting, context):
        pytest.skip(reason)
    measured = measured_setting(setting, context, rounds)
    rounds_ms = {name: pipeline_figures(measured, name, setting.stages,
                                        setting.microbatches).round_ms
                 for name in measured.names}
    pairs = [comparison(a, b, rounds_ms[a], rounds_ms[b]) for a, b in PEERS
             if a in rounds_ms and b in rounds_ms]
    if not pairs:
        pytest.skip(f"no pair of {PEERS} ran at {setting.id}: "
                    f"{'; '.join(measured.skipped.values())}")
    benchmark.group = f"pipeline-{setting.id}"
    whole_rounds = [sum(rounds_ms[n][r] for n in rounds_ms)
                    for r in range(len(next(iter(rounds_ms.values()))))]
    record_round_times(benchmark, round_seconds(whole_rounds))
    write_row(benchmark, PIPELINE_COMPARISON.row(
        workload=setting.workload.name, stages=setting.stages,
        microbatches=setting.microbatches, backend=context.backend,
        comparisons=pairs, round_ms=rounds_ms, orders=measured.orders,
        seed=measured.seed, skipped=measured.skipped,
    ))
