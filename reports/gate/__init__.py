"""The throughput regression gate: baseline results against candidate results, pass or fail.

    python -m reports.gate BASELINE CANDIDATE --confirm       # nox -s gate -- ...
    python -m reports.gate --update-baseline RUN RUN RUN
    python -m reports.gate.trials --pairs 40                  # the gate's own error rates

First the files alone (rules.py: a noise-aware threshold, spread.py, and a rank test per
benchmark), then the re-run of what they flag (confirm.py, suspects.py):

Confirmation (``--confirm``, confirm.py): every benchmark whose files-only ratio
may hide a loss above the minimum once the recorded drift is allowed for (r < (1 - minimum) *
exp(spread)) is measured again, baseline code and candidate code interleaved in blocks on
this machine, and the paired re-run decides it: regressed only when the 95% interval of its
throughput loss lies entirely above the minimum threshold.

Why files alone never fail the gate: they cannot keep a false-alarm rate. Two files of
unchanged code differ by the machine's drift, which no test on their rounds sees, and a suite
file holds hundreds of benchmarks, so some always cross any per-benchmark threshold: 11 of
12 back-to-back unchanged quick pairs and 12 of 12 default pairs on the 2-core machine had
files-only "regressions" (docs/gate.md says how it was measured over whole quick
suites). The re-run removes the drift by interleaving; trials.py measures its
false alarms. CI (bench.yml, through ``nox -s gate``) reads 3 as a warning.

One job a module: rules.py (the files-only rule), loading.py (which files compare),
comparison.py (verdicts and status), render.py (table and Markdown), baseline.py
(--update-baseline), spread.py (run-to-run spread), confirm.py (the interleaved re-run),
suspects.py (what it re-runs, with which code), cli.py (the command); trials.py,
trials_record.py and trial_rates.py measure the gate and read its measured error rates.
"""
