"""Which side should cast a low-precision model's values, the host or the GPU? Per result file
and low-precision member of the offload family, each overlapped offload's step with the host
casting over the same variant with the GPU casting, paired by round (``impl.stats.ratio``): above
1 the GPU's cast is faster. Over the files, per variant: the geometric mean of those ratios,
their range, how many intervals lie wholly above or below 1, and a two-sided sign test of the
medians (``scipy.stats.binomtest``). docs/hybrid.md's cast table is its output
(tests/test_hybrid_cast_side.py checks it).

    python -m impl.hybrid.cast_side results/h100x1/20261207T093620Z-vff674hz.json ...
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from scipy.stats import binomtest

from impl import stats
from impl.hybrid.table import FamilyStep, family_steps, interval, printed
from impl.rows.files import load_results

OVERLAPPED = ("offload-overlap", "offload-overlap-dpu")
# The twin's suffix names the side that is not the default's: runs before the GPU's cast became
# the default (HybridOptions.cast) timed the GPU's as "+gpu-cast", later runs the host's as
# "+host-cast".
GPU_CAST_SUFFIX, HOST_CAST_SUFFIX = "+gpu-cast", "+host-cast"
LOW_PRECISION = ("bf16", "fp16")


def cast_ratios(steps: Sequence[FamilyStep]) -> dict[tuple[str, str], stats.Estimate]:
    """(member, variant) -> the variant's round_ms with the host casting over its round_ms with
    the GPU casting, for each low-precision member that ran both."""
    by_key = {(s.workload, s.variant): s for s in steps}
    ratios = {}
    for (member, variant), plain in by_key.items():
        if variant not in OVERLAPPED or plain.dtype not in LOW_PRECISION:
            continue
        if gpu := by_key.get((member, variant + GPU_CAST_SUFFIX)):
            ratios[member, variant] = stats.ratio(plain.round_ms, gpu.round_ms)
        elif host := by_key.get((member, variant + HOST_CAST_SUFFIX)):
            ratios[member, variant] = stats.ratio(host.round_ms, plain.round_ms)
    return ratios


def family_line(variant: str, ratios: Sequence[stats.Estimate]) -> str:
    """The variant's ratios over every file: geometric mean, range, intervals above and below 1,
    and the sign test of the medians against 1."""
    medians = [r.value for r in ratios]
    above = sum(r.low > 1 for r in ratios)
    below = sum(r.high < 1 for r in ratios)
    faster = sum(m > 1 for m in medians)
    sign = binomtest(faster, len(medians)).pvalue
    geomean = math.exp(sum(map(math.log, medians)) / len(medians))
    return (f"| `{variant}` | {len(medians)} | {geomean:.3f} | {min(medians):.3f} to "
            f"{max(medians):.3f} | {above} | {below} | {faster} of {len(medians)}, "
            f"p = {sign:.2g} |")


def cast_tables(paths: Sequence[str]) -> list[str]:
    per_file = ["| file | member | variant | host cast / GPU cast |", "|---|---|---|---|"]
    by_variant: dict[str, list[stats.Estimate]] = {v: [] for v in OVERLAPPED}
    for path in paths:
        for (member, variant), ratio in cast_ratios(family_steps(load_results(path))).items():
            per_file.append(f"| `{path}` | {member} | `{variant}` | "
                            f"{interval(ratio.to_json())} |")
            by_variant[variant].append(ratio)
    family = ["| variant | pairs | geometric mean | range | interval above 1 | "
              "interval below 1 | median above 1, sign test |", "|---|---|---|---|---|---|---|"]
    family += [family_line(v, ratios) for v, ratios in by_variant.items() if ratios]
    return [*family, "", *per_file]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.hybrid.cast_side", description=(
        "Each low-precision offload member's overlapped step with the host casting over the "
        "same with the GPU casting (HybridOptions.cast=\"device\"), paired by round, "
        "per file and over the files."))
    parser.add_argument("paths", nargs="+", metavar="RESULTS", help="result files")
    args = parser.parse_args(argv)
    return printed(lambda: "\n".join(cast_tables(args.paths)))


if __name__ == "__main__":
    sys.exit(main())
