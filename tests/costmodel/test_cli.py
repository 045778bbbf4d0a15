"""The cost model's command line (issue 52, item 6): each unusable input is one line naming the
file or folder and what to do, exit 2; a partial run is used with a one-line warning or refused
by --no-partial; messages name runs by their file."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from impl.costmodel import predict, validate
from impl.costmodel.inputs import run_name
from impl.rows.files import ResultsError, load_results
from tests.committed import RESULTS

ROOT = Path(__file__).resolve().parent.parent.parent

PARTIAL = str(RESULTS / "h200x2" / "20261123T094012Z.json")  # the README's example: partial
EARLIER_PARTIAL = str(RESULTS / "h200x2" / "20261123T091135Z.json")
COMPLETE = str(RESULTS / "h200x1" / "20261125T022950Z-649c5il2.json")
FABRIC = ["--fabric", "ib400-h200x8"]
WARNING = ("warning: {}: a partial run (suite.partial: stopped part-way, some benchmarks "
           "missing), used as it is; --no-partial refuses it\n")
REFUSED = ("error: {}: a partial run (suite.partial: stopped part-way, some benchmarks "
           "missing), refused by --no-partial\n")


@pytest.fixture
def fitted_on(monkeypatch):
    """predict without fitting the held-out model on every committed run (seconds): the
    folders it was asked to fit on."""
    folders = []

    def held_out_model(paths, runs=None):
        folders.append(list(paths))
        return validate.Model({}, {}, {})

    monkeypatch.setattr(predict, "held_out_model", held_out_model)
    return folders


def test_without_results_here_predict_and_validate_say_what_to_pass(tmp_path, monkeypatch,
                                                                     capsys, fitted_on):
    monkeypatch.chdir(tmp_path)
    here = Path.cwd()
    assert predict.main([PARTIAL, *FABRIC]) == 2
    assert capsys.readouterr().err == (
        f"error: results/: no such folder in {here}; the held-out bands and overheads are "
        "fitted on the runs there: pass --results FOLDER, or run from the repository's root\n")
    assert predict.main(FABRIC) == 2  # no file given: the newest run of results/ is missing too
    assert capsys.readouterr().err.startswith("error: results/: no such folder in ")
    assert validate.main([]) == 2
    assert capsys.readouterr().err == (
        f"error: results/: no such folder in {here}; pass result files or folders, or run from "
        "the repository's root\n")
    # Given the folder, predict fits on it.
    assert predict.main([COMPLETE, *FABRIC, "--results", str(RESULTS)]) == 0
    assert fitted_on == [[str(RESULTS)]]


def test_run_elsewhere_predict_is_one_line_not_a_traceback(tmp_path):
    """It ended in ResultsError's traceback, exit 1 (it reads results/ where it runs)."""
    done = subprocess.run([sys.executable, "-m", "impl.costmodel.predict", PARTIAL, *FABRIC],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"error: results/: no such folder in {tmp_path.resolve()}; the "
                           "held-out bands and overheads are fitted on the runs there: pass "
                           "--results FOLDER, or run from the repository's root\n")


@pytest.mark.parametrize("name", ["run.json.gz", "run.json"])
def test_a_gzip_file_is_named_with_the_command_that_decompresses_it(tmp_path, capsys, name):
    packed = tmp_path / name
    packed.write_bytes(gzip.compress(Path(COMPLETE).read_bytes()))
    command = (f"gunzip {packed}" if name.endswith(".gz")
               else f"gunzip -c {packed} > {tmp_path / 'run-unzipped.json'}")
    expected = f"error: {packed}: gzip-compressed; decompress it first ({command})\n"
    with pytest.raises(ResultsError, match="gzip-compressed"):
        load_results(packed)
    assert predict.main([str(packed), *FABRIC]) == 2
    assert capsys.readouterr().err == expected
    assert validate.main([str(packed)]) == 2
    assert capsys.readouterr().err == expected


def test_a_partial_run_is_used_with_a_warning_or_refused(capsys, fitted_on):
    assert predict.main([PARTIAL, *FABRIC]) == 0
    assert capsys.readouterr().err == WARNING.format(PARTIAL)
    assert predict.main([PARTIAL, *FABRIC, "--no-partial"]) == 2
    assert capsys.readouterr().err == REFUSED.format(PARTIAL)
    assert predict.main([COMPLETE, *FABRIC, "--no-partial"]) == 0
    assert capsys.readouterr().err == ""
    assert validate.main([PARTIAL]) == 0
    assert capsys.readouterr().err == WARNING.format(PARTIAL)
    assert validate.main([PARTIAL, "--no-partial"]) == 2
    assert capsys.readouterr().err == REFUSED.format(PARTIAL)
    # Several: one line naming each.
    assert validate.main([EARLIER_PARTIAL, PARTIAL]) == 0
    assert capsys.readouterr().err == (
        f"warning: {EARLIER_PARTIAL}, {PARTIAL}: partial runs (suite.partial: stopped "
        "part-way, some benchmarks missing), used as they are; --no-partial refuses them\n")


def test_a_partial_run_in_a_folder_is_named(tmp_path, capsys):
    folder = tmp_path / "h200x2"
    folder.mkdir()
    shutil.copy(PARTIAL, folder)
    assert validate.main([str(folder), "--no-partial"]) == 2
    assert capsys.readouterr().err == REFUSED.format(folder / Path(PARTIAL).name)


def test_one_run_alone_says_held_out_validation_needs_another_run(capsys):
    expected = (f"Held-out validation: {PARTIAL} is the only run given, and held-out validation "
                "predicts each GPU cell from another run's inputs (compute-only step, all-reduce "
                "sweep, interference): pass another run of the same GPU model beside it.")
    assert validate.main([PARTIAL]) == 0
    assert capsys.readouterr().out.splitlines()[0] == expected
    assert validate.main(["--markdown", PARTIAL]) == 2
    assert capsys.readouterr().err == f"error: {PARTIAL}: {expected}\n"
    # Another run that holds no input for its cells: said as such.
    assert validate.main([EARLIER_PARTIAL, PARTIAL]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"Held-out validation: no GPU cell of {PARTIAL} could be predicted from another run's "
        "inputs: held-out validation needs another run of the same GPU model with its "
        "compute-only step and all-reduce sweep.")


def test_messages_name_the_run_by_its_file(capsys, fitted_on):
    assert predict.main([PARTIAL, *FABRIC]) == 0
    out = capsys.readouterr().out
    assert out.count(f"beside peer copies ×1.32 (h200x2, {PARTIAL}, 2 ranks); K = 20") == 1
    assert "run 0" not in out
    assert validate.main([PARTIAL]) == 0
    out = capsys.readouterr().out
    assert f"  inputs: compute-only h200x2 {PARTIAL} K = 5; " in out
    assert "run 0" not in out
    # Rows read elsewhere (the report's) have no file: their index, as before.
    assert run_name({"run": 3}) == "run 3"
    assert run_name({"run": 3, "file": "results/x/y.json"}) == "results/x/y.json"
