"""The cost model reads results files and predicts from them: it imports without torch, so a
laptop or a CI job without torch can predict and score a run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK_TORCH = """
import importlib, importlib.abc, pkgutil, sys

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"torch is blocked here ({name})")
        return None

sys.meta_path.insert(0, NoTorch())
import impl.costmodel as package
for module in pkgutil.iter_modules(package.__path__):
    importlib.import_module(f"impl.costmodel.{module.name}")
print(sorted(name for name in sys.modules if name.startswith("impl.costmodel.")))
"""


def test_every_cost_model_module_imports_without_torch():
    ran = subprocess.run([sys.executable, "-c", BLOCK_TORCH], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "'impl.costmodel.predict'" in ran.stdout and "'impl.costmodel.score'" in ran.stdout


def test_the_block_stops_a_torch_import():
    script = BLOCK_TORCH.replace("import impl.costmodel as package",
                                 "import impl.gradients\nimport impl.costmodel as package")
    ran = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=False)
    assert ran.returncode == 1 and "ImportError: torch is blocked here (torch)" in ran.stderr
