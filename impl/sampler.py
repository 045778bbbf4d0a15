"""NVML sampling in a background thread: power, utilisation, SM clock, memory, temperature.

GPUs are matched by UUID (CUDA indices depend on CUDA_VISIBLE_DEVICES, NVML's do not) and
their handles are obtained once. Power is NVML's instantaneous field (NVML_FI_DEV_POWER_INSTANT)
where the driver offers it, otherwise nvmlDeviceGetPowerUsage, which recent drivers average
over about a second; ``power_source`` says which. Energy comes from the difference of the
total-energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ since driver load), read at
start and stop, so it does not depend on the sampling period.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from impl import capabilities, metrics
from impl.rows.kinds import METERED

DEFAULT_PERIOD_MS = 50.0
SERIES = ("power_w", "gpu_util_pct", "mem_util_pct", "sm_clock_mhz", "mem_used_mib", "temp_c")


def normalise_uuid(uuid: str) -> str:
    text = str(uuid).lower()
    return text[4:] if text.startswith("gpu-") else text


@dataclass
class Samples:
    available: bool
    reason: str | None = None
    period_ms: float = DEFAULT_PERIOD_MS
    power_source: str | None = None
    gpus: list[str] = field(default_factory=list)  # UUIDs, in sampling order
    t_s: list[float] = field(default_factory=list)
    series: dict[str, list[list[float]]] = field(default_factory=dict)  # name -> [gpu][sample]
    energy_j: list[float] = field(default_factory=list)  # per GPU, counter difference
    duration_s: float = 0.0

    def summary(self, steps: int) -> dict:
        """Means per GPU plus the energy figures; what goes into ``extra_info``."""
        if not self.available:
            return {"available": False, METERED.reason: self.reason}
        means = {name: [sum(v) / len(v) if v else None for v in per_gpu]
                 for name, per_gpu in self.series.items()}
        # the keys a row's nvml declares (kinds.METERED), with what only this summary says
        return {"available": True, "power_source": self.power_source, METERED.gpus: self.gpus,
                METERED.period_ms: self.period_ms, "samples": len(self.t_s),
                METERED.energy_j: self.energy_j, "duration_s": self.duration_s,
                METERED.energy_per_step_j: (metrics.energy_per_step_j(sum(self.energy_j), steps)
                                            if steps else None),
                METERED.mean: means}

    def to_json(self) -> dict:
        return {"t_s": self.t_s, "series": self.series, "gpus": self.gpus}


class NvmlSampler:
    """``start()`` / ``stop()`` around a measurement; ``stop`` returns the Samples."""

    def __init__(self, uuids: list[str], period_ms: float = DEFAULT_PERIOD_MS):
        if not period_ms > 0:
            raise ValueError(f"sampler period {period_ms} ms must be positive")
        self.period_ms = period_ms
        self.reason = capabilities.missing_nvml()
        self._thread: threading.Thread | None = None
        if self.reason is not None:
            return
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()
        by_uuid = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            by_uuid[normalise_uuid(pynvml.nvmlDeviceGetUUID(handle))] = handle
        wanted = [normalise_uuid(u) for u in uuids]
        missing = [u for u in wanted if u not in by_uuid]
        if missing:
            self.reason = f"NVML does not see GPUs {missing}"
            return
        self.uuids, self.handles = wanted, [by_uuid[u] for u in wanted]
        self.power_source = "instant" if self._instant_power(self.handles[0]) else "average"

    @property
    def available(self) -> bool:
        return self.reason is None

    def _instant_power(self, handle) -> float | None:
        field_id = getattr(self.nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field_id is None:
            return None
        value = self.nvml.nvmlDeviceGetFieldValues(handle, [field_id])[0]
        if value.nvmlReturn != self.nvml.NVML_SUCCESS:
            return None
        return value.value.uiVal / 1e3

    def _power_w(self, handle) -> float:
        if self.power_source == "instant":
            power = self._instant_power(handle)
            if power is not None:
                return power
        return self.nvml.nvmlDeviceGetPowerUsage(handle) / 1e3

    def _read(self, handle) -> tuple[float, ...]:
        nvml = self.nvml
        util = nvml.nvmlDeviceGetUtilizationRates(handle)
        return (self._power_w(handle), float(util.gpu), float(util.memory),
                float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20,
                float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)))

    def _energy_mj(self) -> list[int]:
        return [self.nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles]

    def energy_j(self) -> float:
        """The total-energy counters of the sampled GPUs, summed, in joules (a cumulative
        reading: differences of two readings are the energy in between)."""
        return sum(self._energy_mj()) / 1e3

    def start(self) -> None:
        if not self.available:
            return
        self._samples = Samples(True, period_ms=self.period_ms, power_source=self.power_source,
                                gpus=list(self.uuids),
                                series={n: [[] for _ in self.handles] for n in SERIES})
        self._stop = threading.Event()
        self._energy_start, self._t0 = self._energy_mj(), time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        period = self.period_ms / 1e3
        while not self._stop.is_set():
            now = time.perf_counter() - self._t0
            self._samples.t_s.append(now)
            for gpu, handle in enumerate(self.handles):
                for name, value in zip(SERIES, self._read(handle)):
                    self._samples.series[name][gpu].append(value)
            self._stop.wait(max(0.0, period - (time.perf_counter() - self._t0 - now)))

    def stop(self) -> Samples:
        if not self.available or self._thread is None:
            return Samples(False, reason=self.reason or "sampler was not started")
        self._stop.set()
        self._thread.join()
        self._thread = None
        samples = self._samples
        samples.duration_s = time.perf_counter() - self._t0
        samples.energy_j = [(end - start) / 1e3
                            for start, end in zip(self._energy_start, self._energy_mj())]
        return samples
