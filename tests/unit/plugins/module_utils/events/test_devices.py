"""DRA GPU devices: their class from the slice's taints and the DeviceTaintRules that pick them, and their
transitions: one per class change, a new device only when not healthy, a device no longer published deleted."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.devices import (
    DEVICE_TRANSITION,
    device_changes,
    device_event,
    device_views,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.transitions import SEEN_ON_WATCH
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import project_slice, project_taint_rule
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import DEGRADED, FAILED, HEALTHY

DRIVER = "gpu.nvidia.com"


def resource_slice(node="dra-1", generation=1, taints=None, devices=("gpu-0", "gpu-1")):
    """A ResourceSlice of the NVIDIA DRA driver, in the shape of resource.k8s.io/v1."""
    return project_slice(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}-abcde"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                "devices": [
                    {"name": name, "attributes": {"type": {"string": "gpu"}}, "taints": (taints or {}).get(name, [])}
                    for name in devices
                ],
            },
        }
    )


def rule(name="xid-79", device="gpu-1", effect="NoExecute"):
    return project_taint_rule(
        {
            "metadata": {"name": name},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": "dra-1", "device": device},
                "taint": {"key": "example.com/xid", "value": "79", "effect": effect},
            },
        }
    )


def classes(views):
    return {key[2]: view.health for key, view in views.items()}


def test_a_device_s_class_comes_from_its_taints_and_the_rules_that_pick_it():
    slices = {"s": resource_slice(taints={"gpu-0": [{"key": "k", "effect": None}]})}
    assert classes(device_views(slices, {})) == {"gpu-0": DEGRADED, "gpu-1": HEALTHY}
    assert classes(device_views(slices, {"r": rule()})) == {"gpu-0": DEGRADED, "gpu-1": FAILED}
    assert classes(device_views(slices, {"r": rule(effect="None")})) == {"gpu-0": DEGRADED, "gpu-1": DEGRADED}


def test_each_class_change_once_and_nothing_for_a_republished_slice():
    before = device_views({"s": resource_slice()}, {})
    assert device_changes(before, device_views({"s": resource_slice(generation=2)}, {})) == []
    after = device_views({"s": resource_slice()}, {"r": rule()})
    (change,) = device_changes(before, after)
    event = device_event(change, SEEN_ON_WATCH, act=False)
    assert (event["type"], event["node"], event["from"], event["to"]) == (DEVICE_TRANSITION, "dra-1", HEALTHY, FAILED)
    assert event["device"] == {"driver": DRIVER, "pool": "dra-1", "name": "gpu-1"}
    assert event["taints"] == ["example.com/xid=79:NoExecute"]
    assert device_changes(after, after) == []


def test_new_devices_only_when_not_healthy_and_gone_devices_deleted():
    assert device_changes({}, device_views({"s": resource_slice()}, {})) == []
    tainted = device_views({"s": resource_slice()}, {"r": rule()})
    assert [(c.key[2], c.after.health) for c in device_changes({}, tainted)] == [("gpu-1", FAILED)]
    fewer = device_views({"s": resource_slice(generation=2, devices=("gpu-0",))}, {})
    (gone,) = device_changes(device_views({"s": resource_slice()}, {}), fewer)
    assert (gone.key[2], device_event(gone, SEEN_ON_WATCH, act=True)["to"]) == ("gpu-1", "deleted")
