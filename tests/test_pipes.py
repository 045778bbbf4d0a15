"""`python -m suite.run ... | head`: a closed pipe ends the output quietly, the run goes on to
its end, and the last line that can still be written (stderr) says where the results are."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from suite import pipes

ROOT = Path(__file__).resolve().parent.parent


def test_a_closed_pipe_is_said_once_and_then_written_to_nowhere():
    read, write = os.pipe()
    stream = os.fdopen(write, "w")
    closed = []
    guarded = pipes.Guarded(stream, write, lambda: closed.append(True))
    guarded.write("first\n")
    guarded.flush()
    assert os.read(read, 100) == b"first\n"
    os.close(read)  # the reader goes, as head does after its lines
    for _ in range(3):
        assert guarded.write("more\n") == 5
        guarded.flush()  # BrokenPipeError the first time, caught
    assert closed == [True] and guarded.closed_pipe
    assert os.readlink(f"/proc/self/fd/{write}") == os.devnull
    stream.close()


def test_pipes_and_sockets_are_told_from_files_and_terminals(tmp_path):
    read, write = os.pipe()
    with open(tmp_path / "file", "w") as regular:
        assert pipes.is_pipe(write) and not pipes.is_pipe(regular.fileno())
    os.close(read), os.close(write)
    assert not pipes.is_pipe(write)  # closed: no reader to lose


@pytest.mark.slow
def test_the_run_goes_on_after_head_and_says_where_its_results_are(tmp_path):
    """As `python -m suite.run ... | head -3`: three lines read, the pipe closed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OVERLAP_MACHINE_LABEL": "pipe-test"}
    run = subprocess.Popen([sys.executable, "-m", "suite.run", "--quick", "--skip-mpi",
                            "--results-dir", str(tmp_path), "--", "-k", "test_allreduce"],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    head = [run.stdout.readline() for _ in range(3)]
    run.stdout.close()
    err = run.stderr.read()
    assert run.wait(timeout=600) == 0, err[-3000:]
    assert head[0] == "[suite] mpi pass skipped: --skip-mpi\n"
    assert "Traceback" not in err and "BrokenPipe" not in err, err[-3000:]
    (written,) = tmp_path.glob("pipe-test/*.json")
    count = len(json.loads(written.read_text())["benchmarks"])
    assert count > 0
    lines = err.strip().splitlines()
    assert lines[0] == ("[suite] stdout was closed (its reader ended, as `| head` does): the run "
                        "goes on without it and says where its results are on stderr")
    assert re.fullmatch(rf"\[suite\] wrote {re.escape(str(written))} \({count} benchmarks\) in "
                        r"\d+ s", lines[-1]), lines
