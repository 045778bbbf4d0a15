"""Build the report: result files -> analysis -> figures -> HTML (Jinja) -> PDF (WeasyPrint).

    python -m reports.build                          # newest result file of each machine
    python -m reports.build results/h200x4           # every result file of a folder, merged
    python -m reports.build results --baseline results/baselines/h200x4.json --out /tmp/r
    nox -s report -- results/h200x4

Writes OUT/report.html (self-contained: figures are data URIs) and then OUT/report.pdf, each
through a temporary file and a rename, so a good earlier file is never replaced by a
half-written one. The HTML does not depend on the PDF: it is written even when the PDF cannot
be made, and an earlier report.pdf is then removed so that it is not taken for this build's.
Every step timeline the report draws is also written as a Chrome/Perfetto trace,
OUT/traces/<name>.json (reports/traces.py), named in its caption.
Several files of one machine are merged; where two measure the same thing (same benchmark
identity, analysis.identity) the newer file's row wins.

Exit status: 0 built; 2 unusable input (the message names the file and the problem) or a
missing dependency; 3 WeasyPrint reported content it could not render (listed). When the
PDF is what failed (no Pango, or lost content), report.html was written and the message says so.

WeasyPrint's log during rendering is captured and sorted by what each record costs the PDF:

- Lost content fails the build (exit 3): every ERROR (an image, stylesheet or anchor target
  that failed to load), and every WARNING not named below (an ignored or invalid CSS
  declaration, a target-counter without its anchor, an anchor defined twice, table cells
  dropped).
- TOLERATED_WARNINGS change how the PDF is stored or looks, never what it says: fonts subset
  by fontTools because libharfbuzz-subset0 is missing (the same glyphs), a font embedded whole
  because subsetting failed, a colour-space fallback to sRGB, a deprecated CSS prefix. Each
  kind is printed once as a note, with "(no content lost)".
- A glyph that no installed font has (".notdef glyph rendered"): the PDF draws a box in its
  place and keeps the character in its text layer (pdftotext reads it back); the HTML shows
  it with the reader's fonts. A box is lost content only where it hides a value, and the
  report writes every value (numbers, units, axis and column names) with ASCII and
  REPORT_CHARACTERS, which DejaVu Sans has. So a box for one of those fails the build; a box
  for any other character (CJK or emoji in a workload name, a command, a path, a CPU model:
  text that comes from the inputs) is tolerated and named in one note, with the fonts that
  would draw it. The figures follow the same rule: matplotlib draws their text as outlines
  with its own DejaVu Sans, and a character it lacks becomes a box in the figure.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import sys
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from impl.atomic import unwritable, write_bytes_atomic
from reports import analysis, archive, traces
from reports.captions import Run
from reports.context import report_context
from reports.results import (
    ResultsError,
    ResultsFile,
    find_result_files,
    load_results,
    newest_per_machine,
)
from reports.sections.regression import Baseline

TEMPLATES = Path(__file__).parent / "templates"
DEFAULT_OUT = Path("reports/out")
PANGO_HINT = "WeasyPrint needs Pango: apt-get install libpango-1.0-0 libpangoft2-1.0-0"
TOLERATED_WARNINGS = ("Using fontTools instead of HarfBuzz-Subset", "Unable to subset",
                      "Unable to instantiate", "Unable to save emoji font", "use sRGB instead",
                      "Deprecated `")
MISSING_GLYPH = re.compile(r"^\.notdef glyph rendered for Unicode string unsupported by fonts: "
                           r".* \(U\+([0-9A-F]{4,6})\)$")
# Besides ASCII, the characters reports/format.py, reports/sections/ and the templates write
# values with (tests/test_report.py checks that they use no other).
REPORT_CHARACTERS = "×·−±–—≤≥≈Δ…³“”ᵀ"
FIGURE_MISSING_GLYPH = re.compile(r"^Glyph (\d+) \(.*\) missing from font\(s\)")
FONT_HINT = "fonts-noto-cjk and fonts-noto-color-emoji draw them"

# The fields each kind of row must carry for the report to use it.
REQUIRED_TEXT = {
    "step": ("strategy", "workload", "profile"),
    "comparison": ("workload", "profile", "sequential_reference"),
    "interference": ("workload", "profile"),
    "allreduce": ("profile",),
    "gemm": ("version", "preset", "dtype"),
    "seed_step": ("impl",),
    "tensor_core_ceiling": ("instruction", "dtype"),
    "pipeline": ("variant", "workload"),
    "pipeline_comparison": ("workload",),
    "hybrid_step": ("study", "variant", "workload", "device"),
    "hybrid_comparison": ("study", "workload"),
    "host_adam": ("variant",),
    "digits_curve": ("variant", "device"),
    "gpt_forward": ("device",),
    "tensor_parallel": ("preset", "gemm_backend", "scaling", "schedule", "dtype"),
}
# Nested objects a row of the kind must have (their shapes are in NESTED_SHAPES).
REQUIRED_NESTED = {
    "comparison": ("references", "strategies", "measurement"),
    "interference": ("gemm", "gemm_alone_ms", "slowdown"),
}
# Text fields a row may lack (older runs) or leave null, but that must be text when given:
# the single-GPU studies are selected by device_name (analysis.newest_run_per_gpu).
OPTIONAL_TEXT = {
    "gemm": ("device_name", "kernel_path"),
    "seed_step": ("device_name",),
    "tensor_core_ceiling": ("device_name",),
}
REQUIRED_NUMBERS = {
    "step": ("chunks", "world_size", "step_ms", "samples_per_s", "compute_only_ms",
             "comm_only_ms", "sequential_ms", "limit_ms"),
    "comparison": ("chunks", "world_size"),
    "interference": ("world_size",),
    "allreduce": ("world_size", "size_bytes", "time_ms", "algbw_gbps", "busbw_gbps",
                  "wrong_elements"),
    "synthetic": ("chunks", "step_ms", "sequential_ms", "speedup_pct"),
    "gemm": ("m", "n", "k", "tflops", "arithmetic_intensity", "pct_of_cublas"),
    "seed_step": ("step_ms",),
    "tensor_core_ceiling": ("tflops", "cublas_8192_tflops", "pct_of_cublas_8192"),
    "sampler_overhead": ("overhead_pct", "step_ms_sampler_on", "step_ms_sampler_off"),
    "pipeline": ("stages", "microbatches", "step_ms", "samples_per_s", "bubble_theory"),
    "pipeline_comparison": ("stages", "microbatches"),
    "hybrid_step": ("step_ms", "samples_per_s"),
    "host_adam": ("threads", "parameters", "step_ms", "adam_gbps"),
    "digits_curve": ("epochs", "final_test_accuracy"),
    "gpt_forward": ("first_ms",),
    "tensor_parallel": ("world_size", "step_ms"),
}


# Shapes of the nested extra_info values the report reads; checked once, here, so the
# analysis can trust them. "num" is a finite number, a trailing "?" allows null, a list holds
# one shape for every element (a second element "?" lets the list be null), a dict names its
# keys (extra keys are allowed; a "?" key set to True lets the whole dict be null).
NUM, INT, TEXT = "num", "int", "str"
INTERVAL = {"lane": TEXT, "label": TEXT, "chunk": "int?", "start_ms": NUM, "end_ms": NUM}
TIMELINE = {"intervals": [INTERVAL], "notes": [TEXT]}
NVML_SERIES = {"t_s": [NUM], "series": {"*": [[NUM]]}}
# impl.stats.Estimate as JSON, and impl.comparisons.versus
ESTIMATE = {"value": "num?", "low": "num?", "high": "num?", "rounds": INT}
OPTIONAL_ESTIMATE = {**ESTIMATE, "?": True}
VERSUS = {"speedup": ESTIMATE, "difference_ms": ESTIMATE, "verdict": TEXT}
STRATEGY_FIGURES = {  # impl.comparisons.strategy_figures
    "step_ms": ESTIMATE, "vs_sequential": VERSUS, "vs_ddp?": VERSUS, "vs_ddp_25mb?": VERSUS,
    "hidden_comm_fraction?": OPTIONAL_ESTIMATE, "overlap_efficiency?": OPTIONAL_ESTIMATE,
    "bound_efficiency?": OPTIONAL_ESTIMATE,
    "lost_time": {"exposed_comm_ms": ESTIMATE, "compute_slowdown_ms": ESTIMATE,
                  "other_ms": ESTIMATE, "parts_sum_ms": ESTIMATE, "gap_ms": ESTIMATE}}
NESTED_SHAPES = {
    "timeline": TIMELINE,
    "step_ms_all": [NUM],
    "nvml": {"mean?": {"*": ["num?"]}, "energy_j?": [NUM], "gpus?": [TEXT],
             "period_ms?": "num?", "energy_per_step_j?": "num?", "reason?": "str?",
             "series?": NVML_SERIES},
    "nvml_series": NVML_SERIES,
    "blocks": {"*": [NUM]},
    "curve": {"train_loss": [NUM], "test_loss": [NUM], "test_accuracy": [NUM],
              "epoch_s": [NUM]},
    "iteration_ms": [NUM],
    # tensor_parallel rows (suite/bench_tp.py): Estimate.to_json() per figure, verdicts, GEMMs
    "estimates": {"*": ESTIMATE},
    "verdicts": {"*": TEXT},
    "gemms": [{"label": TEXT, "m": INT, "n": INT, "k": INT, "ms": "num?", "tflops": "num?",
               "arithmetic_intensity": NUM}],
    # interleaved comparisons (suite/bench_overlap.py, bench_interference.py, bench_sampler.py)
    "intervals": {"*": OPTIONAL_ESTIMATE},
    "references": {"compute_only_ms": ESTIMATE, "sequential_ms": ESTIMATE,
                   "sequential_vs_compute_only": VERSUS, "comm_only_ms?": ESTIMATE,
                   "limit_ms?": ESTIMATE, "bound_ms?": ESTIMATE, "compute_to_comm?": ESTIMATE,
                   "bound_update_in_overlap_ms?": ESTIMATE},
    "strategies": {"*": STRATEGY_FIGURES},
    "compared": [TEXT],
    "timelines": {"*": TIMELINE},
    "measurement": {"names": [TEXT], "steps_per_round": INT, "step_ms": {"*": [[NUM]]},
                    "wall_s?": {"*": [NUM]}, "energy_j?": {"*": [NUM]}},
    "ddp_bucket_counts": {"*": INT},
    "gemm": {"m": INT, "n": INT, "k": INT, "dtype": TEXT, "per_step": INT},
    "gemm_alone_ms": ESTIMATE,
    "slowdown": {"*": {"ratio": ESTIMATE, "verdict": TEXT}},
    "overhead_ratio": ESTIMATE,
}
FINGERPRINT_SHAPE = {"gpu_names?": [TEXT], "gpu_uuids?": [TEXT], "machine_label?": "str?",
                     "driver?": "str?", "cuda?": "str?", "nccl?": "str?", "torch?": "str?",
                     "mpi?": "str?", "cpu_model?": "str?", "cpu_cores?": "int?",
                     "gpu_topology?": "str?", "nccl_env?": {"*": TEXT}, "backend?": "str?",
                     "world_size?": "int?", "profile?": "str?", "git_commit?": "str?",
                     "git_dirty?": "bool?",
                     "gpu_limits?": [{"uuid?": "str?", "power_limit_w?": "num?",
                                      "max_sm_clock_mhz?": "num?", "max_mem_clock_mhz?": "num?",
                                      "sm_clock_mhz?": "num?", "mem_clock_mhz?": "num?"}, "?"]}


def _shape_error(value: object, shape: object, where: str) -> str | None:
    """Why ``value`` does not have ``shape`` (see NESTED_SHAPES), or None when it does."""
    if isinstance(shape, str):
        if shape.endswith("?"):
            return None if value is None else _shape_error(value, shape[:-1], where)
        ok = {NUM: _is_number(value) and math.isfinite(value),
              INT: isinstance(value, int) and not isinstance(value, bool),
              TEXT: isinstance(value, str), "bool": isinstance(value, bool)}[shape]
        return None if ok else f"{where} = {value!r:.60}; expected {shape}"
    if isinstance(shape, list):
        if value is None and shape[1:] == ["?"]:
            return None
        if not isinstance(value, list):
            return f"{where} is {type(value).__name__}; expected a list"
        return next((e for i, item in enumerate(value)
                     if (e := _shape_error(item, shape[0], f"{where}[{i}]"))), None)
    if value is None and shape.get("?"):
        return None
    if not isinstance(value, dict):
        return f"{where} is {type(value).__name__}; expected an object"
    for key, inner in shape.items():
        if key == "?":
            continue
        if key == "*":
            error = next((e for k, item in value.items()
                          if (e := _shape_error(item, inner, f"{where}.{k}"))), None)
        elif key.endswith("?"):
            name = key[:-1]
            error = _shape_error(value[name], inner, f"{where}.{name}") if name in value else None
        elif key not in value:
            error = f"{where} has no {key!r}"
        else:
            error = _shape_error(value[key], inner, f"{where}.{key}")
        if error:
            return error
    return None


class BuildError(Exception):
    """A problem the user can fix; printed as one line without a traceback."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


