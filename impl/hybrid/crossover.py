"""Where offload stops costing: the tokens per step from which the delayed-update offload
(offload-overlap-dpu) comes within WITHIN of fused GPU Adam.

Host Adam's work per step is fixed by the parameters (28 bytes each, impl/hybrid/host_adam.py);
the GPU's forward and backward grow with the tokens per step (batch rows, times the sequence
for a decoder). The delayed update's bound is max(GPU step, host work) (impl/hybrid/bounds.py),
so its ratio to fused GPU Adam can fall toward 1 only as the tokens grow. A ``Ladder`` walks
one model's batch from where it starts: doubling while the ratio is outside WITHIN, halving
while it is inside, until the crossover lies between two measured batches, LADDER_POINTS are
measured, or the GPU's memory ends the climb. A point is inside when the upper end of its 95%
interval is: a crossover is claimed only where the interval says so.

    ladder = Ladder(start_batch=16, tokens_per_row=1024)
    while (batch := ladder.next_batch()) is not None:
        ladder.measured(batch, ratio_estimate)   # or ladder.out_of_memory(batch, message)
    ladder.crossover()
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scipy.stats import linregress

WITHIN = 1.10  # the "comes within 1.10× of fused GPU Adam"
LADDER_POINTS = 4  # batches measured at most per model


@dataclass(frozen=True)
class LadderPoint:
    """One batch of a ladder as its row's ``points`` hold it (``asdict``; readers rebuild it
    with ``LadderPoint(**point)``): the delayed update's and fused GPU Adam's median steps,
    their ratio paired by round, the delayed update's bound over fused GPU Adam's step and the
    check's largest errors; or, for a batch that could not run, why."""

    batch: int
    tokens: int
    device_adam_ms: float | None = None
    dpu_ms: float | None = None
    dpu_ratio: dict | None = None  # value, low, high (impl.stats.ratio)
    bound_ratio: float | None = None
    gradient_error: float | None = None
    weight_error: float | None = None
    failed: str | None = None


@dataclass(frozen=True)
class Crossover:
    """Where the ladder put the crossover, in tokens per step: ``tokens`` the fewest measured
    inside WITHIN (None where none was), ``outside_tokens`` the most measured below it outside
    (None where none was), and the verdict in words."""

    tokens: int | None
    outside_tokens: int | None
    verdict: str


@dataclass
class Ladder:
    start_batch: int
    tokens_per_row: int = 1
    points: int = LADDER_POINTS
    ratios: dict[int, dict] = field(default_factory=dict)  # batch -> its ratio (value, low, high)
    failed: dict[int, str] = field(default_factory=dict)  # batch -> why it could not run

    def __post_init__(self):
        if self.start_batch < 1 or self.tokens_per_row < 1 or self.points < 1:
            raise ValueError(f"a ladder needs a start batch, tokens per row and points of at "
                             f"least 1, got {self.start_batch}, {self.tokens_per_row} and "
                             f"{self.points}")

    def inside(self, batch: int) -> bool:
        return self.ratios[batch]["high"] <= WITHIN

    def next_batch(self) -> int | None:
        """The batch to measure next; None when the ladder is done."""
        if not self.ratios and not self.failed:
            return self.start_batch
        if self.failed or len(self.ratios) >= self.points:
            return None
        measured = sorted(self.ratios)
        if self.inside(self.start_batch):  # halve until a batch is outside
            smallest = measured[0]
            return smallest // 2 if self.inside(smallest) and smallest > 1 else None
        largest = measured[-1]
        return None if self.inside(largest) else largest * 2

    def measured(self, batch: int, ratio: dict) -> None:
        self.ratios[batch] = ratio

    def out_of_memory(self, batch: int, message: str) -> None:
        self.failed[batch] = message

    def crossover(self) -> Crossover:
        inside = sorted(b for b in self.ratios if self.inside(b))
        tokens = {b: b * self.tokens_per_row for b in self.ratios | self.failed}
        if not inside:
            largest = max(self.ratios, default=self.start_batch)
            why = (f"batch {max(self.failed)} did not fit ({self.failed[max(self.failed)]})"
                   if self.failed else f"the ladder stops at {self.points} batches")
            return Crossover(None, tokens[largest], (
                f"no batch measured reaches {WITHIN:.2f}×: {interval(self.ratios[largest])} "
                f"at {tokens[largest]:,} tokens a step, the most measured, and {why}"
                if self.ratios else f"nothing measured: {why}"))
        outside = [b for b in self.ratios if b < inside[0]]
        below = max(outside, default=None)
        if below is None:
            return Crossover(tokens[inside[0]], None, (
                f"within {WITHIN:.2f}× at every batch measured, down to {tokens[inside[0]]:,} "
                f"tokens a step ({interval(self.ratios[inside[0]])})"))
        return Crossover(tokens[inside[0]], tokens[below], (
            f"within {WITHIN:.2f}× from {tokens[inside[0]]:,} tokens a step "
            f"({interval(self.ratios[inside[0]])}); {interval(self.ratios[below])} at "
            f"{tokens[below]:,}"))


def interval(ratio: dict) -> str:
    """"1.087× [1.079, 1.101]": a ratio and its 95% interval, to the digits that decide it."""
    return f"{ratio['value']:.3f}× [{ratio['low']:.3f}, {ratio['high']:.3f}]"


def bound_crossover_tokens(fused_ms: dict[int, float], host_work_ms: float) -> float | None:
    """The tokens per step from which the delayed update's bound, max(GPU step, host work),
    is within WITHIN of fused GPU Adam's step: where the GPU step reaches host work / WITHIN,
    on a least-squares line (scipy's linregress) of fused GPU Adam's measured step against
    tokens (``fused_ms``: tokens -> ms). None with fewer than two points or a line that does
    not rise; 0 where the line is there at no tokens."""
    if len(fused_ms) < 2:
        return None
    line = linregress(list(fused_ms), list(fused_ms.values()))
    if line.slope <= 0:
        return None
    return max(0.0, (host_work_ms / WITHIN - line.intercept) / line.slope)
