"""Tensor parallelism: the MLP block split over ranks, its schedules and its metrics.

- impl/tensor_parallel/layers.py: the column- and row-parallel layers and the MLP block they
  make, forward and backward written once, checked against the single-device block;
- impl/tensor_parallel/schedules.py: how the layer's collectives meet its GEMMs (sync,
  overlapped, fused), one contract, with a GEMM backend each;
- impl/tensor_parallel/metrics.py: the study's definitions (TP_FIELDS) and the figures of one
  interleaved measurement (suite/bench_tp.py).

A new schedule is one class filling ``Schedule`` (schedules.py) plus its name in SCHEDULES.
"""
