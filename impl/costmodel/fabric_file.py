"""Fabric files: a small TOML file per fabric, every number with its source.

    [node]
    gpus = { value = 8, source = "HGX H200: 8 GPUs per NVSwitch node" }
    busbw_gbps = { value = 349, source = "4x H200, torch.distributed, 1 GiB: docs/ANCHORS.md" }
    launch_us = { value = 1.3, source = "fit to the all-reduce sweep of results/h200x4" }
    copy_gbps = { value = 390, source = "..." }        # optional: the copy-engine strategy
    nvls_algbw_gbps = { value = 275, source = "..." }  # optional: NVLink SHARP (NVSwitch)

    [network]                                          # optional: none means one node only
    nics = { value = 8, source = "one NIC per GPU" }
    nic_gbps = { value = 47, source = "NDR 400 Gb/s: 46-48 GB/s per NIC, nccl-tests #290" }
    collnet_gbps = { value = 40, source = "..." }      # optional: SHARP in the switches

``load_fabric("ib400-h200x8")`` reads fabrics/ib400-h200x8.toml of this repository; a path to
a ``.toml`` file works too. Anything wrong stops with one line naming the file, the value and
what is allowed (``FabricError``). The formulas that use the numbers are impl/costmodel/fabric.py's
and impl/costmodel/nccl.py's (whose latencies per step are NCCL's tuner constants, cited there).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from impl.costmodel.fabric import NodeFabric
from impl.rows.predictions import FABRIC_FILE, FABRIC_SPEC, FABRIC_TOP_LEVEL

FABRICS_DIR = Path(__file__).resolve().parents[2] / "fabrics"

# The file's tables, keys and top-level keys, each number's range and unit and whether it is
# required, are declared in impl/rows/predictions.py (FABRIC_SPEC, FABRIC_TOP_LEVEL).


class FabricError(ValueError):
    """A fabric file that cannot be used; the message names the file and the value."""

    def __init__(self, path: Path | str, problem: str):
        super().__init__(f"{path}: {problem}")


def available() -> list[str]:
    """Names of the fabric files shipped in fabrics/."""
    return sorted(p.stem for p in FABRICS_DIR.glob("*.toml"))


def fabric_path(name_or_path: str) -> Path:
    """fabrics/<name>.toml for a bare name; the file itself for a path."""
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        path = Path(name_or_path)
        if not path.is_file():
            raise FabricError(path, "no such fabric file")
        return path
    path = FABRICS_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        raise FabricError(name_or_path, f"no fabric of that name in {FABRICS_DIR}; choose one "
                          f"of {', '.join(available())} or give a path to a .toml file")
    return path


def _allowed(integer: bool, low: float, high: float, unit: str) -> str:
    kind = "an integer" if integer else "a number"
    return f"{kind} from {low:g} to {high:g} ({unit})"


def _shown(value: object) -> str:
    """A value as the one line shows it: an integer too long to read by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return f"an integer of {len(str(abs(value)))} digits"  # TOML: at most 4300
    return f"{value!r:.40}"


def _number(path: Path, table: str, key: str, entry: object) -> tuple[float, str]:
    integer, low, high, unit, _ = FABRIC_SPEC[table][key]
    where, allowed = f"{table}.{key}", _allowed(integer, low, high, unit)
    if not isinstance(entry, dict) or set(entry) - {"value", "source"}:
        raise FabricError(path, f"{where} = {entry!r:.60}: write {key} = {{ value = ..., "
                          f"source = \"...\" }} with {allowed}")
    value, source = entry.get("value"), entry.get("source")
    if value is None:
        raise FabricError(path, f"{where} has no value: allowed {allowed}")
    # TOML integers have no size limit: compared as they are (math.isfinite would convert a
    # 400-digit one to a float and overflow), and named by their length, not printed.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            integer and not isinstance(value, int)) or (
            isinstance(value, float) and not math.isfinite(value)) or not low <= value <= high:
        raise FabricError(path, f"{where} = {_shown(value)}: allowed {allowed}")
    if not isinstance(source, str) or not source.strip():
        raise FabricError(path, f"{where} has no source: every number says where it comes "
                          "from (source = \"a measurement, a datasheet, or 'assumed: why'\")")
    return value, source.strip()


