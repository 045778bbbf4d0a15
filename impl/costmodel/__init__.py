"""The cost model: every strategy's step, exposed communication and overlap efficiency.

One model for every strategy of the suite, grown from autotune's α–β and ready-time model:

- impl/costmodel/compute.py: the compute-only step (when each gradient is final);
- impl/costmodel/fabric.py: how long an all-reduce takes (α–β fits of measured comm-only times,
  the suite's all-reduce sweep; fabric files of nodes and NICs, fabrics/*.toml, read by
  impl/costmodel/fabric_file.py, timed by NCCL's own cost model, impl/costmodel/nccl.py);
- impl/costmodel/variant_plans.py: each strategy and named variant as a plan (its collectives,
  when they may start, the interference beside them);
- impl/costmodel/schedule.py: the one schedule that turns a plan into a step;
- impl/costmodel/overhead.py: each strategy's per-step cost beyond the schedule, the median
  residual of the other measured cells;
- impl/costmodel/inputs.py and impl/costmodel/accuracy.py: the model against every measured cell;
- impl/costmodel/heldout.py: the same on inputs none of which came from the checked cell;
- impl/costmodel/scale.py: predictions at 8 to 1024 GPUs for a fabric file, with stragglers
  and bands;
- impl/costmodel/autotune.py: the chunk count K recommended for the chunked strategy.

    python -m impl.costmodel.validate results/h200x2                 # the validation table
    python -m impl.costmodel.predict results/h200x2/<run>.json --fabric ib400-h200x8

docs/costmodel.md describes the model and holds its held-out validation.
"""
