"""WeasyPrint's warnings, fonts and images."""

from __future__ import annotations

import html as html_text
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reports import build, render
from tests.committed import ROOT_COPY
from tests.report.helpers import (
    CPU_FIXTURE,
    ROOT,
)


def weasyprint_record(level: int, message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("weasyprint", level, __file__, 0, message, args, None)


NOTDEF = '.notdef glyph rendered for Unicode string unsupported by fonts: "%s" (U+%04X)'


def test_warning_policy():
    assert render.lost_content(weasyprint_record(logging.ERROR, "Failed to load image at 'x.png'"))
    assert render.lost_content(weasyprint_record(logging.WARNING,
                                                "Ignored `foo: bar` at 1:2, unknown."))
    assert not render.lost_content(weasyprint_record(logging.WARNING,
                                                    'Unable to subset "DejaVu" with HarfBuzz'))
    # A box in place of a character the report writes values with hides a value; a box for
    # CJK or emoji from the inputs does not (build.py's docstring).
    for character in ("7", "%", "−", "×"):
        assert render.lost_content(weasyprint_record(logging.WARNING, NOTDEF, character,
                                                    ord(character))), character
    for character in ("策", "🚀"):
        assert not render.lost_content(weasyprint_record(logging.WARNING, NOTDEF, character,
                                                        ord(character))), character


def test_report_text_uses_only_characters_dejavu_draws():
    """REPORT_CHARACTERS lists every non-ASCII character the report writes values with."""
    from impl.rows.metric_fields import ALLREDUCE_FIELDS, STEP_FIELDS

    sources = [*(ROOT / "reports").glob("*.py"), *(ROOT / "reports" / "templates").rglob("*")]
    texts = [path.read_text(encoding="utf-8") for path in sources if path.is_file()]
    texts += [field.definition for field in (*STEP_FIELDS, *ALLREDUCE_FIELDS)]
    used = {c for text in texts for c in text if not c.isascii()}
    assert used <= set(render.REPORT_CHARACTERS), sorted(used - set(render.REPORT_CHARACTERS))


def pdf_pages_text(path: Path) -> list[str]:
    pypdf = pytest.importorskip("pypdf")
    return [page.extract_text() for page in pypdf.PdfReader(path).pages]


def build_in_process(capsys, *args: str) -> tuple[int, list[str], str]:
    """``python -m reports.build ARGS`` in this process, so that monkeypatches apply: its exit
    status, its stderr lines and its stdout."""
    status = build.main(list(args))
    captured = capsys.readouterr()
    return status, captured.err.splitlines(), captured.out


def wrote_line(out: Path) -> str:
    """What a build that wrote both files and its traces prints."""
    traces = len(list((out / "traces").glob("*.json")))
    return (f"wrote {out / 'report.html'} and {out / 'report.pdf'}, {traces} trace(s) in "
            f"{out / 'traces'}\n")


def test_fonttools_subsetting_is_one_note_and_loses_nothing(tmp_path, monkeypatch, capsys):
    """Without libharfbuzz-subset0, WeasyPrint subsets fonts with fontTools and warns."""
    fonts = pytest.importorskip("weasyprint.pdf.fonts")
    with_harfbuzz = build.build([str(CPU_FIXTURE)], tmp_path / "harfbuzz")
    # What weasyprint.text.ffi leaves there when libharfbuzz-subset.so.0 cannot be loaded:
    # WeasyPrint then takes its real fontTools path and logs its real warning.
    monkeypatch.setattr(fonts, "harfbuzz_subset", None)
    out = tmp_path / "fonttools"
    status, notes, stdout = build_in_process(capsys, str(CPU_FIXTURE), "--out", str(out))
    assert status == 0 and len(notes) == 1, notes
    assert notes[0].startswith('note: WeasyPrint: Using fontTools instead of HarfBuzz-Subset '
                               'for font "DejaVu '), notes[0]
    assert notes[0].endswith("(no content lost)"), notes[0]
    assert stdout == wrote_line(out)
    assert pdf_pages_text(out / "report.pdf") == pdf_pages_text(with_harfbuzz["pdf"])


def test_unloadable_image_fails_with_exit_3_and_keeps_the_html(tmp_path, monkeypatch, capsys):
    from reports import figures

    # Every figure an image WeasyPrint cannot decode: content the PDF would lack.
    monkeypatch.setattr(figures, "data_uri", lambda image: "data:image/png;base64,AAAA")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.pdf").write_bytes(b"%PDF- an earlier build")
    status, lines, stdout = build_in_process(capsys, str(CPU_FIXTURE), "--out", str(out))
    assert status == 3 and len(lines) == 1, lines
    assert lines[0].startswith("error: WeasyPrint could not render all of the report (1 "
                               "problem(s)): error: Failed to load image at "), lines[0]
    assert lines[0].endswith(f"(wrote {out / 'report.html'}, no PDF; removed the earlier "
                             f"{out / 'report.pdf'})"), lines[0]
    assert stdout == ""
    assert 'src="data:image/png;base64,AAAA"' in (out / "report.html").read_text()
    assert not (out / "report.pdf").exists()


# Characters DejaVu lacks, in text that comes from a result file: its folder, its command, the
# CPU model, a workload and a strategy name.
CJK_FOLDER, CJK_COMMAND, CJK_CPU = "結果🚀", "実験", "処理装置 🖥"
CJK_WORKLOAD, CJK_STRATEGY = "mlp_小さい", "threaded_策略🚀"


def dejavu_only_fontconfig(folder: Path) -> Path:
    """A fontconfig file whose only fonts are matplotlib's copies of DejaVu, the report's font:
    the build sees the same fonts whatever this machine has installed (CJK fonts included)."""
    import matplotlib

    fonts = folder / "fonts"
    fonts.mkdir()
    for font in (Path(matplotlib.get_data_path()) / "fonts" / "ttf").glob("DejaVu*.ttf"):
        (fonts / font.name).symlink_to(font)
    config = folder / "fonts.conf"
    config.write_text(f"<?xml version=\"1.0\"?>\n<fontconfig><dir>{fonts}</dir>"
                      f"<cachedir>{folder / 'cache'}</cachedir></fontconfig>\n")
    return config


@pytest.fixture(scope="module")
def cjk_built(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("cjk")
    folder = root / CJK_FOLDER
    folder.mkdir()
    document = json.loads(CPU_FIXTURE.read_text())
    document["suite"]["command"] += f" --note {CJK_COMMAND}"
    document["machine_info"]["overlap"]["cpu_model"] = f"AMD EPYC {CJK_CPU}"
    for benchmark in document["benchmarks"]:
        info = benchmark["extra_info"]
        if info.get("workload") == "mlp_tiny":
            info["workload"] = CJK_WORKLOAD
        if info.get("strategy") == "threaded":
            info["strategy"] = CJK_STRATEGY
    path = folder / "cpu-2core.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    out = root / "out"
    env = {**os.environ, "FONTCONFIG_FILE": str(dejavu_only_fontconfig(root)),
           "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "reports.build", str(path), "--out", str(out)],
                            cwd=ROOT_COPY, env=env, capture_output=True, text=True, timeout=300,
                            check=False)
    return {"result": result, "out": out, "path": path}


def test_cjk_and_emoji_in_the_inputs_build_both_files_with_notes(cjk_built):
    result, out = cjk_built["result"], cjk_built["out"]
    assert result.returncode == 0, result.stderr
    assert result.stdout == wrote_line(out)
    # This run was measured before interleaving: its rows are in an appendix table, no figure
    # draws their names, so the only note on the glyphs is the PDF's. Without the optional
    # libharfbuzz-subset0 a subsetting note comes too (its own test is above): not counted here.
    notes = [line for line in result.stderr.splitlines()
             if "Using fontTools instead of HarfBuzz-Subset" not in line]
    assert len(notes) == 1, result.stderr
    pdf_note = notes[0]
    assert pdf_note.startswith("note: WeasyPrint: no installed font has "), pdf_note
    assert pdf_note.endswith("(fonts-noto-cjk and fonts-noto-color-emoji draw them; input text "
                             "only, no value lost)"), pdf_note
    expected = {c for text in (CJK_FOLDER, CJK_COMMAND, CJK_CPU, CJK_WORKLOAD, CJK_STRATEGY)
                for c in text if not c.isascii() and not c.isspace()}
    listed = set(re.findall(r"(\S) \(U\+[0-9A-F]{4,6}\)", pdf_note))
    assert listed == expected
    html = (out / "report.html").read_text(encoding="utf-8")
    for text in (CJK_COMMAND, CJK_CPU, CJK_WORKLOAD, CJK_STRATEGY, str(cjk_built["path"])):
        assert html_text.escape(text, quote=False) in html, text


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) missing")
def test_cjk_and_emoji_stay_in_the_pdf_text(cjk_built):
    assert cjk_built["result"].returncode == 0, cjk_built["result"].stderr
    text = subprocess.run(["pdftotext", str(cjk_built["out"] / "report.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    flat = re.sub(r"\s", "", text)  # table cells wrap long names over lines
    for value in (CJK_COMMAND, CJK_CPU, CJK_WORKLOAD, CJK_STRATEGY):
        assert re.sub(r"\s", "", value) in flat, value
