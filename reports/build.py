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
identity, impl.rows.merge.identity) the newer file's row wins.

Exit status: 0 built; 2 unusable input (the message names the file and the problem) or a
missing dependency; 3 WeasyPrint reported content it could not render (listed). When the
PDF is what failed (no Pango, or lost content), report.html was written and the message says so.

Inputs: reports/loading.py; rendering and what WeasyPrint may drop: reports/render.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from impl.atomic import unwritable, write_bytes_atomic
from impl.rows.files import ResultsError
from impl.rows.merge import benchmark_rows, merge_rows
from impl.rows.report_records import TRACED
from reports import traces
from reports.loading import BuildError, describe_run, load_archive, load_baseline, load_inputs
from reports.render import import_weasyprint, render_pdf, render_report_html

DEFAULT_OUT = Path("reports/out")


# --- rendering ------------------------------------------------------------------------------


def build(paths: Sequence[str], out: Path, baseline: str | None = None,
          pdf: bool = True) -> dict:
    """Build the report into ``out``; returns {"html": path, "pdf": path or None, "notes"}.

    A BuildError from the PDF step says that report.html was written.
    """
    inputs = load_inputs(paths)
    runs = [describe_run(index, results) for index, results in enumerate(inputs)]
    rows = merge_rows(row for run, results in zip(runs, inputs)
                               for row in benchmark_rows(results.label, run.index,
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
    written = [write_bytes_atomic(out / t[TRACED.file], traces.encode(
        traces.trace(t[TRACED.timeline], t[TRACED.process], t[TRACED.about])))
        for t in timelines]
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
