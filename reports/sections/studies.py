"""One line per study for the abstract: its result with machine, interval and run, or why it has
none.

Each study's record (impl/studies.py) gives its title and benchmark module; ABSTRACT_TESTS
says which studies have a line, in order, and the test functions whose results the line
gives. Where the loaded rows hold a GPU result, the line gives it (machine, interval, run and
commit); where they do not, it says so and names the runs that meant to measure it and did not
finish: bench logs in ``results/<label>/logs/`` (reports/runlogs.py: how the run ended, and
whether it reached the study) and partial result files (``suite.partial`` /
``suite.failed_passes``) whose passes selected the module, and the hangs in its benchmarks that
results files name (``suite.hangs``). The CPU result follows as a check of the method. The
gate's line comes from its trials files.

    lines = section(view)   # [{"study": "Pipeline (bubble ...)", "text": "..."}, ...]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from impl.rows.gate_records import PASS
from impl.rows.kinds import (
    GEMM,
    HYBRID_STEP,
    PIPELINE,
    PIPELINE_COMPARISON,
    TENSOR_PARALLEL,
)
from impl.studies import STUDIES
from reports import analysis
from reports.archive import Archive
from reports.captions import Run, and_list
from reports.format import NA, device_words, fmt, fmt_estimate, fmt_pct, fmt_times
from reports.gate import trial_rates
from reports.runlogs import pass_targets, targets, unfinished
from reports.sections import gemm_sweep, hybrid, tensor_parallel
from reports.sections.hangs import hangs_in
from reports.view import View

# The fields of each kind of row a study's line reads: r[TP.preset].
TP, GEMM_ROW, HYBRID = TENSOR_PARALLEL.names, GEMM.names, HYBRID_STEP.names
PIPE, PIPE_PAIRS = PIPELINE.names, PIPELINE_COMPARISON.names

# study (impl/studies.py) -> the test functions of its module whose results its line gives,
# in the abstract's order
ABSTRACT_TESTS = {
    "tensor parallel": ("test_tp",),
    "pipeline": ("test_pipeline", "test_pipeline_comparison"),
    "hybrid": ("test_offload", "test_offload_comparison", "test_coarse", "test_coarse_comparison",
               "test_digits", "test_gpt_forward"),
    "GEMM": ("test_gemm", "test_gemm_sweep", "test_tensor_core_ceiling", "test_seed_step"),
}
GPU_ONLY = "device-adam"  # the fine-grained hybrid's reference: Adam on the device
VERDICTS = {"no significant difference": "n.s."}
LOG_STAMP = re.compile(r"^(\d{8}T\d{4})")  # a console log's name starts with its UTC start


def run_ref(run: Run) -> str:
    """"quick run of 2026-11-23, 09676a9": the appendix on runs lists it with its file."""
    commit = run.fingerprint.get("git_commit")
    partial = ", partial" if run.partial else ""
    made = f" of {run.created[:10]}" if run.created else ""
    return (f"{run.mode or 'unknown'} run{made}{partial}, "
            f"{commit[:7] if commit else 'commit n/a'}")


def verdict(text: str | None) -> str:
    return VERDICTS.get(text or "", text or "no verdict")


# --- runs that meant to measure a study and did not finish -----------------------------------


def attempts(archive: Archive, module: str, functions: tuple[str, ...],
             measured: Mapping[str, Run] | None = None) -> list[str]:
    """"on h200x2 the run stopped by signal 15 (timeout 250 s) during the pipeline benchmark ...
    (LOG)", per run that selected ``module`` and did not finish it: from its log, else from
    its results file's failed passes (suite.failed_passes) that selected the module.
    ``measured``: per machine label, the run whose result the line gives; an attempt on that
    machine before it is history its result answers (the appendix on runs keeps it)."""
    found, covered = [], set()
    for log in archive.logs:
        if log.wrote:
            covered.add(Path(log.wrote).name)
        covered.add(Path(log.path).name)
        if superseded(archive.label_of_log(log), log_time(log), log.wrote, measured or {}):
            continue
        if targets(log, module, functions) and (how := unfinished(log, module)):
            found.append(f"on {archive.label_of_log(log)} the run {how} (from its console "
                         f"log)")
    files = [f for f in archive.files
             if not superseded(f.label, f.created, str(f.path), measured or {})]
    for results in files:
        suite = results.data.get("suite") or {}
        failed = [p for p in suite.get("passes") or [] if isinstance(p, dict)
                  and p.get(PASS.name) in (suite.get("failed_passes") or ())]
        logged = results.path.name in covered or any(
            name.startswith(results.path.stem + "-") for name in covered)
        if logged or not any(pass_targets(str(p.get("command") or ""), module, functions)
                             for p in failed):
            continue
        names = ", ".join(str(p.get(PASS.name)) for p in failed)
        found.append(f"on {results.label} the pass {names} did not finish (a partial run, "
                     f"appendix on runs)")
    for results in files:  # a hang is named even where the run went on without it
        found += [f"on {results.label} {text} (appendix on runs)" for text in
                  hangs_in(results.data.get("suite") or {}, module, functions)]
    return found


def log_time(log) -> datetime | None:
    """When a console log's run started, from its name (results/<label>/logs/20261127T1707-…,
    UTC), None when its name does not say."""
    stamp = LOG_STAMP.match(Path(log.path).name)
    return datetime.strptime(stamp.group(1), "%Y%m%dT%H%M").replace(tzinfo=UTC) if stamp else None


def superseded(label: str, when: datetime | None, wrote: str | None,
               measured: Mapping[str, Run]) -> bool:
    """Whether an attempt on ``label`` at ``when`` came before the run whose result the line
    gives there (and is not that run itself: a hang inside it stays named)."""
    run = measured.get(label)
    if run is None or run.created is None or when is None:
        return False
    if wrote is not None and Path(wrote).name == Path(run.path).name:
        return False
    return when < datetime.fromisoformat(run.created)


# --- each study's result on one machine --------------------------------------------------------


def tp_text(rows: Sequence[dict], machine: str) -> tuple[str, dict] | None:
    """Overlapped and fused against sync, strong scaling at the largest world measured, torch
    GEMMs where measured."""
    mine = [r for r in tensor_parallel.variant_rows(rows) if r["machine"] == machine
            and r[TP.scaling] == "strong"]
    if not mine:
        return None
    backend = "torch" if any(r[TP.gemm_backend] == "torch" for r in mine) else mine[0][
        TP.gemm_backend]
    preset = next(r[TP.preset] for r in mine if r[TP.gemm_backend] == backend)
    world = max(r[TP.world_size] for r in mine if (r[TP.preset], r[TP.gemm_backend]) == (
        preset, backend))
    found = {r[TP.schedule]: r for r in mine if (r[TP.preset], r[TP.gemm_backend],
                                                 r[TP.world_size]) == (preset, backend, world)}
    parts = [f"{schedule} {fmt_times(found[schedule]['estimates'].get('overlap_speedup'))} "
             f"({verdict((found[schedule].get('verdicts') or {}).get('overlap_speedup'))})"
             for schedule in ("overlapped", "fused") if schedule in found]
    if not parts:
        return None
    row = found.get("overlapped") or found.get("fused")
    return (f"{machine} ({preset}, {backend} GEMMs, strong scaling to {world} ranks), speed "
            f"against sync: {and_list(parts)}", row)


def pipeline_text(rows: Sequence[dict], machine: str) -> tuple[str, dict] | None:
    """Bubble against the theory and ours against the library at the largest p, then m."""
    mine = [r for r in analysis.of_kind(rows, PIPELINE.name) if r["machine"] == machine]
    if not mine:
        return None
    stages = max(r[PIPE.stages] for r in mine)
    m = max(r[PIPE.microbatches] for r in mine if r[PIPE.stages] == stages)
    at = [r for r in mine if (r[PIPE.stages], r[PIPE.microbatches]) == (stages, m)]
    bubbles = [f"{r['variant']} {fmt_estimate(r.get('bubble_estimate'))}" for r in at
               if r.get(PIPE.bubble_estimate)]
    text = (f"{machine} ({at[0]['workload']}, p = {stages}, m = {m}): bubble "
            f"{and_list(bubbles) or NA} against (p − 1)/(m + p − 1) = "
            f"{fmt(at[0]['bubble_theory'])}")
    compared = [pair for r in analysis.of_kind(rows, PIPELINE_COMPARISON.name)
                if r["machine"] == machine
                and (r[PIPE_PAIRS.stages], r[PIPE_PAIRS.microbatches]) == (stages, m)
                for pair in r.get(PIPE_PAIRS.comparisons) or []
                if pair["reference"].startswith("torch-")]
    if compared:
        text += "; against the library " + and_list(
            [f"{p['candidate']} {fmt_times(p.get('speedup'))} ({verdict(p.get('verdict'))})"
             for p in compared])
    return text, at[0]


def hybrid_text(rows: Sequence[dict], machine: str) -> tuple[str, dict] | None:
    """Each offload variant against Adam on the device, in the same rounds (paired)."""
    from impl.comparisons import versus  # imports numpy and scipy: only where compared

    steps = [r for r in analysis.of_kind(rows, HYBRID_STEP.name) if r["machine"] == machine
             and r.get(HYBRID.study) == "fine-grained" and r.get(HYBRID.round_ms)]
    references = [r for r in steps if r[HYBRID.variant] == GPU_ONLY]
    if not references:
        return None
    # The newest run's (runs are numbered oldest first): its figures are the ones quoted, and
    # page 1 names the run they come from after this text (study_line).
    reference = max(references, key=lambda r: r["run"])
    if family := hybrid.family_headline_text(rows, machine):  # the family, not one cell
        return f"{machine} ({device_words(reference['device'])}): {family}", reference
    parts = []  # results files from before the family: their one workload
    for row in steps:
        own, reference_ms = row[HYBRID.round_ms], reference[HYBRID.round_ms]
        if row[HYBRID.variant] not in hybrid.HEADLINE_VARIANTS or (
                row["run"] != reference["run"] or len(own) != len(reference_ms)):
            continue
        compared = versus(own, reference_ms)
        parts.append(f"{row['variant']} {fmt_times(compared['speedup'])} "
                     f"({verdict(compared['verdict'])})")
    if not parts:
        return None
    return (f"{machine} ({reference['workload']}, {device_words(reference['device'])}), "
            f"speed against "
            f"{GPU_ONLY}: {and_list(parts)}", reference)


def gemm_text(rows: Sequence[dict], machine: str) -> tuple[str, dict] | None:
    """The GEMM sweep's geometric mean and minimum (gemm_sweep.sweep_headline) where the
    machine ran it; otherwise the fastest own kernel at the largest bf16 shape, as % of
    cuBLAS in the same process, with the gap between that cuBLAS baseline and cuBLAS's own
    row as its margin."""
    swept = [r for r in analysis.newest_run_per_gpu(rows, gemm_sweep.KIND)
             if r["machine"] == machine]
    if line := gemm_sweep.sweep_headline(swept):
        return f"{machine}: {line}", swept[0]
    mine = [r for r in analysis.newest_run_per_gpu(rows, GEMM.name) if r["machine"] == machine
            and r[GEMM_ROW.dtype] == "bf16"]
    if not mine:
        return None
    size = lambda r: r[GEMM_ROW.m] * r[GEMM_ROW.n] * r[GEMM_ROW.k]
    largest = max(size(r) for r in mine)
    at = [r for r in mine if size(r) == largest]
    own = [r for r in at if r[GEMM_ROW.version] != "cublas"]
    if not own:
        return None
    best = max(own, key=lambda r: r[GEMM_ROW.tflops])
    cublas = next((r for r in at if r[GEMM_ROW.version] == "cublas"), None)
    margin = ""
    # cuBLAS's own row: its time against the baseline cuBLAS time its shape's rows divide by
    if cublas and cublas.get(GEMM_ROW.cublas_ms) and cublas.get(GEMM_ROW.time_ms):
        baseline = cublas[GEMM_ROW.cublas_ms]
        gap = 100 * abs(cublas[GEMM_ROW.time_ms] - baseline) / baseline
        margin = (f" (±{fmt_pct(gap)}: cuBLAS timed twice there; {best['rounds']} rounds, "
                  f"no interval)")
    shape = f"{best['m']}×{best['n']}×{best['k']}"
    return (f"{machine} ({analysis.gpu_model(best)}): {best['version']} "
            f"{fmt(best['tflops'])} TFLOP/s at {shape} bf16, {fmt_pct(best['pct_of_cublas'])} "
            f"of cuBLAS in the same process{margin}", best)


RESULTS: dict[str, Callable[[Sequence[dict], str], tuple[str, dict] | None]] = {
    "tensor parallel": tp_text, "pipeline": pipeline_text, "hybrid": hybrid_text,
    "GEMM": gemm_text}


def study_line(study: str, view: View) -> str:
    """The study's line: GPU results with their runs, or that there is none and why, and the
    CPU result where there is no GPU one."""
    module, functions = Path(STUDIES[study].module).stem, ABSTRACT_TESTS[study]
    rows, runs = view.rows, view.runs
    machines = list(dict.fromkeys(r.label for r in runs))
    results = {m: found for m in machines if (found := RESULTS[study](rows, m))}
    gpu = {m: r for m, r in results.items() if m in view.machines.gpu}
    failed = attempts(view.archive, module, functions,
                      {m: runs[row["run"]] for m, (_, row) in gpu.items()})
    parts = [f"{text} ({run_ref(runs[row['run']])})" for text, row in gpu.values()]
    if not gpu:
        parts.append("no GPU result" + (": " + "; ".join(failed) if failed else
                                         " (no GPU run of it in the loaded folders)"))
        parts += [f"CPU check of the method: {text} ({run_ref(runs[row['run']])})"
                  for m, (text, row) in results.items()]
    elif failed:
        parts.append("unfinished: " + "; ".join(failed))
    return "; ".join(parts) + "."


def gate_line(archive: Archive) -> str:
    """False alarms and detections with their 95% intervals, per machine's current trials
    (gate-trials.json; trials of earlier gate settings are counted, not repeated)."""
    rates = trial_rates.trial_rates(archive.trials)
    if not rates:
        return "no gate trials in the loaded folders (python -m reports.gate.trials makes them)."
    current = [r for r in rates if Path(r["source"]).name == "gate-trials.json"] or rates
    parts = [f"{r['machine']}: false alarms {r['false_alarms']}, detections {r['detections']}"
             for r in current]  # its file is in the regression chapter
    others = len(rates) - len(current)
    more = f"; {others} more trials file(s) of earlier gate settings" if others else ""
    return "; ".join(parts) + more + "."


def section(view: View) -> list[dict]:
    lines = [{"study": STUDIES[study].title, "text": study_line(study, view)}
             for study in ABSTRACT_TESTS]
    lines.append({"study": STUDIES["gate"].title, "text": gate_line(view.archive)})
    return lines

