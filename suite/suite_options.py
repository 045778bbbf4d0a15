"""The suite's pytest options and the values each allows: one definition.

conftest.py declares them to pytest and checks them in pytest_configure; suite/run.py checks
the same values before it launches anything (docs/inputs.md). Every
check raises ValueError with one line naming the option, the value and what is allowed.

    from suite.suite_options import check_suite_options
    choices = check_suite_options({"chunks": "1,10", "workloads": "mlp_tiny"})
    # {"suite_mode": "default", "strategies": None, "workloads": ["mlp_tiny"],
    #  "chunks": [1, 10], "world_sizes": None, "sampler_period_ms": 50.0,
    #  "deadline_multiple": 4.0, "deadline_floor_s": 60.0}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from impl.chunking import MAX_CHUNKS
from impl.presets import MODELS
from impl.sampler import DEFAULT_PERIOD_MS
from impl.strategies import STRATEGIES
from suite.deadline import DEFAULT_FLOOR_S, DEFAULT_MULTIPLE

SUITE_MODES = ("quick", "default", "full")
SAMPLER_PERIOD_MS = (1.0, 10_000.0)  # inclusive bounds of --sampler-period-ms
DEADLINE_MULTIPLE = (0.0, 1000.0)  # inclusive bounds of --deadline-multiple
DEADLINE_FLOOR_S = (1.0, 86_400.0)  # inclusive bounds of --deadline-floor-s


def _listed(option: str, text: str, convert: Callable[[str], object], allowed: str) -> list:
    """Comma-separated values of ``option``, each converted or refused naming ``allowed``."""
    values = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        try:
            values.append(convert(item))
        except ValueError:
            raise ValueError(f"--{option}: {item!r} is not {allowed}") from None
    if not values:
        raise ValueError(f"--{option}={text!r}: give at least one value ({allowed})")
    return values


def _one_of(choices) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if text not in choices:
            raise ValueError(text)
        return text
    return convert


def _integer_from(low: int, high: int | None = None) -> Callable[[str], int]:
    def convert(text: str) -> int:
        value = int(text)  # ValueError for "2.5", "x"
        if value < low or (high is not None and value > high):
            raise ValueError(text)
        return value
    return convert


def strategies(text: str) -> list[str]:
    return _listed("strategies", text, _one_of(STRATEGIES),
                   f"one of {', '.join(STRATEGIES)}")


def workloads(text: str) -> list[str]:
    return _listed("workloads", text, _one_of(MODELS), f"one of {', '.join(MODELS)}")


def chunks(text: str) -> list[int]:
    return _listed("chunks", text, _integer_from(1, MAX_CHUNKS),
                   f"an integer from 1 to {MAX_CHUNKS}")


def world_sizes(text: str) -> list[int]:
    return _listed("world-sizes", text, _integer_from(1), "an integer ≥ 1")


def _number_within(option: str, bounds: tuple[float, float], unit: str = "") -> Callable:
    low, high = bounds

    def check(value: str | float) -> float:
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not low <= number <= high:  # NaN fails both comparisons
            raise ValueError(f"--{option}={value!r}: choose a number from {low:g} to "
                             f"{high:g}{unit}")
        return number
    return check


sampler_period_ms = _number_within("sampler-period-ms", SAMPLER_PERIOD_MS, " ms")
deadline_multiple = _number_within("deadline-multiple", DEADLINE_MULTIPLE)
deadline_floor_s = _number_within("deadline-floor-s", DEADLINE_FLOOR_S, " s")


def suite_mode(text: str) -> str:
    if text not in SUITE_MODES:
        raise ValueError(f"--suite-mode={text!r}: choose one of {', '.join(SUITE_MODES)}")
    return text


@dataclass(frozen=True)
class SuiteOption:
    """A pytest option of the suite: its flag, default, help text and check."""

    flag: str
    default: str | float | None
    help: str
    check: Callable

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


SUITE_OPTIONS = (
    SuiteOption("--suite-mode", "default", "rounds and grid size: quick, default or full",
                suite_mode),
    SuiteOption("--strategies", None, f"comma-separated, from {', '.join(STRATEGIES)}",
                strategies),
    SuiteOption("--workloads", None, f"comma-separated presets, from {', '.join(MODELS)}",
                workloads),
    SuiteOption("--chunks", None, f"comma-separated chunk counts K, 1..{MAX_CHUNKS} "
                "(default 1,5,10,20,50)", chunks),
    SuiteOption("--world-sizes", None, "comma-separated world sizes (default 1,2,4,8; above "
                "the launched world they skip)", world_sizes),
    SuiteOption("--sampler-period-ms", DEFAULT_PERIOD_MS, "NVML sampling period in ms, "
                f"{SAMPLER_PERIOD_MS[0]:g} to {SAMPLER_PERIOD_MS[1]:g} (default "
                f"{DEFAULT_PERIOD_MS:g})", sampler_period_ms),
    SuiteOption("--deadline-multiple", DEFAULT_MULTIPLE, "a benchmark's deadline is this "
                "multiple of its expected time (suite/deadline.py), at least --deadline-floor-s; "
                f"{DEADLINE_MULTIPLE[0]:g} to {DEADLINE_MULTIPLE[1]:g} (default "
                f"{DEFAULT_MULTIPLE:g})", deadline_multiple),
    SuiteOption("--deadline-floor-s", DEFAULT_FLOOR_S, "the shortest deadline of a benchmark "
                f"in seconds, {DEADLINE_FLOOR_S[0]:g} to {DEADLINE_FLOOR_S[1]:g} (default "
                f"{DEFAULT_FLOOR_S:g})", deadline_floor_s),
)


def check_suite_options(given: Mapping[str, object]) -> dict:
    """Every suite option of ``given`` (keyed by dest) checked; absent or None: its default.

    Raises ValueError naming the first option whose value is not allowed.
    """
    checked = {}
    for option in SUITE_OPTIONS:
        value = given.get(option.dest)
        if value is None:
            value = option.default
        checked[option.dest] = None if value is None else option.check(value)
    return checked
