"""The report's sections: one module per section, named after its partial in
reports/templates/sections/ (``<id>.html.j2``; a ``-cpu`` partial is its section's CPU blocks,
moved by reports/layout.py). Each section of reports/context.py names the function that builds
it (``Section.build``), and report_context calls them in report order.

    abstract.py          abstract            (its parts: headline.py, studies.py)
    methodology.py       methodology, definitions
    overlap.py           overlap, overlap-cpu
    reproducibility.py   reproducibility, agreement
    step_anatomy.py      step-anatomy, step-anatomy-cpu
    interference.py      interference, interference-cpu
    course_study.py      course-study
    allreduce.py         allreduce
    energy.py            energy
    gemm.py              gemm
    tensor_parallel.py   tensor-parallel, tensor-parallel-cpu
    pipeline.py          pipeline            (its hybrid half: hybrid.py)
    prediction.py        prediction
    regression.py        regression
    environment.py       environment, topology
    appendix.py          runs, before-interleaving, cells, tables (detail: reports/layout.py
                         moves the tables whose Placement says so)

Each takes the view (reports/view.py: the merged benchmark rows, the runs, their machines, the
archive, the baseline and the sections built before it) and returns the partial's context:
tables (reports/format.py), figures (reports/figures.py, reports/captions.py) and text,
``empty`` where it has nothing to show.
"""
