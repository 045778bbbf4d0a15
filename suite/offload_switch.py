"""The overlapped offloads of one offload-family member with Python's thread switch interval
shortened, beside fused GPU Adam, in interleaved rounds.

A profile of gpt_small_bf16's delayed update on one H100 host
(results/h100x1/logs/20261207T1649-dpu-profile/) had backward's thread 70.7 ms of 3 steps
inside the gradient hooks, about 27 ms of it in operators. The rest is the hooks' Python, the
GIL beside host Adam's threads, or the wait for the previous step's Adam of a bucket. Two
timings tell them apart: the ``+hand-off`` twins (the hooks hand each bucket to a launching
thread, so backward's thread never waits for Adam), and the same variants with the switch
interval shortened from CPython's 5 ms (a thread that wants the GIL gets it sooner from one
that holds it). Each variant's segment of a round sets its interval first.

    python -m suite.offload_switch gpt_small_bf16 OUT.json [--rounds 10] [--device cuda]

OUT.json (written whole or not at all) holds each variant's per-round step times and its
step over fused GPU Adam's at the default interval, paired by round (impl.stats.ratio).
"""

from __future__ import annotations

import argparse
import copy
import itertools
import sys
from dataclasses import replace

import torch

from impl import stats
from impl.atomic import write_json_atomic
from impl.hybrid import build_trainer
from impl.hybrid.base import HybridOptions, calibrated_loss_scale, learning_rate
from impl.presets import preset
from impl.rows.study_records import SWITCH_TIMING as FILE
from impl.workloads import build_model
from suite.bench_hybrid import (
    HAND_OFF_SUFFIX,
    OVERLAPPED,
    host_threads,
    mlp_loss,
    offload_family,
    offload_variants,
)
from suite.deadline import parameter_count
from suite.harness import Rounds, Variant, batches, measure_interleaved

SHORT_SWITCH_S = 2e-4
BASELINE = "device-adam"
STEPS_PER_ROUND = 3


def trainer_settings(workload) -> dict[str, tuple[str, dict]]:
    """variant -> (trainer, HybridOptions it sets), as the offload family declares them
    (suite.bench_hybrid.offload_variants): fused GPU Adam, and each overlapped offload beside
    its hand-off twin (where the member has one)."""
    declared = offload_variants(workload)
    wanted = [BASELINE, *(name + suffix for name in OVERLAPPED for suffix in ("", HAND_OFF_SUFFIX))]
    return {name: declared[name] for name in wanted if name in declared}


def switch_variants(member: str, device: torch.device) -> tuple[list[Variant], list]:
    """Every trainer at CPython's switch interval and at SHORT_SWITCH_S, and the trainers."""
    workload = preset(member)
    loss, data = mlp_loss(workload), batches(workload, device, rank=0)
    initial = build_model(workload, device)
    options = HybridOptions(cpu_threads=host_threads(),
                            lr=learning_rate(workload.kind, parameter_count(workload)),
                            loss_scale=calibrated_loss_scale(initial, loss, data[0]))
    variants, trainers = [], []
    for name, (trainer_name, settings) in trainer_settings(workload).items():
        trainer = build_trainer(trainer_name, copy.deepcopy(initial), loss,
                                replace(options, **settings))
        trainers.append(trainer)
        for interval in (sys.getswitchinterval(), SHORT_SWITCH_S):
            variants.append(timed(trainer, f"{name}@{interval * 1e3:g}ms", interval, data))
    return variants, trainers


def timed(trainer, name: str, interval: float, data: list) -> Variant:
    """The trainer's steps at switch interval ``interval``; its host work drained each round,
    inside the round's steps as in suite/bench_hybrid.py."""
    steps = itertools.count()

    def step() -> None:
        index = next(steps)
        trainer.step(data[index % len(data)])
        if (index + 1) % STEPS_PER_ROUND == 0:
            trainer.drain()

    def after_round() -> None:
        trainer.finish_timeline()

    return Variant(name, step, after_round, lambda: sys.setswitchinterval(interval))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m suite.offload_switch")
    parser.add_argument("member", choices=sorted(offload_family()))
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=10, choices=range(3, 101),
                        metavar="3..100")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    default_interval = sys.getswitchinterval()
    variants, trainers = switch_variants(args.member, device)
    try:
        measured = measure_interleaved(variants, Rounds(warmup=1, rounds=args.rounds,
                                                        steps_per_round=STEPS_PER_ROUND),
                                       device, None)
    finally:
        sys.setswitchinterval(default_interval)
        for trainer in trainers:
            trainer.close()
    round_ms = {v.name: measured.round_ms(v.name) for v in variants}
    reference = round_ms[variants[0].name]  # fused GPU Adam at CPython's interval
    versus = {name: stats.ratio(ms, reference) for name, ms in round_ms.items()}
    write_json_atomic(args.out, {
        FILE.member: args.member, FILE.device: str(device), FILE.host_threads: host_threads(),
        FILE.rounds: args.rounds, FILE.steps_per_round: STEPS_PER_ROUND,
        FILE.round_ms: round_ms,
        FILE.vs_device_adam: {name: ratio.to_json() for name, ratio in versus.items()}})
    for name, ratio in versus.items():
        print(f"{name:34s} {stats.median(round_ms[name]).value:8.2f} ms  "
              f"{ratio.value:.3f}× fused GPU Adam [{ratio.low:.3f}, {ratio.high:.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
