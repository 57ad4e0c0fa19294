"""The device-plugin check on a node where the device plugin advertises nvidia.com/gpu and NVIDIA's
DRA driver publishes the same GPUs in a ResourceSlice: the finding the fleet facts report too,
decided once (gpu/dra.py dual_stack). The slice is the driver's full-GPU ResourceSlice
(tests/unit/fixtures/dra/resourceslice-full-gpu.example.yaml, which names its source)."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.findings import KIND_SERVED_TWICE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import project_slice
from tests.unit.plugins.module_utils.device_plugin.test_dra_layout import (
    CHART_POD_LABELS,
    DP_LABELS,
    NAMESPACE,
    check,
    daemonset,
    dra_pod,
    gpu_slice,
    kinds,
    node,
    pod,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dra"
NODE = "gpu-node-1"  # the node of the fixture's full-GPU slice


def published_slice() -> dict:
    items = yaml.safe_load((FIXTURES / "resourceslice-full-gpu.example.yaml").read_text())["items"]
    return next(s for s in map(project_slice, items) if s and s["node"] == NODE)


def both_ways(slices, gpus=2):
    daemonsets = [
        daemonset("nvidia-device-plugin-daemonset", "kube-system", DP_LABELS, 1),
        daemonset("nvidia-dra-driver-gpu-kubelet-plugin", NAMESPACE, CHART_POD_LABELS, 1),
    ]
    pods = [pod(f"dp-{NODE}", NODE, DP_LABELS, "kube-system"), dra_pod(NODE)]
    return check([node(NODE, gpus)], pods, daemonsets[:1], daemonsets[1:], slices)


def test_the_device_plugin_beside_the_drivers_slice_is_flagged_naming_resource_and_driver():
    result = both_ways([published_slice()])
    assert kinds(result, NODE) == [KIND_SERVED_TWICE]
    (finding,) = result["findings"]
    assert finding["id"] == "fleet.gpus_served_by_device_plugin_and_dra" and finding["severity"] == "error"
    assert finding["message"].startswith(
        "nvidia.com/gpu is in the node's allocatable (device plugin) and driver gpu.nvidia.com publishes 2 "
    )
    assert "cannot be deployed alongside the standard GPU device plugin" in finding["remedy"]
    assert result["healthy"] is False


def test_no_gpu_in_the_allocatable_or_no_slice_is_not_flagged():
    assert KIND_SERVED_TWICE not in kinds(both_ways([published_slice()], gpus=0))
    assert KIND_SERVED_TWICE not in kinds(both_ways([gpu_slice("elsewhere")]))
