"""Fabric files (fabrics/*.toml): their formulas, and one clear line for every bad value."""

from __future__ import annotations

import math

import pytest

from impl.costmodel.fabric_file import FABRICS_DIR, FabricError, available, load_fabric

GOOD = """
name = "test"
description = "two GPUs per node, one NIC each"
[node]
gpus = { value = 2, source = "test" }
busbw_gbps = { value = 100, source = "test" }
latency_us = { value = 10, source = "test" }
copy_gbps = { value = 50, source = "test" }
[network]
nics = { value = 2, source = "test" }
nic_gbps = { value = 25, source = "test" }
latency_us = { value = 5, source = "test" }
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
        assert {"node.gpus", "node.busbw_gbps", "node.latency_us"} <= dict(fabric.sources).keys()


def test_all_reduce_inside_a_node_is_a_ring(tmp_path):
    fabric = load_fabric(write(tmp_path, GOOD))
    # 2 ranks: 10 µs + 2·(1/2)·1 GB / 100 GB/s = 10 ms + 0.01 ms
    assert fabric.all_reduce_ms(1e9, 2) == pytest.approx(0.01 + 10.0)
    assert fabric.all_reduce_ms(1e9, 1) == 0.0


def test_across_nodes_the_nics_bound_the_bandwidth_and_the_tree_the_latency(tmp_path):
    fabric = load_fabric(write(tmp_path, GOOD))
    for world in (4, 16, 64):
        nodes = world // 2
        hops = min(2 * (nodes - 1), 2 * math.ceil(math.log2(nodes)))
        moved = 2 * (world - 1) / world * 1e9
        expected = (10 + hops * 5) / 1e3 + moved / (min(100, 2 * 25) * 1e6)
        assert fabric.all_reduce_ms(1e9, world) == pytest.approx(expected)
    assert fabric.copy_all_reduce_ms(1e9, 2) == pytest.approx(0.01 + 1e9 / 50e6)
    assert fabric.copy_all_reduce_ms(1e9, 4) is None  # peer copies stay inside a node


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
    (("latency_us = { value = 10, source = \"test\" }", "latency_us = { value = 10 }"),
     "node.latency_us has no source: every number says where it comes from"),
    (("copy_gbps = { value = 50, source = \"test\" }", "copy_gbps = 50"),
     "node.copy_gbps = 50: write copy_gbps = { value = ..., source = \"...\" } with a number"),
    (("[network]", "[network]\nswitches = { value = 1, source = \"x\" }"),
     "unknown key network.switches: allowed nics, nic_gbps, latency_us"),
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
                                          r"latency_us$"):
        load_fabric(write(tmp_path, no_node))
    with pytest.raises(FabricError, match=r": not a TOML file: "):
        load_fabric(write(tmp_path, "[node\ngpus = "))
    with pytest.raises(FabricError, match=rf"^infiniband: no fabric of that name in "
                                          rf"{FABRICS_DIR}; choose one of .*ib400-h200x8"):
        load_fabric("infiniband")
    with pytest.raises(FabricError, match=r"nowhere.toml: no such fabric file$"):
        load_fabric(str(tmp_path / "nowhere.toml"))
