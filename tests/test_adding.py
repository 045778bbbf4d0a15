"""docs/adding.md's recipe for a strategy, followed to the letter with a throwaway strategy in a
copy of the tree: the overlap benchmark collects it by default, beside the others."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Step 1 of the recipe: one class filling the contract (here, sequential's all-reduce of each
# chunk under another name; it is collected, never timed, in this test).
PROBE = '''"""A throwaway strategy of tests/test_adding.py."""

import torch.distributed as dist

from impl.strategies.base import ChunkedGradientStrategy


class ProbeStrategy(ChunkedGradientStrategy):
    name = "probe"

    def _communicate(self) -> None:
        for chunk in self.flat.chunks if self.communicates else ():
            dist.all_reduce(chunk, group=self.group)
'''


def test_a_strategy_added_by_the_recipe_is_measured(tmp_path):
    for part in ("impl", "suite"):
        shutil.copytree(ROOT / part, tmp_path / part,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "build"))
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    strategies = tmp_path / "impl" / "strategies"
    (strategies / "probe.py").write_text(PROBE)
    # Step 2: one line in STRATEGIES (and its import).
    registry = (strategies / "__init__.py").read_text()
    registry = registry.replace('    "synthetic": SyntheticStrategy,\n',
                                '    "synthetic": SyntheticStrategy,\n'
                                '    "probe": ProbeStrategy,\n')
    registry = registry.replace("from impl.strategies.options",
                                "from impl.strategies.probe import ProbeStrategy\n"
                                "from impl.strategies.options")
    (strategies / "__init__.py").write_text(registry)

    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "suite/bench_overlap.py", "--collect-only", "-q",
         "-p", "no:cacheprovider", "--suite-mode", "quick"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    ids = [line for line in collected.stdout.splitlines() if "::test_overlap[" in line]
    assert any("-probe-" in line for line in ids), "\n".join(ids)
    assert any("-chunked-" in line for line in ids)  # beside the others, in the same cells
