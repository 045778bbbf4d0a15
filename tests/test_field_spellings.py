"""Row field names spelled as string literals outside impl/rows: each is a second place that
must change with the declaration (impl/rows/kinds.py). Readers should ask the declaration
(a RowKind's fields, ``names``, ``field``, ``holds``, impl.rows.kinds.is_older_step,
reports.format.Column.of) instead, so the count may only go down: lower CEILINGS when it does.

    python -m pytest tests/test_field_spellings.py -q -s   # prints the count per folder
"""

from __future__ import annotations

import ast
import tokenize
from pathlib import Path

from impl.rows.kinds import ROW_KINDS

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("impl", "suite", "reports")
# String literals equal to a declared field name, per folder. Before RowKind.holds,
# is_older_step and Column.of were used: impl 414, suite 606, reports 978; before
# RowKind.names and RowKind.field: impl 400, suite 604, reports 976; before reports.analysis,
# reports.cells, eight more sections, the cost model, bench_overlap and bench_gemm read them
# through it: impl 400, suite 595, reports 712; before the suite built its rows through
# RowKind.row: impl 203, suite 561, reports 322; before the figures, the interference,
# all-reduce, energy, headline, overlap, anatomy and reproducibility sections and the gate's
# comparison read them through it (and a cell's references through kinds.REFERENCE):
# impl 203, suite 245, reports 322; before the hybrid, pipeline, tensor-parallel, interference
# and GEMM-sweep benchmarks kept their measurements in dataclasses and named their figures
# through it, with impl.comparisons, the tensor-parallel metrics and the terminal summary:
# impl 203, suite 245, reports 243; before the cost model read a cell's references through
# kinds.REFERENCE and its protocol, predict, freeze and measured sweep, the report's scaled
# machines, efficiency footnote and headline and the gate's narrowed passes read their fields
# through it: impl 115, suite 83, reports 238; before a paired comparison's, a measurement's
# and a step timeline's keys were declared (kinds.PAIRED, MEASURED, STEP_TIMELINE) and read
# through it, with HYBRID_FIELDS, the GPT forward table, the tensor-parallel series and the
# roofline and regime figures: impl 91, suite 83, reports 233; before an interference
# slowdown's and an NVML summary's keys were declared (kinds.SLOWDOWN, METERED) and read
# through it, with a measurement's JSON through MEASURED, the study comparisons through PAIRED
# and the offload bound's host Adam rate through HOST_ADAM: impl 78, suite 80, reports 191.
# Before the keys of other records that share field names were declared once in impl/rows
# (predictions, gate_records, report_records, study_records: a frozen prediction, the gate's
# verdicts and trials, a launcher's hang and pass records, a trace event, a row group, the
# suite's axes) and written and read through them: impl 75, suite 76, reports 189. What
# remains are pytest parameter names, table headers, template keys and sentences.
CEILINGS = {"impl": 12, "suite": 23, "reports": 53}


def declared_names() -> set[str]:
    return {field.name for kind in ROW_KINDS.values() for field in kind.fields}


def field_spellings(path: Path, names: set[str]) -> int:
    """String literals in ``path`` whose value is one of ``names`` (f-strings not counted)."""
    count = 0
    with path.open("rb") as source:
        for token in tokenize.tokenize(source.readline):
            if token.type != tokenize.STRING:
                continue
            try:
                value = ast.literal_eval(token.string)
            except ValueError:  # an f-string: not one name
                continue
            count += isinstance(value, str) and value in names
    return count


def product_files(root: Path, folder: str) -> list[Path]:
    """The Python files of ``folder`` but those of impl/rows, where the names are declared."""
    return [path for path in sorted((root / folder).rglob("*.py"))
            if path.relative_to(root).parts[:2] != ("impl", "rows")]


def spellings_by_folder(root: Path = ROOT) -> dict[str, int]:
    names = declared_names()
    return {folder: sum(field_spellings(path, names) for path in product_files(root, folder))
            for folder in FOLDERS}


def test_field_spellings_outside_impl_rows_do_not_grow(capsys):
    counts = spellings_by_folder()
    with capsys.disabled():
        print("\nfield names spelled as string literals:",
              ", ".join(f"{folder} {count}" for folder, count in counts.items()))
    grown = {f: (counts[f], CEILINGS[f]) for f in FOLDERS if counts[f] > CEILINGS[f]}
    assert not grown, (f"more literal field names than recorded (count, ceiling): {grown}; "
                       "read them from the declaration (impl/rows/kinds.py) instead")


def test_the_count_finds_a_literal_and_skips_an_fstring(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('a = row["step_ms"]\nb = f"{x}step_ms"\nc = "step_ms is"\n'
                      "d = 'world_size'\n")
    assert field_spellings(sample, {"step_ms", "world_size"}) == 2

