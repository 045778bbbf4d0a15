"""The gate's terminal table fits 120 columns; the Markdown summary keeps every cell whole."""

from __future__ import annotations

from reports.gate.render import TERMINAL_WIDTH, shortened
from tests.gate.test_gate import CPU_MACHINE, benchmark, round_times, run_gate, write_results

LONG = "test_overlap[mlp_8192x12_b1024_bf16-w2-chunked+priority+first1mb-K20-nvlink-interleaved]"


def test_the_terminal_table_fits_120_columns_and_the_summary_keeps_the_full_text(tmp_path,
                                                                                 capsys):
    names = [LONG, LONG.replace("K20", "K5"), "test_s"]
    base = write_results(tmp_path / "a.json", [benchmark(n, round_times(20)) for n in names],
                         CPU_MACHINE)
    cand = write_results(tmp_path / "b.json",
                         [benchmark(n, round_times(20, 0.03, seed=3)) for n in names],
                         CPU_MACHINE)
    code, out, _ = run_gate(capsys, base, cand, "--summary", tmp_path / "s.md")
    assert code == 3  # every benchmark regressed, unconfirmed (files only)
    assert max(len(line) for line in out.splitlines()) <= TERMINAL_WIDTH
    table = out.splitlines()
    assert table[0].split() == ["benchmark", "baseline", "candidate", "ratio", "95%", "CI", "p",
                                "threshold", "re-run", "[95%", "CI]", "verdict"]
    # A shortened name is followed by its full text; the verdict by where it comes from.
    assert table[2].startswith("test_overlap[ml…nk-interleaved]  20 ms")
    assert table[3] == f"    {LONG}; regressed (unconfirmed:"
    assert "only a regression that a re-run confirms fails the gate" in " ".join(table)
    summary = (tmp_path / "s.md").read_text()
    assert r"test\_overlap\[mlp\_8192x12\_b1024\_bf16-w2-chunked+priority+first1mb-K20" in summary


def test_a_shortened_name_keeps_both_ends():
    assert shortened("abcdefghij", 10) == "abcdefghij"
    assert shortened("abcdefghijkl", 7) == "abc…jkl"
