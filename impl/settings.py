"""Environment variables the suite reads: one table, one validation (docs/inputs.md lists them).

The machine label and the process-group backend are read here and nowhere else, so the
launcher, the workers and the report agree on what is allowed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from impl.profiles import DEFAULT_PROFILE, PROFILE_ENV, PROFILES, profile_conflict

# A label names a folder under results/: a letter or digit first, so "." and ".." (and hidden
# folders) cannot be one; no separators, so it stays one folder.
LABEL_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
RESERVED_LABELS = ("baselines",)  # results/baselines/ holds the gate's references
BACKENDS = ("nccl", "gloo")


@dataclass(frozen=True)
class Setting:
    name: str
    allowed: str
    meaning: str
    valid: Callable[[str], bool]


# A day: a collective that waits longer is a hang, and torch converts the timeout to int64
# milliseconds (99999999999999 s overflows it on every rank).
MAX_PG_TIMEOUT_S = 86400


def _pg_timeout(text: str) -> bool:
    return text.isdigit() and 1 <= int(text) <= MAX_PG_TIMEOUT_S


def _extra_compute(text: str) -> bool:
    try:
        return 0 <= float(text) <= 1
    except ValueError:
        return False


def _git_hash(text: str) -> bool:
    return re.fullmatch(r"[0-9a-f]{40}", text) is not None


def valid_label(label: str) -> bool:
    return re.fullmatch(LABEL_PATTERN, label) is not None and label not in RESERVED_LABELS


SETTINGS = (
    Setting("OVERLAP_PROFILE", " | ".join(PROFILES), "interconnect profile (NCCL environment)",
            lambda v: v in PROFILES),
    Setting("OVERLAP_BACKEND", " | ".join(BACKENDS), "process-group backend (default: nccl "
            "with CUDA, else gloo)", lambda v: v in BACKENDS),
    Setting("OVERLAP_PG_TIMEOUT_S", f"an integer from 1 to {MAX_PG_TIMEOUT_S}", "seconds a "
            "collective may wait before the run fails (default 300)", _pg_timeout),
    Setting("OVERLAP_MACHINE_LABEL", "1 to 64 letters, digits, . _ - starting with a letter or "
            f"digit, not {', '.join(RESERVED_LABELS)}", "results folder name (default e.g. "
            "cpu-2core, h200x4)", valid_label),
    Setting("OVERLAP_EXTRA_COMPUTE", "number from 0 to 1", "real extra compute added to every "
            "MLP preset's step (a fraction of its forward, MLPConfig.extra_compute), to test "
            "the regression gate on a known slowdown", _extra_compute),
    Setting("OVERLAP_GIT_COMMIT", "40 hexadecimal digits", "the commit a copy of the source "
            "was made from, where its .git is missing or not the source's (a tree shipped to "
            "a cluster or a lent machine): results record it instead of the copy's HEAD",
            _git_hash),
    Setting("OVERLAP_GIT_TREE", "40 hexadecimal digits", "that commit's tree (git rev-parse "
            "COMMIT^{tree}): the copy's files are hashed the same way, and the results are "
            "marked dirty unless both agree", _git_hash),
)


def check_setting(name: str, value: str) -> str:
    """``value`` if variable ``name`` allows it, else ValueError naming both and what is allowed."""
    setting = next(s for s in SETTINGS if s.name == name)
    if not setting.valid(value):
        raise ValueError(f"{name}={value!r} is not allowed; use {setting.allowed}")
    return value


def selected_backend(environ: Mapping[str, str] = os.environ) -> str:
    """OVERLAP_BACKEND, or nccl where CUDA is present and gloo otherwise."""
    from impl import capabilities  # torch: imported only here, the report and gate need none

    return environ.get("OVERLAP_BACKEND") or capabilities.default_backend()


def check_environment(environ: Mapping[str, str] = os.environ) -> None:
    """Raise ValueError naming the first variable whose value is not allowed.

    Beyond each value on its own: the backend must be usable here, and an interconnect
    profile only applies to nccl and must not contradict NCCL variables already set.
    """
    for setting in SETTINGS:
        if value := environ.get(setting.name):
            check_setting(setting.name, value)
    from impl import capabilities

    backend = selected_backend(environ)
    # gloo is part of every torch build the suite supports; nccl needs a GPU here.
    if backend == "nccl" and (missing := capabilities.missing_gpu(1)):
        raise ValueError(f"OVERLAP_BACKEND={backend}: {missing}; use "
                         f"{' or '.join(b for b in BACKENDS if b != backend)} or leave it unset")
    profile = environ.get(PROFILE_ENV) or None
    if backend == "gloo":
        if profile:
            raise ValueError(f"{PROFILE_ENV}={profile}: interconnect profiles are NCCL "
                             "settings and this run uses gloo; leave it unset")
        return
    if conflict := profile_conflict(profile or DEFAULT_PROFILE, environ):
        raise ValueError(conflict)