# --- input ----------------------------------------------------------------------------------


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_rows(results: ResultsFile) -> None:
    """The suite's fields this report reads: present, of the right type, finite numbers.

    reports/results.py validates pytest-benchmark's part; this checks extra_info per kind and
    the environment fingerprint the report prints.
    """
    if error := _shape_error(results.machine_info.get("overlap") or {}, FINGERPRINT_SHAPE,
                             "machine_info.overlap"):
        raise ResultsError(results.path, error)
    for benchmark in results.benchmarks:
        info, name = benchmark["extra_info"], benchmark["fullname"]
        kind = info.get("kind")
        for key in REQUIRED_TEXT.get(kind, ()):
            if not isinstance(info.get(key), str):
                raise ResultsError(results.path, f"benchmark {name!r} ({kind}) has "
                                                 f"extra_info.{key} = {info.get(key)!r}; "
                                                 "expected a string")
        for key in OPTIONAL_TEXT.get(kind, ()):
            if info.get(key) is not None and not isinstance(info[key], str):
                raise ResultsError(results.path, f"benchmark {name!r} ({kind}) has "
                                                 f"extra_info.{key} = {info[key]!r:.60}; "
                                                 "expected a string or null")
        for key in REQUIRED_NESTED.get(kind, ()):
            if not isinstance(info.get(key), dict):
                raise ResultsError(results.path, f"benchmark {name!r} ({kind}) has "
                                                 f"extra_info.{key} = {info.get(key)!r:.60}; "
                                                 "expected an object")
        for key in REQUIRED_NUMBERS.get(kind, ()):
            if not _is_number(info.get(key)):
                raise ResultsError(results.path, f"benchmark {name!r} ({kind}) has "
                                                 f"extra_info.{key} = {info.get(key)!r}; "
                                                 "expected a number")
        for key, shape in NESTED_SHAPES.items():
            if info.get(key) is not None and (error := _shape_error(info[key], shape,
                                                                     f"extra_info.{key}")):
                raise ResultsError(results.path, f"benchmark {name!r}: {error}")
        for key, value in info.items():  # NaN or infinity anywhere would poison a table
            if _is_number(value) and not math.isfinite(value):
                raise ResultsError(results.path, f"benchmark {name!r} has extra_info.{key} = "
                                                 f"{value!r}; expected a finite number")


