"""The report's CPU–GPU hybrid parts: the trainers' steps and checks, where the offload's host
work goes, host Adam against memory bandwidth, the digits curves and the GPT forward table.

Rows are ``impl.rows.merge.benchmark_rows`` of suite/bench_hybrid.py's kinds; definitions are quoted
from impl/hybrid (HYBRID_FIELDS, impl/hybrid/measure.py). ``section_parts`` fills the hybrid
half of the pipeline section's context (reports/sections/pipeline.py).

    parts = section_parts(view)   # {"hybrid_table": Table | None, ...}
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import fields

from impl.hybrid.crossover import LadderPoint
from impl.hybrid.goals import bound_under_step
from impl.hybrid.gpt_forward import STUDY_TABLE
from impl.hybrid.trainer_check import TrainingCheck
from impl.rows.declare import Declared
from impl.rows.kinds import (
    DIGITS_CURVE,
    GPT_FORWARD,
    HOST_ADAM,
    HYBRID_COMPARISON,
    HYBRID_STEP,
    OFFLOAD_CROSSOVER,
    OFFLOAD_ONLY,
)
from impl.rows.study_records import BALANCE
from reports import figures
from reports.captions import Figure, how_text, make_figure
from reports.format import (
    Column,
    Placement,
    Table,
    device_words,
    fmt,
    make_table,
    text_column,
)
from reports.study_tables import comparison_table, interval_text, of_kind
from reports.view import View

# The fields of each kind of row read here: row[HYBRID.variant].
HYBRID, PAIRS = HYBRID_STEP.names, HYBRID_COMPARISON.names
LARGEST, ADAM, CROSSING = OFFLOAD_ONLY.names, HOST_ADAM.names, OFFLOAD_CROSSOVER.names
DIGITS, GPT = DIGITS_CURVE.names, GPT_FORWARD.names
# A row's check (impl.hybrid.trainer_check.TrainingCheck as JSON), keyed by its fields.
CHECKED = Declared("training check", {f.name: f.name for f in fields(TrainingCheck)})

VARIANT_COLORS = {"cpu": "#7f7f7f", "gpu": "#1f77b4", "coarse-hybrid": "#ff7f0e",
                  "offload-overlap": "#2ca02c"}


def check_text(row: dict) -> str:
    """The check a row passed: gradients and update (impl/hybrid/trainer_check.py), or the older
    weights-only check of runs made before it."""
    if (check := row.get(HYBRID.check)) or row.get(HYBRID.checks):
        checks = [check] if check else row[HYBRID.checks]
        gradient = max(c[CHECKED.gradient_error] for c in checks)
        weights = max(c[CHECKED.weight_error] for c in checks)
        late = " (update one step late)" if checks[0].get(CHECKED.update_delay) else ""
        return (f"gradients {fmt(gradient)} ≤ {fmt(checks[0][CHECKED.gradient_tolerance])}; "
                f"weights {fmt(weights)} ≤ {fmt(checks[0][CHECKED.weight_tolerance])}{late}")
    if row.get(HYBRID.max_abs_err_vs_reference) is not None:
        return (f"weights {fmt(row[HYBRID.max_abs_err_vs_reference])} "
                f"≤ {fmt(row.get(HYBRID.tolerance))} "
                "(older check: against Adam on the CPU after N steps)")
    return "—"


def hybrid_rows(rows: Sequence[dict]) -> list[dict]:
    return [{**row, "step_text": interval_text(row.get(HYBRID.step_ms_estimate)),
             "check_text": check_text(row),
             "imbalance_text": interval_text(row.get(HYBRID.residual_imbalance_estimate))
             if row.get(HYBRID.residual_imbalance) is not None else "—",
             "shares_text": " / ".join(map(str, row[HYBRID.shares]))
             if row.get(HYBRID.shares) else "—",
             "decision_text": ((row.get(HYBRID.balance) or {}).get(BALANCE.decision) or {}).get(
                 "reason") or "—"}
            for row in of_kind(rows, "hybrid_step")]


GPU_ONLY = "device-adam"  # fused GPU Adam: the offload family's reference
HEADLINE_VARIANTS = ("offload-overlap-dpu", "offload-overlap")


def _time_ratio(speedup: dict) -> dict:
    """A speedup reference/candidate as the time ratio candidate/reference, interval too."""
    def inverse(value):
        return 1 / value if value else None
    return {"value": inverse(speedup.get("value")), "low": inverse(speedup.get("high")),
            "high": inverse(speedup.get("low"))}


def family_rows(rows: Sequence[dict]) -> list[dict]:
    """Every fine-grained variant of every family member against fused GPU Adam in the same
    rounds: the time ratio with its interval, beside the variant's bound and goal as ratios
    (impl/hybrid/bounds.py) and whether the step meets max(goal, 1.10 × bound)."""
    steps = {(r["machine"], r.get("run"), r[HYBRID.workload], r[HYBRID.variant]): r
             for r in of_kind(rows, "hybrid_step") if r.get(HYBRID.study) == "fine-grained"}
    table = []
    for comparison in of_kind(rows, "hybrid_comparison"):
        if comparison.get(PAIRS.study) != "fine-grained":
            continue
        for pair in comparison.get(PAIRS.comparisons) or []:
            if pair["reference"] != GPU_ONLY:
                continue
            step = steps.get((comparison["machine"], comparison.get("run"),
                              comparison[PAIRS.workload], pair["candidate"]), {})
            ratio = _time_ratio(pair.get("speedup") or {})
            bound = step.get(HYBRID.bound_ratio)
            table.append({  # keyed by the step row's field names (FAMILY_COLUMNS)
                "machine": comparison["machine"], "run": comparison.get("run"),
                HYBRID.workload: comparison[PAIRS.workload], HYBRID.variant: pair["candidate"],
                HYBRID.dtype: comparison.get(PAIRS.dtype) or step.get(HYBRID.dtype) or "fp32",
                HYBRID.parameters: (comparison.get(PAIRS.parameters)
                                    or step.get(HYBRID.parameters)),
                "ratio": ratio["value"], "ratio_text": interval_text(ratio),
                HYBRID.bound_ratio: bound, HYBRID.goal_ratio: step.get(HYBRID.goal_ratio),
                "meets_text": meets_text(ratio["value"], bound, step.get(HYBRID.meets_goal))})
    return table


def meets_text(ratio: float | None, bound: float | None, meets: bool | None) -> str:
    """Whether the step meets its goal or bound: "yes", "no", "—" (no bound), or "no verdict"
    where the step is under its bound (its rates read low: impl/hybrid/goals.py; rows written
    before that rule say "met" there)."""
    if ratio is not None and bound and bound_under_step(ratio, bound):
        return "no verdict: under its bound"
    if meets is None:
        return "—"
    return "yes" if meets else "no"


def family_headline(rows: Sequence[dict], machine: str) -> dict | None:
    """Page 1's hybrid figures for ``machine``: per headline variant, over the family members
    of its newest run, the geometric mean and the worst of the time ratio to fused GPU Adam,
    the members counted and how many meet their goal or bound; None for a family of one."""
    mine = [r for r in family_rows(rows) if r["machine"] == machine and r["ratio"]]
    if not mine:
        return None
    newest = max(r["run"] for r in mine)  # runs are numbered oldest first
    out = {}
    for variant in HEADLINE_VARIANTS:
        at = [r for r in mine if r["run"] == newest and r[HYBRID.variant] == variant]
        if len(at) < 2:  # one workload is a cell, quoted as such by the caller
            continue
        worst = max(at, key=lambda r: r["ratio"])
        out[variant] = {"geomean": math.exp(statistics.fmean(math.log(r["ratio"]) for r in at)),
                        "worst": worst["ratio"], "worst_workload": worst[HYBRID.workload],
                        "members": len(at), "meeting": sum(r["meets_text"] == "yes" for r in at)}
    return out or None


def family_headline_text(rows: Sequence[dict], machine: str) -> str | None:
    """"time against fused GPU Adam, geometric mean of 2 workloads: offload-overlap-dpu 1.75×
    (worst 3.02×, gpt_small_bf16; 1 of 2 within goal or 1.10× bound), offload-overlap …"."""
    if not (headline := family_headline(rows, machine)):
        return None
    members = max(h["members"] for h in headline.values())
    text = (f"time against fused GPU Adam, geometric mean of {members} workloads: " + ", ".join(
        f"{variant} {fmt(h['geomean'])}× (worst {fmt(h['worst'])}×, {h['worst_workload']}; "
        f"{h['meeting']} of {h['members']} within goal or 1.10× bound)"
        for variant, h in headline.items()))
    if crossings := [r for r in crossover_rows(rows) if r["machine"] == machine]:
        text += "; where offload stops costing: " + "; ".join(
            f"{r[CROSSING.workload]} {r[CROSSING.verdict]}" for r in crossings)
    return text


