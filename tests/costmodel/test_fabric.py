"""Fabric files (fabrics/*.toml): their formulas, and one clear line for every bad value."""

from __future__ import annotations

import pytest

from impl.costmodel import nccl
from impl.costmodel.fabric_file import FABRICS_DIR, FabricError, available, load_fabric

GOOD = """
name = "test"
description = "two GPUs per node, one NIC each"
[node]
gpus = { value = 2, source = "test" }
busbw_gbps = { value = 100, source = "test" }
launch_us = { value = 10, source = "test" }
copy_gbps = { value = 50, source = "test" }
[network]
nics = { value = 2, source = "test" }
nic_gbps = { value = 25, source = "test" }
"""


def write(tmp_path, text: str):
    path = tmp_path / "fabric.toml"
    path.write_text(text)
    return str(path)


def test_every_shipped_fabric_loads_with_a_source_for_every_number():
    assert {"ib400-h200x8", "ib400-h100x8", "roce400-h100x8", "nvlink-h200x8",
            "pcie-l40sx8"} <= set(available())
    for name in available():
        fabric = load_fabric(name)
        assert fabric.name == name
        assert all(source for _, source in fabric.sources)
        assert {"node.gpus", "node.busbw_gbps", "node.launch_us"} <= dict(fabric.sources).keys()


def test_inside_a_node_nccls_tuner_picks_the_ring_by_size(tmp_path):
    """Hand-computed from NCCL's tuner (impl/costmodel/nccl.py), 2 ranks, busbw 100 GB/s."""
    fabric = load_fabric(write(tmp_path, GOOD))
    # 1 GB: ring Simple, 8.4 + 2 · 3.4 µs + 1e9 B / (100 GB/s · 2/2), plus the 10 µs launch.
    choice = fabric.choice(1e9, 2)
    assert (choice.algorithm, choice.protocol) == ("ring", "Simple")
    assert choice.time_us == pytest.approx(8.4 + 2 * 3.4 + 1e4 + 10)
    # 64 KiB: ring LL, 3.6 + 2 · 0.47 µs + 65536 B / (100/4 GB/s), plus the launch.
    choice = fabric.choice(65536, 2)
    assert (choice.algorithm, choice.protocol) == ("ring", "LL")
    assert choice.time_us == pytest.approx(3.6 + 2 * 0.47 + 65536 / 25e3 + 10)
    assert fabric.all_reduce_ms(1e9, 1) == 0.0


def test_across_nodes_two_levels_and_the_tree_for_small_messages(tmp_path):
    fabric = load_fabric(write(tmp_path, GOOD))
    # 4 ranks on 2 nodes: the NICs bound the busbw (min(100, 2 · 25) = 50 GB/s); the ring's 6
    # steps are 4 on NVLink (3.4 µs) and 2 on the network (9.6 µs), × 1.9 for the plateau.
    choice = fabric.choice(1e9, 4)
    assert (choice.algorithm, choice.protocol) == ("ring", "Simple")
    latency = (8.4 + 4 * 3.4 + 2 * 9.6) * 1.9
    assert choice.time_us == pytest.approx(latency + 1e9 / (1e3 * 50 * 4 / 6) + 10)
    # 16 nodes of one GPU, 64 bytes: the tree's 2 · log2(16) network steps beat the ring's 30.
    choice = nccl.all_reduce(64, 16, 16, 50.0)
    assert (choice.algorithm, choice.protocol) == ("tree", "LL")
    assert choice.time_us == pytest.approx(4.4 + 2 * 4 * 5.0 + 64 / (1e3 * 45 / 3.8 * 0.5))
    assert fabric.copy_all_reduce_ms(1e9, 2) == pytest.approx(0.01 + 1e9 / 50e6)
    assert fabric.copy_all_reduce_ms(1e9, 4) is None  # peer copies stay inside a node