def load_inputs(paths: Sequence[str]) -> list[ResultsFile]:
    """Validated result files, oldest first (so newer rows win when merged)."""
    found = find_result_files(paths) if paths else newest_per_machine("results")
    if not found:
        raise BuildError(f"no result files in {' '.join(paths) if paths else 'results/'}")
    loaded = [load_results(path) for path in found]
    for results in loaded:
        check_rows(results)
    return sorted(loaded, key=lambda r: (r.sort_time, r.path.name))


def load_archive(paths: Sequence[str], inputs: Sequence[ResultsFile]) -> archive.Archive:
    """Every result file the paths name (default: all of results/), validated like the
    inputs, with the logs and gate trials of their folders (reports/archive.py)."""
    found = archive.scan(paths, inputs)
    for results in found.files:
        check_rows(results)
    return found


def describe_run(index: int, results: ResultsFile) -> Run:
    suite = results.data.get("suite") or {}
    command = suite.get("command") or "pytest (no suite record)"
    launcher = suite.get("launcher_command") or command
    created = results.created.isoformat(timespec="seconds") if results.created else None
    passes = suite.get("passes") if isinstance(suite.get("passes"), list) else []
    kinds = Counter(str(b["extra_info"].get("kind")) for b in results.benchmarks)
    return Run(index, results.label, str(results.path), command, launcher, suite.get("mode"),
               results.partial, created, results.fingerprint,
               tuple(suite.get("failed_passes") or ()), suite.get("note"),
               tuple(p for p in passes if isinstance(p, dict)), tuple(sorted(kinds.items())))


