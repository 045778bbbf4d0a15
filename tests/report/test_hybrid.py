"""The report's offload family: ratios to fused GPU Adam per workload, and page 1's headline
quoting the family (geometric mean and worst), never one cell."""

from __future__ import annotations

import math

import pytest

from reports.sections import hybrid


def family(ratios: dict[str, dict[str, float]], run: str = "r1") -> list[dict]:
    """Rows as the report loads them: per workload, a comparison row whose pairs hold the
    speedup device-adam / variant, and one step row per variant with its bound figures."""
    rows = []
    for workload, by_variant in ratios.items():
        rows.append({"kind": "hybrid_comparison", "study": "fine-grained", "machine": "h100x1",
                     "run": run, "workload": workload, "dtype": "bf16", "parameters": 10,
                     "comparisons": [{"candidate": v, "reference": "device-adam",
                                      "speedup": {"value": 1 / r, "low": 0.9 / r,
                                                  "high": 1.1 / r}}
                                     for v, r in by_variant.items()]})
        rows += [{"kind": "hybrid_step", "study": "fine-grained", "machine": "h100x1",
                  "run": run, "workload": workload, "variant": v, "bound_ratio": r / 1.05,
                  "goal_ratio": 1.03, "meets_goal": r <= 1.10 * r / 1.05 or r <= 1.03}
                 for v, r in by_variant.items()]
    return rows


def test_family_rows_turn_speedups_into_time_ratios():
    table = hybrid.family_rows(family({"a": {"offload-overlap-dpu": 2.0}}))
    assert len(table) == 1
    row = table[0]
    assert row["ratio"] == pytest.approx(2.0)
    assert row["ratio_text"] == "2.00 [1.82, 2.22]"
    assert row["bound_ratio"] == pytest.approx(2.0 / 1.05) and row["meets_text"] == "yes"


def test_the_headline_quotes_the_family_not_one_cell():
    rows = family({"a": {"offload-overlap-dpu": 2.0, "offload-overlap": 4.0},
                   "b": {"offload-overlap-dpu": 8.0, "offload-overlap": 9.0}})
    headline = hybrid.family_headline(rows, "h100x1")
    assert headline["offload-overlap-dpu"]["geomean"] == pytest.approx(4.0)
    assert headline["offload-overlap-dpu"]["worst"] == 8.0
    assert headline["offload-overlap-dpu"]["worst_workload"] == "b"
    assert headline["offload-overlap"]["geomean"] == pytest.approx(math.sqrt(36))
    text = hybrid.family_headline_text(rows, "h100x1")
    assert text == ("time against fused GPU Adam, geometric mean of 2 workloads: "
                    "offload-overlap-dpu 4.00× (worst 8.00×, b; 2 of 2 within goal or 1.10× "
                    "bound), offload-overlap 6.00× (worst 9.00×, b; 2 of 2 within goal or 1.10× "
                    "bound)")


def test_one_workload_is_no_family():
    assert hybrid.family_headline(family({"a": {"offload-overlap-dpu": 2.0}}), "h100x1") is None
    assert hybrid.family_headline([], "h100x1") is None


def test_the_coarse_row_says_whether_it_splits_and_why():
    reason = "GPU alone: the GPU alone computes the 256 rows in 3.83 ms; ..."
    rows = [{"kind": "hybrid_step", "study": "coarse-grained", "machine": "h100x1",
             "variant": "coarse-hybrid", "balance": {"decision": {"reason": reason}}},
            {"kind": "hybrid_step", "study": "coarse-grained", "machine": "h100x1",
             "variant": "worker0-alone", "balance": None}]
    assert [r["decision_text"] for r in hybrid.hybrid_rows(rows)] == [reason, "—"]



def test_the_largest_model_row_states_its_plan_attempt_and_check():
    row = {"kind": "offload_only", "machine": "h100x1", "run": "r1",
           "workload": "mlp_8192x57_b2048_bf16", "parameters": 3825205248,
           "plan": {"gpu_only_layers": 56, "offload_layers": 94, "offload_bound_by": "host"},
           "gpu_only_attempt": "out of memory: CUDA out of memory",
           "check": {"gradient_error": 1e-3, "gradient_tolerance": 0.1, "weight_error": 1e-7,
                     "weight_tolerance": 1e-5, "update_delay": 0},
           "step_ms_estimate": {"value": 1500.0, "low": 1490.0, "high": 1510.0, "rounds": 3},
           "model_tflops": 31.3, "peak_tflops": 760.0, "fraction_of_peak": 0.041}
    [table] = hybrid.only_offload_rows([row, {"kind": "hybrid_step"}])
    assert table["plan_text"] == ("GPU-only Adam 56 layers, the offload 94 (bound by the host's "
                                  "memory)")
    assert table["check_text"] == "gradients 0.00100 ≤ 0.100; weights 1.00e-07 ≤ 1.00e-05"
    assert table["step_text"] == "1,500 [1,490, 1,510]"


def ladder(run: str, workload: str, verdict: str) -> dict:
    return {"kind": "offload_crossover", "machine": "h100x1", "run": run, "workload": workload,
            "verdict": verdict,
            "batches": [{"batch": 16, "tokens": 16384,
                        "dpu_ratio": {"value": 1.56, "low": 1.5, "high": 1.6}},
                       {"batch": 32, "tokens": 32768, "failed": "CUDA out of memory"}]}


def test_the_crossover_is_the_newest_ladder_per_model_and_page_1_quotes_it():
    rows = [ladder("r1", "gpt_small_bf16", "older"),
            ladder("r2", "gpt_small_bf16", "within 1.10× from 65,536 tokens a step (1.04×)"),
            ladder("r1", "mlp_4096x8_b8192", "within 1.10× at every batch measured")]
    crossings = hybrid.crossover_rows(rows)
    assert [(r["workload"], r["run"]) for r in crossings] == [("gpt_small_bf16", "r2"),
                                                             ("mlp_4096x8_b8192", "r1")]
    assert crossings[0]["batches_text"] == ("16 rows, 16,384 tokens: 1.56 [1.50, 1.60]; 32 rows, "
                                           "32,768 tokens: did not run (CUDA out of memory)")
    family_rows = family({"a": {"offload-overlap-dpu": 2.0}, "b": {"offload-overlap-dpu": 8.0}})
    assert hybrid.family_headline_text(family_rows + rows, "h100x1").endswith(
        "; where offload stops costing: gpt_small_bf16 within 1.10× from 65,536 tokens a step "
        "(1.04×); mlp_4096x8_b8192 within 1.10× at every batch measured")


def test_page_1_names_the_run_the_family_figures_come_from():
    from reports.sections import studies

    def steps(run: int, dpu: float) -> list[dict]:
        return [{"kind": "hybrid_step", "study": "fine-grained", "machine": "h200x1", "run": run,
                 "workload": workload, "variant": variant, "device": "NVIDIA H200",
                 "round_ms": [ms] * 3}
                for workload in ("a", "b")
                for variant, ms in (("device-adam", 10.0), ("offload-overlap-dpu", 10 * dpu))]

    older, newer = steps(0, 3.0), steps(1, 1.5)
    headline = [dict(row, machine="h200x1") for row in family(
        {"a": {"offload-overlap-dpu": 1.5}, "b": {"offload-overlap-dpu": 1.5}}, run=1)]
    text, reference = studies.hybrid_text(older + newer + headline, "h200x1")
    assert reference["run"] == 1  # the run whose family the text quotes, not the first found
    assert "offload-overlap-dpu 1.50×" in text
