"""The environment a result was measured in, recorded beside every results file."""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

from impl import capabilities
from impl.rows.gate_records import MACHINE
from impl.settings import check_setting


def _run(command: list[str]) -> str | None:
    if shutil.which(command[0]) is None:
        return None
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def gpu_names() -> list[str]:
    return [torch.cuda.get_device_name(i) for i in range(capabilities.gpu_count())]


def gpu_uuids() -> list[str]:
    return [str(torch.cuda.get_device_properties(i).uuid) for i in range(capabilities.gpu_count())]


def machine_label(gpus: int | None = None) -> str:
    """``cpu-2core``, ``h200x4``…; OVERLAP_MACHINE_LABEL overrides it."""
    if label := os.environ.get("OVERLAP_MACHINE_LABEL"):
        return check_setting("OVERLAP_MACHINE_LABEL", label)
    count = capabilities.gpu_count() if gpus is None else gpus
    if count == 0:
        return f"cpu-{os.cpu_count()}core"
    name = torch.cuda.get_device_name(0)
    model = re.search(r"\b([A-Z]+\d+[A-Z]*)\b", name.replace("NVIDIA", ""))
    return f"{(model.group(1) if model else 'gpu').lower()}x{count}"


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


# What runs write, not what they run: the committed runs are data, and a copy shipped to a lent
# machine leaves them behind when they outgrow what it may carry.
RESULTS_FOLDER = "results"


@functools.lru_cache(maxsize=1)  # the files do not change during a run; one hash per process
def working_tree_hash() -> str | None:
    """git's tree hash of the code as it is (tracked files, and untracked ones git does not
    ignore, without ``results/``), made in a temporary index: equal to ``python -m
    impl.fingerprint``'s in the source checkout exactly when the code is the same."""
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(folder, "index"))}
        added = subprocess.run(["git", "add", "-A"], env=env, capture_output=True, timeout=60,
                               check=False)
        left_out = subprocess.run(["git", "rm", "-r", "-q", "--cached", "--ignore-unmatch",
                                   "--", RESULTS_FOLDER], env=env, capture_output=True,
                                  timeout=60, check=False)
        if added.returncode != 0 or left_out.returncode != 0:
            return None
        tree = subprocess.run(["git", "write-tree"], env=env, capture_output=True, text=True,
                              timeout=60, check=False)
        return tree.stdout.strip() if tree.returncode == 0 else None


def git_state() -> tuple[str | None, bool | None]:
    """The commit and whether the files differ from it (None: unknown).

    HEAD and its tracked files' status; or, where OVERLAP_GIT_COMMIT states the commit of a
    copy whose .git is missing or not the source's, that commit, dirty unless the code hashes
    to OVERLAP_GIT_TREE (unknown without it). ``python -m impl.fingerprint`` prints both for a
    clean checkout.
    """
    if stated := os.environ.get("OVERLAP_GIT_COMMIT"):
        commit = check_setting("OVERLAP_GIT_COMMIT", stated)
        tree = os.environ.get("OVERLAP_GIT_TREE")
        files = working_tree_hash() if tree and shutil.which("git") else None
        return commit, (None if files is None else files != check_setting("OVERLAP_GIT_TREE",
                                                                            tree))
    commit = _run(["git", "rev-parse", "HEAD"])
    if commit is None:
        return None, None
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"])
    return commit, (None if status is None else bool(status))


def gpu_limits() -> list[dict] | None:
    """Per GPU (NVML order): power limit and clocks, which decide what a GPU can sustain.

    A GPU near its power limit lowers its clocks, so energy and step times from two machines
    compare only with these beside them. None without NVML.
    """
    if capabilities.missing_nvml():
        return None
    import pynvml

    pynvml.nvmlInit()
    try:
        limits = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            limits.append({
                "uuid": pynvml.nvmlDeviceGetUUID(handle),
                "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1e3,
                "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle,
                                                                     pynvml.NVML_CLOCK_SM),
                "max_mem_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle,
                                                                      pynvml.NVML_CLOCK_MEM),
                "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            })
        return limits
    finally:
        pynvml.nvmlShutdown()


def fingerprint(backend: str, world_size: int, profile: str) -> dict:
    driver = nvml_driver()
    commit, dirty = git_state()
    mpi = _run([capabilities.mpi_launcher() or "mpirun", "--version"])
    return {
        MACHINE.machine_label: machine_label(),
        MACHINE.gpu_names: gpu_names(),
        MACHINE.gpu_uuids: gpu_uuids(),
        MACHINE.driver: driver,
        MACHINE.cuda: torch.version.cuda,
        MACHINE.nccl: (".".join(map(str, torch.cuda.nccl.version())) if capabilities.gpu_count()
                       else None),
        MACHINE.torch: torch.__version__,
        MACHINE.mpi: mpi.splitlines()[0] if mpi else None,
        MACHINE.cpu_model: cpu_model(),
        MACHINE.cpu_cores: os.cpu_count(),
        MACHINE.gpu_topology: _run(["nvidia-smi", "topo", "-m"]),
        MACHINE.gpu_limits: gpu_limits(),
        MACHINE.nccl_env: {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
        MACHINE.backend: backend,
        MACHINE.world_size: world_size,
        MACHINE.profile: profile,
        MACHINE.git_commit: commit,
        MACHINE.git_dirty: dirty,
        MACHINE.python: platform.python_version(),
    }


def nvml_driver() -> str | None:
    if capabilities.missing_nvml():
        return None
    import pynvml

    pynvml.nvmlInit()
    try:
        return pynvml.nvmlSystemGetDriverVersion()
    finally:
        pynvml.nvmlShutdown()


def main() -> int:
    """Print the settings that state this checkout's commit to a copy of it (impl.settings)."""
    commit, dirty = git_state()
    tree = working_tree_hash()
    if commit is None or dirty is not False or tree is None:
        print("impl.fingerprint: the checkout is not a clean git checkout (git status shows "
              "changes, or git is missing): commit or stash first")
        return 2
    print(f"OVERLAP_GIT_COMMIT={commit} OVERLAP_GIT_TREE={tree}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