def test_nvls_where_a_fabric_has_it_with_nccls_constants(tmp_path):
    """Hand-computed from NCCL's tuner (tuning.cc at b647562): NVLS is 23 µs plus bytes over
    its algbw in a node; across N nodes the NVLS tree adds 2 · log2 N network levels of 14 µs
    and its algbw is 5/6 of min(NVLS's busBw, the NICs' (halved beyond two nodes))."""
    assert nccl.nvls_time_us(1e6, 1, 271.0) == pytest.approx(23 + 1e6 / 271e3)
    # 4 nodes, NICs 376 GB/s a node: busBw min(271 · 6/5, 376 / 2) = 188, algbw 156.7.
    assert nccl.nvls_time_us(1e6, 4, 271.0, 376.0) == pytest.approx(
        23 + 2 * 2 * 14 + 1e6 / (1e3 * 188 * 5 / 6))
    with pytest.raises(ValueError, match="NVLS across 2 nodes needs the network's bandwidth"):
        nccl.nvls_time_us(1e6, 2, 271.0)
    with_nvls = load_fabric(write(tmp_path, GOOD.replace(
        'copy_gbps = { value = 50, source = "test" }',
        'copy_gbps = { value = 50, source = "test" }\n'
        'nvls_algbw_gbps = { value = 120, source = "test" }')))
    # 1 GB on the 2 GPUs of a node: NVLS's 1e9 / 120 GB/s beats the ring's 1e9 / 100.
    choice = with_nvls.choice(1e9, 2)
    assert (choice.algorithm, choice.protocol) == ("nvls", "Simple")
    assert choice.time_us == pytest.approx(23 + 1e9 / 120e3 + 10)
    # 4 ranks on 2 nodes: the NVLS tree, busBw min(120 · 6/5, 2 · 25) = 50, algbw 41.7,
    # beats the ring's 50 · 4/6 = 33.3 GB/s algbw.
    choice = with_nvls.choice(1e9, 4)
    assert choice.algorithm == "nvls-tree"
    assert choice.time_us == pytest.approx(23 + 2 * 14 + 1e9 / (1e3 * 50 * 5 / 6) + 10)
    assert load_fabric(write(tmp_path, GOOD)).choice(1e9, 2).algorithm == "ring"  # no NVLS
    assert load_fabric("nvlink-h200x8").nvls_algbw_gbps == 271
    assert load_fabric("pcie-l40sx8").nvls_algbw_gbps is None


def test_collnet_across_nodes_where_a_fabric_has_it_with_nccls_constants(tmp_path):
    """Hand-computed from NCCL's tuner (tuning.cc at b647562), 4 ranks on 2 nodes of 2 GPUs
    and 2 NICs reaching 50 GB/s each with in-network reduction: B_c = min(2 · 50, 100)."""
    # Direct: 2 · (3.7 + 1 · 0.4) + 31 µs; algbw 0.5 · 0.85 · 100 / ((2/2 + 1) / 2).
    assert nccl.collnet_time_us(1e6, 4, 2, "collnet-direct", 50.0, 2, 100.0) == pytest.approx(
        2 * (3.7 + 0.4) + 31 + 1e6 / (1e3 * 0.5 * 0.85 * 100))
    # Chain: 2 · (2 − 1) · 2.8 + 30 µs; algbw 0.5 · 100. One NIC a node: Direct's f = 1.5.
    assert nccl.collnet_time_us(1e6, 4, 2, "collnet-chain", 50.0, 2, 100.0) == pytest.approx(
        2 * 2.8 + 30 + 1e6 / 50e3)
    assert nccl.collnet_time_us(1e6, 4, 2, "collnet-direct", 50.0, 1, 100.0) == pytest.approx(
        2 * (3.7 + 0.4) + 31 + 1e6 / (1e3 * 0.5 * 0.85 * 50 / 1.5))
    with pytest.raises(ValueError, match="CollNet reduces in the network's switches: 1 node"):
        nccl.collnet_time_us(1e6, 2, 1, "collnet-chain", 50.0, 2, 100.0)
    sharp = load_fabric(write(tmp_path, GOOD + 'collnet_gbps = { value = 50, source = "t" }\n'))
    # 1 GB on 2 nodes: Chain's 50 GB/s algbw beats the ring's 50 · 4/6 and the tree's 22.5.
    choice = sharp.choice(1e9, 4)
    assert (choice.algorithm, choice.protocol) == ("collnet-chain", "Simple")
    assert choice.time_us == pytest.approx(2 * 2.8 + 30 + 1e9 / 50e3 + 10)
    assert sharp.choice(1e9, 2).algorithm == "ring"  # one node: the switches see nothing
    assert load_fabric("ib400-sharp-h200x8").collnet_gbps == 40
    assert load_fabric("ib400-h200x8").collnet_gbps is None


