"""What a strategy is built with besides its model, workload and group: one frozen dataclass.

Every field has the default of the plain strategy; a named variant (impl/strategy_records.py,
VARIANTS) is a strategy and the fields that differ. It sits below both the contract
(impl/strategies/base.py) and the knobs, which read its fields.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StrategyOptions:
    chunks: int = 1  # K gradient chunks (element ranges of the flat gradient buffer)
    lr: float = 1e-3
    ddp_bucket_mb: float | None = None  # ddp only: None derives the cap from ``chunks``
    synthetic_scale: float = 1.0  # synthetic only: multiplies the study's 300/200 ms
    synthetic_overlap: bool = True  # synthetic only: False runs the study's sequential model
    # Check every gradient for NaN/Inf before it leaves the rank (impl/finite.py). It adds a
    # CPU-GPU sync per step, so the suite's timed rounds turn it off; its checks keep it on.
    check_finite: bool = True
    # How the K chunks are cut (impl/gradients.py): "bytes" (equal sizes) or "layers" (equal
    # numbers of parameter tensors); first_chunk_mb makes the first chunk that size (DDP's
    # 1 MB first bucket) so the first all-reduce starts early.
    chunk_split: str = "bytes"
    first_chunk_mb: float | None = None
    # Update each chunk's parameters as soon as its all-reduce has finished, on the
    # communication side, so only the last chunk's update stays on the critical path
    # (strategies with ``supports_update_in_overlap``).
    update_in_overlap: bool = False
    # GPU knobs: the communication stream's priority ("normal" or "high"), NCCL's CTA cap for
    # the strategy's collectives (a process group of its own), and SMs kept from cuBLAS.
    comm_priority: str = "normal"
    nccl_max_ctas: int | None = None
    cublas_sm_carveout: int | None = None
