"""Host Adam beside the rest of an offloaded step: what costs it its rate inside training.

Inside the delayed update's step of gpt_small_bf16 on one H200 host, host Adam ran at 0.58 of
the rate the host_adam rows measure alone (docs/hybrid.md). Beside it in that step run the
GPU's forward and backward (launched by the main thread), the pinned copies of gradients to the
host and of weights back, and the cast of bf16 gradients to fp32 in host Adam's own workers.
``Beside`` runs one of them over and over in a thread while host Adam is timed, so an
interleaved measurement can set host Adam's rate beside each against its rate alone
(suite/bench_hybrid.py, test_host_adam_beside):

    with Beside(gpu_steps(model, batch, loss, device)), Beside(copies(device)):
        update()   # host Adam's time while the GPU trains and the copies run

The background work is continuous, more than one step's share: a rate beside it is a floor.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch

from impl.hybrid.bounds import COPY_BYTES


class Beside:
    """Runs ``work`` over and over in a thread from entry until exit. Entry returns once the
    first run has ended (the work at its steady state); an exception in ``work`` is raised at
    exit."""

    def __init__(self, work: Callable[[], None]):
        self.work, self.runs = work, 0
        self.stop, self.started = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None

    def _loop(self) -> None:
        try:
            while not self.stop.is_set():
                self.work()
                self.runs += 1
                self.started.set()
        except BaseException as error:  # noqa: BLE001  (kept for exit, which raises it)
            self.error = error
        finally:
            self.started.set()

    def __enter__(self) -> Beside:
        self.stop.clear()
        self.started.clear()
        self.thread = threading.Thread(target=self._loop, name="beside", daemon=True)
        self.thread.start()
        self.started.wait()
        return self

    def __exit__(self, *exc) -> bool:
        self.stop.set()
        self.thread.join()
        if self.error is not None:
            raise RuntimeError(f"the work beside host Adam failed: {self.error}") from self.error
        return False


def gpu_steps(model: torch.nn.Module, batch, loss, device: torch.device) -> Callable[[], None]:
    """One forward and backward of ``model`` on ``batch``, waited for: the GPU's side of an
    offloaded step without its copies."""

    def step() -> None:
        loss(model(batch.inputs), batch.targets).backward()
        model.zero_grad(set_to_none=True)
        torch.cuda.current_stream(device).synchronize()  # this thread's stream, not the copies'

    return step


def copies(device: torch.device, nbytes: int = COPY_BYTES) -> Callable[[], None]:
    """A pinned copy of ``nbytes`` to the host and one back on a stream of their own (as the
    offload's copies run beside the compute stream), waited for."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    gpu = torch.empty(nbytes, dtype=torch.uint8, device=device)
    side = torch.cuda.Stream(device)

    def both_ways() -> None:
        with torch.cuda.stream(side):
            host.copy_(gpu, non_blocking=True)
            gpu.copy_(host, non_blocking=True)
        side.synchronize()

    return both_ways
