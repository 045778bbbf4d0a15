"""DeepSpeed's CPU Adam as a labelled reference beside the suite's host Adam: absent with a
reason where deepspeed is not here, and checked against torch's fused Adam before it is timed
(impl/hybrid/deepspeed_adam.py)."""

from __future__ import annotations

import sys

import pytest
import torch
from torch.optim.adam import adam

from impl.hybrid.deepspeed_adam import check_against_torch, deepspeed_cpu_adam

LR = 1e-3


def parameter(seed: int = 0) -> torch.nn.Parameter:
    generator = torch.Generator().manual_seed(seed)
    param = torch.nn.Parameter(torch.randn(4096, generator=generator) * 0.02)
    param.grad = torch.randn(4096, generator=generator) * 1e-3
    return param


class TorchAdamStep:
    """An optimizer whose step is torch's single-tensor Adam (scale 1: the same update)."""

    def __init__(self, param: torch.nn.Parameter, scale: float = 1.0):
        self.param, self.scale = param, scale
        self.moments = (torch.zeros_like(param), torch.zeros_like(param))

    @torch.no_grad()
    def step(self) -> None:
        adam([self.param], [self.param.grad * self.scale], [self.moments[0]],
             [self.moments[1]], [], [torch.tensor(0.0)], foreach=False, amsgrad=False,
             beta1=0.9, beta2=0.999, lr=LR, weight_decay=0.0, eps=1e-8, maximize=False)


def test_without_deepspeed_the_reference_is_absent_with_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepspeed", None)  # import deepspeed raises ImportError
    optimizer, why_not = deepspeed_cpu_adam([parameter()], LR)
    assert optimizer is None
    assert why_not.startswith("deepspeed is not installed here (")
    assert why_not.endswith("pip install deepspeed: its CPU Adam builds with this host's "
                            "compiler at first use")


def test_a_reference_that_updates_as_torch_does_passes_its_check():
    param = parameter()
    assert check_against_torch(TorchAdamStep(param), param, LR) <= 1e-7


def test_a_reference_that_updates_otherwise_fails_its_check_with_the_difference():
    param = parameter()
    wrong = TorchAdamStep(param, scale=-1.0)  # each weight moves lr the other way
    with pytest.raises(AssertionError, match=r"deepspeed-cpu-adam: one step from the same "
                                             r"state differs from torch's fused Adam by up "
                                             r"to 0.002 in a weight \(allowed 1e-06\)"):
        check_against_torch(wrong, param, LR)


def test_deepspeed_cpu_adam_updates_as_torch_does_where_it_is_installed():
    pytest.importorskip("deepspeed", reason="deepspeed is not installed here (optional)")
    param = parameter()
    optimizer, why_not = deepspeed_cpu_adam([param], LR)
    assert why_not is None, why_not
    assert check_against_torch(optimizer, param, LR) <= 1e-6