def crossover_rows(rows: Sequence[dict]) -> list[dict]:
    """The crossover ladders (kind offload_crossover), newest run per machine and model: every
    batch measured, the delayed update against fused GPU Adam, and the crossover."""
    newest = {}
    for row in of_kind(rows, OFFLOAD_CROSSOVER.name):
        key = (row["machine"], row[CROSSING.workload])
        if key not in newest or row["run"] > newest[key]["run"]:  # runs numbered oldest first
            newest[key] = row
    return [{**row, "batches_text": "; ".join(point_text(p) for p in row[CROSSING.batches])}
            for row in newest.values()]


def point_text(point: dict) -> str:
    """"32 rows, 32,768 tokens: 1.21 [1.18, 1.25]", or why the batch could not run."""
    point = LadderPoint(**point)
    where = f"{point.batch:,} rows, {point.tokens:,} tokens"
    if point.failed is not None:
        return f"{where}: did not run ({point.failed})"
    return f"{where}: {interval_text(point.dpu_ratio)}"


HOST_WORK = (HYBRID.hidden_host_fraction, HYBRID.exposed_adam_ms, HYBRID.exposed_copies_ms,
             HYBRID.tail_ms, HYBRID.carried_ms, HYBRID.host_adam_gbps)


def only_offload_rows(rows: Sequence[dict]) -> list[dict]:
    """The largest-model rows (kind offload_only): the plan, GPU-only Adam's attempt, the checked
    step and its model TFLOP/s against the measured bf16 peak."""
    out = []
    for row in of_kind(rows, "offload_only"):
        plan = row.get(LARGEST.plan) or {}
        out.append({**row, "step_text": interval_text(row.get(LARGEST.step_ms_estimate)),
                    "check_text": check_text(row),
                    "plan_text": f"GPU-only Adam {plan.get('gpu_only_layers')} layers, the "
                                 f"offload {plan.get('offload_layers')} (bound by the "
                                 f"{plan.get('offload_bound_by')}'s memory)"})
    return out


