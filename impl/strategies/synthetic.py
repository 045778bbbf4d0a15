"""Synthetic: the course study's original simulation. SLEEPS, computes nothing.

Kept only to reproduce the study's headline (~30% faster with overlap): per chunk a compute
phase of 300 ± 50 ms and a communication phase of 200 ± 30 ms (uniform), both scaled by
``synthetic_scale`` so tests run fast. With ``synthetic_overlap`` a second thread
"communicates" chunk i while the main thread "computes" chunk i + 1; without it the phases
alternate. It never touches the model's weights, is labelled ``real = False``, and its results
are kept out of every table of real measurements.
"""

from __future__ import annotations

import random
import threading
import time

from impl.strategies.base import Strategy
from impl.strategy_records import SIMULATION

COMPUTE_MS, COMPUTE_JITTER_MS = 300.0, 50.0
COMM_MS, COMM_JITTER_MS = 200.0, 30.0


class SyntheticStrategy(Strategy):
    name = "synthetic"
    role = SIMULATION
    real = False

    def __init__(self, model, workload, group, options):
        super().__init__(model, workload, group, options)
        if options.synthetic_scale <= 0:
            raise ValueError(f"synthetic_scale={options.synthetic_scale} must be positive")
        self.recorder.cuda = False  # host sleeps only: host clock
        self.recorder.notes[:] = ["synthetic: sleep-based simulation, no real work"]

    def chunk_durations_ms(self) -> list[tuple[float, float]]:
        """(compute, communication) per chunk of the next step, in ms: seeded by the step
        index, so a sequential and an overlapped run draw the same times for the same step."""
        scale, rng = self.options.synthetic_scale, random.Random(self.steps_done)
        compute = (COMPUTE_MS - COMPUTE_JITTER_MS, COMPUTE_MS + COMPUTE_JITTER_MS)
        comm = (COMM_MS - COMM_JITTER_MS, COMM_MS + COMM_JITTER_MS)
        return [(scale * rng.uniform(*compute), scale * rng.uniform(*comm))
                for _ in range(self.options.chunks)]

    def _sleep(self, lane: str, chunk: int, seconds: float) -> None:
        start = time.perf_counter()
        time.sleep(seconds)
        self.recorder.add(lane, f"{lane} c{chunk}", chunk, start, time.perf_counter())

    def _step(self, batch) -> None:
        durations = [(compute / 1e3, comm / 1e3) for compute, comm in self.chunk_durations_ms()]
        if not self.options.synthetic_overlap:
            for chunk, (compute_s, comm_s) in enumerate(durations):
                self._sleep("compute", chunk, compute_s)
                self._sleep("comm", chunk, comm_s)
            return
        communicator: threading.Thread | None = None
        for chunk, (compute_s, comm_s) in enumerate(durations):
            self._sleep("compute", chunk, compute_s)
            if communicator is not None:
                communicator.join()  # one communication channel, as in the study
            communicator = threading.Thread(target=self._sleep, args=("comm", chunk, comm_s))
            communicator.start()
        communicator.join()
