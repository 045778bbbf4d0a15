"""The offload family of result files as Markdown: per file, each fine-grained variant's step
against fused GPU Adam measured in the same rounds, beside its bound and goal, then the rates
the run measured. docs/hybrid.md's H100 and H200 tables are its output (tests/test_hybrid_table.py
checks them); it only reads rows, through impl/rows/files.py.

    python -m impl.hybrid.table results/h100x1/20261125T185111Z-e7j9h2iw.json

Each cell is the ratio of medians round_ms / device-adam's round_ms with its 95% interval
(``impl.stats.ratio``, paired by round); a variant with a bound (impl/hybrid/bounds.py) adds
the bound as a ratio to fused GPU Adam's step (``bound_ratio``), its median step / bound and
whether it meets its goal (``meets_goal``: ratio ≤ max(goal, 1.10 × bound_ratio)).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from impl import stats
from impl.rows.files import ResultsError, ResultsFile, load_results

REFERENCE = "device-adam"  # fused GPU Adam: the family's reference
STUDY = "fine-grained"
HOST_ADAM_VARIANT = "fused-intra-op"  # the host Adam the offload runs (impl/hybrid/host_adam.py)


def rows_of(results: ResultsFile, kind: str) -> list[dict]:
    return [b["extra_info"] for b in results.benchmarks if b["extra_info"].get("kind") == kind]


def family_steps(results: ResultsFile) -> list[dict]:
    """The file's fine-grained hybrid_step rows; ResultsError where there are none, or where a
    workload lacks its fused-GPU-Adam reference."""
    steps = [r for r in rows_of(results, "hybrid_step") if r["study"] == STUDY]
    if not steps:
        raise ResultsError(results.path, f"no {STUDY} hybrid_step rows (the offload family of "
                                         "suite/bench_hybrid.py)")
    for workload in dict.fromkeys(r["workload"] for r in steps):
        if not any(r["workload"] == workload and r["variant"] == REFERENCE for r in steps):
            raise ResultsError(results.path, f"workload {workload!r} has no {REFERENCE} row to "
                                             "compare against")
    return steps


def median_step_ms(row: dict) -> float:
    """step_ms is a number in the suite's rows; an estimate ({"value": ...}) is read too."""
    step = row["step_ms"]
    return step["value"] if isinstance(step, dict) else step


def interval(estimate: dict) -> str:
    return f"{estimate['value']:.3f} [{estimate['low']:.3f}, {estimate['high']:.3f}]"


def cell(row: dict, reference: dict) -> str:
    if row is reference:
        return f"step {median_step_ms(row):.1f} ms"
    text = interval(stats.ratio(row["round_ms"], reference["round_ms"]).to_json())
    if row.get("bound_ratio") is not None:
        text += f", bound {row['bound_ratio']:.3f}"
    if row.get("bound_ms"):
        text += f", step/bound {median_step_ms(row) / row['bound_ms']:.2f}"
    if row.get("meets_goal") is not None:
        text += ": met" if row["meets_goal"] else ": missed"
    return text


def family_table(steps: Sequence[dict]) -> list[str]:
    """Rows the variants, columns the workloads, in the order the file holds them."""
    workloads = list(dict.fromkeys(r["workload"] for r in steps))
    variants = list(dict.fromkeys(r["variant"] for r in steps))
    by = {(r["workload"], r["variant"]): r for r in steps}
    headers = [f"`{w}`, {by[w, REFERENCE].get('dtype') or 'fp32'}" for w in workloads]
    lines = ["| variant | " + " | ".join(headers) + " |",
             "|---|" + "---|" * len(workloads)]
    for variant in variants:
        cells = [cell(by[w, variant], by[w, REFERENCE]) if (w, variant) in by else ""
                 for w in workloads]
        lines.append(f"| `{variant}` | " + " | ".join(cells) + " |")
    return lines


def rates_line(results: ResultsFile, steps: Sequence[dict]) -> str | None:
    """The rates the bounds used (the rows' ``rates``) and host Adam against the in-place
    bandwidth measured in the same rounds (the host_adam row of HOST_ADAM_VARIANT)."""
    parts = []
    if rates := next((r["rates"] for r in steps if r.get("rates")), None):
        parts.append(f"for the bounds, host Adam {rates['adam_gbps']:.1f} GB/s "
                     f"({rates['threads']} threads) and pinned copies "
                     f"{rates['to_host_gbps']:.1f} GB/s to the host, "
                     f"{rates['to_device_gbps']:.1f} GB/s to the GPU")
    host = next((r for r in rows_of(results, "host_adam")
                 if r["variant"] == HOST_ADAM_VARIANT), None)
    if host and host.get("fraction_of_bandwidth"):
        parts.append(f"host Adam `{HOST_ADAM_VARIANT}` {host['adam_gbps']:.1f} GB/s "
                     f"({host['threads']} threads), "
                     f"{interval(host['fraction_of_bandwidth'])} of the in-place bandwidth "
                     f"measured in the same rounds ({host['bandwidth_gbps']:.1f} GB/s)")
    return f"Rates measured in the run: {'; '.join(parts)}." if parts else None


def file_block(path: str) -> list[str]:
    results = load_results(path)
    steps = family_steps(results)
    devices = ", ".join(dict.fromkeys(r["device"] for r in steps))
    commit = ((results.data.get("commit_info") or {}).get("id") or "unknown")[:7]
    lines = [f"**`{path}`**: {results.label}, {devices}, commit {commit}", "",
             *family_table(steps)]
    if rates := rates_line(results, steps):
        lines += ["", rates]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.hybrid.table", description=(
        "The offload family (fine-grained hybrid_step rows) of result files, as Markdown: "
        "each variant's step against fused GPU Adam, its bound and goal, the run's rates."))
    parser.add_argument("paths", nargs="+", metavar="RESULTS", help="result files")
    args = parser.parse_args(argv)
    try:
        blocks = [file_block(path) for path in args.paths]
    except ResultsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n\n".join("\n".join(block) for block in blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
