"""The largest model each trainer holds (impl/hybrid/capacity.py), on round numbers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from impl.hybrid import largest
from impl.hybrid.capacity import main, mlp_capacity


def test_the_offload_holds_what_gpu_only_adam_cannot():
    # Layers of 2^20 bf16 parameters, 4 MiB of activations each; usable GPU memory
    # int(12 GiB · 0.95) − 2 GiB = 10,093,173,145 bytes: GPU-only Adam 20 bytes a parameter,
    # 24 MiB a layer, 401 layers; the offload 8 MiB a layer on the GPU, 1203 layers, and
    # 16 MiB a layer on the host, 3072 layers in 0.75 · 64 GiB.
    plan = mlp_capacity(12 * 2**30, 64 * 2**30, width=1024, batch=1024, dtype="bf16")
    assert (plan.gpu_only_layers, plan.offload_layers, plan.offload_bound_by) == (401, 1203,
                                                                                  "GPU")
    assert plan.offload_parameters == 1203 * 2**20
    small_host = mlp_capacity(12 * 2**30, 8 * 2**30, width=1024, batch=1024, dtype="bf16")
    assert (small_host.offload_layers, small_host.offload_bound_by) == (384, "host")


def test_the_capacity_cli_refuses_bad_input_in_one_line(capsys):
    assert main(["--gpu-gib", "80", "--host-gib", "128", "--dtype", "fp8"]) == 2
    assert capsys.readouterr().err == "capacity: dtype 'fp8': choose one of fp32, bf16, fp16\n"
    assert main(["--gpu-gib", "80", "--host-gib", "128", "--batch", "0"]) == 2
    assert capsys.readouterr().err == "capacity: batch=0: choose a positive integer\n"


def test_a_host_smaller_than_its_gpu_has_no_model_only_the_offload_trains(monkeypatch):
    # One H200 (139.8 GiB) on a host of 128 GiB: the offload's 16 bytes a parameter on the host
    # hold fewer layers than GPU-only Adam on the GPU, so nothing is tried.
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: SimpleNamespace(total_memory=int(139.8 * 2**30)))
    monkeypatch.setattr(largest, "host_bytes", lambda: 128 * 2**30)
    monkeypatch.setattr(largest, "try_gpu_only", lambda *args: pytest.fail("tried a model"))
    with pytest.raises(largest.NoModelOnlyTheOffloadHolds) as raised:
        largest.only_offload_workload(torch.device("cuda"), largest.loss_for, None)
    assert str(raised.value) == (
        "no model only the offload can train here: the plan holds 99 layers of width 8192 with "
        "GPU-only Adam and 96 with the offload, bound by the host's memory (128 GiB of host "
        "memory)")