def host_work_rows(rows: Sequence[dict]) -> list[dict]:
    """The offload variants whose rows carry the host-work split (impl/hybrid/measure.py)."""
    return [{"machine": row["machine"], HYBRID.workload: row[HYBRID.workload],
             HYBRID.variant: row[HYBRID.variant],
             **{f"{key}_text": interval_text(row.get(key)) for key in HOST_WORK}}
            for row in of_kind(rows, "hybrid_step") if row.get(HYBRID.hidden_host_fraction)]


def host_adam_rows(rows: Sequence[dict]) -> list[dict]:
    """Host Adam against memory bandwidth; runs before the in-place a += s·b measured it
    against a copy (8 bytes counted per value, its write-allocate read missed): said so."""
    def bandwidth(row: dict) -> tuple[str, str]:
        if row.get(ADAM.bandwidth_gbps) is not None:
            return (fmt(row[ADAM.bandwidth_gbps]),
                    interval_text(row.get(ADAM.fraction_of_bandwidth)))
        return (f"{fmt(row.get('copy_gbps'))} (a copy)",
                f"{interval_text(row.get('fraction_of_copy_bandwidth'))} (of a copy)")

    return [{**row, "step_text": interval_text(row.get(ADAM.step_ms_estimate)),
             **dict(zip(("bandwidth_text", "fraction_text"), bandwidth(row)))}
            for row in sorted(of_kind(rows, "host_adam"),
                              key=lambda r: (r["machine"], -r[ADAM.adam_gbps]))]


