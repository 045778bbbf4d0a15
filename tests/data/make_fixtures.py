"""Make the report tests' small result files by trimming real ones.

    python tests/data/make_fixtures.py results/h200x4/20261121T224707Z.json \\
        results/cpu-2core/20261121T225224Z.json
    python tests/data/make_fixtures.py --name cpu-2core-interleaved --chunks 1,5,20 \\
        --workloads mlp_tiny,gpt_tiny RUN.json

writes tests/data/<label>-trimmed.json (or <name>-trimmed.json) for each file given. Trimming
keeps the shape of a real run and every kind of row the report draws, and only shortens what
is long: GEMM rows for two of the four shapes, at most MAX_SAMPLES NVML samples per series,
MAX_ROUNDS per-step and per-round times of runs made before interleaving, and no CPU flag list.
Interleaved runs keep every round (their intervals are computed from them) and lose only
whole cells (``--chunks``, ``--workloads``) and the step rows' copies of the timelines that
their cell's comparison row holds. Every number kept is the measured one, so a headline the
report computes from the fixture is a headline of the real run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).parent
GEMM_PRESETS = ("seed_layer_1024x512x512", "square_4096")
MAX_SAMPLES = 12
MAX_ROUNDS = 5


def trim_benchmark(benchmark: dict, chunks: set[int] | None = None,
                   workloads: set[str] | None = None) -> dict | None:
    info = benchmark["extra_info"]
    if info.get("kind") == "gemm" and info.get("preset") not in GEMM_PRESETS:
        return None
    if info.get("kind") in ("step", "comparison", "interference"):
        if workloads and info.get("workload") not in workloads:
            return None
        if chunks and info.get("kind") != "interference" and info.get("chunks") not in chunks:
            return None
    if "intervals" in info or info.get("kind") == "comparison":  # interleaved: keep rounds
        info.pop("timeline", None)  # the comparison row keeps the representative steps
        return benchmark
    stats = benchmark["stats"]
    if stats.get("data"):
        stats["data"] = stats["data"][:MAX_ROUNDS]
    if info.get("step_ms_all"):
        info["step_ms_all"] = info["step_ms_all"][:MAX_ROUNDS]
    series = info.get("nvml_series")
    if series and series.get("t_s"):
        series["t_s"] = series["t_s"][:MAX_SAMPLES]
        series["series"] = {name: [gpu[:MAX_SAMPLES] for gpu in per_gpu]
                            for name, per_gpu in series["series"].items()}
    return benchmark


def trim(source: Path, chunks: set[int] | None = None,
         workloads: set[str] | None = None) -> dict:
    document = json.loads(source.read_text())
    document["benchmarks"] = [b for b in (trim_benchmark(b, chunks, workloads)
                                          for b in document["benchmarks"]) if b]
    cpu = document["machine_info"].get("cpu")
    if isinstance(cpu, dict):
        cpu.pop("flags", None)
    document.setdefault("suite", {})["trimmed_from"] = str(source)
    return document


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sources", nargs="+", type=Path, help="real result files")
    parser.add_argument("--name", help="file name stem instead of the machine label")
    parser.add_argument("--chunks", help="keep overlap cells of these K only (comma-separated)")
    parser.add_argument("--workloads", help="keep overlap cells of these workloads only")
    args = parser.parse_args()
    chunks = {int(k) for k in args.chunks.split(",")} if args.chunks else None
    workloads = set(args.workloads.split(",")) if args.workloads else None
    for source in args.sources:
        document = trim(source, chunks, workloads)
        label = args.name or document["suite"].get("label") or source.parent.name
        target = HERE / f"{label}-trimmed.json"
        target.write_text(json.dumps(document, indent=None, separators=(",", ":")) + "\n")
        print(f"{target}: {target.stat().st_size / 1024:.0f} KB, "
              f"{len(document['benchmarks'])} benchmarks")


if __name__ == "__main__":
    main()
