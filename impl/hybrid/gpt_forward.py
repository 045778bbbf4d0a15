"""The study's GPT forward-pass table: time per iteration for 10 iterations, warm-up first.

The study's decoder: vocabulary 10000, context 1000, 10 layers, 1 head, dropout 0.2. It gives
no width and no batch; this suite uses width 384 and batch 2 (preset ``gpt_study_w384_b2``):
a forward of about 0.12 TFLOP, which puts a GTX 1650 (about 3 TFLOP/s fp32) near the study's
60 ms and a 16-core i7 near its 2 s. An iteration is the training forward: model in training
mode (dropout active), autograd recording, logits and cross-entropy, then a device sync.

Run in a fresh process, so the first iteration shows the whole warm-up (kernel loading,
cuBLAS handles, allocator growth) as the study's did:

    python -m impl.hybrid.gpt_forward --device cuda --iterations 10
    python -m impl.hybrid.gpt_forward --device cpu --threads 16
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from impl import capabilities
from impl.presets import gpt_study_w384_b2
from impl.rows.kinds import GPT_FORWARD
from impl.workloads import GPTConfig, build_model, make_batch

# The JSON line of a fresh process and the study's table name their figures as the
# gpt_forward row does.
ROW = GPT_FORWARD.names
# The study's table (its hardware: a GTX 1650 and a 16-core Intel i7), quoted by the report.
STUDY_TABLE = {
    "cpu": {"hardware": "16-core Intel i7", ROW.first_ms: None, ROW.steady_ms: (2100.0, 2500.0),
            "text": "≈2.1–2.5 s per iteration"},
    "cuda": {"hardware": "NVIDIA GTX 1650", ROW.first_ms: 655.0, ROW.steady_ms: (60.0, 60.0),
             "text": "655 ms at first, then ≈60 ms"},
}


def forward_ms(config: GPTConfig, device: torch.device, iterations: int) -> list[float]:
    """Milliseconds of each of ``iterations`` training forwards (logits and loss)."""
    model = build_model(config, device)
    model.train()
    batch = make_batch(config, device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    times = []
    for _ in range(iterations):
        started = time.perf_counter()
        logits = model(batch.inputs)
        loss = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten())
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # CPU-GPU sync: the iteration ends on the device
        times.append((time.perf_counter() - started) * 1e3)
        del logits, loss  # the graph goes, as it would after backward
    return times


def measure_in_fresh_process(device: str, iterations: int, threads: int,
                             timeout_s: float = 600) -> dict:
    """Run this module in a new interpreter and return its JSON line."""
    command = [sys.executable, "-m", "impl.hybrid.gpt_forward", "--device", device,
               "--iterations", str(iterations), "--threads", str(threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                            env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed with exit {result.returncode}: "
                           f"{result.stderr.strip().splitlines()[-1:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.hybrid.gpt_forward",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error(f"--iterations={args.iterations}: choose an integer ≥ 1")
    if args.threads < 1:
        parser.error(f"--threads={args.threads}: choose an integer ≥ 1")
    if args.device == "cuda" and (reason := capabilities.missing_gpu()):
        print(f"error: --device cuda: {reason}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    config = gpt_study_w384_b2()
    device = torch.device(args.device)
    times = forward_ms(config, device, args.iterations)
    name = (torch.cuda.get_device_name(device) if device.type == "cuda"
            else f"{os.cpu_count()} CPU cores")
    print(json.dumps({ROW.device: args.device, ROW.device_name: name, ROW.threads: args.threads,
                      ROW.iteration_ms: times, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
