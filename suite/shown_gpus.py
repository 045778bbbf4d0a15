"""A pytest plugin for collection only: torch sees H100s (80 GB, compute capability 9.0),
as many as OVERLAP_SHOWN_GPUS says (default 1).

No benchmark can run under it; it lets a CPU machine see which benchmarks a run on a GPU node
plans and what the plan expects them to take (suite/budget.py, tests/test_gpu_plan.py):

    OVERLAP_SHOWN_GPUS=4 OVERLAP_BACKEND=nccl OVERLAP_COLLECT_WORLD=4 \
        python -m pytest -p suite.shown_gpus --collect-only -q suite/
"""

import os
from types import SimpleNamespace

import torch

H100 = SimpleNamespace(name="NVIDIA H100 80GB HBM3", total_memory=80 * 2**30, major=9,
                       minor=0, multi_processor_count=132)
SHOWN = int(os.environ.get("OVERLAP_SHOWN_GPUS", "1"))

torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: SHOWN
torch.cuda.get_device_name = lambda device=None: H100.name
torch.cuda.get_device_capability = lambda device=None: (H100.major, H100.minor)
torch.cuda.get_device_properties = lambda device=None: H100
torch.cuda.mem_get_info = lambda device=None: (H100.total_memory - 2**30, H100.total_memory)
torch.cuda.is_bf16_supported = lambda *args, **kwargs: True
torch.cuda.can_device_access_peer = lambda a, b: True  # all pairs NVLink, as on an HGX node
