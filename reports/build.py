"""Build the report: result files -> analysis -> figures -> HTML (Jinja) -> PDF (WeasyPrint).

    python -m reports.build                          # newest result file of each machine
    python -m reports.build results/h200x4           # every result file of a folder, merged
    python -m reports.build results --baseline results/baselines/h200x4.json --out /tmp/r
    nox -s report -- results/h200x4

Writes OUT/report.html (self-contained: figures are data URIs) and OUT/report.pdf, each
through a temporary file and a rename, and only once both rendered: a good earlier report is
never replaced by a half-written one. Several files of one machine are merged; where two
measure the same thing (same benchmark identity, analysis.identity) the newer file's row wins.

Exit status: 0 built; 2 unusable input (the message names the file and the problem) or a
missing dependency; 3 WeasyPrint reported content it could not render (listed).

WeasyPrint's log during rendering is captured. Every ERROR (an image, stylesheet or anchor
target that failed) fails the build, and so does every WARNING except TOLERATED_WARNINGS,
which change how something looks but lose nothing: font subsetting falling back to whole
fonts, colour-space fallbacks to sRGB, deprecated prefixes. The rest (an ignored or invalid
CSS declaration, a glyph missing from every font, a target-counter without its anchor, an
anchor defined twice, table cells dropped) means the PDF lacks something the HTML shows.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from impl.atomic import write_bytes_atomic
from reports import analysis
from reports.results import (
    ResultsError,
    ResultsFile,
    find_result_files,
    load_results,
    newest_per_machine,
)
from reports.sections import Baseline, Run, report_context

TEMPLATES = Path(__file__).parent / "templates"
DEFAULT_OUT = Path("reports/out")
PANGO_HINT = "WeasyPrint needs Pango: apt-get install libpango-1.0-0 libpangoft2-1.0-0"
TOLERATED_WARNINGS = ("Unable to subset", "Unable to instantiate", "Unable to save emoji font",
                      "use sRGB instead", "Deprecated `")

# The fields each kind of row must carry for the report to use it.
REQUIRED_TEXT = {
    "step": ("strategy", "workload", "profile"),
    "allreduce": ("profile",),
    "gemm": ("version", "preset", "dtype"),
    "seed_step": ("impl",),
    "tensor_core_ceiling": ("instruction", "dtype"),
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
    "allreduce": ("world_size", "size_bytes", "time_ms", "algbw_gbps", "busbw_gbps",
                  "wrong_elements"),
    "synthetic": ("chunks", "step_ms", "sequential_ms", "speedup_pct"),
    "gemm": ("m", "n", "k", "tflops", "arithmetic_intensity", "pct_of_cublas"),
    "seed_step": ("step_ms",),
    "tensor_core_ceiling": ("tflops", "cublas_8192_tflops", "pct_of_cublas_8192"),
    "sampler_overhead": ("overhead_pct", "step_ms_sampler_on", "step_ms_sampler_off"),
}


# Shapes of the nested extra_info values the report reads; checked once, here, so the
# analysis can trust them. "num" is a finite number, a trailing "?" allows null, a list holds
# one shape for every element, a dict names its keys (extra keys are allowed).
NUM, INT, TEXT = "num", "int", "str"
INTERVAL = {"lane": TEXT, "label": TEXT, "chunk": "int?", "start_ms": NUM, "end_ms": NUM}
NESTED_SHAPES = {
    "timeline": {"intervals": [INTERVAL], "notes": [TEXT]},
    "step_ms_all": [NUM],
    "nvml": {"mean?": {"*": ["num?"]}, "energy_j?": [NUM], "gpus?": [TEXT],
             "period_ms?": "num?", "energy_per_step_j?": "num?", "reason?": "str?"},
    "nvml_series": {"t_s": [NUM], "series": {"*": [[NUM]]}},
    "blocks": {"*": [NUM]},
}
FINGERPRINT_SHAPE = {"gpu_names?": [TEXT], "gpu_uuids?": [TEXT], "machine_label?": "str?",
                     "driver?": "str?", "cuda?": "str?", "nccl?": "str?", "torch?": "str?",
                     "mpi?": "str?", "cpu_model?": "str?", "cpu_cores?": "int?",
                     "gpu_topology?": "str?", "nccl_env?": {"*": TEXT}, "backend?": "str?",
                     "world_size?": "int?", "profile?": "str?", "git_commit?": "str?"}


def _shape_error(value: object, shape: object, where: str) -> str | None:
    """Why ``value`` does not have ``shape`` (see NESTED_SHAPES), or None when it does."""
    if isinstance(shape, str):
        if shape.endswith("?"):
            return None if value is None else _shape_error(value, shape[:-1], where)
        ok = {NUM: _is_number(value) and math.isfinite(value),
              INT: isinstance(value, int) and not isinstance(value, bool),
              TEXT: isinstance(value, str)}[shape]
        return None if ok else f"{where} = {value!r:.60}; expected {shape}"
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where} is {type(value).__name__}; expected a list"
        return next((e for i, item in enumerate(value)
                     if (e := _shape_error(item, shape[0], f"{where}[{i}]"))), None)
    if not isinstance(value, dict):
        return f"{where} is {type(value).__name__}; expected an object"
    for key, inner in shape.items():
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


def describe_run(index: int, results: ResultsFile) -> Run:
    suite = results.data.get("suite") or {}
    command = suite.get("command") or "pytest (no suite record)"
    launcher = suite.get("launcher_command") or command
    created = results.created.isoformat(timespec="seconds") if results.created else None
    return Run(index, results.label, str(results.path), command, launcher, suite.get("mode"),
               results.partial, created, results.fingerprint,
               tuple(suite.get("failed_passes") or ()), suite.get("note"))


def load_baseline(path: str, inputs: Sequence[ResultsFile]) -> Baseline:
    """The baseline file and the candidate benchmarks comparable with it, chosen by the gate's
    own rules (same machine label, then reports.gate.comparable_files: same GPUs, driver,
    world size, backend and profile), so the report's table and the gate cannot disagree."""
    from reports.gate import GateError, comparable_files, merge_benchmarks

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


