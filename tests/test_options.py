"""Strategy options: chunk layouts, the update inside the overlap, and the GPU knobs' errors."""

from __future__ import annotations

import pytest
import torch

from impl.chunking import chunk_bounds
from impl.presets import preset
from impl.strategies import StrategyOptions, build_strategy
from impl.strategy_check import max_abs_diff, train
from impl.workloads import build_model
from tests.multirank import run_ranks

SPANS = [(0, 100), (100, 1100), (1100, 1200), (1200, 5200)]
STEPS, LR = 4, 0.02


def test_equal_bytes_chunks_on_aligned_boundaries():
    assert chunk_bounds(SPANS, 4) == [0, 1280, 2624, 3904, 5200]


def test_equal_layers_cut_between_parameters():
    assert chunk_bounds(SPANS, 2, "layers") == [0, 1100, 5200]
    assert chunk_bounds(SPANS, 4, "layers") == [0, 100, 1100, 1200, 5200]
    with pytest.raises(ValueError, match="needs at least 5 parameter tensors; the model has 4"):
        chunk_bounds(SPANS, 5, "layers")


def test_small_first_chunk_then_equal_chunks():
    assert chunk_bounds(SPANS, 3, first_chunk_elements=128) == [0, 128, 2688, 5200]
    with pytest.raises(ValueError, match="chunk split 'rows': choose one of bytes, layers"):
        chunk_bounds(SPANS, 3, "rows")


OPTION_SETS = {
    "update-in-overlap": dict(update_in_overlap=True, check_finite=False),
    "layers": dict(chunk_split="layers"),
    "first-chunk": dict(first_chunk_mb=0.01),
    "all": dict(update_in_overlap=True, check_finite=False, chunk_split="layers",
                first_chunk_mb=0.01),
}


def weights_with_options(context, workload_name: str) -> dict:
    workload = preset(workload_name)
    group = context.group(context.world_size)
    reference = train("sequential", workload, group, context.device,
                      StrategyOptions(chunks=5, lr=LR), STEPS)
    out = {"reference": [w.numpy() for w in reference]}
    for strategy in ("chunked", "threaded"):
        for name, fields in OPTION_SETS.items():
            options = StrategyOptions(chunks=5, lr=LR, **fields)
            weights = train(strategy, workload, group, context.device, options, STEPS)
            out[strategy, name] = [w.numpy() for w in weights]
    return out


@pytest.mark.parametrize("world", [1, 2], ids=lambda w: f"world{w}")
@pytest.mark.parametrize("workload", ["mlp_tiny", "gpt_tiny"])
def test_options_keep_the_sequential_weights(world, workload):
    ranks = run_ranks(weights_with_options, world, workload)
    reference = [torch.from_numpy(w) for w in ranks[0]["reference"]]
    initial = list(build_model(preset(workload), torch.device("cpu")).parameters())
    assert max_abs_diff(reference, initial) > 1e-4, "training did not change the weights"
    for rank, results in enumerate(ranks):
        for key, weights in results.items():
            if key == "reference":
                continue
            for got, want in zip((torch.from_numpy(w) for w in weights), reference):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6,
                                           msg=f"rank {rank} {key} world={world}")


def test_update_in_overlap_hides_all_but_the_last_update_in_the_timeline():
    workload = preset("mlp_tiny")
    model = build_model(workload, torch.device("cpu"))
    options = StrategyOptions(chunks=4, update_in_overlap=True, check_finite=False)
    runner = build_strategy("chunked", model, workload, None, options)
    from impl.workloads import make_batch

    runner.step(make_batch(workload, torch.device("cpu")))
    timeline = runner.finish_timeline()
    runner.close()
    updates = [i for i in timeline.intervals if i.label.startswith("update")]
    assert [i.label for i in updates] == ["update c0", "update c1", "update c2", "update c3"]
    backward_end = timeline.backward_end_ms()
    assert all(u.end_ms <= backward_end for u in updates[:-1]), \
        "every chunk but the last is updated during backward when nothing is communicated"
    assert updates[-1].start_ms >= backward_end
    assert not any(i.label == "update" for i in timeline.intervals), "no whole-model update"


@pytest.mark.parametrize(("strategy", "fields", "message"), [
    ("sequential", dict(update_in_overlap=True, check_finite=False),
     "update_in_overlap: strategy 'sequential' cannot update chunks while it communicates"),
    ("chunked", dict(update_in_overlap=True),
     "update_in_overlap updates each chunk before the step's non-finite check could veto it"),
    ("chunked", dict(cublas_sm_carveout=16),
     "cublas_sm_carveout is a GPU knob (cuBLAS); this strategy runs on cpu"),
    ("chunked", dict(comm_priority="urgent"), "comm_priority='urgent': choose 'normal' or 'high'"),
])
def test_options_that_cannot_apply_are_named(strategy, fields, message):
    workload = preset("mlp_tiny")
    with pytest.raises(ValueError) as error:
        build_strategy(strategy, build_model(workload, torch.device("cpu")), workload, None,
                       StrategyOptions(chunks=2, **fields))
    assert message in str(error.value)


def _nccl_knob_on_gloo(context):
    workload = preset("mlp_tiny")
    try:
        build_strategy("chunked", build_model(workload, context.device), workload,
                       context.group(2), StrategyOptions(chunks=2, nccl_max_ctas=8))
    except ValueError as error:
        return str(error)
    return None


def test_nccl_knobs_on_gloo_are_named():
    assert run_ranks(_nccl_knob_on_gloo, 2) == [
        "nccl_max_ctas is an NCCL knob; this group runs gloo"] * 2


def test_copy_engine_pieces_cover_the_chunk_on_aligned_cuts():
    from impl.strategies.copy_engine import pieces

    assert pieces(0, 1000, 2) == [(0, 512), (512, 1000)]
    assert pieces(128, 128 + 64 * 3, 4) == [(128, 192), (192, 256), (256, 256), (256, 320)]


def _copy_engine_on_gloo(context):
    workload = preset("mlp_tiny")
    try:
        build_strategy("copy-engine", build_model(workload, context.device), workload,
                       context.group(2), StrategyOptions(chunks=2))
    except ValueError as error:
        return str(error)
    return None


def test_copy_engine_without_gpus_says_why():
    (first, second) = run_ranks(_copy_engine_on_gloo, 2)
    assert first == second
    assert first.startswith("copy-engine at 2 ranks: copy-engine moves gradients between GPUs "
                            "through symmetric memory: it needs CUDA GPUs and NCCL")