def load_baseline(path: str, inputs: Sequence[ResultsFile]) -> Baseline:
    """The baseline file and the candidate benchmarks comparable with it, chosen by the gate's
    own rules (same machine label, then reports/gate/loading.py's comparable_files: same GPUs,
    driver, world size, backend and profile), so the report's table and the gate cannot
    disagree."""
    from reports.gate.loading import GateError, comparable_files, merge_benchmarks

    baseline = load_results(path)
    check_rows(baseline)
    candidates = [r for r in inputs if r.label == baseline.label]
    if not candidates:
        loaded = ", ".join(sorted({r.label for r in inputs}))
        raise BuildError(f"{path}: baseline of machine {baseline.label!r}, but no loaded result "
                         f"file is of that machine (loaded: {loaded})")
    try:
        _, kept, notes = comparable_files([baseline], candidates)
    except GateError as error:
        raise BuildError(f"--baseline {path}: {error}") from None
    return Baseline(str(path), baseline.label, merge_benchmarks([baseline]),
                    merge_benchmarks(kept), notes)


# --- rendering ------------------------------------------------------------------------------


def import_weasyprint():
    """WeasyPrint, or a BuildError saying what to install (it loads Pango when imported)."""
    try:
        with warnings.catch_warnings():
            # Without libharfbuzz-subset0 WeasyPrint also warns on import; rendering names the
            # same fact once as a note (TOLERATED_WARNINGS).
            warnings.filterwarnings("ignore", message="HarfBuzz-Subset will be required")
            import weasyprint
    except OSError as error:  # Pango or one of its libraries is missing
        raise BuildError(f"{PANGO_HINT} ({error})") from None
    except ImportError as error:
        raise BuildError(f"WeasyPrint is not installed: pip install weasyprint ({error})"
                         ) from None
    return weasyprint


