"""The GEMM sweep (suite/bench_gemm.py, rows of kind ``gemm_sweep``): v6 and v7 against
cuBLAS over the shape families of impl/kernels/sweep.py, per GPU model, with the roofline
bound; and the one line page 1 quotes (``sweep_headline``). Pure functions of the rows.
docs/gemm.md's family table is printed from a results file by

    python -m reports.sections.gemm_sweep results/h100x1/gemm-sweep-<stamp>.json

A family's figure is the geometric mean and the minimum of the per-row ratios (cuBLAS's
median time over the kernel's, rounds interleaved; above 1 the kernel is faster), never the
best row.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from impl.rows.kinds import GEMM_SWEEP
from reports import analysis
from reports.captions import how_text
from reports.format import Column, Placement, Table, estimate_column, fmt, make_table, text_column
from reports.view import View

KIND = GEMM_SWEEP.name
# The sweep rows' fields: row[SWEEP.family]. A family's summary row is keyed by its rows'
# family and dtype under the same names.
SWEEP = GEMM_SWEEP.names
KERNELS = ("v7", "v6")
SHORT_OF = 0.90  # a shape under this share of cuBLAS's speed is counted apart (issue goal)

#: The whole sweep's forced variants (suite/bench_gemm.py), each against what it is the
#: alternative to: (variant, against, the question). The copy variants run only on shapes
#: where they differ from the plan, so their rows are those shapes.
VARIANT_PAIRS = (
    ("v7_bn128x2", "v7_bn128", "two CTAs per SM against one, width 128"),
    ("v7_bn192", "v7", "width 192 forced (unsplit) against the plan"),
    ("v7", "v7_bn128", "the plan against width 128 forced"),
    ("v7", "v7_bn256", "the plan against width 256 forced"),
    ("v7", "v7_lines", "the plan's copies against every off-line operand copied"),
    ("v7", "v7_rows8", "the plan's copies against none"),
    ("v7", "v7_stream_k", "the plan against stream-K forced"),
    ("best width", "v7", "the faster of the two widths forced against the plan"),
    ("best", "v7", "the fastest v7 variant of each shape against the plan"),
)
WIDTHS = ("v7_bn128", "v7_bn256")


def time_of(row: dict, variant: str) -> float | None:
    """A variant's median time in ``row``, None where the row did not time it. ``best`` is
    the fastest v7 variant the row timed (the plan included), ``best width`` the faster of
    the forced widths (each the plan at that width)."""
    times = row[SWEEP.time_ms]
    if variant == "best":
        return min(time for name, time in times.items() if name.startswith("v7"))
    if variant == "best width":
        return min(times[w] for w in WIDTHS) if set(WIDTHS) <= times.keys() else None
    return times.get(variant)
#: A pair's variant counts as faster (slower) on a shape where its speed ratio is above
#: 1 + CLEAR (below 1 - CLEAR): rounds interleaved, a few percent apart is noise.
CLEAR = 0.03

SUMMARY_COLUMNS = (text_column(SWEEP.family), text_column(SWEEP.dtype),
                   Column("rows", "shapes"),
                   Column("v7_geomean", "v7 / cuBLAS, geometric mean"),
                   Column("v7_min", "v7 / cuBLAS, minimum"),
                   Column("v7_short", f"shapes with v7 under {SHORT_OF:.2f} of cuBLAS"),
                   text_column("v7_worst", "v7's slowest shape"),
                   Column("v6_geomean", "v6 / cuBLAS, geometric mean"),
                   Column("v6_min", "v6 / cuBLAS, minimum"))

ROW_COLUMNS = (text_column(SWEEP.preset, "shape", nowrap=True), text_column(SWEEP.dtype),
               Column("cublas_tflops", "cuBLAS", "TFLOP/s"),
               estimate_column("v7_vs_cublas", "v7 / cuBLAS"),
               Column("v6_vs_cublas", "v6 / cuBLAS"),
               text_column("v7_tile", "v7 tile, rows, K parts"),
               Column.of(GEMM_SWEEP.field.roofline_tflops, "roofline"),
               text_column(SWEEP.roofline_bound, "bound"),
               Column("v7_pct_of_roofline", "v7 of roofline", "%"))

NOT_COVERED = (
    "What v7 does not cover: row-major A and B only (no transposed operands, no batches, no "
    "fused bias or activation), bf16 and fp16 only (no fp8, tf32 or fp32), one GPU. Its "
    "split-K sums fp32 parts in a second kernel through memory (no stream-K, no in-kernel "
    "fix-up) and splits only where its wave model, costing the parts at HBM bandwidth, "
    "finds the gain larger than that traffic; no thread-block clusters with TMA multicast; and "
    "operands whose rows do not start on 128-byte lines are copied first (or, where the copy "
    "would cost more than it wins, read misaligned), which is where the ragged family loses.")


def geometric_mean(values: Sequence[float]) -> float:
    """exp(mean(ln x)): the mean of ratios that treats 2× faster and 2× slower alike."""
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"geometric mean needs positive values; got {list(values)}")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ratio(row: dict, kernel: str) -> float:
    return row[SWEEP.vs_cublas][kernel]["value"]


def sweep_rows(rows: Sequence[dict]) -> list[dict]:
    """The sweep's rows of the newest run per GPU model, as the tables show them."""
    shown = []
    for row in analysis.newest_run_per_gpu(rows, KIND):
        roofline = row.get(SWEEP.roofline_tflops)
        tflops = row[SWEEP.tflops]  # per variant
        shown.append({
            **row, "cublas_tflops": tflops["cublas"],
            "v7_vs_cublas": row[SWEEP.vs_cublas]["v7"], "v6_vs_cublas": ratio(row, "v6"),
            "v7_tile": f"128×{row['v7_block_n']}, ×{row['v7_row_multiple']}"
                       + (f" (copies {'+'.join(row['v7_copies'])})"
                          if row[SWEEP.v7_copies] else "")
                       + (f", split-K {row['v7_splits']}"
                          if row.get(SWEEP.v7_splits, 1) > 1 else "")
                       + (f", stream-K {row['v7_stream_k_tiles']} tiles"
                          if row.get(SWEEP.v7_stream_k_tiles) else ""),
            "v7_pct_of_roofline": 100 * tflops["v7"] / roofline if roofline else None})
    return shown