def lost_content(record: logging.LogRecord) -> bool:
    """True when a WeasyPrint log record means the PDF lacks something (module docstring)."""
    if record.levelno >= logging.ERROR:
        return True
    message = record.getMessage()
    return not any(marker in message for marker in TOLERATED_WARNINGS)


def render_pdf(weasyprint, html: str, base_url: str) -> tuple[bytes, list[str]]:
    """The PDF and the tolerated warnings; raises BuildError listing any lost content."""
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
    fatal = [r for r in collector.records if lost_content(r)]
    if fatal:
        listed = "; ".join(f"{r.levelname.lower()}: {r.getMessage()}" for r in fatal)
        raise BuildError(f"WeasyPrint could not render all of the report ({len(fatal)} "
                         f"problem(s)): {listed}", status=3)
    return pdf, [r.getMessage() for r in collector.records]


def build(paths: Sequence[str], out: Path, baseline: str | None = None,
          pdf: bool = True) -> dict:
    """Build the report into ``out``; returns {"html": path, "pdf": path or None, "notes"}."""
    weasyprint = import_weasyprint() if pdf else None  # fail before any slow work
    inputs = load_inputs(paths)
    runs = [describe_run(index, results) for index, results in enumerate(inputs)]
    rows = analysis.merge_rows(row for run, results in zip(runs, inputs)
                               for row in analysis.benchmark_rows(results.label, run.index,
                                                                  results.benchmarks))
    compared = load_baseline(baseline, inputs) if baseline else None
    html = render_html(report_context(rows, runs, compared))
    notes: list[str] = []
    document = None
    if weasyprint is not None:
        document, notes = render_pdf(weasyprint, html, str(out.resolve()))
    written = {"html": write_bytes_atomic(out / "report.html", html.encode()), "pdf": None,
               "notes": notes}
    if document is not None:
        written["pdf"] = write_bytes_atomic(out / "report.pdf", document)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.build", description=(
        "Render the overlap report as HTML and PDF from stored results."))
    parser.add_argument("paths", nargs="*", help="result files or folders (default: the newest "
                        "file of each machine folder under results/)")
    parser.add_argument("--baseline", help="a result file to compare against (regression "
                        "table, reports/gate.py's rule)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"output folder (default: {DEFAULT_OUT})")
    parser.add_argument("--html-only", action="store_true",
                        help="skip the PDF (no WeasyPrint needed)")
    args = parser.parse_args(argv)
    try:
        written = build(args.paths, args.out, args.baseline, pdf=not args.html_only)
    except ResultsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.status
    for note in written["notes"]:
        print(f"note: WeasyPrint: {note}", file=sys.stderr)
    print(f"wrote {written['html']}" + (f" and {written['pdf']}" if written["pdf"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
