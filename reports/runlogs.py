"""What a benchmark run's log says about how it ended: pure functions of the log's text.

The device logs kept beside the results (``results/<label>/logs/*.log``) are the console
output of ``python -m suite.run``: an optional ``# machine: command`` header, one
``[suite] torchrun …`` / ``[suite] mpirun …`` line per pass with its pytest command, pytest's
verbose lines (``suite/bench_x.py::test_x[id] PASSED``), its summary
(``=== 20 passed, 4 skipped in 28.05s ===``) and ``[suite] wrote [PARTIAL] PATH (N
benchmarks)``. A run stopped from outside (a ``timeout``) shows torchrun's ``Received 15 death
signal`` instead of a summary. The report reads them to say why a study has no GPU result.

    log = read_log(text, "results/h200x2/logs/20261123T0957-pipeline-bench-hung.log")
    log.ended      # "stopped by signal 15 (timeout 250 s) during the pipeline benchmark ..."
    selects(log.selection, "bench_pipeline.py", "test_pipeline")   # True
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PASS_LINE = re.compile(r"^\[suite\] (torchrun|mpirun)[^:]*: (.*)$")
TEST_LINE = re.compile(r"^(suite/[\w./-]+\.py::\S+)(?: (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS))?")
SUMMARY = re.compile(r"^=+ (.*\bin [\d.]+s\b.*?) =+$")
WROTE = re.compile(r"^\[suite\] wrote (PARTIAL )?(\S+) \((\d+) benchmarks\)")
SIGNAL = re.compile(r"Received (\d+) death signal")
TIMEOUT = re.compile(r"\btimeout (\d+)\b")
MODULE = re.compile(r"\bsuite/(bench_\w+)\.py\b")
SELECTION = re.compile(r"(?:^|\s)-k\s+(?:'([^']*)'|\"([^\"]*)\"|(\S+))")
TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


@dataclass(frozen=True)
class BenchLog:
    """One benchmark run's log, as far as the report needs it."""

    path: str
    header: str | None  # the "# ..." line a person wrote above the output, without the "# "
    selection: str | None  # pytest's -k expression, None when the run selected everything
    tests: tuple[tuple[str, str | None], ...] = ()  # (test id, outcome or None: never ended)
    summary: str | None = None  # pytest's last summary line ("20 passed, 4 skipped in 28s")
    signal: int | None = None  # the signal that stopped torchrun from outside
    timeout_s: int | None = None  # the `timeout N` the header's command ran under
    wrote: str | None = None  # the results file the launcher wrote
    partial: bool = False  # ... marked partial
    failed: tuple[str, ...] = field(default=())  # test ids that FAILED or ERRORed
    modules: tuple[str, ...] = ()  # the benchmark modules its passes collected ("bench_tp")

    @property
    def finished(self) -> bool:
        """Whether the run wrote a complete results file with no failed benchmark."""
        return self.wrote is not None and not self.partial and not self.failed

    @property
    def last_test(self) -> str | None:
        """The last benchmark that started (the one a hang happened in, if it never ended)."""
        return self.tests[-1][0] if self.tests else None

    @property
    def ended(self) -> str:
        """How the run ended, in words: "finished", "stopped by signal 15 (timeout 250 s)
        during the x benchmark ...", "3 benchmark(s) failed, first the x benchmark ...", ..."""
        if self.finished:
            return "finished"
        last = self.last_test
        open_test = last is not None and self.tests[-1][1] is None
        where = f" during {short_id(last)}" if open_test else (
            f" after {short_id(last)}" if last else " before its first benchmark")
        if self.signal is not None:
            limit = f" (timeout {self.timeout_s} s)" if self.timeout_s else ""
            return f"stopped by signal {self.signal}{limit}{where}"
        if self.failed:
            return (f"{len(self.failed)} benchmark(s) failed, first "
                    f"{short_id(self.failed[0])}")
        if self.partial:
            return "wrote a partial results file"
        return f"ended without a results file{where}"


def short_id(test_id: str) -> str:
    """A benchmark in words: ``suite/bench_pipeline.py::test_pipeline[a-b]`` -> "the pipeline
    benchmark a-b" (its parameters as pytest names them, so `-k a-b` finds it)."""
    name = test_id.split("::")[-1]
    found = re.fullmatch(r"test_(\w+?)(?:\[(.*)\])?", name)
    if found is None:
        return name
    study = f"the {found[1].replace('_', ' ')} benchmark"
    return f"{study} {found[2]}" if found[2] else study


def selection_of(command: str) -> str | None:
    """The -k expression of a command line, or None."""
    found = SELECTION.search(command)
    return None if found is None else next(g for g in found.groups() if g is not None)


