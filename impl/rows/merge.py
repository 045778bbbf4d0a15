"""Rows as the report and the cost model use them: one flat dict per benchmark, with
duplicates of one measurement merged (the newest run's row wins)."""

from __future__ import annotations

from collections.abc import Iterable

from impl.rows.kinds import ROW_KINDS


def benchmark_rows(machine: str, run: int, benchmarks: Iterable[dict]) -> list[dict]:
    """One flat row per benchmark: its extra_info plus machine, run index, round count and the
    per-round times in seconds (``round_s``, pytest-benchmark's stats.data, None when not
    saved). The suite's round plan (extra_info.rounds: warmup, rounds, steps per round) is
    kept as ``round_plan``: ``rounds`` is the count."""
    return [{**b["extra_info"], "machine": machine, "run": run, "name": b["name"],
             "rounds": b["stats"].get("rounds"), "round_s": b["stats"].get("data"),
             "round_plan": b["extra_info"].get("rounds")
             if isinstance(b["extra_info"].get("rounds"), dict) else None}
            for b in benchmarks]


def identity(row: dict) -> tuple:
    """What makes two rows the same measurement: its kind's declared identity
    (impl/rows/kinds.py), the benchmark's name for a kind this version does not declare."""
    kind = ROW_KINDS.get(row.get("kind"))
    values = kind.identity_of(row) if kind else (row.get("name"),)
    return (row["machine"], row.get("kind"), *values)


def merge_rows(rows: Iterable[dict]) -> list[dict]:
    """Rows with duplicates removed; pass them oldest run first, so the newest one wins."""
    merged: dict[tuple, dict] = {}
    for row in rows:
        merged[identity(row)] = row
    return list(merged.values())
