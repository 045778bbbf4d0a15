"""suite.offload_switch: the overlapped offloads at two switch intervals beside fused GPU Adam,
run on the CPU with the tiny member."""

from __future__ import annotations

import json
import subprocess
import sys

from impl.rows.study_records import SWITCH_TIMING as FILE
from suite import offload_switch


def test_every_trainer_runs_at_both_intervals_and_the_file_holds_their_rounds(tmp_path):
    out = tmp_path / "switch.json"
    assert offload_switch.main(["mlp_tiny", str(out), "--rounds", "3", "--device", "cpu"]) == 0
    document = json.loads(out.read_text())
    names = [f"{trainer}@{interval}ms" for trainer in (
        "device-adam", "offload-overlap", "offload-overlap+hand-off", "offload-overlap-dpu",
        "offload-overlap-dpu+hand-off") for interval in ("5", "0.2")]
    assert list(document[FILE.round_ms]) == names
    assert all(len(rounds) == 3 and min(rounds) > 0 for rounds in document[FILE.round_ms].values())
    assert document[FILE.vs_device_adam]["device-adam@5ms"]["value"] == 1.0
    assert sys.getswitchinterval() == 0.005  # restored


def test_an_unknown_member_is_one_line_naming_it(tmp_path):
    result = subprocess.run([sys.executable, "-m", "suite.offload_switch", "gpt_huge",
                             str(tmp_path / "x.json")], capture_output=True, text=True)
    assert result.returncode == 2
    assert "argument member: invalid choice: 'gpt_huge'" in result.stderr.splitlines()[-1]
    assert not (tmp_path / "x.json").exists()
