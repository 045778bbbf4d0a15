"""What no result file may hold, found in the parsed JSON before any field is read: numbers
that are not finite (NaN, Infinity, beyond the float range, integers too long for a float) and
text that is not valid Unicode (a lone surrogate), each named with its place in the document.
impl/rows/files.py reads files through these.
"""

from __future__ import annotations

import math
import re


class LongInteger(float):
    """A JSON integer longer than 19 characters, held as a float (inf beyond the float range).

    Python's int() refuses 4300+ digits without naming the field, and a 400-digit int
    overflows the first float operation; as a float first_bad_value names it.
    """

    def __new__(cls, text: str) -> LongInteger:
        value = super().__new__(cls, text)
        value.digits = len(text.lstrip("-"))
        return value

    def __repr__(self) -> str:
        return f"an integer of {self.digits} digits"


def parse_int(text: str) -> int | float:
    return int(text) if len(text) <= 19 else LongInteger(text)


def first_bad_value(document: object) -> str | None:
    """The first value no result file may hold, described with its place in the document.

    Not finite numbers (NaN, Infinity, beyond the float range) and text that is not valid
    Unicode (a lone surrogate such as "\\ud800", which no UTF-8 output can hold), in keys too.
    Iterative: the depth of a document must not matter.
    """
    todo: list[tuple[str, object]] = [("", document)]
    while todo:
        where, value = todo.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return (f"{where or 'the document'} = {value!r}; expected a finite number "
                    "(within ±1.8e308)")
        if isinstance(value, str) and not is_unicode(value):
            return f"{where or 'the document'} = {value!r:.80}; not valid Unicode text"
        if isinstance(value, dict):
            for key, item in value.items():
                if not is_unicode(key):
                    return f"{where or 'the document'} has the key {key!r:.80}; not valid text"
                todo.append((f"{where}.{key}" if where else key, item))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                # Plain floats (round times: most of a file) are judged here, without a place
                # made for each: x - x is 0.0 for every finite float, NaN otherwise.
                if type(item) is not float:
                    todo.append((f"{where}[{index}]", item))
                elif item - item != 0.0:
                    return (f"{where}[{index}] = {item!r}; expected a finite number "
                            "(within ±1.8e308)")
    return None


def with_benchmark_name(document: dict, problem: str) -> str:
    """``problem`` led by the benchmark's name when it lies inside ``benchmarks[i]``."""
    index = re.match(r"benchmarks\[(\d+)\]", problem)
    try:
        name = document["benchmarks"][int(index[1])]["fullname"]
    except (TypeError, LookupError, ValueError):
        return problem
    return f"benchmark {name!r}: {problem}" if is_unicode(str(name)) else problem


def is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