def test_nccls_model_fitted_to_a_sweep_recovers_its_numbers():
    sizes = [2**20 * 4**i for i in range(6)]
    times_ms = [nccl.all_reduce(b, 4, 1, 300.0, launch_us=5.0).time_us / 1e3 for b in sizes]
    bus, launch = nccl.calibrate(sizes, times_ms, 4)
    assert (bus, launch) == (pytest.approx(300.0, rel=1e-3), pytest.approx(5.0, abs=0.05))


def test_a_fabric_without_network_is_one_node():
    fabric = load_fabric("nvlink-h200x8")
    assert fabric.max_gpus == 8
    with pytest.raises(ValueError, match=r"^world size 16: fabric 'nvlink-h200x8' is one node "
                                         r"of 8 GPUs with no network; choose 1 to 8 or a "
                                         r"fabric with \[network\]$"):
        fabric.all_reduce_ms(1e6, 16)


@pytest.mark.parametrize("change, message", [
    (("busbw_gbps = { value = 100, source = \"test\" }\n", ""),
     "node.busbw_gbps is missing: allowed a number from 0.001 to 10000 (GB/s, all-reduce bus "
     "bandwidth inside a node), with its source"),
    (("value = 100,", "value = -3,"),
     "node.busbw_gbps = -3: allowed a number from 0.001 to 10000 (GB/s, all-reduce bus "
     "bandwidth inside a node)"),
    (("gpus = { value = 2,", "gpus = { value = 2.5,"),
     "node.gpus = 2.5: allowed an integer from 1 to 1024 (GPUs per node)"),
    (("nic_gbps = { value = 25,", "nic_gbps = { value = \"fast\","),
     "network.nic_gbps = 'fast': allowed a number from 0.001 to 10000 (GB/s reached per NIC)"),
    (("launch_us = { value = 10, source = \"test\" }", "launch_us = { value = 10 }"),
     "node.launch_us has no source: every number says where it comes from"),
    (("copy_gbps = { value = 50, source = \"test\" }", "copy_gbps = 50"),
     "node.copy_gbps = 50: write copy_gbps = { value = ..., source = \"...\" } with a number"),
    (("[network]", "[network]\nswitches = { value = 1, source = \"x\" }"),
     "unknown key network.switches: allowed nics, nic_gbps"),
    (("name = \"test\"", "name = \"test\"\nspeed = 1"),
     "unknown key 'speed': allowed name, description, node, network"),
    (("[node]", "[nodes]"), "unknown key 'nodes': allowed name, description, node, network"),
    (("nics = { value = 2,", "nics = { value = true,"),
     "network.nics = True: allowed an integer from 1 to 64 (NICs per node)"),
])
def test_a_bad_value_is_one_line_naming_it_and_what_is_allowed(tmp_path, change, message):
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(FabricError) as raised:
        load_fabric(path)
    text = str(raised.value)
    assert text.startswith(f"{path}: {message}")
    assert "\n" not in text


def test_a_missing_table_a_broken_file_and_an_unknown_name(tmp_path):
    no_node = GOOD[:GOOD.index("[node]")]
    with pytest.raises(FabricError, match=r"\[node\] is missing: it needs gpus, busbw_gbps, "
                                          r"launch_us$"):
        load_fabric(write(tmp_path, no_node))
    with pytest.raises(FabricError, match=r": not a TOML file: "):
        load_fabric(write(tmp_path, "[node\ngpus = "))
    with pytest.raises(FabricError, match=rf"^infiniband: no fabric of that name in "
                                          rf"{FABRICS_DIR}; choose one of .*ib400-h200x8"):
        load_fabric("infiniband")
    with pytest.raises(FabricError, match=r"nowhere.toml: no such fabric file$"):
        load_fabric(str(tmp_path / "nowhere.toml"))
