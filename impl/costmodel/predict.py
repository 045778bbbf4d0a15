"""Predict every strategy's step at 8 to 1024 GPUs from a results file and a fabric file.

    python -m impl.costmodel.predict                   # the newest GPU run, its GPU's fabric
    python -m impl.costmodel.predict results/h200x1/<run>.json --fabric ib400-h200x8
    nox -s predict -- results/h200x2/20261123T094012Z.json --fabric roce400-h100x8 --chunks 5

The results give the compute side (any compute-only timeline: a one-GPU run is enough) and
the interference; the fabric file (fabrics/<name>.toml, or a path) gives the all-reduce at
each world size. Printed per workload and strategy: the step time, the exposed communication
and the overlap efficiency, all PREDICTED; then how well the same model did on the files'
measured multi-GPU cells, if they hold any (impl/costmodel/accuracy.py).

The held-out bands, overheads and lanes are fitted on the runs of results/ (--results FOLDER
for another folder). A fabric file for another GPU model than the results', and a partial
results file (suite.partial: its run stopped part-way), are warned about in one line each;
--no-partial refuses a partial one. Exit status: 0 printed; 2 unusable input (one line naming
the file, folder or value and what is allowed).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from impl.costmodel import accuracy, scale
from impl.costmodel.fabric import NodeFabric
from impl.costmodel.fabric_file import FabricError, available, fabric_path, load_fabric
from impl.costmodel.validate import (
    RESULTS,
    held_out_model,
    load_runs,
    missing_results,
    partial_runs,
    runs_rows,
    summary_lines,
)
from impl.rows.files import ResultsError
from impl.rows.kinds import COMPARISON

CELL = COMPARISON.names  # the cells whose compute-only timeline the model starts from


# The figures of a prediction each strategy's lines show: label, the figure, its format.
FIGURES = (("step ms", lambda p: p.step_ms, ".4g"),
           ("exposed ms", lambda p: p.exposed_comm_ms, ".3g"),
           ("efficiency", lambda p: p.overlap_efficiency, ".2f"),
           ("weak scal.", lambda p: p.weak_scaling, ".2f"))


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
                  f" K = {chunks}; stragglers: per-step spread σ {source.spread_ms:.3g} ms, the "
                  "slowest of n ranks",
                  f"  {'strategy':16}{'':10}" + "".join(f"{w:>9}" for w in worlds)]
        mine = [p for p in predictions if p.workload == source.workload]
        for strategy in dict.fromkeys(p.strategy for p in mine):
            row = {p.world_size: p for p in mine if p.strategy == strategy}
            for label, figure, digits in FIGURES:
                lines.append(f"  {strategy if label == 'step ms' else '':16}{label:10}" + "".join(
                    f"{_cell(figure(row[w]), digits):>9}" if w in row else f"{'':>9}"
                    for w in worlds))
            notes = dict.fromkeys(p.note for p in row.values() if p.note)
            bands = {p.band for p in row.values() if p.band is not None}
            if bands:
                notes[f"band ±{max(bands):.1%} of the step (held-out error with the "
                      "compute-only step's interval)"] = None
            if extra := {p.overhead_ms for p in row.values() if p.overhead_ms}:
                notes[f"overhead {max(extra):+.2f} ms per step beyond the schedule (median "
                      "residual of the measured cells on this GPU model, assumed to hold at "
                      "every GPU count)"] = None
            lines += [f"  {'':16}note: {note}" for note in notes]
        lines += [f"  {line}" for line in fastest_lines(mine, worlds)]
        lines.append("")
    return lines


def fastest_lines(predictions: Sequence[scale.Prediction], worlds: Sequence[int]) -> list[str]:
    """Per world size, the fastest strategy, or that its band overlaps others' (it cannot be
    told apart from them); world sizes with the same verdict share a line."""
    verdicts: dict[str, list[int]] = {}
    for world in worlds:
        found = scale.separable([p for p in predictions if p.world_size == world])
        if found is None:
            continue
        best, rivals = found
        verdict = (f"fastest: {best.strategy}" if not rivals else
                   f"cannot separate {best.strategy} from "
                   f"{', '.join(p.strategy for p in rivals)} (bands overlap)")
        verdicts.setdefault(verdict, []).append(world)
    return [f"{', '.join(map(str, sizes))} GPUs: {verdict}" for verdict, sizes in verdicts.items()]


def chunk_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 256:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed an integer from 1 to 256")
    return int(text)


def fabric_gpu(name: str) -> str | None:
    """The GPU model a fabric file is for, from its name (``ib400-h200x8``: h200)."""
    found = re.search(r"-([a-z0-9]+)x\d+$", name)
    return found.group(1) if found else None


def fits_device(name: str, device: str | None) -> bool:
    """Whether fabric ``name`` is for the GPU model ``device`` (a row's device name)."""
    gpu = fabric_gpu(name)
    return bool(gpu and device and gpu in device.lower().replace(" ", ""))


def default_fabric(device: str | None) -> str | None:
    """The fabric file for ``device``'s GPU model, across nodes where one is shipped."""
    matching = [name for name in available() if fits_device(name, device)]
    return min(matching, key=lambda n: (not n.startswith("ib"), n)) if matching else None


def newest_gpu_run(rows: Sequence[dict], fabric: str | None) -> list[dict]:
    """The rows of the newest run holding a GPU compute-only step that a fabric file (the
    one named, else any shipped) describes."""
    runs = [r.get("run") for r in rows if COMPARISON.holds(r)
            and "compute-only" in (r.get(CELL.timelines) or {})
            and (fits_device(fabric, r.get(CELL.device)) if fabric
                 else default_fabric(r.get(CELL.device)))]
    if not runs:
        return []
    newest = max(runs)
    return [r for r in rows if r.get("run") == newest]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.costmodel.predict", description=(
        "Predict each strategy's step, exposed communication and overlap efficiency at 8 to "
        "1024 GPUs."))
    parser.add_argument("paths", nargs="*", help="result files or folders (the compute side; "
                        "default: the newest GPU run in results/ that a fabric file describes)")
    parser.add_argument("--fabric", help="a fabric name (fabrics/<name>.toml: "
                        f"{', '.join(available())}) or a path to a .toml file (default: the "
                        "one for the results' GPU model)")
    parser.add_argument("--chunks", type=chunk_count, default=scale.PREDICTION_CHUNKS,
                        help=f"K, the chunk count (default {scale.PREDICTION_CHUNKS})")
    parser.add_argument("--results", default=RESULTS, help="the folder of runs the held-out "
                        f"bands, overheads and lanes are fitted on (default: {RESULTS}/, the "
                        "committed runs; partial ones included)")
    parser.add_argument("--no-partial", action="store_true", help="refuse a partial results "
                        "file to predict from (a run stopped part-way: suite.partial) instead "
                        "of using it with a warning")
    args = parser.parse_args(argv)
    try:
        if not Path(args.results).is_dir():
            print(missing_results(args.results, "the held-out bands and overheads are fitted "
                                  "on the runs there: pass --results FOLDER"), file=sys.stderr)
            return 2
        runs = load_runs(args.paths or [args.results])
        rows = runs_rows(runs, merged=bool(args.paths))
        if not args.paths:
            name = args.fabric and fabric_path(args.fabric).stem
            rows = newest_gpu_run(rows, name)
            if not rows:
                print(f"error: no GPU run in {args.results}/ that a fabric file describes; pass "
                      "RESULTS --fabric NAME (fabrics: " + ", ".join(available()) + ")",
                      file=sys.stderr)
                return 2
        used = {r["file"] for r in rows}
        partial = partial_runs([r for r in runs if str(r.path) in used], args.no_partial)
        if partial and args.no_partial:
            print(partial, file=sys.stderr)
            return 2
        devices = sorted({r[CELL.device] for r in rows if COMPARISON.holds(r)
                          and isinstance(r.get(CELL.device), str)})
        fabric_name = args.fabric or next(filter(None, map(default_fabric, devices)), None)
        if fabric_name is None:
            print(f"error: no fabric file for {', '.join(devices) or 'these results'}; pass "
                  f"--fabric NAME ({', '.join(available())}) or a path", file=sys.stderr)
            return 2
        fabric = load_fabric(fabric_name)
        # Without paths the runs read are those of --results: each file loaded once.
        model = held_out_model([args.results], None if args.paths else runs)
    except (FabricError, ResultsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sources, predictions = scale.predict(rows, fabric, chunks=args.chunks,
                                         held_out=model.bands, overheads=model.overheads,
                                         lanes=model.lanes)
    if not sources:
        print(f"error: {' '.join(args.paths)}: no compute-only timeline (an overlap cell of "
              "suite/bench_overlap.py, any world size) to predict from", file=sys.stderr)
        return 2
    if partial:
        print(partial, file=sys.stderr)
    if other := [s.device for s in sources if not fits_device(fabric.name, s.device)]:
        print(f"warning: compute measured on {', '.join(sorted(set(map(str, other))))}, fabric "
              f"{fabric.name} is for {(fabric_gpu(fabric.name) or 'another GPU').upper()}: "
              "these predictions mix two machines", file=sys.stderr)
    checks = accuracy.validate(rows)
    print("\n".join(table(sources, predictions, fabric, args.chunks) + (
        summary_lines(checks) if checks else [
            "No measured multi-GPU cell in these files: the model's errors on every committed "
            "cell are printed by python -m impl.costmodel.validate results/"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
