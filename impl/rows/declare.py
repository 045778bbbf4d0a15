"""How a kind of row is declared: its fields (name, unit, definition, shape) and its identity.

A row is one benchmark's ``extra_info``. The suite writes it through its kind
(``RowKind.check_written``: every field declared, the required ones present, each of its
shape), and the report, the gate and the cost model read it through the same declaration
(``RowKind.check_read``: older files may lack fields added since, or carry fields no longer
written, so reading asks only for the required fields and checks the shape of the declared
ones it finds).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from impl.rows.shapes import Range, is_number, shape_error


@dataclass(frozen=True)
class Field:
    """One field of a row: its unit ("" when none), definition, shape (impl/rows/shapes.py),
    range (RANGES: what its numbers can be) and label (a table's short header for it, where
    the report shows it in one; reports.format.Column.of).

    ``required``: every row of the kind has it, in every result file; ``written``: the suite
    still writes it (False: read from older files only).
    """

    name: str
    unit: str
    definition: str
    higher_is_better: bool | None = None
    shape: object = "any"
    required: bool = False
    written: bool = True
    range: str = "any"
    label: str = ""

    def __post_init__(self) -> None:
        if self.range not in RANGES:
            raise RowError(f"field {self.name!r}: range {self.range!r} is none of "
                           f"{', '.join(RANGES)}")

    def range_problem(self, value: float) -> str | None:
        """Why the number ``value`` (the field's own, or one in a list under it) is
        outside the field's range ("expected ..."), or None."""
        return RANGES[self.range](value)


# What a field's numbers can be, beyond their type. The report and the gate divide by steps,
# world sizes and micro-batch counts, so a zero there is no measurement (impl/rows/files.py
# checks every number of extra_info, at any depth, against the field its key names).
RANGES = {
    "any": lambda value: None,
    "positive": lambda value: None if value > 0 else "expected a number > 0",
    "non_negative": lambda value: None if value >= 0 else "expected a number >= 0",
    # ranks, chunks, stages, micro-batches, tensor shapes
    "count": lambda value: (None if isinstance(value, int) and value >= 1
                            else "expected an integer >= 1"),
}


class RowError(ValueError):
    """A row that does not match its kind's declaration; the message names the field."""


@dataclass(frozen=True)
class RowKind:
    """A kind of row: what one row is, the fields that make two rows the same measurement
    (``identity``: a newer run's row replaces an older one's; "name" is the benchmark's name,
    "has F" whether the row holds field F), and every field it holds."""

    name: str
    summary: str
    identity: tuple[str, ...]
    fields: tuple[Field, ...]

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        if doubled := sorted({n for n in names if names.count(n) > 1}):
            raise RowError(f"row kind {self.name!r} declares {', '.join(doubled)} twice")
        keys = {key.removeprefix("has ") for key in self.identity}
        if unknown := sorted(keys - set(names) - {"name"}):
            raise RowError(f"row kind {self.name!r}: identity names undeclared {unknown}")

    @property
    def by_name(self) -> dict[str, Field]:
        return {f.name: f for f in self.fields}

    @cached_property
    def names(self) -> Declared:
        """The declared field names as attributes: ``row[TENSOR_PARALLEL.names.preset]`` reads
        the field the declaration names, where a misspelt one raises AttributeError."""
        return Declared(self.name, {f.name: f.name for f in self.fields})

    @cached_property
    def field(self) -> Declared:
        """The declared fields as attributes: ``Column.of(HOST_ADAM.field.adam_gbps)``."""
        return Declared(self.name, self.by_name)

    def row(self, /, **values: object) -> dict:
        """A row of this kind: ``{"kind": name, **values}``. A keyword that is no declared
        field raises TypeError here, at the call site, before anything is measured in vain;
        write_row (impl/rows/write.py) checks the rest (required fields, shapes, ranges)."""
        declared = self.by_name
        if unknown := next((name for name in values if name not in declared), None):
            raise TypeError(f"row kind {self.name!r} declares no field {unknown!r}")
        return {"kind": self.name, **values}

    def holds(self, row: dict) -> bool:
        """Whether ``row`` is of this kind."""
        return row.get("kind") == self.name

    def field_problem(self, info: dict, field: Field) -> str | None:
        """Why ``info``'s value of ``field`` cannot be it (absent only where not required)."""
        if field.name not in info and not field.required:
            return None
        value, where = info.get(field.name), f"extra_info.{field.name}"  # absent reads as None
        if value is None and not field.required and _nullable(field.shape):
            return None
        if not _of_type(value, field.shape):
            return f"has {where} = {value!r:.60}; expected {_in_words(field.shape)}"
        if is_number(value) and not math.isfinite(value):
            return f"has {where} = {value!r}; expected a finite number"
        error = shape_error(value, field.shape, where)
        return None if error is None else f"has {error}"

    def fields_named(self, *names: str) -> tuple[Field, ...]:
        """The declared fields of these names, in this order (a study's table of figures)."""
        return tuple(self.by_name[name] for name in names)

    def identity_of(self, row: dict) -> tuple:
        """The values of ``identity`` in a row (impl.rows.merge.benchmark_rows)."""
        return tuple(key.removeprefix("has ") in row if key.startswith("has ") else row.get(key)
                     for key in self.identity)

    def check_read(self, info: dict) -> str | None:
        """Why a row read from a result file cannot be used, or None."""
        return next((p for f in self.fields if (p := self.field_problem(info, f))), None)

    def check_written(self, info: dict) -> str | None:
        """Why a row about to be written does not match the declaration, or None."""
        declared = self.by_name
        for name in info:
            if name == "kind":
                continue
            if name not in declared:
                return (f"writes extra_info.{name}, which the kind {self.name!r} does not "
                        f"declare (impl/rows/kinds.py; declared: {', '.join(sorted(declared))})")
            if not declared[name].written:
                return f"writes extra_info.{name}, which the kind {self.name!r} no longer writes"
        return self.check_read(info)


class Declared:
    """One kind's declared fields (or their names) as attributes (RowKind.names, .field), so
    that a reader names a field as an identifier the declaration checks, not a free string."""

    def __init__(self, kind: str, by_name: dict[str, object]) -> None:
        self._kind = kind
        self.__dict__.update(by_name)

    @classmethod
    def keys(cls, kind: str, names: Iterable[str]) -> Declared:
        """``names`` (a tuple of keys, or a shape whose optional keys end in "?") as attributes
        naming themselves: ``record[PAIRED.verdict]``."""
        return cls(kind, {name.removesuffix("?"): name.removesuffix("?") for name in names})

    def __getattr__(self, name: str) -> object:  # only for names not declared
        kind = self.__dict__.get("_kind")  # absent while a copy is being built
        raise AttributeError(f"row kind {kind!r} declares no field {name!r}")


def ranged_fields(kinds: Iterable[RowKind]) -> dict[str, Field]:
    """Each field name with a range other than "any", declared by any of ``kinds``, to its
    field; raises RowError where two declarations of one name disagree on its range (a value
    is judged by its name at any depth of a row, whatever its kind)."""
    ranges: dict[str, set[str]] = {}
    found: dict[str, Field] = {}
    for kind in kinds:
        for field in kind.fields:
            ranges.setdefault(field.name, set()).add(field.range)
            found.setdefault(field.name, field)
    if mixed := sorted(name for name, seen in ranges.items() if len(seen) > 1):
        raise RowError("fields declared with different ranges: " + ", ".join(
            f"{name} ({' and '.join(sorted(ranges[name]))})" for name in mixed))
    return {name: field for name, field in found.items() if field.range != "any"}


def _nullable(shape: object) -> bool:
    if isinstance(shape, Range):
        return shape.base.endswith("?")
    return (shape.endswith("?") if isinstance(shape, str) else
            shape[1:] == ["?"] if isinstance(shape, list) else bool(shape.get("?")))


_TYPES = {"num": (int, float), "int": (int, float), "str": str, "bool": bool, "obj": dict,
          "list": list, "any": object}


def _of_type(value: object, shape: object) -> bool:
    """Whether ``value`` is of the JSON type of ``shape``'s outer level (a finer problem is
    shape_error's to name)."""
    if isinstance(shape, Range):
        shape = shape.base
    base = shape.rstrip("?") if isinstance(shape, str) else "list" if isinstance(
        shape, list) else "obj"
    if base in ("num", "int") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[base])


_WORDS = {"num": "a number", "int": "a number", "str": "a string", "bool": "true or false",
          "obj": "an object", "list": "a list", "any": "a value"}


def _in_words(shape: object) -> str:
    if isinstance(shape, Range):
        return shape.words()
    base = shape.rstrip("?") if isinstance(shape, str) else "list" if isinstance(
        shape, list) else "obj"
    return _WORDS[base] + (" or null" if _nullable(shape) else "")
