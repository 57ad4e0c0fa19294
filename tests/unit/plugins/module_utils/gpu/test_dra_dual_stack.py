"""GPUs served by the device plugin and a DRA driver on one node (gpu/dra.py dual_stack), from the
published shapes: the driver's ResourceSlice of two full H100s, its chart's DeviceClasses and an
allocated claim (tests/unit/fixtures/dra, each file names its source)."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    DevicePluginSide,
    claims_by_device,
    devices_by_node,
    dual_stack,
    project_claim,
    project_device_class,
    project_slice,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dra"
GPU = "nvidia.com/gpu"
NODE = "gpu-node-1"  # the node of the fixtures' full-GPU slice and of their claims


def items(name: str) -> list[dict]:
    return yaml.safe_load((FIXTURES / name).read_text())["items"]


def node_devices(node: str = NODE) -> list[dict]:
    slices = [s for s in map(project_slice, items("resourceslice-full-gpu.example.yaml")) if s]
    return devices_by_node(slices)[node]


def chart_classes(mapped: bool = True) -> list[dict]:
    """The chart's DeviceClasses; without `mapped`, as rendered before resource.k8s.io/v1 (no
    extendedResourceName), which is what most clusters run today."""
    classes = [c for c in map(project_device_class, items("deviceclasses-nvidia-helm.yaml")) if c]
    return classes if mapped else [{**c, "extended_resource": None} for c in classes]


def template_claim_holders() -> dict:
    """The fixtures' claim from a template: gpu-test1/pod1 holds gpu-0 of gpu-node-1."""
    claim = project_claim(items("resourceclaim-allocated.example.yaml")[0])
    return claims_by_device([claim])


def plugin(allocatable=None, pods=None) -> DevicePluginSide:
    return DevicePluginSide({GPU: 2} if allocatable is None else allocatable, DEFAULT_OPTIONS.counts, pods or {})


def test_the_device_plugins_gpus_beside_the_drivers_slice_without_a_mapping_class():
    found = dual_stack(plugin(), node_devices(), chart_classes(mapped=False), {})
    assert found == [
        {
            "resource": GPU,
            "allocatable": 2,
            "driver": "gpu.nvidia.com",
            "devices": 2,
            "device_class": None,
            "over_committed": False,
            "plugin_pods": [],
            "plugin_gpus": 0,
            "claim_pods": [],
            "claimed_devices": 0,
        }
    ]


def test_no_device_class_at_all_still_counts():
    assert [e["resource"] for e in dual_stack(plugin(), node_devices(), [], {})] == [GPU]


def test_a_class_that_maps_the_resource_is_one_case_of_the_same_view():
    (entry,) = dual_stack(plugin(), node_devices(), chart_classes(), {})
    assert (entry["device_class"], entry["devices"], entry["over_committed"]) == ("gpu.nvidia.com", 2, False)


def test_pods_holding_gpus_both_ways_are_over_commit():
    pods = {"ml/trainer": {GPU: 1}, "ml/cpu-sidecar": {}}
    (entry,) = dual_stack(plugin(pods=pods), node_devices(), chart_classes(mapped=False), template_claim_holders())
    assert entry["over_committed"]
    assert (entry["plugin_pods"], entry["plugin_gpus"]) == (["ml/trainer"], 1)
    assert (entry["claim_pods"], entry["claimed_devices"]) == (["gpu-test1/pod1"], 1)


def test_one_side_alone_holding_gpus_is_the_risk_only():
    claims_only = dual_stack(plugin(), node_devices(), [], template_claim_holders())
    plugin_only = dual_stack(plugin(pods={"ml/trainer": {GPU: 2}}), node_devices(), [], {})
    assert [e["over_committed"] for e in claims_only + plugin_only] == [False, False]
    assert claims_only[0]["claim_pods"] == ["gpu-test1/pod1"] and plugin_only[0]["plugin_pods"] == ["ml/trainer"]


def test_no_gpu_resource_or_none_allocatable_is_not_dual_stack():
    assert dual_stack(plugin({GPU: 0, "cpu": 64}), node_devices(), chart_classes(), {}) == []
    assert dual_stack(plugin({"example.com/fpga": 2}), node_devices(), chart_classes(), {}) == []


def test_no_gpu_driver_devices_is_not_dual_stack():
    other = [{**d, "driver": "compute-domain.nvidia.com"} for d in node_devices()]
    assert dual_stack(plugin(), [], chart_classes(), {}) == []
    assert dual_stack(plugin(), other, chart_classes(), {}) == []


def test_a_mapped_resource_outside_the_counted_names_still_counts():
    classes = [{**c, "extended_resource": "example.com/h100"} for c in chart_classes() if c["name"] == "gpu.nvidia.com"]
    (entry,) = dual_stack(plugin({"example.com/h100": 2}), node_devices(), classes, {})
    assert (entry["resource"], entry["device_class"]) == ("example.com/h100", "gpu.nvidia.com")
