"""The fleet facts of a node whose GPUs the device plugin and NVIDIA's DRA driver both serve: the
risk, with or without a DeviceClass that maps the resource, and the over-commit when pods hold
GPUs both ways (slices and claims in the driver's shape, tests/unit/fixtures/dra)."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import (
    PROBLEM_OVER_COMMITTED,
    PROBLEM_SERVED_TWICE,
)
from tests.unit.plugins.module_utils.fleet.test_dra_facts import (
    by_name,
    chart_classes,
    claim,
    device_plugin,
    dra_plugin,
    facts_of,
    full_gpu,
    make_node,
    make_pod,
    resource_slice,
)

NODE = "both"


def unmapped_classes() -> list[dict]:
    """The chart's classes as rendered before resource.k8s.io/v1: no extendedResourceName."""
    classes = []
    for item in chart_classes():
        spec = {k: v for k, v in item["spec"].items() if k != "extendedResourceName"}
        classes.append({**item, "spec": spec})
    return classes


def node_of(pods=(), claims=(), classes=None, gpus=2) -> dict:
    slices = [resource_slice(NODE, [full_gpu(i, NODE) for i in range(gpus)])]
    system = [device_plugin(NODE), dra_plugin(NODE)]
    classes = unmapped_classes() if classes is None else classes
    return by_name(facts_of([make_node(NODE, gpus)], [*system, *pods], slices, claims, classes))[NODE]


def kinds(node) -> list[str]:
    return [p["kind"] for p in node["problems"]]


def test_the_device_plugin_beside_the_drivers_slices_without_a_mapping_class_is_the_risk():
    node = node_of()
    assert kinds(node) == [PROBLEM_SERVED_TWICE]
    assert node["problems"][0]["reason"] == (
        "nvidia.com/gpu is in the node's allocatable (device plugin) and driver gpu.nvidia.com publishes 2 "
        "GPU device(s) here in ResourceSlices: the scheduler counts the two apart, so pods asking either way "
        "can be given the same GPUs"
    )
    (entry,) = node["dra"]["served_by_both"]
    assert (entry["resource"], entry["driver"], entry["device_class"]) == ("nvidia.com/gpu", "gpu.nvidia.com", None)
    assert "cannot be deployed alongside the standard GPU device plugin" in node["problems"][0]["remedy"]


def test_a_mapping_class_is_the_same_finding_in_its_own_words():
    node = node_of(classes=chart_classes())
    assert kinds(node) == [PROBLEM_SERVED_TWICE]
    assert (
        "DeviceClass gpu.nvidia.com maps it to the DRA devices of driver gpu.nvidia.com"
        in (node["problems"][0]["reason"])
    )


def test_pods_holding_gpus_both_ways_are_over_commit_naming_both():
    pods = [make_pod("limits", NODE, gpus=1), make_pod("claimer", NODE)]
    node = node_of(pods, [claim("claimer-gpu", NODE, ["gpu-0"], pods=["claimer"])])
    assert kinds(node) == [PROBLEM_OVER_COMMITTED]
    reason = node["problems"][0]["reason"]
    assert reason.startswith("ml/limits hold 1 nvidia.com/gpu (device plugin) and ml/claimer hold claims on 1 ")
    (entry,) = node["dra"]["served_by_both"]
    assert entry["over_committed"] and (entry["plugin_pods"], entry["claim_pods"]) == (["ml/limits"], ["ml/claimer"])
    assert node["gpu_pods"] == ["ml/claimer", "ml/limits"]


def test_a_node_with_only_dra_gpus_or_only_the_device_plugin_is_not_flagged():
    dra_only = by_name(facts_of([make_node("dra")], [dra_plugin("dra")], [resource_slice("dra", [full_gpu(0, "dra")])]))
    plugin_only = by_name(facts_of([make_node("dp", 2)], [device_plugin("dp")], [], [], chart_classes()))
    assert dra_only["dra"]["dra"]["served_by_both"] == [] == plugin_only["dp"]["dra"]["served_by_both"]
    assert PROBLEM_SERVED_TWICE not in kinds(dra_only["dra"]) + kinds(plugin_only["dp"])