def family_summary(rows: Sequence[dict]) -> list[dict]:
    """Per family and dtype, then per dtype over every family: geometric mean and minimum."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row[SWEEP.dtype], row[SWEEP.family]), []).append(row)
    for dtype in dict.fromkeys(row[SWEEP.dtype] for row in rows):
        groups[(dtype, "all")] = [row for row in rows if row[SWEEP.dtype] == dtype]
    summary = []
    for (dtype, family), members in groups.items():
        worst = min(members, key=lambda r: ratio(r, "v7"))
        summary.append({SWEEP.family: family, SWEEP.dtype: dtype, "rows": len(members),
                        "v7_worst": worst[SWEEP.preset],
                        **{f"{k}_geomean": geometric_mean([ratio(r, k) for r in members])
                           for k in KERNELS},
                        **{f"{k}_min": min(ratio(r, k) for r in members) for k in KERNELS},
                        "v7_short": sum(ratio(r, "v7") < SHORT_OF for r in members)})
    return summary


def sweep_headline(rows: Sequence[dict]) -> str | None:
    """Page 1's GEMM line: v7 (and v6) over cuBLAS as the sweep's geometric mean and minimum
    per GPU model, or None where no sweep was run."""
    lines = []
    by_gpu: dict[str, list[dict]] = {}
    for row in analysis.newest_run_per_gpu(rows, KIND):
        by_gpu.setdefault(analysis.gpu_model(row), []).append(row)
    for gpu, members in sorted(by_gpu.items()):
        worst = min(members, key=lambda r: ratio(r, "v7"))
        v7 = [ratio(r, "v7") for r in members]
        v6 = [ratio(r, "v6") for r in members]
        # cuBLAS is slow where TMA-style strides break (0.15 of its aligned rate), so that
        # family lifts any mean; the mean without it is quoted beside.
        aligned = [ratio(r, "v7") for r in members if r[SWEEP.family] != "unaligned"]
        lines.append(
            f"own GEMM v7 against cuBLAS on {gpu}, {len(members)} shapes × dtypes: geometric "
            f"mean {fmt(geometric_mean(v7))} ({fmt(geometric_mean(aligned))} without the "
            f"unaligned family), minimum {fmt(min(v7))} ({worst['preset']} {worst['dtype']}); "
            f"v6 {fmt(geometric_mean(v6))} and {fmt(min(v6))}")
    return "; ".join(lines) or None


def sweep_tables(view: View) -> list[Table]:
    """Per machine: the family summary, then every row of the sweep."""
    shown = sweep_rows(view.rows)
    tables = []
    for label in dict.fromkeys(r["machine"] for r in view.machines.in_order(shown)):
        mine = [r for r in shown if r["machine"] == label]
        where, how = view.machines.words[label], how_text(mine, view.runs)
        tables.append(make_table(
            f"tab-gemm-sweep-summary-{label}",
            f"GEMM sweep on {where}, per shape family: cuBLAS's median time over v7's and "
            f"v6's (above 1 the own kernel is faster), geometric mean and minimum over the "
            f"family's shapes. held_out was drawn after v7's tile rates were fitted, held_out_2 "
            f"after its stream-K rule was fixed (held_out had been looked at while that rule "
            f"was made); fresh is drawn the same way in each run with the run's seed. {how}",
            SUMMARY_COLUMNS, family_summary(mine)))
        tables.append(make_table(
            f"tab-gemm-sweep-{label}",
            f"Every shape of the GEMM sweep on {where}. Each row was checked against cuBLAS "
            f"on fresh inputs (v7 into a NaN-poisoned output) before it was timed; cuBLAS "
            f"(torch.matmul), v6 and v7 ran interleaved in shuffled order per round, each "
            f"round one CUDA graph of back-to-back launches. v7 / cuBLAS carries its 95% "
            f"bootstrap interval over rounds. v7's tile is 128 rows by the width its wave "
            f"model chose, its rows padded to the multiple shown (64: whole 128-byte lines, "
            f"the copy timed with the GEMM), and its K cut into the parts shown where it "
            f"splits K, and the tiles of a last partial wave shared out stream-K where it runs "
            f"them so (fp32 partials summed by a second kernel, timed with it). Roofline: "
            f"the peaks table's dense tensor-core rate and HBM bandwidth "
            f"(impl/kernels/peaks.py); bound says which roof binds at the shape's arithmetic "
            f"intensity. {how}", ROW_COLUMNS, mine,
            placement=Placement("every shape of the GEMM sweep")))
    return tables


def family_markdown(rows: Sequence[dict]) -> str:
    """``family_summary`` as the Markdown table docs/gemm.md shows (v7 and v6 over cuBLAS)."""
    lines = ["| family | dtype | shapes | v7 geomean | v7 min (shape) | v7 under "
             f"{SHORT_OF:.2f} | v6 geomean | v6 min |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {s['family']} | {s['dtype']} | {s['rows']} | {s['v7_geomean']:.2f} | "
              f"{s['v7_min']:.2f} ({s['v7_worst']}) | {s['v7_short']} | "
              f"{s['v6_geomean']:.2f} | {s['v6_min']:.2f} |" for s in family_summary(rows)]
    return "\n".join(lines)


def variant_pairs(rows: Sequence[dict]) -> list[dict]:
    """Per pair of VARIANT_PAIRS and dtype, over the shapes that timed both: the variant's
    speed over the other's (median times, above 1: the variant is faster), geometric mean,
    minimum and maximum with their shapes, and the shapes clearly faster and slower."""
    summary = []
    for variant, against, question in VARIANT_PAIRS:
        for dtype in dict.fromkeys(row[SWEEP.dtype] for row in rows):
            paired = [(row[SWEEP.preset], time_of(row, variant), time_of(row, against))
                      for row in rows if row[SWEEP.dtype] == dtype]
            speeds = {shape: other / mine for shape, mine, other in paired
                      if mine is not None and other is not None}
            if not speeds:
                continue
            slowest, fastest = min(speeds, key=speeds.get), max(speeds, key=speeds.get)
            summary.append({"pair": f"{variant} / {against}", "question": question,
                            SWEEP.dtype: dtype, "shapes": len(speeds),
                            "geomean": geometric_mean(list(speeds.values())),
                            "min": speeds[slowest], "min_shape": slowest,
                            "max": speeds[fastest], "max_shape": fastest,
                            "faster": sum(v > 1 + CLEAR for v in speeds.values()),
                            "slower": sum(v < 1 - CLEAR for v in speeds.values())})
    return summary


def variants_markdown(rows: Sequence[dict]) -> str:
    """``variant_pairs`` as the Markdown table docs/gemm.md shows."""
    lines = [f"| variant / against | what it asks | dtype | shapes | geomean | min (shape) | "
             f"max (shape) | faster by {CLEAR:.0%}+ | slower by {CLEAR:.0%}+ |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| `{s['pair']}` | {s['question']} | {s['dtype']} | {s['shapes']} | "
              f"{s['geomean']:.2f} | {s['min']:.2f} ({s['min_shape']}) | "
              f"{s['max']:.2f} ({s['max_shape']}) | {s['faster']} | {s['slower']} |"
              for s in variant_pairs(rows)]
    return "\n".join(lines)


VARIANTS_FLAG = "--variants"


def main(argv: Sequence[str]) -> int:
    """The family table of one sweep's results file, or of several pooled (the fresh family
    of runs with different seeds: each draws its own shapes); with ``--variants`` first, the
    forced variants' table (VARIANT_PAIRS) instead."""
    show = variants_markdown if argv[:1] == [VARIANTS_FLAG] else family_markdown
    argv = argv[1:] if show is variants_markdown else argv
    if not argv or not all(Path(path).is_file() for path in argv):
        print(f"usage: python -m reports.sections.gemm_sweep [{VARIANTS_FLAG}] RESULTS.json "
              f"[RESULTS.json ...] (sweep results files, their rows pooled); got "
              f"{' '.join(argv) or 'no argument'}", file=sys.stderr)
        return 2
    rows = []
    for path in argv:
        mine = [b["extra_info"] for b in json.loads(Path(path).read_text())["benchmarks"]
                if b.get("extra_info", {}).get("kind") == KIND]
        if not mine:
            print(f"{path} has no rows of kind {KIND}", file=sys.stderr)
            return 2
        rows += mine
    print(show(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
