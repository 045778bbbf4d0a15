"""The hangs a results file names (``suite.hangs``, suite/hangs.py's entries): which benchmark
hung, on which ranks, as one line each for the appendix's runs and page 1's study lines.

    hang_text({"benchmark": "suite/bench_tp.py::test_tp[...]", "stuck": [1], "deadline_s": 60,
               "pass": "torchrun gloo-tcp", ...})
    # "suite/bench_tp.py::test_tp[...] hung on rank 1 (deadline 60 s, pass torchrun gloo-tcp)"
"""

from __future__ import annotations

from collections.abc import Sequence

from reports.runlogs import AFTER, hangs_of


def hang_text(hang: dict) -> str:
    """One line: the benchmark, the ranks the others waited for, the deadline or the stall."""
    benchmark = str(hang.get("benchmark"))
    stuck = [str(rank) for rank in hang.get("stuck") or sorted(hang.get("ranks") or {})]
    ranks = f"rank{'s' if len(stuck) > 1 else ''} {', '.join(stuck)}" if stuck else "no rank named"
    errors = {rank: where["failed"] for rank, where in (hang.get("ranks") or {}).items()
              if isinstance(where, dict) and "failed" in where}
    what = (f"stalled {benchmark}" if benchmark.startswith(AFTER)
            else f"{benchmark} raised on some ranks only" if errors
            else f"{benchmark} hung")
    why = ([f"rank {rank} raised {error}" for rank, error in errors.items()] if errors
           else [f"deadline {hang['deadline_s']:.0f} s"] if hang.get("deadline_s") else [])
    if hang.get("stalled"):
        why.append(f"the launcher ended the pass: {hang['stalled']}")
    if hang.get("pass"):
        why.append(f"pass {hang['pass']}")
    return f"{what} on {ranks}" + (f" ({'; '.join(why)})" if why else "")


def hangs_in(suite: dict, module: str, functions: Sequence[str]) -> list[str]:
    """The lines of the hangs in ``module``'s benchmarks named ``functions``."""
    found = []
    for hang in hangs_of(suite):
        benchmark = str(hang.get("benchmark")).removeprefix(AFTER)
        path, _, test = benchmark.partition("::")
        if path.endswith(f"{module}.py") and test.split("[")[0] in functions:
            found.append(hang_text(hang))
    return found