def digits_rows(rows: Sequence[dict]) -> list[dict]:
    order = ("cpu", "gpu", "coarse-hybrid", "offload-overlap")
    table = []
    for row in of_kind(rows, "digits_curve"):
        curve = row.get(DIGITS.curve) or {}
        losses = curve.get("train_loss") or [None]
        table.append({**row, "final_train_loss": losses[-1],
                      "accuracy_pct": None if row.get(DIGITS.final_test_accuracy) is None
                      else row[DIGITS.final_test_accuracy] * 100,
                      "criterion_text": "reference" if row[DIGITS.variant] == "cpu"
                      else "n/a (no cpu curve in this run)"
                      if row.get(DIGITS.loss_curve_max_diff_vs_cpu) is None
                      else f"{fmt(row['loss_curve_max_diff_vs_cpu'])} "
                           f"(≤ {fmt(row.get('loss_curve_tolerance'))})"})
    return sorted(table, key=lambda r: (r["machine"], order.index(r[DIGITS.variant])
                                        if r[DIGITS.variant] in order else len(order)))


def gpt_rows(rows: Sequence[dict]) -> list[dict]:
    """This suite's forward times per machine and device, then the study's, as it printed;
    keyed as the rows' fields each column shows, in words."""
    table = [{"source": row["machine"], GPT.device: row.get(GPT.device_name) or row[GPT.device],
              GPT.threads: row.get(GPT.threads), GPT.first_ms: fmt(row.get(GPT.first_ms)),
              GPT.steady_ms: fmt(row.get(GPT.steady_ms)),
              GPT.iteration_ms: ", ".join(fmt(t) for t in row.get(GPT.iteration_ms) or [])}
             for row in of_kind(rows, "gpt_forward")]
    for study in STUDY_TABLE.values():
        low, high = study[GPT.steady_ms]
        table.append({"source": "the study", GPT.device: study["hardware"], GPT.threads: "—",
                      GPT.first_ms: fmt(study[GPT.first_ms]) if study[GPT.first_ms] else "—",
                      GPT.steady_ms: fmt(low) if low == high else f"{fmt(low)}–{fmt(high)}",
                      GPT.iteration_ms: study["text"]})
    return table


@figures._styled
def curves_figure(curves: Sequence[dict]) -> figures.Image:
    """Training loss (log scale) and test accuracy per epoch, one line per variant."""
    fig, axes = figures._figure(1, 2, height=2.5)
    loss_ax, accuracy_ax = axes[0]
    for row in curves:
        curve = row[DIGITS.curve]
        epochs = range(1, len(curve["train_loss"]) + 1)
        style = {"color": VARIANT_COLORS.get(row[DIGITS.variant]), "linewidth": 1,
                 "label": f"{row[DIGITS.variant]} ({device_words(row[DIGITS.device])})"}
        loss_ax.plot(epochs, curve["train_loss"], **style)
        accuracy_ax.plot(epochs, [a * 100 for a in curve["test_accuracy"]], **style)
    loss_ax.set_yscale("log")
    loss_ax.set_xlabel("epoch")
    loss_ax.set_ylabel("training loss (cross-entropy)")
    accuracy_ax.set_xlabel("epoch")
    accuracy_ax.set_ylabel("test accuracy (%)")
    accuracy_ax.axhline(95, color="#999999", linewidth=0.6, linestyle=":")
    accuracy_ax.legend(loc="lower right")
    return figures._save(fig)


