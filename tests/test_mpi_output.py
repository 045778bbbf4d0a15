"""Under mpirun, as under torchrun, only rank 0's output reaches the log; no colour codes in a
file."""

from __future__ import annotations

import os
import sys
from collections import deque

import pytest

from impl import capabilities
from suite import launch, run
from suite.launch import Launcher, show_rank_zero, split_by_rank

RANKS_SAY = ("import os, sys; rank = os.environ['OMPI_COMM_WORLD_RANK']; "
             "print(f'rank {rank} says hello'); print(f'rank {rank} warns', file=sys.stderr); "
             "print('colour on a terminal:', sys.stdout.isatty(), os.environ.get('PY_COLORS')); "
             "sys.exit(int(rank))")


def test_tagged_pieces_are_split_by_rank():
    assert split_by_rank("[1,0]<stdout>:a[1,0]<stdout>: b\n") == [(0, "stdout", "a"),
                                                                 (0, "stdout", " b\n")]
    assert split_by_rank("mpirun noticed\n") == [(None, "mpirun", "mpirun noticed\n")]
    assert split_by_rank("[1,1]<stderr>:x[1,0]<stdout>:y\n") == [(1, "stderr", "x"),
                                                                (0, "stdout", "y\n")]


def test_only_rank_zero_and_mpirun_are_shown(capsys):
    others = deque(maxlen=5)
    show_rank_zero(["[1,1]<stdout>:one\n", "[1,0]<stdout>:zero\n", "mpirun: done\n",
                    "[1,12]<stderr>:twelve\n"], others)
    assert capsys.readouterr().out == "zero\nmpirun: done\n"
    assert list(others) == ["one", "twelve"]


def test_a_line_split_around_the_other_stream_is_shown_whole(capsys):
    """What a loaded machine gave: rank 0's stdout line arrived in two pieces with a stderr
    line between them."""
    show_rank_zero(["[1,0]<stdout>:colour on a terminal:[1,0]<stderr>:rank 0 warns\n",
                    "[1,0]<stdout>: True 0\n", "[1,0]<stdout>:no newline at the end"], deque())
    assert capsys.readouterr().out.splitlines() == [
        "rank 0 warns", "colour on a terminal: True 0", "no newline at the end"]


def test_the_mpirun_pass_prints_rank_zero_only(tmp_path, capfd):
    if reason := capabilities.missing_mpi():
        pytest.skip(reason)
    (mpi,) = [p for p in run.plan("quick", ["gloo"], 0, tmp_path, []) if p.name == "mpirun"]
    assert launch.TAG_OUTPUT in mpi.command
    # The pass's own launch (mpirun and its options, 2 ranks, this Python), a short program.
    at = mpi.command.index(sys.executable)
    command = [*mpi.command[:at + 1], "-c", RANKS_SAY]
    code = Launcher().run(command, {**os.environ, **mpi.env})
    out, _ = capfd.readouterr()
    assert code != 0  # rank 1 exits 1
    shown = out.split("[suite] the other ranks' last")[0]
    assert "rank 0 says hello" in shown and "rank 0 warns" in shown
    assert "rank 1" not in shown
    assert "colour on a terminal: True 0" in shown  # a pseudo-terminal, told not to colour
    assert "rank 1 says hello" in out.split("[suite] the other ranks' last")[1]