def render_html(context: dict) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return environment.get_template("report.html.j2").render(**context)


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def missing_glyph(record: logging.LogRecord) -> str | None:
    """The character WeasyPrint drew as a box because no installed font has it, or None."""
    match = MISSING_GLYPH.match(record.getMessage())
    return chr(int(match.group(1), 16)) if match else None


def writes_values(character: str) -> bool:
    """True for the characters the report writes its values with (module docstring)."""
    return character.isascii() or character in REPORT_CHARACTERS


def lost_content(record: logging.LogRecord) -> bool:
    """True when a WeasyPrint log record means the PDF lacks something (module docstring)."""
    if record.levelno >= logging.ERROR:
        return True
    character = missing_glyph(record)
    if character is not None:
        return writes_values(character)
    return not any(marker in record.getMessage() for marker in TOLERATED_WARNINGS)


def _unique(texts: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(texts))


def _listed(characters: Sequence[str]) -> str:
    return ", ".join(f"{c} (U+{ord(c):04X})" for c in characters)


def tolerated_notes(records: Sequence[logging.LogRecord]) -> list[str]:
    """One line per kind of tolerated record (WeasyPrint repeats them per font or glyph)."""
    characters = _unique(c for r in records if (c := missing_glyph(r)) is not None)
    by_kind: dict[str, list[str]] = {}
    for record in records:
        if missing_glyph(record) is None:
            by_kind.setdefault(record.msg, []).append(record.getMessage())
    notes = []
    for messages in by_kind.values():
        messages = _unique(messages)
        more = f" (and {len(messages) - 1} more like it)" if len(messages) > 1 else ""
        notes.append(f"WeasyPrint: {messages[0]}{more} (no content lost)")
    if characters:
        notes.append(f"WeasyPrint: no installed font has {_listed(characters)}: the PDF draws "
                     "boxes in their place and keeps them in its text, the HTML shows them "
                     f"({FONT_HINT}; input text only, no value lost)")
    return notes