def parse_fabric(path: Path, document: dict, name: str) -> NodeFabric:
    """A NodeFabric from a parsed fabric file, or FabricError for the first bad value."""
    if unknown := sorted(set(document) - set(FABRIC_TOP_LEVEL)):
        raise FabricError(path, f"unknown key {unknown[0]!r}: allowed "
                          f"{', '.join(FABRIC_TOP_LEVEL)}")
    values, sources = {}, []
    for table, keys in FABRIC_SPEC.items():
        given = document.get(table)
        if given is None and table == "network":
            continue
        if not isinstance(given, dict):
            raise FabricError(path, f"[{table}] is missing: it needs "
                              f"{', '.join(k for k, s in keys.items() if s[4])}")
        if unknown := sorted(set(given) - set(keys)):
            raise FabricError(path, f"unknown key {table}.{unknown[0]}: allowed "
                              f"{', '.join(keys)}")
        for key, (integer, low, high, unit, required) in keys.items():
            if key not in given:
                if required:
                    raise FabricError(path, f"{table}.{key} is missing: allowed "
                                      f"{_allowed(integer, low, high, unit)}, with its source")
                continue
            values[f"{table}.{key}"], source = _number(path, table, key, given[key])
            sources.append((f"{table}.{key}", source))
    for text in (FABRIC_FILE.name, FABRIC_FILE.description):
        if text in document and not isinstance(document[text], str):
            raise FabricError(path, f"{text} = {document[text]!r:.40}: allowed a string")
    return NodeFabric(
        name=document.get(FABRIC_FILE.name, name),
        description=document.get(FABRIC_FILE.description, ""),
        gpus_per_node=values["node.gpus"], busbw_node_gbps=values["node.busbw_gbps"],
        launch_us=values["node.launch_us"], copy_gbps=values.get("node.copy_gbps"),
        nics_per_node=values.get("network.nics"), nic_gbps=values.get("network.nic_gbps"),
        nvls_algbw_gbps=values.get("node.nvls_algbw_gbps"),
        collnet_gbps=values.get("network.collnet_gbps"), sources=tuple(sources))


def _long_integer(text: str) -> tuple[str, int]:
    """Where a TOML text holds an integer too long for int(), and its digits: ("node.gpus",
    5000) (the key of its line, under the table above it)."""
    table = ""
    for number, line in enumerate(text.splitlines(), 1):
        if header := re.match(r"\s*\[([^\]]*)\]", line):
            table = f"{header[1].strip()}."
        if digits := re.search(r"\d{1000,}", line):
            key = re.match(r"\s*([\w\"'.-]+)\s*=", line)
            return (f"{table}{key[1]}" if key else f"line {number}"), len(digits[0])
    return "a value", 0


def load_fabric(name_or_path: str) -> NodeFabric:
    """The fabric named ``name_or_path`` (fabrics/<name>.toml) or the file at that path."""
    path = fabric_path(name_or_path)
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        raise FabricError(path, "reading TOML needs Python 3.11 or later (tomllib)") from None
    try:
        text = path.read_text(encoding="utf-8")
        document = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise FabricError(path, f"not a TOML file: {error}") from None
    except OSError as error:
        raise FabricError(path, f"cannot read: {error}") from None
    except ValueError:  # int() of more digits than Python converts (sys.int_info)
        where, digits = _long_integer(text)
        table, _, key = where.partition(".")
        spec = FABRIC_SPEC.get(table, {}).get(key)
        allowed = _allowed(*spec[:4]) if spec else "the numbers of SPEC (fabric_file.py)"
        raise FabricError(path, f"{where} = an integer of {digits} digits: allowed "
                          f"{allowed}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise FabricError(path, "nested too deeply to be a fabric file (a fabric file has two "
                          "levels: [node] and [network] of { value, source })") from None
    return parse_fabric(path, document, path.stem)
