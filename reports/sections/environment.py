"""Environment and GPU topology (templates sections/environment.html.j2 and topology.html.j2):
each machine's fingerprint (GPUs and their limits, driver, libraries, commit), partial runs, the
kinds of rows the report has no section for, and ``nvidia-smi topo -m`` where recorded.
"""

from __future__ import annotations

import re
from collections import Counter

from impl.rows.gate_records import MACHINE
from reports import analysis
from reports.captions import runs_of
from reports.format import Cell, Table, fmt
from reports.sections import appendix
from reports.view import View

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


# Per-GPU limits of the fingerprint (``gpu_limits``, impl/fingerprint.py), shown where a run
# recorded them.
GPU_FIELDS = (("power limit (W)", "power_limit_w"), ("max SM clock (MHz)", "max_sm_clock_mhz"),
              ("max memory clock (MHz)", "max_mem_clock_mhz"), ("SM clock (MHz)", "sm_clock_mhz"),
              ("memory clock (MHz)", "mem_clock_mhz"))


def per_gpu(limits: list[dict] | None, key: str) -> str | None:
    """One field of every GPU as "700 (×4)" when all agree, else each value; None when no GPU
    recorded it."""
    values = [gpu.get(key) for gpu in limits or []]
    if all(v is None for v in values):
        return None
    shown = [fmt(v) if v is not None else "n/a" for v in values]
    return f"{shown[0]} (×{len(shown)})" if len(set(shown)) == 1 else ", ".join(shown)


def section_environment(view: View) -> dict:
    rows, runs = view.rows, view.runs
    labels = view.machines.labels
    newest = {label: runs_of(label, runs)[-1] for label in labels}

    def value(label: str, key: str) -> str:
        fp = newest[label].fingerprint
        if key == "gpus":
            gpus = Counter(fp.get("gpu_names") or [])
            return ", ".join(f"{n}× {name}" for name, n in gpus.items()) or "none"
        if key == "cpu":
            return f"{fp.get('cpu_model') or 'n/a'}, {fp.get('cpu_cores') or '?'} cores"
        if key == "git":
            return "; ".join(f"{appendix.commit_text(r.fingerprint)}"
                             for r in runs_of(label, runs))
        if key == "profiles":
            return ", ".join(analysis.profiles(rows).get(label, [])) or "n/a"
        if key == "files":
            return "; ".join(f"{r.path}{' (partial)' if r.partial else ''}"
                             for r in runs_of(label, runs))
        if key in dict(GPU_FIELDS).values():
            return per_gpu(fp.get("gpu_limits"), key) or "n/a"
        found = fp.get(key)
        return "n/a" if found in (None, "", []) else str(found)

    # (header, key): a fingerprint's own key (MACHINE) or one that value() composes
    fields = [("GPUs", "gpus"), ("driver", MACHINE.driver), ("CUDA", MACHINE.cuda),
              ("NCCL", MACHINE.nccl), ("torch", MACHINE.torch), ("MPI", MACHINE.mpi),
              ("CPU", "cpu"), ("Python", MACHINE.python), ("backend", MACHINE.backend),
              ("profiles measured", "profiles")]
    fields += [(name, key) for name, key in GPU_FIELDS
               if any(per_gpu(newest[label].fingerprint.get("gpu_limits"), key)
                      for label in labels)]
    fields += [("git commit", "git"), ("result files", "files")]
    table = Table("tab-environment", "Environment of each machine, from the newest result "
                  "file's fingerprint (machine_info.overlap); git commit per file. Each run's "
                  "command lines per pass are in the appendix.", ["", *labels],
                  [[Cell(name), *(Cell(value(label, key)) for label in labels)]
                   for name, key in fields], [], [False] * (len(labels) + 1))
    partial = [{"label": r.label, "path": r.path, "failed": ", ".join(r.failed_passes),
                "note": r.note} for r in runs if r.partial]
    topology = [{"label": label,
                 "text": _ANSI.sub("", newest[label].fingerprint.get("gpu_topology") or "")}
                for label in labels if newest[label].fingerprint.get("gpu_topology")]
    return {"empty": not runs, "table": table, "partial": partial, "topology": topology,
            "unknown_kinds": analysis.unknown_kinds(rows)}


def section_topology(view: View) -> dict:
    """The appendix of nvidia-smi topo -m: its template reads the environment's ``topology``."""
    return {"empty": not view.built["environment"]["topology"]}
