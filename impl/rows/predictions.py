"""The keys of the cost model's own records and files, declared once, for those that share a
row field's name: the code that writes each and every reader name a key as an attribute here
(``prediction[PREDICTION.step_ms]``), as kinds.REFERENCE names a comparison's references.

None of these is a row: a frozen predictions file (impl/costmodel/freeze.py writes it,
score.py reads it), an autotune prediction (impl/costmodel/autotune.py, with the measured step
suite/bench_autotune.py adds), a strategy's summary of the model's errors
(impl/costmodel/accuracy.py's by_strategy) and a fabric file (fabrics/*.toml, read and
checked by impl/costmodel/fabric_file.py).
"""

from __future__ import annotations

from impl.rows.declare import Declared
from impl.rows.kinds import AUTOTUNE

# A scale.Prediction's figures a frozen prediction keeps, under the Prediction's names.
PREDICTED_FIGURES = ("workload", "strategy", "world_size", "step_ms", "band", "exposed_comm_ms",
                     "overlap_efficiency", "overhead_ms", "straggler_ms", "note")
# One frozen prediction: those figures, its K, its band's low and high step and the run its
# compute-only step came from.
PREDICTION = Declared.keys("frozen prediction",
                           (*PREDICTED_FIGURES, "chunks", "low_ms", "high_ms", "compute_from"))
# A frozen predictions file: what froze them, the best pick's hedge and the predictions.
FROZEN_FILE = Declared.keys("frozen predictions file", ("frozen", "pair_band", "predictions"))
FROZEN_BY = Declared.keys("frozen", ("commit", "command", "fitted_on", "device", "fabric"))

# One K of an autotune row's predictions: the model's step and bound, and beside them the
# step measured at that K and the model's error against it.
TUNED = Declared.keys("autotune prediction", (
    "chunks", "predicted_ms", "bound_ms", "comm_ms", "overlapped_comm_ms", "measured_ms",
    "relative_error"))
# An autotune row's fabric, fitted from its comm-only times: AUTOTUNE's declared keys.
FITTED = Declared.keys("fitted fabric", tuple(AUTOTUNE.field.fabric.shape))

# One (machine, strategy)'s errors of the model over its measured cells.
SUMMARY = Declared.keys("accuracy summary", (
    "cells", "median_abs_error", "max_abs_error", "median_calm_error", "max_hidden_gap",
    "meets_goal"))

# A fabric file: table -> key -> (integer?, lowest allowed, highest allowed, unit, required).
FABRIC_SPEC: dict[str, dict[str, tuple[bool, float, float, str, bool]]] = {
    "node": {
        "gpus": (True, 1, 1024, "GPUs per node", True),
        "busbw_gbps": (False, 1e-3, 1e4, "GB/s, all-reduce bus bandwidth inside a node", True),
        "launch_us": (False, 0, 1e6, "µs per all-reduce call beyond NCCL's own latency", True),
        "copy_gbps": (False, 1e-3, 1e4, "GB/s, peer copies on copy engines", False),
        "nvls_algbw_gbps": (False, 1e-3, 1e4, "GB/s, NVLink SHARP all-reduce algbw in a node",
                            False),
    },
    "network": {
        "nics": (True, 1, 64, "NICs per node", True),
        "nic_gbps": (False, 1e-3, 1e4, "GB/s reached per NIC", True),
        "collnet_gbps": (False, 1e-3, 1e4, "GB/s per NIC of an all-reduce reduced in the "
                         "network's switches (CollNet, SHARP)", False),
    },
}
FABRIC_TOP_LEVEL = ("name", "description", *FABRIC_SPEC)
FABRIC_FILE = Declared.keys("fabric file", FABRIC_TOP_LEVEL)
