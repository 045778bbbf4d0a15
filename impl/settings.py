"""Environment variables the suite reads: one table, one validation (README lists them)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from impl.profiles import PROFILES


@dataclass(frozen=True)
class Setting:
    name: str
    allowed: str
    meaning: str
    valid: Callable[[str], bool]


def _positive_int(text: str) -> bool:
    return text.isdigit() and int(text) >= 1


SETTINGS = (
    Setting("OVERLAP_PROFILE", " | ".join(PROFILES), "interconnect profile (NCCL environment)",
            lambda v: v in PROFILES),
    Setting("OVERLAP_BACKEND", "nccl | gloo", "process-group backend (default: nccl with "
            "CUDA, else gloo)", lambda v: v in ("nccl", "gloo")),
    Setting("OVERLAP_PG_TIMEOUT_S", "integer ≥ 1", "seconds a collective may wait before the "
            "run fails (default 300)", _positive_int),
    Setting("OVERLAP_MACHINE_LABEL", "letters, digits, . _ -", "results folder name "
            "(default e.g. cpu-2core, h200x4)", lambda v: re.fullmatch(r"[A-Za-z0-9._-]+", v)
            is not None),
)


def check_environment(environ: Mapping[str, str] = os.environ) -> None:
    """Raise ValueError naming the first variable whose value is not allowed."""
    for setting in SETTINGS:
        value = environ.get(setting.name)
        if value not in (None, "") and not setting.valid(value):
            raise ValueError(f"{setting.name}={value!r} is not allowed; use {setting.allowed}")
