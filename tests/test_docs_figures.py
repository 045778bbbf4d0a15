"""The figures the README and docs/ quote stay true: a setting they state is the code's own
constant, and no page carries a measured duration, test count or page count typed by hand
(those change with every run; the report and the commands that regenerate them give them).
docs/hybrid.md, docs/gemm.md and docs/costmodel.md hold measured tables that name their
source file and command, and docs/ANCHORS.md the dated reference measurements the suite is
held against; they are left out of the second check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from impl import dist
from suite import deadline, launch, pass_watch, watchdog

ROOT = Path(__file__).resolve().parents[1]
MEASURED_TABLE_PAGES = {"docs/hybrid.md", "docs/gemm.md", "docs/costmodel.md", "docs/ANCHORS.md"}
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix()
                              for p in (ROOT / "docs").glob("*.md"))]


def text(page: str) -> str:
    """The page with its lines joined: a phrase may wrap."""
    return " ".join((ROOT / page).read_text().split())


def test_the_deadlines_the_failures_page_states_are_the_codes():
    page = text("docs/failures.md")
    nccl_rates = {k: v for k, v in deadline.ALL_REDUCE_BYTES_PER_S.items()
                  if k not in ("gloo-tcp", deadline.MPI_STAGED)}
    for phrase in (
        f"multiple {deadline.DEFAULT_MULTIPLE:g} and floor {deadline.DEFAULT_FLOOR_S:g} s",
        f"expected to take up to {deadline.DEFAULT_FLOOR_S / deadline.DEFAULT_MULTIPLE:g} s a "
        f"minute",
        f"{deadline.CPU_FLOPS / 1e9:g} GFLOP/s per CPU rank",
        f"{deadline.GPU_SHARE_OF_PEAK:.0%} of a GPU's dense peak",
        f"all-reduces at {deadline.ALL_REDUCE_BYTES_PER_S['gloo-tcp'] / 1e9:g} GB/s over gloo",
        f"{min(v for k, v in nccl_rates.items()) / 1e9:g}"
        f" to {max(nccl_rates.values()) / 1e9:g} GB/s over NCCL",
        f"{deadline.ALL_REDUCE_BYTES_PER_S[deadline.MPI_STAGED] / 1e9:g} GB/s for the mpi "
        "strategy on GPUs",
        f"{deadline.DEFAULT_EXPECTED_S[False, 'quick']:g} to "
        f"{deadline.DEFAULT_EXPECTED_S[False, 'full']:g} s by mode on a CPU",
        f"{deadline.DEFAULT_EXPECTED_S[True, 'quick']:g} to "
        f"{deadline.DEFAULT_EXPECTED_S[True, 'full']:g} s on GPUs",
        f"+ {pass_watch.START_MARGIN_S:g} s to start",
        f"+ {pass_watch.END_MARGIN_S:g} s to end",
        f"plus {pass_watch.START_MARGIN_S:g} s to start and {pass_watch.END_MARGIN_S:g} s to end",
        f"the longest deadline plus {watchdog.GRACE_S + watchdog.BACKSTOP_S:g} s",
        f"{dist.DEFAULT_TIMEOUT_S} s outside benchmark runs",
        f"waits up to {watchdog.GRACE_S:g} s for the other ranks",
        f"exits {watchdog.HANG_EXIT}",
        f"still running {pass_watch.END_MARGIN_S:g} s later ({pass_watch.HANG_END_MARGIN_S:g} s "
        f"where a hang record exists)",
        f"or {pass_watch.SESSION_END_MARGIN_S:g} s later where rank 0",
        f"SIGKILL after {launch.GRACE_S:g} s",
        f"SIGKILL to any left after {launch.GRACE_S:g} s",
    ):
        assert phrase in page, phrase


def test_the_inputs_page_states_the_codes_defaults():
    page = text("docs/inputs.md")
    assert (f"defaults {deadline.DEFAULT_MULTIPLE:g} and {deadline.DEFAULT_FLOOR_S:g}"
            in page)
    assert (f"the longest deadline plus {watchdog.GRACE_S + watchdog.BACKSTOP_S:g} s, "
            f"elsewhere {dist.DEFAULT_TIMEOUT_S}") in page


# A measured duration ("took 22 s", "in 14:25"), a test tally ("511 passed") or a page count
# ("a 57-page report") goes stale with the next run.
HAND_TYPED = re.compile(r"\btook \d|(?<![\d:])\d+:\d\d(?![\d:])|\b\d+ (passed|skipped|failed)\b|"
                        r"\b\d+[- ]pages?\b|\babout \d+(\.\d+)? (s|min|minutes|seconds)\b")


@pytest.mark.parametrize("page", [p for p in PAGES if p not in MEASURED_TABLE_PAGES])
def test_no_page_carries_a_hand_typed_measurement(page):
    found = [m.group(0) for m in HAND_TYPED.finditer(text(page))]
    assert found == [], f"{page}: {found}"
