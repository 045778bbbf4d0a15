"""DeepSpeed's CPU Adam, the host optimizer ZeRO-Offload runs: a labelled reference beside the
suite's host Adam (impl/hybrid/host_adam.py), timed in the same rounds (suite/bench_hybrid.py,
``test_host_adam``). Optional: where deepspeed is not installed, or its C++ op does not build
(it compiles with the host's compiler and ninja at first use), the reference is absent and the
row says why.

    optimizer, why_not = deepspeed_cpu_adam([param], lr=1e-3)   # param.grad set before step()

Its settings are torch.optim.Adam's defaults (betas 0.9, 0.999, eps 1e-8, no weight decay,
Adam rather than AdamW), the suite's host Adam's, so that one step of each from the same state
gives the same weights (``check_against_torch``).
"""

from __future__ import annotations

import torch
from torch.optim.adam import adam

VARIANT = "deepspeed-cpu-adam"  # the host_adam row's variant name
INSTALL_HINT = ("pip install deepspeed: its CPU Adam builds with this host's compiler at "
                "first use")
MAX_WEIGHT_DIFFERENCE = 1e-6  # one step of lr 1e-3 from the same state: rounding only


def deepspeed_cpu_adam(params: list[torch.nn.Parameter],
                       lr: float) -> tuple[object | None, str | None]:
    """``(DeepSpeedCPUAdam over params, None)``, or ``(None, why there is none here)``."""
    try:
        from deepspeed.ops.adam import DeepSpeedCPUAdam
    except ImportError as error:
        return None, f"deepspeed is not installed here ({error}); {INSTALL_HINT}"
    try:
        return DeepSpeedCPUAdam(params, lr=lr, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.0, adamw_mode=False), None
    # Its op is compiled here at first use: a missing compiler, ninja or header raises
    # whatever the build raises, and the reference is then absent rather than the study.
    except Exception as error:  # noqa: BLE001
        lines = str(error).strip().splitlines()
        return None, (f"deepspeed's CPU Adam did not build here: "
                      f"{lines[0] if lines else type(error).__name__}")


def check_against_torch(optimizer, param: torch.nn.Parameter, lr: float) -> float:
    """One step of ``optimizer`` from ``param``'s present state (no step taken yet) against
    torch's fused CPU Adam from the same; returns the largest weight difference, and raises
    where it is more than rounding (a reference that updates differently is no reference)."""
    before, grad = param.detach().clone(), param.grad.detach().clone()
    exp_avg, exp_avg_sq = torch.zeros_like(before), torch.zeros_like(before)
    adam([before], [grad], [exp_avg], [exp_avg_sq], [], [torch.tensor(0.0)], fused=True,
         foreach=False, amsgrad=False, beta1=0.9, beta2=0.999, lr=lr, weight_decay=0.0,
         eps=1e-8, maximize=False)
    optimizer.step()
    difference = (param.detach() - before).abs().max().item()
    if not difference <= MAX_WEIGHT_DIFFERENCE:
        raise AssertionError(f"{VARIANT}: one step from the same state differs from torch's "
                             f"fused Adam by up to {difference:.3g} in a weight (allowed "
                             f"{MAX_WEIGHT_DIFFERENCE:g})")
    return difference
