"""The driver view and the pre-flight from one list each: nodes, pods, budgets, DaemonSets, NVIDIADrivers
and ResourceClaims; the last two optional."""

from __future__ import annotations

from collections.abc import Iterator

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_info.reads import read_driver_objects
from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_info.view import driver_report, report_lines
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError

NOW = 1_800_000_000.0


def gpu_node(name, labels=None):
    return {
        "metadata": {"name": name, "labels": labels or {}, "managedFields": [{"manager": "kubelet"}]},
        "status": {"capacity": {"nvidia.com/gpu": "8"}},
    }


DRIVER_DS = {
    "metadata": {
        "name": "nvidia-driver-daemonset",
        "namespace": "gpu-operator",
        "labels": {"app": "nvidia-driver-daemonset"},
        "annotations": {"deprecated.daemonset.template.generation": "3"},
        "ownerReferences": [{"kind": "ClusterPolicy", "name": "cluster-policy", "controller": True}],
    },
    "spec": {
        "template": {"spec": {"containers": [{"name": "d", "image": "nvcr.io/nvidia/driver:570.86.15-ubuntu22.04"}]}}
    },
}


def driver_pod(node, generation):
    return {
        "metadata": {
            "name": f"driver-{node}",
            "namespace": "gpu-operator",
            "labels": {"app": "nvidia-driver-daemonset", "pod-template-generation": generation},
            "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-driver-daemonset", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "d", "image": "nvcr.io/nvidia/driver:570.86.15-ubuntu22.04"}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


SNEAKY = {
    "metadata": {"name": "sneaky", "namespace": "ml"},
    "spec": {
        "nodeName": "gpu-b",
        "containers": [{"name": "m", "image": "x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}],
    },
    "status": {"phase": "Running"},
}


class Cluster:
    def __init__(self, served=True):
        self.served = served
        self.paths: list[str] = []
        self.lists = {
            "/api/v1/nodes": [
                gpu_node("gpu-a"),
                gpu_node("gpu-b", {"nvidia.com/gpu-driver-upgrade-state": "upgrade-failed"}),
                {"metadata": {"name": "cpu-1"}, "status": {"capacity": {"cpu": "4"}}},
            ],
            "/api/v1/pods": [driver_pod("gpu-a", "3"), driver_pod("gpu-b", "2"), SNEAKY],
            "/apis/policy/v1/poddisruptionbudgets": [],
            "/apis/apps/v1/daemonsets": [DRIVER_DS],
            "/apis/nvidia.com/v1alpha1/nvidiadrivers": [],
            "/apis/resource.k8s.io/v1/resourceclaims": [],
        }

    def list_items(self, path: str, **_query) -> Iterator[dict]:
        self.paths.append(path)
        if not self.served and ("nvidia.com" in path or "resource.k8s.io" in path):
            raise ClusterError("not found", 404)
        yield from self.lists[path]


def test_one_list_each_and_the_view_per_gpu_node():
    client = Cluster()
    objects = read_driver_objects(client, None, None, 500)
    assert len(client.paths) == 6 and len(set(client.paths)) == 6
    assert [n["metadata"]["name"] for n in objects.nodes] == ["gpu-a", "gpu-b"]
    assert "managedFields" not in objects.nodes[0]["metadata"]
    result = driver_report(objects, "580.65.06", NOW)
    by_node = {n["node"]: n for n in result["nodes"]}
    assert by_node["gpu-a"]["pod_revision_current"] is True and by_node["gpu-a"]["ready_to_upgrade"]
    assert by_node["gpu-b"]["pod_revision_current"] is False
    assert by_node["gpu-b"]["upgrade_state"] == "upgrade-failed"
    assert by_node["gpu-a"]["version"] == "570.86.15"
    assert by_node["gpu-a"]["managed_by"] == "gpu-operator-clusterpolicy"
    assert [(b["node"], b["pod"], b["reason"]) for b in result["blockers"]] == [
        ("gpu-b", "sneaky", "gpu-use-without-request")
    ]
    assert result["counts"]["nodes_blocked"] == 1 and result["counts"]["pods_not_current"] == 1
    assert result["counts"]["versions"] == {"570.86.15": 2}
    assert result["notes"] == []
    lines = report_lines(result)
    assert lines[1].startswith("gpu-b: driver 570.86.15 (gpu-operator-clusterpolicy), upgrade-failed")
    assert "NOT on the current template" in lines[1]


def test_unserved_nvidia_drivers_and_claims_give_notes():
    objects = read_driver_objects(Cluster(served=False), None, ["gpu-a"], 500)
    assert [n["metadata"]["name"] for n in objects.nodes] == ["gpu-a"]
    assert len(objects.notes) == 2 and all("does not serve" in n for n in objects.notes)
    assert [p["metadata"]["name"] for p in objects.pods] == ["driver-gpu-a"]


class Forbidden(Cluster):
    def list_items(self, path: str, **_query) -> Iterator[dict]:
        if "poddisruptionbudgets" in path:
            raise ClusterError("forbidden", 403)
        yield from super().list_items(path, **_query)


def test_a_reader_that_may_not_list_budgets_gets_a_note_and_the_rest():
    objects = read_driver_objects(Forbidden(), None, None, 500)
    assert objects.budgets == [] and len(objects.nodes) == 2
    assert objects.notes == [
        "not allowed to list policy/v1 poddisruptionbudgets: budgets that allow no disruption are not found"
    ]
