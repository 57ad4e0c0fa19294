"""The device-plugin check on nodes whose GPUs come through NVIDIA's DRA driver.

The kubelet plugin's DaemonSet and pod labels are those of the driver's Helm chart:
NVIDIA/k8s-dra-driver-gpu, deployments/helm/nvidia-dra-driver-gpu/templates/kubeletplugin.yaml
(DaemonSet `<chart>-kubelet-plugin`, pods labelled by templates/_helpers.tpl `selectorLabels`:
`nvidia-dra-driver-gpu-component: kubelet-plugin`, and `app.kubernetes.io/name: nvidia-dra-driver-gpu`),
and deployments/helm/dra-driver-nvidia-gpu (the kubernetes-sigs chart, `dra-driver-nvidia-gpu-component`).
"""

from __future__ import annotations

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.findings import (
    KIND_DRA_NO_SLICES,
    KIND_DRA_NOT_READABLE,
    KIND_DRA_PLUGIN_NOT_READY,
    KIND_NO_CAPACITY,
    KIND_NO_DEVICE_PLUGIN,
    KIND_NO_DRA_PLUGIN_POD,
    KIND_NO_PLUGIN_POD,
    KIND_SEVERAL_DEPLOYMENTS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.projection import (
    ClusterReads,
    compact_node,
    project_daemonset,
    project_plugin_pod,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.targets import (
    is_dra_daemonset,
    plugin_pod_queries,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.verdict import evaluate
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import deployment_of
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import project_slice
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS

CHART_POD_LABELS = {
    "app.kubernetes.io/name": "nvidia-dra-driver-gpu",
    "app.kubernetes.io/instance": "nvidia-dra-driver-gpu",
    "nvidia-dra-driver-gpu-component": "kubelet-plugin",
}
NAMESPACE = "nvidia-dra-driver-gpu"
DP_LABELS = {"name": "nvidia-device-plugin-ds"}


def node(name, gpus=None, labels=None):
    capacity = {"cpu": "64"}
    if gpus is not None:
        capacity["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def daemonset(name, namespace, pod_labels, count):
    status = {k: count for k in ("desiredNumberScheduled", "currentNumberScheduled", "updatedNumberScheduled")}
    status.update(numberReady=count, numberAvailable=count, numberMisscheduled=0, observedGeneration=1)
    return {
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {
            "selector": {"matchLabels": {k: v for k, v in pod_labels.items() if k.endswith("component")} or pod_labels},
            "template": {"metadata": {"labels": pod_labels}, "spec": {"containers": [{"name": "gpus"}]}},
        },
        "status": status,
    }


def pod(name, node_name, labels, namespace, ready=True, owner="x"):
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [{"kind": "DaemonSet", "name": owner}],
        },
        "spec": {"nodeName": node_name},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def dra_pod(node_name, ready=True):
    return pod(
        f"kubelet-plugin-{node_name}",
        node_name,
        CHART_POD_LABELS,
        NAMESPACE,
        ready,
        "nvidia-dra-driver-gpu-kubelet-plugin",
    )


def gpu_slice(node_name, gpus=2):
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"}},
        }
        for i in range(gpus)
    ]
    return project_slice(
        {
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": node_name,
                "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            }
        }
    )


def check(nodes, pods, daemonsets=(), dra_daemonsets=(), slices=(), note=None):
    read = ClusterReads(
        [project_daemonset(d) for d in daemonsets],
        [],
        [compact_node(n, DEFAULT_OPTIONS) for n in nodes],
        [p for p in map(project_plugin_pod, pods) if p],
        dra_daemonsets=[project_daemonset(d) for d in dra_daemonsets],
        slices=slices,
        dra_note=note,
    )
    return evaluate(read, DEFAULT_OPTIONS)


def kinds(result, node_name=None):
    return sorted(f["kind"] for f in result["findings"] if node_name is None or f["node"] == node_name)


@pytest.mark.parametrize(
    "labels, key",
    [
        (CHART_POD_LABELS, "nvidia-dra-driver"),
        ({"dra-driver-nvidia-gpu-component": "kubelet-plugin"}, "dra-driver-nvidia-gpu"),
    ],
)
def test_the_kubelet_plugin_is_a_deployment_kind_of_its_own(labels, key):
    assert deployment_of(labels).key == key
    ds = project_daemonset(daemonset("k", NAMESPACE, labels, 1))
    assert is_dra_daemonset(ds, DEFAULT_OPTIONS)
    assert (NAMESPACE, ds["pod_selector"]) in plugin_pod_queries(DEFAULT_OPTIONS, [ds])


def test_a_healthy_dra_only_cluster_has_no_device_plugin_finding():
    nodes = [node("dra-0", labels={"nvidia.com/gpu.present": "true"}), node("dra-1")]
    result = check(
        nodes,
        [dra_pod("dra-0"), dra_pod("dra-1")],
        dra_daemonsets=[daemonset("nvidia-dra-driver-gpu-kubelet-plugin", NAMESPACE, CHART_POD_LABELS, 2)],
        slices=[gpu_slice("dra-0"), gpu_slice("dra-1")],
    )
    assert result["findings"] == []
    assert result["healthy"] is True
    assert [d["key"] for d in result["deployments"]] == ["nvidia-dra-driver"]
    [summary] = result["dra_daemonsets"]
    assert summary["healthy"] and summary["deployment"] == "nvidia-dra-driver"
    by_name = {n["name"]: n for n in result["nodes"]}
    assert by_name["dra-0"]["gpu_sources"] == ["dra"]
    assert by_name["dra-0"]["dra"] == {
        "kubelet_plugin_pods": [f"{NAMESPACE}/kubelet-plugin-dra-0"],
        "kubelet_plugin_ready": True,
        "slices": 1,
        "devices": 2,
    }
    assert (result["counts"]["dra_nodes"], result["counts"]["dra_plugin_pods"]) == (2, 2)
    assert "GPUs through DRA: 2 nodes, 2 kubelet-plugin pods" in result["report"]


def test_a_mixed_cluster_checks_each_node_for_its_own_source():
    nodes = [node("gfd", 4, {"nvidia.com/gpu.product": "Tesla-T4"}), node("dra")]
    pods = [pod("dp-gfd", "gfd", DP_LABELS, "kube-system"), dra_pod("dra")]
    result = check(
        nodes,
        pods,
        daemonsets=[daemonset("nvidia-device-plugin-daemonset", "kube-system", DP_LABELS, 1)],
        dra_daemonsets=[daemonset("nvidia-dra-driver-gpu-kubelet-plugin", NAMESPACE, CHART_POD_LABELS, 1)],
        slices=[gpu_slice("dra")],
    )
    assert result["findings"] == []
    assert KIND_SEVERAL_DEPLOYMENTS not in kinds(result)


def test_kubelet_plugin_missing_not_ready_or_publishing_nothing():
    nodes = [node("stale"), node("down"), node("silent")]
    result = check(
        nodes,
        [dra_pod("down", ready=False), dra_pod("silent")],
        slices=[gpu_slice("stale"), gpu_slice("down")],
    )
    assert kinds(result, "stale") == [KIND_NO_DRA_PLUGIN_POD]
    assert kinds(result, "down") == [KIND_DRA_PLUGIN_NOT_READY]
    assert kinds(result, "silent") == [KIND_DRA_NO_SLICES]
    assert KIND_NO_DEVICE_PLUGIN not in kinds(result)
    assert not {KIND_NO_PLUGIN_POD, KIND_NO_CAPACITY} & set(kinds(result))


def test_a_gpu_node_with_neither_source_still_lacks_a_device_plugin():
    result = check([node("bare", labels={"nvidia.com/gpu.product": "Tesla-T4"})], [], slices=[])
    assert kinds(result) == sorted([KIND_NO_DEVICE_PLUGIN, KIND_NO_PLUGIN_POD, KIND_NO_CAPACITY])


def test_slices_that_cannot_be_read_are_a_note_and_no_slice_finding():
    result = check([node("dra")], [dra_pod("dra")], slices=None, note="this cluster does not serve resource.k8s.io/v1")
    assert kinds(result) == [KIND_DRA_NOT_READABLE]
    assert result["healthy"] is True
