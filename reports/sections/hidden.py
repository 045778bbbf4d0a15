"""Page 1's one answer to "how much of the communication is hidden": one sentence per machine.

The machine of the newest run loaded (the run the user just made, or the newest of the files
given to ``nox -s report``) leads; the other machines follow, labelled as references. Each
sentence reads one headline row (headline.rows_of), the machine's first workload in the
registry's order with the most ranks, so no row is picked for its result, and states:

- the hidden communication fraction (HTA's definition): of the time the all-reduces take,
  the share that runs while compute runs, from the strategy's timeline;
- the time saved per step against sequential in the same rounds, in ms and as a share of
  sequential's step, each with its 95% interval;
- the overlap efficiency, the saving as a share of what a perfect overlap would save. It is
  below the hidden fraction when communication that overlaps compute slows that compute;
- in brackets, why the saving may not be overlap's: its interval includes 0 (no verdict), or
  DDP made fewer buckets than K (fewer, larger messages).

    answers = sentences(entries, runs)   # [{"label", "machine", "text"}], lead first
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.rows.gate_records import ESTIMATED
from impl.rows.kinds import COMPARISON, PAIRED
from reports import cells
from reports.captions import Machines, Run
from reports.format import fmt_estimate
from reports.sections.overlap import saved_pct
from reports.view import View

FABRICS = {"nvlink": "NVLink", "shm": "NCCL over shared memory (no peer-to-peer)",
           "socket": "NCCL over sockets", "gloo-tcp": "gloo over TCP"}
DEFINITIONS = (
    "Hidden communication fraction: the all-reduces' time that overlaps compute over their "
    "whole time, from the step's timeline (HTA's definition). Time saved: sequential's step "
    "minus the strategy's, in the same rounds. Overlap efficiency: (sequential − step) / "
    "(sequential − max(compute-only, comm-only)); below the hidden fraction when hidden "
    "communication slows the compute beside it.")


def lead_machine(runs: Sequence[Run], shown: set[str]) -> str | None:
    """The machine of the newest run that has a row on page 1."""
    dated = [run for run in runs if run.label in shown]
    newest = max(dated, key=lambda run: (run.created or "", run.index), default=None)
    return newest.label if newest else None


def in_reading_order(entries: Sequence[dict], lead: str | None) -> list[dict]:
    """The lead machine's rows first, the others in the report's machine order."""
    return sorted(entries, key=lambda e: e["cell"]["machine"] != lead)


def saved_ms(entry: dict) -> dict:
    """Sequential's step minus the strategy's: the paired difference, sign turned."""
    difference = entry["answer"]["figures"]["vs_sequential"][PAIRED.difference_ms]
    e = ESTIMATED
    turn = lambda x: None if x is None else -x
    return {e.value: turn(difference.get(e.value)), e.low: turn(difference.get(e.high)),
            e.high: turn(difference.get(e.low)), e.rounds: difference.get(e.rounds)}


def machine_words(entry: dict, machines: Machines) -> str:
    """"h200x2 (2× NVIDIA H200), NVLink, 2 GPUs" or "cpu-2core (AMD EPYC, 2 cores, no GPU),
    gloo over TCP, 2 ranks"."""
    cell = entry["cell"]
    ranks = "GPUs" if entry["gpu"] else "ranks"
    return (f"{machines.words[cell['machine']]}, "
            f"{FABRICS.get(cell['profile'], cell['profile'])}, {cell['world_size']} {ranks}")


def caveats(entry: dict) -> str:
    """What keeps the saving from reading as overlap's: an interval that includes 0 (no
    verdict), or DDP's fewer buckets than K (fewer, larger messages)."""
    verdict, said = entry["answer"]["figures"]["vs_sequential"][PAIRED.verdict], []
    if verdict == cells.NO_DIFFERENCE:
        said.append("the saving's interval includes 0: no verdict")
    elif verdict == "slower":
        said.append("slower than sequential: the interval excludes 0")
    buckets = cells.bucket_count(entry["cell"], entry["best"])
    if cells.other_chunking(entry["cell"], entry["best"]):
        said.append(f"{entry['best']} made {buckets} bucket(s), not K = "
                    f"{entry['cell']['chunks']}: its saving comes from fewer, larger messages, "
                    f"not from overlap")
    return "".join(f" ({text})" for text in said)


def sentence(entry: dict, machines: Machines) -> str:
    found = entry["answer"]["figures"]
    efficiency = (f"; overlap efficiency {fmt_estimate(entry['efficiency'])}"
                  if entry["efficiency"] else "")
    return (f"{machine_words(entry, machines)}, {entry['cell']['workload']} at K = "
            f"{entry['cell']['chunks']}: {entry['best']} hides "
            f"{fmt_estimate(found.get('hidden_comm_fraction'))} of the communication (hidden "
            f"communication fraction) and saves {fmt_estimate(saved_ms(entry))} ms per step, "
            f"{fmt_estimate(saved_pct(found['vs_sequential']['speedup']))}% of sequential's "
            f"step{efficiency}{caveats(entry)}.")


def representative(entries: Sequence[dict], machine: str) -> dict:
    """The row a machine's sentence reads: its first workload in the registry's order among
    its cells with the most ranks (module docstring)."""
    return min((e for e in entries if e["cell"]["machine"] == machine),
               key=lambda e: (-e["cell"][COMPARISON.names.world_size],
                              cells.workload_rank(e["cell"][COMPARISON.names.workload])))


def sentences(entries: Sequence[dict], view: View) -> list[dict]:
    """One sentence per machine, the lead machine's first, then the others in the order of
    ``entries`` (module docstring)."""
    lead = lead_machine(view.runs, {e["cell"]["machine"] for e in entries})
    machines = dict.fromkeys(e["cell"]["machine"] for e in in_reading_order(entries, lead))
    return [{"label": "Newest run" if machine == lead else "Reference", "machine": machine,
             "text": sentence(representative(entries, machine), view.machines)}
            for machine in machines]
