"""The cost model's command line (issue 52, item 6): each unusable input is one line naming the
file or folder and what to do, exit 2."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from impl.costmodel import predict, validate
from impl.rows.files import ResultsError, load_results
from tests.committed import RESULTS

COMPLETE = str(RESULTS / "h200x1" / "20261125T022950Z-649c5il2.json")
FABRIC = ["--fabric", "ib400-h200x8"]


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
