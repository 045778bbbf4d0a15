"""What every section's captions say about where and how a number was measured.

A caption names the machine (label and GPUs), the command and mode of the run, and the
rounds; these helpers are shared by the sections (reports/sections/).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reports import figures


@dataclass(frozen=True)
class Run:
    """One result file as the report describes it."""

    index: int
    label: str
    path: str
    command: str  # as recorded (suite.command), wrappers such as timeout included
    launcher: str  # the suite's own command line (suite.launcher_command), for captions
    mode: str | None
    partial: bool
    created: str | None
    fingerprint: dict
    failed_passes: tuple[str, ...] = ()
    note: str | None = None
    passes: tuple[dict, ...] = ()  # suite.passes: each pass's name, command line, env, exit
    kinds: tuple[tuple[str, int], ...] = ()  # rows per extra_info.kind in the file
    hangs: tuple[dict, ...] = ()  # suite.hangs: the benchmarks that hung, and on which ranks


@dataclass(frozen=True)
class Figure:
    id: str
    src: str  # data URI
    caption: str
    alt: str


def runs_of(label: str, runs: Sequence[Run]) -> list[Run]:
    return [r for r in runs if r.label == label]


def machine_text(label: str, runs: Sequence[Run]) -> str:
    """"h200x4 (4× NVIDIA H200)" or "cpu-2core (AMD EPYC, 2 cores, no GPU)", from the newest
    run's fingerprint."""
    fingerprint = runs_of(label, runs)[-1].fingerprint
    gpus = Counter(fingerprint.get("gpu_names") or [])
    if gpus:
        return f"{label} ({', '.join(f'{n}× {name}' for name, n in gpus.items())})"
    cpu = fingerprint.get("cpu_model") or "CPU"
    cores = fingerprint.get("cpu_cores")
    return f"{label} ({cpu}{f', {cores} cores' if cores else ''}, no GPU)"


def how_text(rows: Sequence[dict], runs: Sequence[Run]) -> str:
    """The command(s), mode(s) and round counts the rows were measured with."""
    used = [runs[i] for i in sorted({r["run"] for r in rows})]
    commands = "; ".join(dict.fromkeys(f"{run.launcher} ({run.mode or 'unknown'} mode)"
                                       for run in used))
    rounds = sorted({r["rounds"] for r in rows if r.get("rounds") is not None})
    counted = (f"{rounds[0]}" if len(rounds) == 1 else f"{rounds[0]}–{rounds[-1]}"
               ) if rounds else "an unknown number of"
    return f"Run by {commands}; {counted} timed rounds per benchmark."


@dataclass(frozen=True)
class Machines:
    """The loaded runs' machines, derived once for every section (reports/view.py): their
    labels in report order (GPU machines first, most GPUs first, then CPU machines), those
    where a run had GPUs, and each one in words (machine_text)."""

    labels: tuple[str, ...]
    gpu: frozenset[str]
    words: Mapping[str, str]

    @classmethod
    def of(cls, runs: Sequence[Run]) -> Machines:
        gpus = {r.label: len(r.fingerprint.get("gpu_names") or []) for r in runs}
        labels = tuple(sorted(gpus, key=lambda label: (-gpus[label], label)))
        return cls(labels, frozenset(r.label for r in runs if r.fingerprint.get("gpu_names")),
                   {label: machine_text(label, runs) for label in labels})

    def in_order(self, items: Iterable) -> list:
        """Items with a "machine" key in this order (stable within a machine)."""
        order = {label: index for index, label in enumerate(self.labels)}
        return sorted(items, key=lambda item: order.get(item["machine"], len(order)))


def make_figure(figure_id: str, image: figures.Image, caption: str, alt: str) -> Figure:
    return Figure(figure_id, figures.data_uri(image), caption, alt)


def and_list(words: Sequence[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    words = list(words)
    if not words:
        return ""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
