"""The import graph of impl/, suite/ and reports/, read from the source with ``ast``: no module
imports itself through others (no circle), and the layers import downward only.

The layers, bottom up: impl (the engine and the studies' code), suite (the benchmarks and the
launcher, which measure impl), reports (the report builder and the gate, which read what the
suite wrote and may run its harness: reports/gate/trials.py). No exception: the result row
and the result-file reader live at the bottom, in impl/rows, which the suite writes through
and the report, the gate and the cost model read through.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("impl", "suite", "reports")
LAYER = {package: rank for rank, package in enumerate(PACKAGES)}  # may import its own or lower


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES
            for path in sorted((ROOT / package).rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> list[tuple[str, bool]]:
    """(module of this tree it imports, whether at module level), from the source. ``from P
    import X`` imports P.X where that is a module, else P; a relative import is resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # import a.b.c of a module a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                found.append((target, id(node) in top_level))
    return found


def graph() -> dict[str, dict[str, bool]]:
    """importer -> {imported: at module level (or else only inside a function)}."""
    found = modules()
    edges: dict[str, dict[str, bool]] = {}
    for name, path in found.items():
        mine = edges.setdefault(name, {})
        for target, top in imports_of(name, path, set(found)):
            mine[target] = mine.get(target, False) or top
    return edges


def find_circle(edges: dict[str, dict[str, bool]]) -> list[str] | None:
    """One circle of imports as [a, b, ..., a], or None (depth-first search, iterative)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(edges):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(edges[start]))]
        state[start] = 1
        while stack:
            target = next(stack[-1], None)
            if target is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(target) == 1:
                return [*path[path.index(target):], target]
            elif not state.get(target):
                state[target] = 1
                path.append(target)
                stack.append(iter(sorted(edges.get(target, {}))))
    return None


def test_the_graph_is_read_from_the_tree():
    edges = graph()
    assert {"impl.strategies.base", "reports.gate.cli", "suite.harness"} <= set(edges)
    assert edges["reports.gate.cli"]["reports.gate.comparison"] is True
    assert edges["impl.strategies.base"]["impl.strategies.options"] is True
    assert edges["reports.gate.trials"]["impl.rows.files"] is False  # inside a function


def test_a_circle_is_found_and_named():
    assert find_circle({"a": {"b": True}, "b": {"c": True}, "c": {"a": False}}) == [
        "a", "b", "c", "a"]
    assert find_circle({"a": {"b": True}, "b": {}, "c": {"b": True}}) is None


def test_no_module_imports_itself_through_others():
    circle = find_circle(graph())
    assert circle is None, "import circle: " + " -> ".join(circle)


def folder_of(name: str) -> str:
    """The folder a module belongs to for the folder circles: its subpackage of impl, suite or
    reports (impl.rows.kinds -> impl.rows), or the module itself when it sits directly in one
    (impl.metrics)."""
    return ".".join(name.split(".")[:2])


def folder_graph(edges: dict[str, dict[str, bool]]) -> dict[str, dict[str, bool]]:
    folders: dict[str, dict[str, bool]] = {}
    for importer, targets in edges.items():
        mine = folders.setdefault(folder_of(importer), {})
        for imported, top_level in targets.items():
            if folder_of(imported) != folder_of(importer):
                mine[folder_of(imported)] = mine.get(folder_of(imported), False) or top_level
    return folders


def test_a_circle_between_folders_is_found():
    # impl.rows.kinds imported the step fields from impl.metrics, which imported Field from
    # impl.rows.declare: no module circle, but the two import each other.
    edges = {"impl.rows.kinds": {"impl.metrics": True}, "impl.rows.declare": {},
             "impl.metrics": {"impl.rows.declare": True}}
    assert find_circle(edges) is None
    assert find_circle(folder_graph(edges)) == ["impl.metrics", "impl.rows", "impl.metrics"]


def test_no_folder_imports_itself_through_others():
    """A package (impl/rows, reports/gate) and the modules beside it import each other one way
    only, so either can be read, moved or tested without the other."""
    circle = find_circle(folder_graph(graph()))
    assert circle is None, "import circle between folders: " + " -> ".join(circle)


def test_the_row_imports_nothing_above_it():
    """impl/rows is the bottom of the tree: it imports no other module of impl, suite or
    reports (the metric definitions it declares live in impl/rows/metric_fields.py)."""
    outside = sorted(f"{importer} imports {imported}"
                     for importer, targets in graph().items() if folder_of(importer) == "impl.rows"
                     for imported in targets if folder_of(imported) != "impl.rows")
    assert not outside, "; ".join(outside)


def test_imports_run_down_the_layers():
    upward = []
    for importer, targets in graph().items():
        for imported, top_level in targets.items():
            if LAYER[imported.split(".")[0]] <= LAYER[importer.split(".")[0]]:
                continue
            upward.append(f"{importer} imports {imported}"
                          + (" at module level" if top_level else ""))
    assert not upward, "imports that run up the layers (impl < suite < reports): " + "; ".join(
        sorted(upward))


def test_the_row_is_torch_free():
    """impl/rows is at the bottom: the report, the gate and the cost model read result files
    through it on machines without torch."""
    code = ("import sys, impl.rows.files, impl.rows.merge, impl.rows.write; "
            "print('torch' in sys.modules)")
    found = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                           text=True, check=True)
    assert found.stdout.strip() == "False"
