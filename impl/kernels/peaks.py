"""Hardware peaks by device name, and the roofline they define.

Dense (no structured sparsity) peaks at boost clock, from NVIDIA's datasheets:
- H100: "NVIDIA H100 Tensor Core GPU" datasheet (SXM and PCIe columns, and H100 NVL);
  the datasheet's tensor figures are "with sparsity", halved here.
- H200: "NVIDIA H200 Tensor Core GPU" datasheet (H200 SXM column): the same compute as
  H100 SXM, 4.8 TB/s of HBM3e.
- A100: "NVIDIA A100 Tensor Core GPU" datasheet (dense figures given directly).
Keys are the names ``torch.cuda.get_device_name()`` reports. ``fp32`` is the non-tensor
CUDA-core rate; ``tf32``, ``bf16``, ``fp16`` are tensor-core rates with fp32 accumulation.
A device that is not here fails loudly (never a silent default):
add its row from its datasheet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

TERA = 1e12


@dataclass(frozen=True)
class DevicePeaks:
    name: str
    flops: Mapping[str, float]  # FLOP/s by dtype key: fp32, tf32, bf16, fp16
    hbm_bytes_per_s: float

    def peak_flops(self, dtype: str) -> float:
        if dtype not in self.flops:
            raise KeyError(f"no {dtype!r} peak for {self.name}; known: {', '.join(self.flops)}")
        return self.flops[dtype]


def _peaks(
    name: str, fp32: float, tf32: float, bf16: float, fp16: float, tb_per_s: float
) -> DevicePeaks:
    flops = {"fp32": fp32 * TERA, "tf32": tf32 * TERA, "bf16": bf16 * TERA, "fp16": fp16 * TERA}
    return DevicePeaks(name, MappingProxyType(flops), tb_per_s * TERA)


# name: fp32, tf32, bf16, fp16 (TFLOP/s, dense), HBM (TB/s)
PEAKS: Mapping[str, DevicePeaks] = MappingProxyType({
    p.name: p
    for p in (
        _peaks("NVIDIA H200", 67.0, 494.7, 989.0, 989.0, 4.8),
        _peaks("NVIDIA H100 80GB HBM3", 67.0, 494.7, 989.0, 989.0, 3.35),  # H100 SXM
        _peaks("NVIDIA H100 PCIe", 51.0, 378.0, 756.5, 756.5, 2.0),
        _peaks("NVIDIA H100 NVL", 60.0, 417.5, 835.5, 835.5, 3.9),
        _peaks("NVIDIA A100-SXM4-80GB", 19.5, 156.0, 312.0, 312.0, 2.039),
        _peaks("NVIDIA A100-SXM4-40GB", 19.5, 156.0, 312.0, 312.0, 1.555),
    )
})


class UnknownDeviceError(LookupError):
    """No peak table for this device name."""


def lookup(device_name: str) -> DevicePeaks:
    """The peaks of ``device_name`` as torch reports it; UnknownDeviceError otherwise."""
    try:
        return PEAKS[device_name]
    except KeyError:
        known = "; ".join(sorted(PEAKS))
        raise UnknownDeviceError(
            f"no hardware peaks for device {device_name!r}; known: {known} "
            "(add a row to impl/kernels/peaks.py from the vendor's datasheet)"
        ) from None


def roofline(intensity: float, dtype: str, peaks: DevicePeaks) -> float:
    """Attainable FLOP/s at ``intensity`` FLOP/byte: min(peak_flops[dtype], intensity · bw).

    The roofline model (Williams, Waterman, Patterson 2009): below the ridge point
    peak_flops / bw a kernel is bound by memory bandwidth, above it by compute.
    ``bw`` is HBM bandwidth, so caches can let a kernel beat the memory roof.
    """
    if intensity < 0:
        raise ValueError(f"arithmetic intensity must be >= 0; got {intensity}")
    return min(peaks.peak_flops(dtype), intensity * peaks.hbm_bytes_per_s)


def binding_roof(intensity: float, dtype: str, peaks: DevicePeaks) -> str:
    """Which roof of ``roofline`` binds at ``intensity``: ``"memory"`` below the ridge point
    peak_flops / bw, ``"compute"`` at or above it."""
    return "memory" if intensity * peaks.hbm_bytes_per_s < peaks.peak_flops(dtype) else "compute"
