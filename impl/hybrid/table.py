"""The offload family of result files as Markdown: per file, each fine-grained variant's step
against fused GPU Adam measured in the same rounds, beside its bound and goal, then the rates
the run measured and its crossover ladders (impl/hybrid/crossover.py). docs/hybrid.md's H100
and H200 tables are its output (tests/test_hybrid_table.py checks them); it only reads rows,
through impl/rows/files.py.

    python -m impl.hybrid.table results/h100x1/20261125T185111Z-e7j9h2iw.json

Each cell is the ratio of medians round_ms / device-adam's round_ms with its 95% interval
(``impl.stats.ratio``, paired by round); a variant with a bound (impl/hybrid/bounds.py) adds
the bound as a ratio to fused GPU Adam's step (``bound_ratio``), its median step / bound and
whether it meets its goal (``meets_goal``: ratio ≤ max(goal, 1.10 × bound_ratio)).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

from impl import stats
from impl.hybrid.crossover import LadderPoint
from impl.hybrid.goals import bound_under_step
from impl.rows.declare import RowKind
from impl.rows.files import ResultsError, ResultsFile, load_results
from impl.rows.kinds import HOST_ADAM, HYBRID_STEP, OFFLOAD_CROSSOVER

REFERENCE = "device-adam"  # fused GPU Adam: the family's reference
STUDY = "fine-grained"
HOST_ADAM_VARIANT = "fused-grouped"  # the host Adam the offload runs (impl/hybrid/host_adam.py)
# ... and before the grouped layout, in the runs that have no row of it.
EARLIER_HOST_ADAM_VARIANT = "fused-intra-op"


@dataclass(frozen=True)
class FamilyStep:
    """The fields of a hybrid_step row (impl/rows/kinds.py's HYBRID_STEP) this table reads,
    by their declared names; those without a default are required there
    (tests/test_hybrid_table.py checks both)."""

    study: str
    workload: str
    variant: str
    device: str
    step_ms: float | dict  # a number in the suite's rows; an estimate ({"value": ...}) too
    round_ms: list[float] | None = None  # every row the suite writes has them
    dtype: str | None = None
    rates: dict | None = None
    bound_ms: float | None = None
    bound_ratio: float | None = None
    meets_goal: bool | None = None

    @property
    def median_step_ms(self) -> float:
        return self.step_ms["value"] if isinstance(self.step_ms, dict) else self.step_ms


@dataclass(frozen=True)
class HostAdam:
    """The fields of a host_adam row (HOST_ADAM) this table reads."""

    variant: str
    threads: int
    adam_gbps: float
    bandwidth_gbps: float | None = None
    fraction_of_bandwidth: dict | None = None
    vs_alone: dict | None = None


def rows_of(results: ResultsFile, kind: RowKind, reader: type) -> list:
    """The file's rows of ``kind``, each as ``reader`` (a dataclass of the fields it reads)."""
    names = [f.name for f in fields(reader)]
    return [reader(**{name: row[name] for name in names if name in row})
            for row in (b["extra_info"] for b in results.benchmarks) if kind.holds(row)]


def family_steps(results: ResultsFile) -> list[FamilyStep]:
    """The file's fine-grained hybrid_step rows; ResultsError where there are none, or where a
    workload lacks its fused-GPU-Adam reference."""
    steps = [r for r in rows_of(results, HYBRID_STEP, FamilyStep) if r.study == STUDY]
    if not steps:
        raise ResultsError(results.path, f"no {STUDY} {HYBRID_STEP.name} rows (the offload "
                                         "family of suite/bench_hybrid.py)")
    if unpaired := [r.variant for r in steps if not r.round_ms]:
        raise ResultsError(results.path, f"{STUDY} rows without round_ms (no per-round times "
                                         f"to pair): {', '.join(unpaired)}")
    for workload in dict.fromkeys(r.workload for r in steps):
        if not any(r.workload == workload and r.variant == REFERENCE for r in steps):
            raise ResultsError(results.path, f"workload {workload!r} has no {REFERENCE} row to "
                                             "compare against")
    return steps


def interval(estimate: dict) -> str:
    return f"{estimate['value']:.3f} [{estimate['low']:.3f}, {estimate['high']:.3f}]"


def cell(step: FamilyStep, reference: FamilyStep) -> str:
    if step is reference:
        return f"step {step.median_step_ms:.1f} ms"
    text = interval(stats.ratio(step.round_ms, reference.round_ms).to_json())
    if step.bound_ratio is not None:
        text += f", bound {step.bound_ratio:.3f}"
    if step.bound_ms:
        text += f", step/bound {step.median_step_ms / step.bound_ms:.2f}"
    if step.bound_ms and bound_under_step(step.median_step_ms, step.bound_ms):
        text += ": under its bound, whose rates read low: no verdict"
    elif step.meets_goal is not None:
        text += ": met" if step.meets_goal else ": missed"
    return text


def family_table(steps: Sequence[FamilyStep]) -> list[str]:
    """Rows the variants, columns the workloads, in the order the file holds them."""
    workloads = list(dict.fromkeys(r.workload for r in steps))
    variants = list(dict.fromkeys(r.variant for r in steps))
    by = {(r.workload, r.variant): r for r in steps}
    headers = [f"`{w}`, {by[w, REFERENCE].dtype or 'fp32'}" for w in workloads]
    lines = ["| variant | " + " | ".join(headers) + " |",
             "|---|" + "---|" * len(workloads)]
    for variant in variants:
        cells = [cell(by[w, variant], by[w, REFERENCE]) if (w, variant) in by else ""
                 for w in workloads]
        lines.append(f"| `{variant}` | " + " | ".join(cells) + " |")
    return lines


def rates_line(results: ResultsFile, steps: Sequence[FamilyStep]) -> str | None:
    """The rates the bounds used (the rows' ``rates``) and host Adam against the in-place
    bandwidth measured in the same rounds (the host_adam row of the trainers' engine)."""
    parts = []
    if rates := next((r.rates for r in steps if r.rates), None):
        parts.append(f"for the bounds, host Adam {rates['adam_gbps']:.1f} GB/s "
                     f"({rates['threads']} threads) and pinned copies "
                     f"{rates['to_host_gbps']:.1f} GB/s to the host, "
                     f"{rates['to_device_gbps']:.1f} GB/s to the GPU")
    rows = {r.variant: r for r in rows_of(results, HOST_ADAM, HostAdam)}
    host = rows.get(HOST_ADAM_VARIANT) or rows.get(EARLIER_HOST_ADAM_VARIANT)
    if host and host.fraction_of_bandwidth:
        parts.append(f"host Adam `{host.variant}` {host.adam_gbps:.1f} GB/s "
                     f"({host.threads} threads), {interval(host.fraction_of_bandwidth)} of the "
                     f"in-place bandwidth measured in the same rounds "
                     f"({host.bandwidth_gbps:.1f} GB/s)")
    return f"Rates measured in the run: {'; '.join(parts)}." if parts else None


def host_adam_table(rows: Sequence[HostAdam]) -> list[str]:
    """Every host Adam row of a file in one table: the labelled references (DeepSpeed's CPU
    Adam) beside the suite's engines, each with its share of the in-place bandwidth of the same
    rounds, and the rows of host Adam beside the rest of the step (impl/hybrid/contention.py)
    with their rate over its rate alone. A column only some rows fill is blank on the others."""
    columns = [("share of the in-place bandwidth", lambda row: row.fraction_of_bandwidth),
               ("rate / rate alone (fp32 gradients)", lambda row: row.vs_alone)]
    shown = [(label, value_of) for label, value_of in columns
             if any(value_of(row) for row in rows)]
    lines = ["| host Adam | threads | GB/s | " + " | ".join(label for label, _ in shown) + " |",
             "|---|---|---|" + "---|" * len(shown)]
    for row in rows:
        cells = [interval(value) if (value := value_of(row)) else ""
                 for _, value_of in shown]
        lines.append(f"| `{row.variant}` | {row.threads} | {row.adam_gbps:.1f} | "
                     + " | ".join(cells) + " |")
    bandwidth = next((r.bandwidth_gbps for r in rows if r.bandwidth_gbps), None)
    if bandwidth:
        lines += ["", f"In-place bandwidth measured in the same rounds: {bandwidth:.1f} GB/s."]
    return lines


@dataclass(frozen=True)
class Crossing:
    """The fields of an offload_crossover row (OFFLOAD_CROSSOVER) this table reads."""

    workload: str
    parameters: int
    batches: list[dict]
    verdict: str
    dtype: str | None = None
    bound_crossover_tokens: float | None = None
    host_work_ms: float | None = None


def crossover_table(rows: Sequence[Crossing]) -> list[str]:
    """Each ladder (impl/hybrid/crossover.py): per batch the delayed update against fused GPU
    Adam, then the crossover and the bound's."""
    lines = ["| model | batch rows | tokens a step | fused GPU Adam ms | offload-overlap-dpu "
             "/ fused GPU Adam | bound / fused GPU Adam |", "|---|---|---|---|---|---|"]
    for row in rows:
        model = f"`{row.workload}`, {row.dtype or 'fp32'}, {row.parameters / 1e6:.0f}M"
        for point in (LadderPoint(**p) for p in row.batches):
            where = f"| {model} | {point.batch} | {point.tokens:,} |"
            if point.failed is not None:
                lines.append(f"{where} did not run: {point.failed} | | |")
                continue
            bound = "" if point.bound_ratio is None else f"{point.bound_ratio:.3f}"
            lines.append(f"{where} {point.device_adam_ms:.1f} | {interval(point.dpu_ratio)} | "
                         f"{bound} |")
    lines.append("")
    for row in rows:
        bound = (f"; the bound's crossover {row.bound_crossover_tokens:,.0f} tokens (host work "
                 f"{row.host_work_ms:.1f} ms a step)" if row.bound_crossover_tokens is not None
                 else "")
        lines.append(f"- `{row.workload}`: {row.verdict}{bound}.")
    return lines


def crossover_block(crossings: Sequence[Crossing]) -> list[str]:
    return ["", "Where offload stops costing (impl/hybrid/crossover.py):", "",
            *crossover_table(crossings)] if crossings else []


def file_block(path: str) -> list[str]:
    """The family's table, the run's rates and its crossover ladders; a file without the
    family (a run of ``-k host_adam`` or ``-k crossover``), its host_adam rows' table and its
    ladders."""
    results = load_results(path)
    commit = ((results.data.get("commit_info") or {}).get("id") or "unknown")[:7]
    host_rows = rows_of(results, HOST_ADAM, HostAdam)
    crossings = rows_of(results, OFFLOAD_CROSSOVER, Crossing)
    if (host_rows or crossings) and not any(
            r.study == STUDY for r in rows_of(results, HYBRID_STEP, FamilyStep)):
        return [f"**`{path}`**: {results.label}, commit {commit}",
                *(["", *host_adam_table(host_rows)] if host_rows else []),
                *crossover_block(crossings)]
    steps = family_steps(results)
    devices = ", ".join(dict.fromkeys(r.device for r in steps))
    lines = [f"**`{path}`**: {results.label}, {devices}, commit {commit}", "",
             *family_table(steps)]
    if rates := rates_line(results, steps):
        lines += ["", rates]
    return lines + crossover_block(crossings)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.hybrid.table", description=(
        "The offload family (fine-grained hybrid_step rows) of result files, as Markdown: "
        "each variant's step against fused GPU Adam, its bound and goal, the run's rates, "
        "and where offload stops costing (offload_crossover rows); a file of host_adam rows "
        "alone, every host Adam beside the in-place bandwidth."))
    parser.add_argument("paths", nargs="+", metavar="RESULTS", help="result files")
    args = parser.parse_args(argv)
    return printed(lambda: "\n\n".join("\n".join(file_block(path)) for path in args.paths))


def printed(make: Callable[[], str]) -> int:
    """Print what ``make`` returns and exit 0; a file it cannot use is one line, exit 2."""
    try:
        text = make()
    except ResultsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
