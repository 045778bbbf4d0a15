"""Run the whole suite on what this machine has and write one results file.

    python -m suite.run [--quick | --full] [--profiles nvlink,socket] [-- <pytest args>]

CPU only: 2 gloo ranks (one thread each) and the tiny presets. GPUs: torchrun over all of
them with the GPU presets, once per interconnect profile (NCCL reads its environment at
start-up, so each profile is its own launch). With MPI present, the mpi strategy runs in a
pass of its own under mpirun. Every pass writes its own file; they are merged into
results/<machine-label>/<UTC timestamp>.json, written whole (marked partial if a pass failed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from impl import capabilities
from impl.atomic import write_json_atomic
from impl.fingerprint import machine_label
from impl.profiles import ALWAYS, PROFILES, check_profile
from impl.settings import check_environment
from suite.summary import summary_table

SUITE_FILES = ("suite/bench_overlap.py", "suite/bench_allreduce.py", "suite/bench_synthetic.py",
               "suite/bench_interference.py", "suite/bench_autotune.py")
GPU_ONLY_FILES = ("suite/bench_gemm.py", "suite/bench_sampler.py")
CPU_RANKS = 2


@dataclass
class Pass:
    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    output: Path | None = None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def is_open_mpi(launcher: str) -> bool:
    result = subprocess.run([launcher, "--version"], capture_output=True, text=True, check=False)
    return "Open MPI" in result.stdout + result.stderr


def plan(mode: str, profiles: list[str], gpus: int, workdir: Path, stamp: str,
         pytest_args: list[str], skip_mpi: bool = False, ranks: int | None = None) -> list[Pass]:
    ranks = ranks or gpus or CPU_RANKS
    common = ["-p", "no:cacheprovider", "--suite-mode", mode, "-v", *pytest_args]
    passes = []
    for profile in profiles:
        files = [*SUITE_FILES, *(GPU_ONLY_FILES if gpus else ())]
        narrowed = []
        if profile != "nvlink":  # slower fabrics: the reference workload over several ranks
            narrowed = ["--strategies", "sequential,chunked,ddp", "--world-sizes",
                        ",".join(str(w) for w in (2, 4, 8) if w <= ranks),
                        "--workloads", "mlp_8192x12_bf16"]
            files = ["suite/bench_overlap.py", "suite/bench_allreduce.py"]
        output = workdir / f".{stamp}-{profile}.json.tmp"
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc-per-node={ranks}", "--local-ranks-filter=0", "-m", "pytest",
                   *files, *common, *narrowed, "--results-json", str(output)]
        passes.append(Pass(f"torchrun {profile}", command, {"OVERLAP_PROFILE": profile}, output))
    if skip_mpi:
        print("[suite] mpi pass skipped: --skip-mpi", flush=True)
    elif capabilities.missing_mpi() is None:
        launcher = capabilities.mpi_launcher()
        extra = ["--allow-run-as-root", "--oversubscribe"] if is_open_mpi(launcher) else []
        output = workdir / f".{stamp}-mpi.json.tmp"
        # On GPUs MPI stages every chunk through host memory: seconds per step for the
        # 1.5 GiB reference model, so this pass uses the smaller transformer.
        narrowed = ["--workloads", "gpt_small_bf16", "--chunks", "1,10"] if gpus else []
        command = [launcher, *extra, "-n", str(ranks), sys.executable, "-m", "pytest",
                   "suite/bench_overlap.py", *common, "--strategies", "mpi", "--world-sizes",
                   str(ranks), *narrowed, "--results-json", str(output)]
        passes.append(Pass("mpirun", command, {"MASTER_PORT": str(free_port()),
                                               "OVERLAP_PROFILE": profiles[0]}, output))
    else:
        print(f"[suite] mpi pass skipped: {capabilities.missing_mpi()}", flush=True)
    return passes


def run_pass(step: Pass, base_env: dict[str, str]) -> int:
    print(f"\n[suite] {step.name}: {shlex.join(step.command)}", flush=True)
    started = time.monotonic()
    code = subprocess.run(step.command, env={**base_env, **step.env}, check=False).returncode
    print(f"[suite] {step.name} finished with exit {code} in {time.monotonic() - started:.0f} s",
          flush=True)
    return code


def merge(passes: list[Pass], codes: list[int], command: str, label: str) -> dict | None:
    documents = []
    for step in passes:
        if step.output and step.output.exists():
            documents.append((step, json.loads(step.output.read_text())))
    if not documents:
        return None
    merged = dict(documents[0][1])
    merged["benchmarks"] = [b for _, doc in documents for b in doc["benchmarks"]]
    failed = [s.name for s, code in zip(passes, codes) if code not in (0, 5)]
    merged["suite"] = {
        **documents[0][1].get("suite", {}), "label": label, "command": command,
        "partial": bool(failed) or any(doc.get("suite", {}).get("partial") for _, doc in documents),
        "failed_passes": failed,
        "passes": [{"name": s.name, "command": shlex.join(s.command), "env": s.env,
                    "exit": code} for s, code in zip(passes, codes)],
    }
    return merged


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    pytest_args = []
    if "--" in argv:
        at = argv.index("--")
        argv, pytest_args = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser(prog="nox -s bench --", description=__doc__.split("\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", const="quick", dest="mode")
    size.add_argument("--full", action="store_const", const="full", dest="mode")
    parser.add_argument("--profiles", default=None,
                        help=f"comma-separated interconnect profiles from {', '.join(PROFILES)} "
                             "(default: nvlink; --full on several GPUs: nvlink,shm,socket)")
    parser.add_argument("--results-dir", default="results")
    parser.add_argument("--skip-mpi", action="store_true", help="leave out the mpirun pass")
    parser.add_argument("--ranks", type=int, default=None,
                        help="processes to launch (default: one per GPU, or 2 gloo ranks on "
                             "CPU); with GPUs at most their number")
    args, unknown = parser.parse_known_args(argv)
    # Anything not for the launcher goes to pytest (-k, --workloads, ...).
    return args, [*unknown, *pytest_args]


def main(argv: list[str] | None = None) -> int:
    args, pytest_args = parse(sys.argv[1:] if argv is None else argv)
    try:
        check_environment()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    mode = args.mode or "default"
    gpus = capabilities.gpu_count()
    if args.profiles:
        try:
            profiles = [check_profile(p.strip()) for p in args.profiles.split(",") if p.strip()]
        except ValueError as error:
            print(f"error: --profiles: {error}", file=sys.stderr)
            return 2
    elif gpus >= 2 and mode == "full":
        # Slower fabrics only in --full: the socket pass alone took over 9 minutes on 4 H200
        # (1.5 GiB per step at ~3.5 GB/s), which would break the default's 10-minute budget.
        profiles = ["nvlink", "shm", "socket"]
    else:
        profiles = ["nvlink"]  # one GPU or gloo: fabric profiles change nothing
    label = machine_label()
    workdir = Path(args.results_dir, label)
    workdir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    command = shlex.join(["python", "-m", "suite.run", *(sys.argv[1:] if argv is None else argv)])
    env = {**os.environ, **ALWAYS, "OVERLAP_COMMAND": command, "PYTHONUNBUFFERED": "1"}
    if not gpus:
        env.setdefault("OMP_NUM_THREADS", "1")  # 2 ranks on 2 cores: one thread each

    if args.ranks is not None and not 1 <= args.ranks <= (gpus or 64):
        print(f"error: --ranks={args.ranks}: choose 1 to {gpus or 64}"
              + (f" (this machine has {gpus} GPUs)" if gpus else " gloo ranks"), file=sys.stderr)
        return 2
    passes = plan(mode, profiles, gpus, workdir, stamp, pytest_args, args.skip_mpi, args.ranks)
    started = time.monotonic()
    codes = [run_pass(step, env) for step in passes]
    merged = merge(passes, codes, command, label)
    for step in passes:
        if step.output:
            step.output.unlink(missing_ok=True)
    if merged is None:
        print("[suite] no benchmark finished; nothing written", file=sys.stderr)
        return max(codes) or 1
    target = write_json_atomic(workdir / f"{stamp}.json", merged)
    print("\n" + summary_table(merged))
    state = "PARTIAL " if merged["suite"]["partial"] else ""
    print(f"\n[suite] wrote {state}{target} ({len(merged['benchmarks'])} benchmarks) in "
          f"{time.monotonic() - started:.0f} s")
    return next((code for code in codes if code not in (0, 5)), 0)


if __name__ == "__main__":
    sys.exit(main())
