"""Page 1's answer to "how much is hidden" (reports/sections/hidden.py): the newest run's
machine leads, in words, with one sentence per machine; other machines are references; a CPU
user sees their own answer even beside GPU machines."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace

import pytest

from impl.rows.merge import benchmark_rows, merge_rows
from reports import cells, loading
from reports.format import fmt_estimate
from reports.results import load_results, newest_per_machine
from reports.sections import headline, hidden
from reports.sections.overlap import saved_pct
from reports.view import View
from tests.committed import RESULTS
from tests.report.helpers import INTERLEAVED

GPU_RUN = RESULTS / "h200x2" / "20261123T094012Z.json"


def page_one(runs_made, newest: str) -> dict:
    """Page 1's headline for the CPU fixture and a committed 2× H200 run, ``newest`` made last."""
    runs = [loading.describe_run(i, r) for i, r in enumerate(runs_made)]
    runs = [replace(run, created="2030-01-01T00:00:00+00:00") if run.label == newest else run
            for run in runs]
    rows = merge_rows(row for run, r in zip(runs, runs_made)
                               for row in benchmark_rows(r.label, run.index,
                                                                  r.benchmarks))
    return headline.section(View.of(rows, runs))


@pytest.fixture(scope="module")
def made():
    return [load_results(INTERLEAVED), load_results(GPU_RUN)]


def test_a_cpu_users_run_leads_page_one_beside_gpu_references(made):
    page = page_one(made, "cpu-2core")
    labels = [(a["label"], a["machine"]) for a in page["answers"]]
    assert labels == [("Newest run", "cpu-2core"), ("Reference", "h200x2")]
    machines = [row[1].text for row in page["table"].rows]
    assert machines[0] == "CPU (2 cores), gloo over TCP, 2 ranks"
    assert "2× NVIDIA H200, NVLink" in machines
    cpu, gpu = (a["text"] for a in page["answers"])
    assert cpu.startswith("cpu-2core (AMD EPYC, 2 cores, no GPU), gloo over TCP, 2 ranks, ")
    assert gpu.startswith("h200x2 (2× NVIDIA H200), NVLink, 2 GPUs, ")


def test_a_gpu_run_leads_and_the_cpu_is_named_as_left_out(made):
    page = page_one(made, "h200x2")
    assert [(a["label"], a["machine"]) for a in page["answers"]] == [("Newest run", "h200x2")]
    assert all(row[1].text == "2× NVIDIA H200, NVLink" for row in page["table"].rows)
    assert "cpu-2core (AMD EPYC, 2 cores, no GPU), which checks the method" in page["absent"]


def test_each_sentence_states_the_rows_figures_and_names_the_metric(made):
    page = page_one(made, "cpu-2core")
    runs = [loading.describe_run(i, r) for i, r in enumerate(made)]
    rows = merge_rows(row for run, r in zip(runs, made)
                               for row in benchmark_rows(r.label, run.index,
                                                                  r.benchmarks))
    for line in page["answers"]:
        entry = min((e for e in headline.rows_of(View.of(rows, runs))
                     if e["cell"]["machine"] == line["machine"]),
                    key=lambda e: (-e["cell"]["world_size"],
                                   cells.workload_rank(e["cell"]["workload"])))
        found = entry["answer"]["figures"]
        difference = found["vs_sequential"]["difference_ms"]
        saved = hidden.saved_ms(entry)
        assert (saved["value"], saved["low"], saved["high"]) == (
            -difference["value"], -difference["high"], -difference["low"])
        text = line["text"]
        assert (f"{entry['best']} hides {fmt_estimate(found['hidden_comm_fraction'])} of the "
                f"communication (hidden communication fraction)") in text
        assert f"saves {fmt_estimate(saved)} ms per step" in text
        assert (f"{fmt_estimate(saved_pct(found['vs_sequential']['speedup']))}% of "
                f"sequential's step") in text
        if entry["efficiency"]:
            assert f"overlap efficiency {fmt_estimate(entry['efficiency'])}" in text
        # A saving that is not overlap's, or not significant, says so in the sentence.
        cell, best = entry["cell"], entry["best"]
        buckets = (cell.get("ddp_bucket_counts") or {}).get(best)
        assert (f"({best} made {buckets} bucket(s), not K = {cell['chunks']}: its saving comes "
                f"from fewer, larger messages, not from overlap)" in text) == (
            buckets is not None and buckets != cell["chunks"])
        assert ("(the saving's interval includes 0: no verdict)" in text) == (
            found["vs_sequential"]["verdict"] == cells.NO_DIFFERENCE)
    # The CPU fixture's answer is DDP with one 25 MB bucket for the whole tiny model.
    assert "ddp-25mb made 1 bucket(s), not K = 20" in page["answers"][0]["text"]
    assert "Hidden communication fraction:" in page["definitions"]
    assert "Overlap efficiency: (sequential − step)" in page["definitions"]


def test_the_users_own_run_is_chosen_before_the_repositorys_of_that_machine(tmp_path):
    """A quick run just made (not committed) is read before the committed default run of the
    same machine, though that one is stronger."""
    folder = tmp_path / "results" / "cpu-2core"
    folder.mkdir(parents=True)
    shutil.copy(INTERLEAVED, folder / "20261101T000000Z.json")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "reference run"], check=True)
    assert newest_per_machine(tmp_path / "results") == [folder / "20261101T000000Z.json"]
    own = folder / "20261102T000000Z.json"
    document = json.loads(INTERLEAVED.read_text())
    document["suite"]["mode"] = "quick"  # weaker than the committed run
    own.write_text(json.dumps(document))
    assert newest_per_machine(tmp_path / "results")[0] == own