HYBRID_COLUMNS = (
    text_column("machine"), text_column(HYBRID.study, "strategy"), text_column(HYBRID.workload),
    text_column(HYBRID.variant), text_column(HYBRID.device),
    text_column("step_text", "step ms [95% CI]"),
    Column.of(HYBRID_STEP.field.samples_per_s, "throughput"),
    text_column("shares_text", "rows per worker"),
    text_column("imbalance_text", "residual imbalance [95% CI]"),
    text_column("decision_text", "split or GPU alone (impl/hybrid/coarse.py, split_decision)"),
    text_column("check_text", "check: error ≤ tolerance"),
)
FAMILY_COLUMNS = (  # family_rows
    text_column("machine"), text_column(HYBRID.workload), text_column(HYBRID.dtype),
    Column.of(HYBRID_STEP.field.parameters), text_column(HYBRID.variant),
    text_column("ratio_text", "time / fused GPU Adam [95% CI]"),
    Column.of(HYBRID_STEP.field.bound_ratio, "bound / fused GPU Adam", unit=""),
    Column.of(HYBRID_STEP.field.goal_ratio, "goal", unit=""),
    text_column("meets_text", "within max(goal, 1.10 × bound)"),
)
ONLY_OFFLOAD_COLUMNS = (
    text_column("machine"), text_column(LARGEST.workload, "model"),
    Column.of(OFFLOAD_ONLY.field.parameters),
    text_column("plan_text", "memory plan at this width"),
    text_column(LARGEST.gpu_only_attempt, "one fused GPU Adam step"),
    text_column("check_text", "first step checked: error ≤ tolerance"),
    text_column("step_text", "offload-overlap step ms [95% CI]"),
    # The headers name their unit already.
    Column.of(OFFLOAD_ONLY.field.model_tflops, "model TFLOP/s", unit=""),
    Column.of(OFFLOAD_ONLY.field.peak_tflops, "measured bf16 peak TFLOP/s", unit=""),
    Column.of(OFFLOAD_ONLY.field.fraction_of_peak, "of peak"),
)
CROSSOVER_COLUMNS = (
    text_column("machine"), text_column(CROSSING.workload, "model"),
    text_column(CROSSING.dtype), Column.of(OFFLOAD_CROSSOVER.field.parameters),
    text_column("batches_text", "offload-overlap-dpu / fused GPU Adam per batch [95% CI]"),
    text_column(CROSSING.verdict, "crossover"),
    Column.of(OFFLOAD_CROSSOVER.field.bound_crossover_tokens, "the bound's crossover, tokens"),
    Column.of(OFFLOAD_CROSSOVER.field.host_work_ms),
)
HOST_WORK_COLUMNS = (
    text_column("machine"), text_column(HYBRID.workload), text_column(HYBRID.variant),
    text_column("hidden_host_fraction_text", "hidden host work [95% CI]"),
    text_column("exposed_adam_ms_text", "exposed Adam ms"),
    text_column("exposed_copies_ms_text", "exposed copies ms"),
    text_column("tail_ms_text", "tail after backward ms"),
    text_column("carried_ms_text", "carried into the next step ms"),
    text_column("host_adam_gbps_text", "host Adam GB/s"),
)
HOST_ADAM_COLUMNS = (
    text_column("machine"), text_column(ADAM.variant, "implementation, threads"),
    Column.of(HOST_ADAM.field.threads), Column.of(HOST_ADAM.field.parameters),
    text_column("step_text", "one update ms [95% CI]"),
    Column.of(HOST_ADAM.field.adam_gbps, "Adam"),
    text_column("bandwidth_text", "memory, a += s·b (GB/s)"),
    text_column("fraction_text", "Adam / memory [95% CI]"),
)
DIGITS_COLUMNS = (
    text_column("machine"), text_column(DIGITS.variant), text_column(DIGITS.device),
    Column.of(DIGITS_CURVE.field.epochs),
    Column("final_train_loss", "final training loss"),
    Column("accuracy_pct", "test accuracy", "%"),
    text_column("criterion_text", "max loss difference to cpu"),
)
GPT_COLUMNS = (
    text_column("source", "measured by"), text_column(GPT.device),
    text_column(GPT.threads), text_column(GPT.first_ms, "first iteration (ms)"),
    text_column(GPT.steady_ms, "then, median (ms)"),
    text_column(GPT.iteration_ms, "every iteration (ms)"),
)


def steps_table(rows: Sequence[dict], runs: Sequence) -> Table | None:
    """Every hybrid trainer's step and the check it passed before timing."""
    if not (steps := hybrid_rows(rows)):
        return None
    return make_table(
        "tab-hybrid", "CPU–GPU hybrid steps: fine-grained (offload-overlap, with the update "
        "one step late in offload-overlap-dpu, against the same copies and host Adam after "
        "backward, and against Adam on the device) and coarse-grained (two workers sharing "
        "each batch, against each alone). Before timing, each step's gradients were checked "
        "against a backward at the reference's weights (on the trainer's GPU, or the CPU; "
        "IEEE fp32 for an fp32 model, the weights rounded to the model's dtype for bf16) and "
        "its update against Adam (fp32) applied to the trainer's own gradients "
        "(impl/hybrid/trainer_check.py). " + how_text(steps, runs),
        HYBRID_COLUMNS, steps, placement=Placement("every hybrid step"))