def render_report_html(rows: list[dict], runs: list[Run], compared: Baseline | None,
                       found: archive.Archive | None = None
                       ) -> tuple[str, list[str], list[dict]]:
    """The HTML, with its figures, a note naming characters the figures drew as boxes, and
    the step timelines it draws (for their traces)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        context = report_context(rows, runs, compared, found)
        html = render_html(context)
    characters = []
    for warning in caught:
        match = FIGURE_MISSING_GLYPH.match(str(warning.message))
        if match is None:  # not about glyphs: shown as it would have been
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno)
        else:
            characters.append(chr(int(match.group(1))))
    characters = _unique(characters)
    if lost := [c for c in characters if writes_values(c)]:
        raise BuildError(f"matplotlib's font has no {_listed(lost)}, which the figures write "
                         "values with", status=3)
    if not characters:
        return html, [], context["timelines"]
    return html, [f"matplotlib: its font has no {_listed(characters)}: the figures draw boxes "
                  "in their place (input text only, no value lost)"], context["timelines"]


def render_pdf(weasyprint, html: str, base_url: str) -> tuple[bytes, list[str]]:
    """The PDF and notes on the tolerated warnings; raises BuildError listing lost content."""
    logger = logging.getLogger("weasyprint")
    collector = _Collector()
    propagate = logger.propagate
    logger.addHandler(collector)
    logger.propagate = False  # collected here and reported once, not also printed raw
    try:
        pdf = weasyprint.HTML(string=html, base_url=base_url).write_pdf()
    finally:
        logger.removeHandler(collector)
        logger.propagate = propagate
    fatal = _unique(f"{r.levelname.lower()}: {r.getMessage()}"
                    for r in collector.records if lost_content(r))
    if fatal:
        raise BuildError(f"WeasyPrint could not render all of the report ({len(fatal)} "
                         f"problem(s)): {'; '.join(fatal)}", status=3)
    return pdf, tolerated_notes(collector.records)


def build(paths: Sequence[str], out: Path, baseline: str | None = None,
          pdf: bool = True) -> dict:
    """Build the report into ``out``; returns {"html": path, "pdf": path or None, "notes"}.

    A BuildError from the PDF step says that report.html was written.
    """
    inputs = load_inputs(paths)
    runs = [describe_run(index, results) for index, results in enumerate(inputs)]
    rows = analysis.merge_rows(row for run, results in zip(runs, inputs)
                               for row in analysis.benchmark_rows(results.label, run.index,
                                                                  results.benchmarks))
    compared = load_baseline(baseline, inputs) if baseline else None
    html, notes, timelines = render_report_html(rows, runs, compared, load_archive(paths, inputs))
    written = {"html": write_bytes_atomic(out / "report.html", html.encode()), "pdf": None,
               "notes": notes, "traces": write_traces(out, timelines)}
    if not pdf:
        return written
    try:
        document, pdf_notes = render_pdf(import_weasyprint(), html, str(out.resolve()))
    except BuildError as error:
        earlier = out / "report.pdf"
        removed = f"; removed the earlier {earlier}" if earlier.exists() else ""
        earlier.unlink(missing_ok=True)
        raise BuildError(f"{error} (wrote {written['html']}, no PDF{removed})",
                         error.status) from None
    written["notes"] += pdf_notes
    written["pdf"] = write_bytes_atomic(out / "report.pdf", document)
    return written


def write_traces(out: Path, timelines: Sequence[dict]) -> list[Path]:
    """One Perfetto trace per step timeline of the report; traces of earlier builds that this
    one does not draw are removed, so OUT/traces always matches the report beside it."""
    written = [write_bytes_atomic(out / t["file"], traces.encode(
        traces.trace(t["timeline"], t["process"], t["about"]))) for t in timelines]
    for stale in (out / "traces").glob("*.json"):
        if stale not in written:
            stale.unlink()
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.build", description=(
        "Render the overlap report as HTML and PDF from stored results."))
    parser.add_argument("paths", nargs="*", help="result files or folders (default: the newest "
                        "file of each machine folder under results/)")
    parser.add_argument("--baseline", help="a result file to compare against (regression "
                        "table, reports/gate/rules.py's rule)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"output folder (default: {DEFAULT_OUT})")
    parser.add_argument("--html-only", action="store_true",
                        help="skip the PDF (no WeasyPrint needed)")
    args = parser.parse_args(argv)
    if problem := unwritable(args.out):
        print(f"error: --out={args.out}: {problem}", file=sys.stderr)
        return 2
    try:
        written = build(args.paths, args.out, args.baseline, pdf=not args.html_only)
    except ResultsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.status
    except OSError as error:  # a full disk: each file is written whole or not at all
        print(f"error: --out={args.out}: cannot write the report: {error}", file=sys.stderr)
        return 2
    for note in written["notes"]:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {written['html']}" + (f" and {written['pdf']}" if written["pdf"] else "")
          + (f", {len(written['traces'])} trace(s) in {args.out / 'traces'}"
             if written["traces"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
