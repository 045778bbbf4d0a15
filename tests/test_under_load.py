"""The suite's tests assert values, never timings: they pass with two busy loops beside them.

On the 2-core machine two busy loops take every core, the load other work puts on it. The
file run here held the assertion that failed under such load (the synthetic model's wall clock
within 2% of its prediction, now reported by suite/bench_synthetic.py); the launcher's and the
rendezvous's time bounds became hang guards. It is cheap, so this test stays cheap.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUSY_LOOPS = 2
FORMERLY_TIMED = ["tests/costmodel/test_model.py"]


def test_the_formerly_timed_tests_pass_beside_two_busy_loops():
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(BUSY_LOOPS)]
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *FORMERLY_TIMED],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
            text=True, timeout=600, check=False)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    assert result.returncode == 0, result.stdout[-3000:]
    assert " failed" not in result.stdout
