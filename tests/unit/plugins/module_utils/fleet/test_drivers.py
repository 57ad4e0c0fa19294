"""The fleet facts' driver view: kept from the node and pod lists the facts read anyway (one list more each of
NVIDIADrivers and DaemonSets only when asked), and its problems: stuck, failed, mixed in a pool, not current."""

from __future__ import annotations

from collections.abc import Iterator

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.drivers import DriverRead, add_driver_view
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.reads import read_fleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError

NOW = 1_800_000_000.0
STATE = "nvidia.com/gpu-driver-upgrade-state"


def node(name, version, model="NVIDIA-H100-80GB-HBM3", labels=None, annotations=None):
    all_labels = {"nvidia.com/gpu.product": model, "nvidia.com/cuda.driver-version.full": version, **(labels or {})}
    return {
        "metadata": {"name": name, "labels": all_labels, "annotations": annotations or {}},
        "spec": {},
        "status": {
            "capacity": {"nvidia.com/gpu": "8"},
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def driver_pod(node_name, generation):
    return {
        "metadata": {
            "name": f"nvidia-driver-daemonset-{node_name}",
            "namespace": "gpu-operator",
            "labels": {"app": "nvidia-driver-daemonset", "pod-template-generation": generation},
            "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-driver-daemonset", "controller": True}],
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "d", "image": "nvcr.io/nvidia/driver:550.54.15-ubuntu22.04"}],
        },
        "status": {"phase": "Running"},
    }


DAEMONSET = {
    "metadata": {
        "name": "nvidia-driver-daemonset",
        "namespace": "gpu-operator",
        "labels": {"app": "nvidia-driver-daemonset"},
        "annotations": {"deprecated.daemonset.template.generation": "2"},
        "ownerReferences": [{"kind": "ClusterPolicy", "name": "cluster-policy", "controller": True}],
    },
    "spec": {"template": {"spec": {}}},
}
NODES = [
    node("a", "550.54.15"),
    node(
        "b",
        "535.183.06",
        labels={STATE: "validation-required"},
        annotations={"nvidia.com/gpu-driver-upgrade-validation-start-time": str(int(NOW) - 7200)},
    ),
    node("c", "550.54.15", labels={STATE: "upgrade-failed"}),
    node(
        "d",
        "535.183.06",
        model="Tesla-T4",
        labels={STATE: "wait-for-jobs-required"},
        annotations={"nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time": str(int(NOW) - 60)},
    ),
]


class Cluster:
    def __init__(self, served=True):
        self.served = served
        self.paths: list[str] = []

    def list_items(self, path: str, **_query) -> Iterator[dict]:
        self.paths.append(path)
        if path == "/api/v1/nodes":
            yield from NODES
        elif path == "/api/v1/pods":
            yield from (driver_pod("a", "2"), driver_pod("b", "1"))
        elif path == "/apis/apps/v1/daemonsets":
            yield DAEMONSET
        elif path.startswith("/apis/nvidia.com/") and not self.served:
            raise ClusterError("not found", 404)


def facts_of(objects: bool, served=True, stuck_after=3600):
    client, drivers = Cluster(served), DriverRead(objects=objects)
    nodes, pods, plugins, dra = read_fleet(client, DEFAULT_OPTIONS, None, None, 500, drivers)
    facts = summarise(nodes, pods, plugins, DEFAULT_OPTIONS, dra)
    add_driver_view(facts, drivers, NOW, stuck_after)
    return facts, client.paths


def ids(problems):
    return sorted(
        (p["where"].get("node") or p["where"].get("pool"), p["id"])
        for p in problems
        if p["id"].startswith("fleet.driver")
    )


def test_from_the_lists_the_facts_read_anyway():
    facts, paths = facts_of(objects=False)
    assert "/apis/apps/v1/daemonsets" not in paths and not any("nvidia.com/v1alpha1" in p for p in paths)
    by_node = {n["name"]: n["driver"] for n in facts["nodes"]}
    assert by_node["a"]["managed_by"] == "gpu-operator-clusterpolicy" and by_node["a"]["pod_revision_current"] is None
    assert by_node["b"]["upgrade_state"] == "validation-required" and by_node["b"]["state_since"] == 7200.0
    assert by_node["d"]["managed_by"] == "host"
    assert ids(facts["problems"]) == [
        ("NVIDIA-H100-80GB-HBM3", "fleet.driver_versions_mixed"),
        ("b", "fleet.driver_upgrade_stuck"),
        ("c", "fleet.driver_upgrade_failed"),
    ]
    stuck = next(p for p in facts["problems"] if p["id"] == "fleet.driver_upgrade_stuck")
    assert stuck["message"] == "nvidia.com/gpu-driver-upgrade-state=validation-required for 2h00m (longer than 1h00m)"
    mixed = next(p for p in facts["problems"] if p["id"] == "fleet.driver_versions_mixed")
    assert "535.183.06 on 1 node(s), 550.54.15 on 2 node(s)" in mixed["message"]
    assert "fleet.driver_upgrade_failed" in [p["id"] for p in {n["name"]: n for n in facts["nodes"]}["c"]["problems"]]
    assert facts["drivers"]["versions"] == {"535.183.06": 2, "550.54.15": 2}
    assert facts["drivers"]["upgrade_states"] == {
        "none": 1,
        "upgrade-failed": 1,
        "validation-required": 1,
        "wait-for-jobs-required": 1,
    }


def test_with_the_objects_the_template_revision_is_judged():
    facts, paths = facts_of(objects=True)
    assert paths.count("/apis/apps/v1/daemonsets") == 1 and paths[0] == "/apis/nvidia.com/v1alpha1/nvidiadrivers"
    by_node = {n["name"]: n["driver"] for n in facts["nodes"]}
    assert (by_node["a"]["pod_revision_current"], by_node["b"]["pod_revision_current"]) == (True, False)
    assert ("b", "fleet.driver_pod_not_current") in ids(facts["problems"])
    assert facts["drivers"]["pods_not_current"] == ["b"] and facts["notes"] == []


def test_unserved_nvidia_drivers_give_a_note_and_a_longer_limit_no_stuck_node():
    facts, _paths = facts_of(objects=True, served=False, stuck_after=8000)
    assert any("does not serve nvidia.com/v1alpha1 nvidiadrivers" in n for n in facts["notes"])
    assert "fleet.driver_upgrade_stuck" not in [p["id"] for p in facts["problems"]]