def family_table(rows: Sequence[dict]) -> Table | None:
    """The offload family's step times as multiples of fused GPU Adam's, beside bound and goal."""
    if not (family := family_rows(rows)):
        return None
    return make_table(
        "tab-hybrid-family", "The offload family against fused GPU Adam "
        "(torch.optim.Adam(fused=True), fp32 master on the GPU for bf16 models), "
        "interleaved in the same rounds: each variant's step time as a multiple of fused "
        "GPU Adam's (95% interval), beside its bound from measured host-Adam and copy "
        "rates (impl/hybrid/bounds.py: the delayed update max(GPU step, host Adam + "
        "copies); the overlapped one max(GPU step + the host work of the last bucket, the "
        "step's host work)) and its goal (offload-overlap 1.10×, offload-overlap-dpu "
        "1.03×). +host-cast: the host casts bf16/fp16 values to and from the fp32 master "
        "and the copies carry 2 bytes a value; without it the GPU casts and the copies carry "
        "fp32 (earlier result files cast on the host by default and name the GPU's twin "
        "+gpu-cast). +per-tensor: a bucket per tensor, the "
        "offload before its flat buckets (impl/hybrid/buckets.py), timed beside them. "
        "+half-threads: the delayed update with host Adam on half the host threads (its "
        "bound still counts the rates of all of them). +hand-off: the gradient hooks hand "
        "each bucket to a launching thread, so backward's thread never waits in them.",
        FAMILY_COLUMNS, family)


def only_offload_table(rows: Sequence[dict], runs: Sequence) -> Table | None:
    """The model only the offload can train: what GPU-only Adam did with it, and its offload."""
    if not (largest := only_offload_rows(rows)):
        return None
    return make_table(
        "tab-hybrid-only-offload", "The model only the offload can train "
        "(impl/hybrid/largest.py): the smallest bf16 MLP of the memory plan's width and batch "
        "(impl/hybrid/capacity.py) that GPU-only Adam cannot hold, with what one fused GPU "
        "Adam step of it did; the overlapped offload's first step checked (gradients against "
        "a bf16 backward at the reference's weights, the fp32 master against Adam's first "
        "step on the trainer's own gradients), then its timed steps; model TFLOP/s = 6 · "
        "parameters · batch rows / step time, against cuBLAS's bf16 8192³ rate measured in "
        "the same process (the figure ZeRO-Offload reports). " + how_text(largest, runs),
        ONLY_OFFLOAD_COLUMNS, largest)


def crossover_table(rows: Sequence[dict], runs: Sequence) -> Table | None:
    """Where offload stops costing: each ladder's batches and its crossover."""
    if not (crossings := crossover_rows(rows)):
        return None
    return make_table(
        "tab-hybrid-crossover", "Where offload stops costing (impl/hybrid/crossover.py): each "
        "model's batch walked from its own, doubling while the delayed-update offload is over "
        "1.10× fused GPU Adam's step and halving while it is within (the upper end of the "
        "95% interval, paired by round), each batch checked before it was timed; the bound's "
        "crossover is where a line through fused GPU Adam's measured steps reaches the host "
        "work at the run's rates over 1.10 (impl/hybrid/bounds.py: the delayed update is "
        "bound by max(GPU step, host work)). " + how_text(crossings, runs),
        CROSSOVER_COLUMNS, crossings)


def host_work_table(rows: Sequence[dict]) -> Table | None:
    """Where the offload's host work goes: hidden, exposed, after backward, carried over."""
    if not (split := host_work_rows(rows)):
        return None
    return make_table(
        "tab-hybrid-host-work", "Where the offload's host work goes (impl/hybrid/measure.py, "
        "median over rounds of each round's last step, 95% interval): the fraction of the "
        "copies and host Adam that GPU compute hides, the exposed parts, the time from the "
        "end of backward to the end of the step, host work still running when the step "
        "ends (the delayed update's Adam, beside the next step's forward) and host Adam's "
        "rate at 28 bytes per parameter over its busy time.", HOST_WORK_COLUMNS, split,
        placement=Placement("where the offload's host work goes, every variant"))


