"""Predict every strategy's step at 8 to 1024 GPUs from a results file and a fabric file.

    python -m impl.costmodel.predict results/h200x1/<run>.json --fabric ib400-h200x8
    nox -s predict -- results/h200x2/20261123T094012Z.json --fabric roce400-h100x8 --chunks 5

The results give the compute side (any compute-only timeline: a one-GPU run is enough) and
the interference; the fabric file (fabrics/<name>.toml, or a path) gives the all-reduce at
each world size. Printed per workload and strategy: the step time, the exposed communication
and the overlap efficiency, all PREDICTED; then how well the same model did on the files'
measured multi-GPU cells, if they hold any (impl/costmodel/accuracy.py).

Exit status: 0 printed; 2 unusable input (one line naming the file or value and what is
allowed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from impl.costmodel import accuracy, scale
from impl.costmodel.fabric import NodeFabric
from impl.costmodel.fabric_file import FabricError, available, load_fabric
from impl.costmodel.validate import load_rows, summary_lines
from impl.rows.files import ResultsError


def _cell(value: float | None, digits: str = ".3g") -> str:
    return "—" if value is None else format(value, digits)


def table(sources: Sequence[scale.Source], predictions: Sequence[scale.Prediction],
          fabric: NodeFabric, chunks: int) -> list[str]:
    """The predictions as text: per workload, strategies down, world sizes across."""
    worlds = sorted({p.world_size for p in predictions})
    lines = [f"PREDICTED by the cost model (impl/costmodel/) for fabric {fabric.name}: "
             f"{fabric.description}", ""]
    for source in sources:
        lines += [f"{source.workload}: {source.about}; interference {source.interference.source};"
                  f" K = {chunks}",
                  f"  {'strategy':16}{'':10}" + "".join(f"{w:>9}" for w in worlds)]
        mine = [p for p in predictions if p.workload == source.workload]
        for strategy in dict.fromkeys(p.strategy for p in mine):
            row = {p.world_size: p for p in mine if p.strategy == strategy}
            for label, field, digits in (("step ms", "step_ms", ".4g"),
                                         ("exposed ms", "exposed_comm_ms", ".3g"),
                                         ("efficiency", "overlap_efficiency", ".2f")):
                lines.append(f"  {strategy if label == 'step ms' else '':16}{label:10}" + "".join(
                    f"{_cell(getattr(row[w], field), digits):>9}" if w in row else f"{'':>9}"
                    for w in worlds))
            notes = dict.fromkeys(p.note for p in row.values() if p.note)
            lines += [f"  {'':16}note: {note}" for note in notes]
        lines.append("")
    return lines


def chunk_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 256:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed an integer from 1 to 256")
    return int(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.costmodel.predict", description=(
        "Predict each strategy's step, exposed communication and overlap efficiency at 8 to "
        "1024 GPUs."))
    parser.add_argument("paths", nargs="+", help="result files or folders (the compute side)")
    parser.add_argument("--fabric", required=True, help="a fabric name (fabrics/<name>.toml: "
                        f"{', '.join(available())}) or a path to a .toml file")
    parser.add_argument("--chunks", type=chunk_count, default=scale.DEFAULT_CHUNKS,
                        help=f"K, the chunk count (default {scale.DEFAULT_CHUNKS})")
    args = parser.parse_args(argv)
    try:
        fabric = load_fabric(args.fabric)
        rows = load_rows(args.paths)
    except (FabricError, ResultsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sources, predictions = scale.predict(rows, fabric, chunks=args.chunks)
    if not sources:
        print(f"error: {' '.join(args.paths)}: no compute-only timeline (an overlap cell of "
              "suite/bench_overlap.py, any world size) to predict from", file=sys.stderr)
        return 2
    checks = accuracy.validate(rows)
    print("\n".join(table(sources, predictions, fabric, args.chunks) + (
        summary_lines(checks) if checks else [
            "No measured multi-GPU cell in these files: the model's errors on every committed "
            "cell are printed by python -m impl.costmodel.validate results/"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
