"""The cost model: every strategy's step, exposed communication and overlap efficiency.

One model for every strategy of the suite, grown from autotune's α–β and ready-time model:

- impl/model/compute.py: the compute-only step (when each gradient is final);
- impl/model/fabric.py: how long an all-reduce takes (α–β fits of measured comm-only times;
  fabric files of nodes and NICs, fabrics/*.toml, read by impl/model/fabric_file.py);
- impl/model/plans.py: each strategy and named variant as a plan (its collectives, when they
  may start, the interference beside them);
- impl/model/schedule.py: the one schedule that turns a plan into a step;
- impl/model/inputs.py and impl/model/validation.py: the model against every measured cell;
- impl/model/scale.py: predictions at 8 to 1024 GPUs for a fabric file;
- impl/model/autotune.py: the chunk count K recommended for the chunked strategy.

    python -m impl.model.validate results/h200x2                 # the validation table
    python -m impl.model.predict results/h200x2/<run>.json --fabric ib400-h200x8
"""