def host_adam_table(rows: Sequence[dict], runs: Sequence) -> Table | None:
    """Host Adam alone, each implementation against the memory bandwidth of the same threads."""
    if not (adam := host_adam_rows(rows)):
        return None
    return make_table(
        "tab-host-adam", "Host Adam alone over the offload workload's parameter count (28 "
        "bytes per parameter), interleaved with the memory bandwidth measured the same way "
        "(an in-place a += s·b over as many fp32 values on the same threads, 12 bytes per "
        "value): torch's fused, foreach and per-tensor CPU Adam, each "
        "with one worker spreading every piece over the intra-op threads, a pool of "
        "single-threaded workers, or (grouped, the trainers' since 28 Nov) workers of at most "
        "16 threads each (impl/hybrid/host_adam.py). " + how_text(adam, runs),
        HOST_ADAM_COLUMNS, adam, placement=Placement("host Adam alone, every implementation"))


def digits_parts(view: View) -> tuple[Table | None, list[Figure]]:
    """The digits MLP's table of final values, and the curves of one machine."""
    rows, runs = view.rows, view.runs
    if not (digits := digits_rows(rows)):
        return None, []
    table = make_table(
        "tab-digits", f"The study's MLP on handwritten digits ({digits[0].get('data')}; "
        "Adam, lr 1e-3, batch 100): final training loss and test accuracy; the hybrids' "
        "curves against the CPU curve (largest per-epoch loss difference in units of the "
        "CPU's first-epoch loss). " + how_text(digits, runs), DIGITS_COLUMNS, digits,
        placement=Placement("the digits MLP's final losses and accuracies"))
    # One machine's curves: the one that ran the most epochs, a GPU before the CPU. The
    # others' final values are in the table; their curves add pages, not answers.
    machines = list(dict.fromkeys(r["machine"] for r in digits))
    machine = max(machines, key=lambda m: (
        max(r[DIGITS.epochs] for r in digits if r["machine"] == m), m in view.machines.gpu))
    mine = [r for r in digits if r["machine"] == machine]
    others = [m for m in machines if m != machine]
    figure = make_figure(
        f"fig-digits-{machine}", curves_figure(mine), f"Training loss and test accuracy "
        f"per epoch on {machine}, {mine[0]['epochs']} epochs (the study ran "
        f"{mine[0].get('study_epochs')})"
        + (f"; {', '.join(others)}: final values in the digits table" if others else "") + ". "
        + how_text(mine, runs), f"Digits MLP loss and accuracy curves, {machine}")
    return table, [figure]


def gpt_table(rows: Sequence[dict], runs: Sequence) -> Table | None:
    """The study's GPT forward: the first iteration apart, beside the study's own table."""
    if not (gpt := of_kind(rows, "gpt_forward")):
        return None
    return make_table(
        "tab-gpt-forward", "The study's decoder (vocabulary 10000, context 1000, 10 layers, "
        "1 head, dropout 0.2; width 384 and batch 2 chosen here): time of each training "
        "forward (logits and loss, then a device sync) in a fresh process, the first "
        "iteration apart, beside the study's table. " + how_text(gpt, runs),
        GPT_COLUMNS, gpt_rows(rows),
        placement=Placement("the study's GPT forward, every iteration"))


def section_parts(view: View) -> dict:
    """The hybrid half of the pipeline section's context (None or [] where nothing loaded)."""
    rows, runs = view.rows, view.runs
    digits_table, digits_figures = digits_parts(view)
    return {"hybrid_table": steps_table(rows, runs), "hybrid_family_table": family_table(rows),
            # The family table answers the offload's question; every pair is detail.
            "hybrid_comparisons": comparison_table(
                rows, "hybrid_comparison", "tab-hybrid-compare",
                "The hybrids against their references",
                placement=Placement("the hybrids against their references, every pair",
                                    always=True)),
            "host_work_table": host_work_table(rows),
            "only_offload_table": only_offload_table(rows, runs),
            "crossover_table": crossover_table(rows, runs),
            "host_adam_table": host_adam_table(rows, runs), "digits_table": digits_table,
            "digits_figures": digits_figures, "gpt_table": gpt_table(rows, runs)}
