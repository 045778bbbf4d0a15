"""No function of impl/, suite/ or reports/ is longer than 80 lines, read from the source with
``ast``: a longer one does several jobs, and each job reads better as a function of its own
(STYLE.md: "a 200-line timing function branching on global flags").

A function's length runs from its ``def`` line to its last line, docstring, comments and blank
lines included, decorators not; a nested function counts within the one that holds it too.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("impl", "suite", "reports")
MAX_LINES = 80
# Longer functions still to be split, by (file, function name): none may join.
LONG_ALLOWED: set[tuple[str, str]] = set()


Long = tuple[str, str, int]  # (path, function name, lines)


def long_functions(source: str, path: str, max_lines: int = MAX_LINES) -> list[Long]:
    """(path, function name, lines) of every function of ``source`` longer than ``max_lines``."""
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > max_lines:
                found.append((path, node.name, lines))
    return found


@functools.cache
def tree_long_functions() -> list[Long]:
    return [found for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
            for found in long_functions(path.read_text(encoding="utf-8"),
                                        path.relative_to(ROOT).as_posix())]


def statements(count: int, indent: int) -> str:
    return "".join(f"{' ' * indent}x{i} = {i}\n" for i in range(count))


def test_a_long_function_is_found_and_measured():
    # 4 lines and a decorator: the decorator does not count.
    assert long_functions("@staticmethod\ndef f():\n" + statements(3, 4), "m.py", 4) == []
    assert long_functions("def f():\n" + statements(4, 4), "m.py", 4) == [("m.py", "f", 5)]
    nested = lambda inner: "async def outer():\n    def inner():\n" + statements(inner, 8)
    assert long_functions(nested(3), "m.py", 5) == []
    assert long_functions(nested(4), "m.py", 5) == [("m.py", "outer", 6)]
    assert long_functions(nested(5), "m.py", 5) == [("m.py", "outer", 7), ("m.py", "inner", 6)]


def test_no_function_is_longer_than_80_lines():
    long = [f"{path}: {name} is {lines} lines" for path, name, lines in tree_long_functions()
            if (path, name) not in LONG_ALLOWED]
    assert not long, f"split by job, to at most {MAX_LINES} lines: " + "; ".join(long)


def test_the_allowed_long_functions_are_still_long():
    """An entry of LONG_ALLOWED goes once its function is split, so that it cannot grow back."""
    still_long = {(path, name) for path, name, _ in tree_long_functions()}
    stale = sorted(f"{path}: {name}" for path, name in LONG_ALLOWED - still_long)
    assert not stale, "no longer over 80 lines, remove from LONG_ALLOWED: " + "; ".join(stale)