def is_bench_log(text: str) -> bool:
    """A log of python -m suite.run (it launched at least one pass)."""
    return any(PASS_LINE.match(line) for line in text.splitlines())


def read_log(text: str, path: str) -> BenchLog:
    """Everything ``BenchLog`` holds, from the log's text."""
    lines = text.splitlines()
    header = lines[0][2:].strip() if lines and lines[0].startswith("# ") else None
    selection = None
    modules: dict[str, None] = {}
    tests: dict[str, str | None] = {}
    summary = wrote = None
    partial = False
    signal = None
    for line in lines:
        if found := PASS_LINE.match(line):
            selection = selection or selection_of(found.group(2))
            modules.update(dict.fromkeys(MODULE.findall(found.group(2))))
        elif found := TEST_LINE.match(line):
            outcome = found.group(2)
            if outcome or found.group(1) not in tests:
                tests[found.group(1)] = outcome
        elif found := SUMMARY.match(line):
            summary = found.group(1)
        elif found := WROTE.match(line):
            partial, wrote = bool(found.group(1)), found.group(2)
        if found := SIGNAL.search(line):
            signal = int(found.group(1))
    if selection is None and header:
        selection = selection_of(header)
    timeout = TIMEOUT.search(header or "")
    return BenchLog(path, header, selection, tuple(tests.items()), summary, signal,
                    int(timeout.group(1)) if timeout else None, wrote, partial,
                    tuple(t for t, outcome in tests.items() if outcome in ("FAILED", "ERROR")),
                    tuple(modules))


def targets(log: BenchLog, module: str, functions: tuple[str, ...]) -> bool:
    """Whether the run meant to measure a benchmark module: its passes collected the module
    and the -k expression selects one of its test functions."""
    return module in log.modules and any(selects(log.selection, f"{module}.py", function)
                                         for function in functions)


def unfinished(log: BenchLog, module: str) -> str | None:
    """How a run that selected ``module`` failed it, or None when the module's benchmarks all
    ended (passed or skipped) or the whole run finished."""
    mine = [(test, outcome) for test, outcome in log.tests
            if test.startswith(f"suite/{module}.py::")]
    if any(outcome in (None, "FAILED", "ERROR") for _, outcome in mine):
        return log.ended
    if not mine and not log.finished:
        return f"{log.ended}, before any {module} benchmark started"
    return None


def pass_targets(command: str, module: str, functions: tuple[str, ...]) -> bool:
    """Whether a pass's pytest command collected ``module`` and its -k selects it."""
    return f"suite/{module}.py" in command and any(
        selects(selection_of(command), f"{module}.py", f) for f in functions)


# --- pytest's -k expressions --------------------------------------------------------------------


def selects(expression: str | None, *names: str) -> bool:
    """Whether pytest's ``-k expression`` selects a test whose names (module file, function)
    are ``names``: ``and``, ``or``, ``not`` and parentheses over case-insensitive substring
    matches, as pytest evaluates it. No expression selects everything."""
    if not expression or not expression.strip():
        return True
    tokens = TOKEN.findall(expression)
    lowered = [n.lower() for n in names]

    def parse_binary(i: int, word: str, operand) -> tuple[bool, int]:
        """``operand (word operand)*``, "or" binding looser than "and"."""
        value, i = operand(i)
        while i < len(tokens) and tokens[i] == word:
            right, i = operand(i + 1)
            value = (value or right) if word == "or" else (value and right)
        return value, i

    def parse_or(i: int) -> tuple[bool, int]:
        return parse_binary(i, "or", lambda j: parse_binary(j, "and", parse_not))

    def parse_not(i: int) -> tuple[bool, int]:
        if i >= len(tokens):
            raise ValueError(f"-k {expression!r}: ends where a name was expected")
        if tokens[i] == "not":
            value, i = parse_not(i + 1)
            return not value, i
        if tokens[i] == "(":
            value, i = parse_or(i + 1)
            if i >= len(tokens) or tokens[i] != ")":
                raise ValueError(f"-k {expression!r}: a '(' is never closed")
            return value, i + 1
        return any(tokens[i].lower() in name for name in lowered), i + 1

    value, end = parse_or(0)
    if end != len(tokens):
        raise ValueError(f"-k {expression!r}: unexpected {tokens[end]!r}")
    return value


AFTER = "after "  # a stall after a benchmark (suite/hangs.py's AFTER)


def hangs_of(suite: dict) -> list[dict]:
    """The hangs a results file names (``suite.hangs``, suite/hangs.py's entries)."""
    return [hang for hang in suite.get("hangs") or [] if isinstance(hang, dict)]
