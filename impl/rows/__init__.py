"""The result row: the one interface between the suite, the report, the gate and the cost model.

A row is one benchmark's ``extra_info``. Each kind of row is declared once, in
impl/rows/kinds.py (identity, fields with unit, definition and shape); the benchmarks write
rows through ``write_row`` (impl/rows/write.py), so a missing, misspelt or mistyped field
fails when the row is written, on the machine that measured it; readers load result files
through impl/rows/files.py, which checks every row against the same declaration, and merge
them with impl/rows/merge.py. Torch-free.

    from impl.rows.write import write_row
    write_row(benchmark, {"kind": "allreduce", "world_size": 2, ...})
"""
