"""Interconnect profiles: slower fabrics emulated on one host through NCCL's environment.

They only mean something for the nccl backend and must be applied before the process group
starts (NCCL reads its environment when a communicator is created).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

# NVLink multicast (NVLS) can take a shared host's GPUs out of service: always off here.
ALWAYS = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
          "NVSHMEM_DISABLE_NVLS": "1"}

PROFILES: dict[str, dict[str, str]] = {
    "nvlink": {},
    "shm": {"NCCL_P2P_DISABLE": "1"},
    "socket": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"},
}
DEFAULT_PROFILE = "nvlink"
PROFILE_ENV = "OVERLAP_PROFILE"


def check_profile(name: str) -> str:
    if name not in PROFILES:
        raise ValueError(f"unknown interconnect profile {name!r}; choose one of "
                         f"{sorted(PROFILES)}")
    return name


def profile_env(name: str) -> dict[str, str]:
    """The environment variables profile ``name`` sets, NVLS switch included."""
    return {**ALWAYS, **PROFILES[check_profile(name)]}


def profile_conflict(name: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """Why profile ``name`` cannot be applied over ``environ``, or None when it can.

    Silently overriding a user's NCCL_P2P_DISABLE would measure a different fabric than the
    one the results are labelled with.
    """
    wanted = profile_env(name)
    for key in PROFILES["socket"]:
        if key not in wanted and environ.get(key, "0") not in ("0", ""):
            return (f"profile {name!r} needs {key} unset, but the environment has "
                    f"{key}={environ[key]}")
    return None


def apply_profile(name: str, environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set the profile's variables in ``environ``; conflicting values already there are an error
    (``profile_conflict``)."""
    if conflict := profile_conflict(name, environ):
        raise ValueError(conflict)
    wanted = profile_env(name)
    environ.update(wanted)
    return wanted


def recorded_profile(backend: str, environ: MutableMapping[str, str] = os.environ) -> str:
    """The profile a result is labelled with: the NCCL profile, or ``gloo-tcp`` for gloo.

    The profiles are NCCL settings; gloo always talks TCP, so its runs say so instead.
    """
    if backend == "gloo":
        return "gloo-tcp"
    return check_profile(environ.get(PROFILE_ENV, DEFAULT_PROFILE))
