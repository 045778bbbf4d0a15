"""Predictions frozen before the runs they predict are measured.

    python -m impl.costmodel.freeze --device H200 --worlds 2 4 --chunks 5 20 \\
        --out results/predictions/<name>.json   # a folder no results reader takes for runs

The present model, as ``python -m impl.costmodel.predict`` applies it, fitted only on the
committed results (``results/``, or the paths given): each workload's compute-only step from
the newest run on the named GPU model, the all-reduce from the fabric file for that model, the
held-out bands, overheads, lanes and pair band of every committed GPU cell
(validate.held_out_model).
Every strategy of every such workload, at each world size and K, goes into one JSON file with
the commit that made it; a later run is scored against it, never the other way round.

Exit status: 0 written; 2 unusable input (one line naming the value and what is allowed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict

from impl.atomic import write_bytes_atomic
from impl.costmodel import scale
from impl.costmodel.fabric_file import FabricError, available, load_fabric
from impl.costmodel.predict import chunk_count, fits_device
from impl.costmodel.validate import RESULTS, Model, held_out_model, load_rows
from impl.rows.files import ResultsError
from impl.rows.kinds import COMPARISON
from impl.rows.predictions import FROZEN_BY, FROZEN_FILE, PREDICTED_FIGURES, PREDICTION

# The rows the model is fitted on (comparison, step, interference and all-reduce rows) declare
# device alike.
ROW = COMPARISON.names


def on_device(rows: Sequence[dict], device: str) -> list[dict]:
    """The rows of the newest run per workload measured on GPU model ``device`` (a part of
    the device name, any case): what the model takes its compute side from."""
    wanted = device.lower().replace(" ", "")
    return [r for r in rows if isinstance(r.get(ROW.device), str)
            and wanted in r[ROW.device].lower().replace(" ", "")]


def frozen(rows: Sequence[dict], fabric_name: str, worlds: Sequence[int],
           chunks: Sequence[int], model: Model) -> list[dict]:
    """Every prediction, each with its K and its band's low and high step."""
    fabric = load_fabric(fabric_name)
    measured = scale.sweeps(rows)
    found = []
    for k in chunks:
        sources, predictions = scale.predict(rows, fabric, worlds=worlds, chunks=k,
                                             held_out=model.bands, overheads=model.overheads,
                                             lanes=model.lanes, sweeps=measured)
        about = {s.workload: s.about for s in sources}
        for p in predictions:
            record = {field: asdict(p)[field] for field in PREDICTED_FIGURES}
            low, high = p.step_range or (None, None)
            found.append({**record, PREDICTION.chunks: k, PREDICTION.low_ms: low,
                          PREDICTION.high_ms: high, PREDICTION.compute_from: about[p.workload]})
    return found


def node_fabric(device: str) -> str:
    """The NVLink node fabric file for GPU model ``device`` (its copy-engine bandwidth, and
    NCCL's where no sweep was measured); FabricError where there is none."""
    found = next((n for n in available() if n.startswith("nvlink") and fits_device(n, device)),
                 None)
    if found is None:
        raise FabricError(f"--device {device!r}", "no node fabric file for it; pass --fabric "
                          f"({', '.join(available())})")
    return found


def git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.costmodel.freeze", description=(
        "Freeze the present model's predictions for runs not measured yet."))
    parser.add_argument("paths", nargs="*", default=[RESULTS],
                        help=f"the results the model is fitted on (default: {RESULTS}/)")
    parser.add_argument("--device", required=True, help="the GPU model to predict (H100, H200)")
    parser.add_argument("--worlds", type=int, nargs="+", required=True,
                        help="world sizes (within the fabric's node)")
    parser.add_argument("--chunks", type=chunk_count, nargs="+", default=[scale.PREDICTION_CHUNKS])
    parser.add_argument("--fabric", help=f"a fabric name ({', '.join(available())}; default: "
                        "the NVLink node file for the device)")
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args(argv)
    try:
        rows = on_device(load_rows(args.paths), args.device)
        if not rows:
            raise ValueError(f"--device {args.device!r}: no row of {', '.join(args.paths)} "
                             "was measured on it")
        fabric_name = args.fabric or node_fabric(args.device)
        model = held_out_model(args.paths)
        predictions = frozen(rows, fabric_name, args.worlds, args.chunks, model)
    except (ResultsError, FabricError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    command = "python -m impl.costmodel.freeze " + " ".join(
        argv if argv is not None else sys.argv[1:])
    document = {FROZEN_FILE.frozen: {FROZEN_BY.commit: git("rev-parse", "HEAD"),
                                     FROZEN_BY.command: command,
                                     FROZEN_BY.fitted_on: list(args.paths),
                                     FROZEN_BY.device: args.device,
                                     FROZEN_BY.fabric: fabric_name},
                # The best pick's hedge: every strategy predicted within (1 + pair_band) of
                # the best's step (impl/costmodel/pairs.py).
                FROZEN_FILE.pair_band: model.pair_band, FROZEN_FILE.predictions: predictions}
    write_bytes_atomic(args.out, (json.dumps(document, indent=1) + "\n").encode())
    print(f"{len(predictions)} predictions frozen in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
