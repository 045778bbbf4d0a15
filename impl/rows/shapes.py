"""The shape language of a row's fields, and its one checker.

A shape is a string, a list or a dict:

- "num" a finite number, "int" an integer, "str" text, "bool" true or false, "any" any JSON
  value, "obj" any JSON object, "list" any JSON list; a trailing "?" allows null;
- Range("num" or "int", low, high): a number or an integer from low to high (a trailing "?"
  on the base allows null), for values whose bounds the readers rely on;
- [shape] a list whose every element has the shape ([shape, "?"] lets the list be null);
- {key: shape} an object with those keys (extra keys allowed); a key ending in "?" may be
  absent, "*" gives the shape of every value, and "?": True lets the object be null.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NUM, INT, TEXT, BOOL, ANY, OBJ, LIST = "num", "int", "str", "bool", "any", "obj", "list"


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_SCALARS = {
    NUM: lambda v: is_number(v) and math.isfinite(v),
    INT: lambda v: isinstance(v, int) and not isinstance(v, bool),
    TEXT: lambda v: isinstance(v, str),
    BOOL: lambda v: isinstance(v, bool),
    ANY: lambda v: True,
    OBJ: lambda v: isinstance(v, dict),
    LIST: lambda v: isinstance(v, list),
}


@dataclass(frozen=True)
class Range:
    """A number ("num") or an integer ("int") from ``low`` to ``high``; "num?" or "int?"
    also allows null."""

    base: str
    low: float
    high: float

    def words(self) -> str:
        kind = "an integer" if self.base.rstrip("?") == INT else "a number"
        return (f"{kind} from {self.low:g} to {self.high:g}"
                + (" or null" if self.base.endswith("?") else ""))

    def problem(self, value: object) -> str | None:
        """Why ``value`` is not in the range ("expected ..."), or None."""
        if value is None and self.base.endswith("?"):
            return None
        if (not _SCALARS[self.base.rstrip("?")](value)
                or (isinstance(value, float) and not math.isfinite(value))
                or not self.low <= value <= self.high):
            return f"expected {self.words()}"
        return None


def shape_error(value: object, shape: object, where: str) -> str | None:
    """Why ``value`` does not have ``shape``, or None when it does."""
    if isinstance(shape, Range):
        problem = shape.problem(value)
        return None if problem is None else f"{where} = {value!r:.60}; {problem}"
    if isinstance(shape, str):
        if shape.endswith("?"):
            return None if value is None else shape_error(value, shape[:-1], where)
        return None if _SCALARS[shape](value) else f"{where} = {value!r:.60}; expected {shape}"
    if isinstance(shape, list):
        if value is None and shape[1:] == ["?"]:
            return None
        if not isinstance(value, list):
            return f"{where} is {type(value).__name__}; expected a list"
        return next((e for i, item in enumerate(value)
                     if (e := shape_error(item, shape[0], f"{where}[{i}]"))), None)
    if value is None and shape.get("?"):
        return None
    if not isinstance(value, dict):
        return f"{where} is {type(value).__name__}; expected an object"
    for key, inner in shape.items():
        if key == "?":
            continue
        if key == "*":
            error = next((e for k, item in value.items()
                          if (e := shape_error(item, inner, f"{where}.{k}"))), None)
        elif key.endswith("?"):
            name = key[:-1]
            error = shape_error(value[name], inner, f"{where}.{name}") if name in value else None
        elif key not in value:
            error = f"{where} has no {key!r}"
        else:
            error = shape_error(value[key], inner, f"{where}.{key}")
        if error:
            return error
    return None


def nullable(shape: object) -> object:
    """``shape`` that also allows null."""
    if isinstance(shape, Range):
        return shape if shape.base.endswith("?") else Range(f"{shape.base}?", shape.low,
                                                             shape.high)
    if isinstance(shape, str):
        return shape if shape.endswith("?") else f"{shape}?"
    if isinstance(shape, list):
        return [shape[0], "?"]
    return {**shape, "?": True}


# Nested shapes that several kinds of row share.
INTERVAL = {"lane": TEXT, "label": TEXT, "chunk": "int?", "start_ms": NUM, "end_ms": NUM}
TIMELINE = {"intervals": [INTERVAL], "notes": [TEXT]}  # impl.timeline.Timeline.to_json
NVML_SERIES = {"t_s": [NUM], "series": {"*": [[NUM]]}}  # impl.sampler.Samples.to_json
NVML = {"mean?": {"*": ["num?"]}, "energy_j?": [NUM], "gpus?": [TEXT], "period_ms?": "num?",
        "energy_per_step_j?": "num?", "reason?": "str?", "series?": NVML_SERIES}
ESTIMATE = {"value": "num?", "low": "num?", "high": "num?", "rounds": INT}  # impl.stats.Estimate
OPTIONAL_ESTIMATE = nullable(ESTIMATE)
VERSUS = {"speedup": ESTIMATE, "difference_ms": ESTIMATE, "verdict": TEXT}  # comparisons.versus
MEASUREMENT = {"names": [TEXT], "steps_per_round": INT, "step_ms": {"*": [[NUM]]},
               "wall_s?": {"*": [NUM]}, "energy_j?": {"*": [NUM]}}  # impl.comparisons
