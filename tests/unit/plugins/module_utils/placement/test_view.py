"""The placement view: per pool and size, what fits, where, and the GPUs stranded with why."""

from __future__ import annotations

from fleets import build, claim, dra_objects, dra_slice, node, pod

from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.fleet import PlacementOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.options import placement_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.result import finding_dict
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.view import placement_view, view_hits

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
A10 = {"accelerator": "NVIDIA-A10"}


def pools(view):
    return {p["pool"]: p for p in view["pools"]}


def test_free_gpus_scattered_over_nodes_fit_small_pods_and_no_large_one():
    fleet, _pending = build(
        [node("h-0", labels=H100), node("h-1", labels=H100)],
        [pod("a", 6, node_name="h-0", phase="Running"), pod("b", 5, node_name="h-1", phase="Running")],
    )
    h100 = pools(placement_view(fleet, PlacementOptions()))["NVIDIA-H100-80GB-HBM3"]
    assert h100["gpus_free"] == 5
    assert h100["fits"]["1"] == {"pods": 5, "nodes": {"h-0": 2, "h-1": 3}}
    assert h100["fits"]["2"] == {"pods": 2, "nodes": {"h-0": 1, "h-1": 1}}
    assert h100["fits"]["4"]["pods"] == 0 and h100["largest"] == 3
    assert h100["stranded"]["4"] == {"gpus": 5, "by_reason": {"fragmented": 5}}
    assert h100["stranded"]["2"] == {"gpus": 1, "by_reason": {"fragmented": 1}}


def test_finished_pods_free_their_gpus():
    fleet, _pending = build([node("h-0", labels=H100)], [pod("done", 8, node_name="h-0", phase="Succeeded")])
    assert pools(placement_view(fleet, PlacementOptions()))["NVIDIA-H100-80GB-HBM3"]["fits"]["8"]["pods"] == 1


def test_cordoned_tainted_and_cpu_short_nodes_strand_their_gpus_with_the_reason():
    taint = {"key": "dedicated", "value": "training", "effect": "NoSchedule"}
    nodes = [
        node("a-cordoned", 4, labels=A10, cordoned=True),
        node("a-tainted", 4, labels=A10, taints=[taint]),
        node("a-no-cpu", 4, labels=A10, cpu="2"),
        node("a-ok", 4, labels=A10),
    ]
    fleet, _pending = build(nodes, [pod("cpu-hog", 0, node_name="a-no-cpu", cpu="2", phase="Running")])
    options = placement_options(shape={"cpu": "1"})
    a10 = pools(placement_view(fleet, options))["NVIDIA-A10"]
    assert a10["fits"]["4"] == {"pods": 1, "nodes": {"a-ok": 1}}
    assert a10["stranded"]["1"]["by_reason"] == {"unschedulable": 4, "taint": 4, "cpu": 4}
    tolerating = placement_options(shape={"cpu": "1", "tolerations": [{"key": "dedicated", "operator": "Exists"}]})
    assert pools(placement_view(fleet, tolerating))["NVIDIA-A10"]["fits"]["4"]["nodes"] == {"a-tainted": 1, "a-ok": 1}


def test_pools_split_by_a_named_label_and_withdrawn_gpus_count_apart():
    nodes = [
        node("p1-0", labels={**A10, "pool": "one"}, allocatable_gpus=6),
        node("p2-0", labels={**A10, "pool": "two"}),
    ]
    fleet, _pending = build(nodes, [], options=PlacementOptions(pool_label_keys=("pool",)))
    view = placement_view(fleet, PlacementOptions(pool_label_keys=("pool",)))
    by_name = pools(view)
    assert set(by_name) == {"NVIDIA-A10 pool=one", "NVIDIA-A10 pool=two"}
    assert by_name["NVIDIA-A10 pool=one"]["withdrawn"] == 2 and by_name["NVIDIA-A10 pool=one"]["largest"] == 6
    assert view["fleet"]["fits"]["8"]["nodes"] == {"p2-0": 1}


def test_dra_nodes_count_their_free_whole_devices():
    dra = dra_objects(slices=[dra_slice("dra-0", 4)], claims=[claim("held", 1, "dra-0", ["gpu-0"])])
    fleet, _pending = build([node("dra-0", None)], [], dra)
    view = placement_view(fleet, PlacementOptions())
    (entry,) = view["nodes"]
    assert entry["by_source"] == {"device_plugin": 0, "dra": 3} and entry["pool"] == "NVIDIA-H100-80GB-HBM3"
    assert view["fleet"]["fits"]["2"] == {"pods": 1, "nodes": {"dra-0": 1}}


def test_a_non_gpu_node_is_not_in_the_view():
    fleet, _pending = build([node("cpu-only", None), node("h-0", labels=H100)], [])
    assert [n["name"] for n in placement_view(fleet, PlacementOptions())["nodes"]] == ["h-0"]


def test_stranded_and_fragmented_pools_are_findings():
    fleet, _pending = build([node("a-0", 4, labels=A10, cordoned=True), node("a-1", 4, labels=A10)], [])
    messages = [finding_dict(h)["message"] for h in view_hits(placement_view(fleet, PlacementOptions()))]
    assert messages == [
        "pool NVIDIA-A10: 4 free GPU(s) cannot take even a 1-GPU pod (4 unschedulable)",
        "pool NVIDIA-A10: 8 GPUs free, yet no 8-GPU pod fits (at most 4 on one node)",
    ]
