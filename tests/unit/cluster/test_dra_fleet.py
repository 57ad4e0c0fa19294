"""The DRA side of the simulated fleet: nodes, slices, the driver's objects and the pods, as the
fleet file describes them and as the driver publishes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    class_selects,
    model_from_devices,
    project_device_class,
    project_slice,
)
from tests.cluster import cluster as local_cluster
from tests.cluster import dra, fleet

BASE = "device_plugin: {namespace: kube-system, name: p}\n"
DRIVER = "dra_driver: {namespace: nvidia-dra-driver-gpu, name: k, node_selector: {a: 'b'}}\n"


def shipped() -> dict:
    return fleet.load(local_cluster.HERE / "fleet.yaml")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


def test_the_shipped_fleet_has_dra_nodes_with_full_gpus_and_static_mig():
    spec = shipped()
    nodes = {n["name"]: n for n in fleet.dra_nodes(spec)}
    assert set(nodes) == {"dra-h100", "dra-a100-mig"}
    assert nodes["dra-h100"]["dra"]["mig"] is None
    assert nodes["dra-a100-mig"]["dra"]["mig"] == {"profile": "3g.40gb", "per_gpu": 2}
    for node in nodes.values():
        assert node["gpus"] is None, "a DRA node advertises no nvidia.com/gpu"
        status = fleet.node_object(node)["status"]
        assert "nvidia.com/gpu" not in status["capacity"]
        assert status["addresses"] == [{"type": "InternalIP", "address": "127.0.0.1"}]
    assert spec["dra_driver"]["node_selector"] == {"nvidia.com/dra-kubelet-plugin": "true"}


def test_slices_are_in_the_driver_shape_and_read_back_as_the_modules_read_them():
    nodes = {n["name"]: n for n in fleet.dra_nodes(shipped())}
    h100 = dra.resource_slice("dra-h100", nodes["dra-h100"]["dra"], "uid-1")
    assert h100["spec"]["pool"] == {"name": "dra-h100", "generation": 1, "resourceSliceCount": 1}
    assert h100["metadata"]["ownerReferences"][0] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "dra-h100",
        "uid": "uid-1",
        "controller": True,
    }
    projected = project_slice(h100)
    assert [d["name"] for d in projected["devices"]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert len({d["uuid"] for d in projected["devices"]}) == 4
    assert model_from_devices(projected["devices"]).model == "NVIDIA-H100-80GB-HBM3"
    mig = project_slice(dra.resource_slice("dra-a100-mig", nodes["dra-a100-mig"]["dra"]))
    assert [d["name"] for d in mig["devices"]] == [
        "gpu-0-mig-3g40gb-9-0",
        "gpu-0-mig-3g40gb-9-4",
        "gpu-1-mig-3g40gb-9-0",
        "gpu-1-mig-3g40gb-9-4",
    ]
    assert {d["parent_uuid"] for d in mig["devices"][:2]} == {
        dra.full_gpu("dra-a100-mig", 0, "x", "1")["attributes"]["uuid"]["string"]
    }
    assert model_from_devices(mig["devices"]).model == "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"
    classes = {c["metadata"]["name"]: project_device_class(c) for c in dra.device_classes()}
    assert all(class_selects(classes["gpu.nvidia.com"], d) for d in projected["devices"])
    assert all(class_selects(classes["mig.nvidia.com"], d) for d in mig["devices"])
    assert classes["gpu.nvidia.com"]["extended_resource"] == "nvidia.com/gpu"


def test_pods_on_dra_nodes_and_with_claims_go_through_the_scheduler():
    spec = shipped()
    pods = {p["name"]: p for p in spec["pods"]}
    namespace = spec["pod_namespace"]
    claim = fleet.fleet_pod(pods["dra-claim"], namespace)["spec"]
    assert claim["nodeSelector"] == {"kubernetes.io/hostname": "dra-h100"} and "nodeName" not in claim
    assert claim["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "dra-claim-gpu"}]
    assert claim["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    template = fleet.fleet_claim_template(pods["dra-claim"], namespace)
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 1,
    }
    extended = fleet.fleet_pod(pods["dra-extended"], namespace)["spec"]
    assert extended["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    assert "resourceClaims" not in extended
    pending = fleet.fleet_pod(pods["dra-too-many"], namespace)["spec"]
    assert "nodeSelector" not in pending and "nodeName" not in pending
    # The device-plugin fleet's pods stay bound to their node.
    assert fleet.fleet_pod(pods["overcommit-a"], namespace)["spec"]["nodeName"] == "gke-l4"
    assert fleet.fleet_claim_template(pods["overcommit-a"], namespace) is None


def test_the_fleet_file_says_what_the_dra_nodes_hold():
    spec = shipped()
    expected = {n["name"]: fleet.expected_dra_node(n, spec) for n in fleet.dra_nodes(spec)}
    assert expected["dra-h100"] == {
        "model": "NVIDIA-H100-80GB-HBM3",
        "capacity": 4,
        "allocatable": 4,
        "allocated": 3,
        "free": 1,
    }
    assert (expected["dra-a100-mig"]["capacity"], expected["dra-a100-mig"]["allocated"]) == (4, 1)
    assert [p["name"] for p in fleet.pending_pods(spec)] == ["dra-too-many"]


def test_the_kubelet_plugin_daemonset_is_the_charts():
    daemonset = dra.kubelet_plugin_daemonset(shipped()["dra_driver"])
    template = daemonset["spec"]["template"]
    assert daemonset["spec"]["selector"]["matchLabels"] == {"nvidia-dra-driver-gpu-component": "kubelet-plugin"}
    assert template["metadata"]["labels"]["app.kubernetes.io/name"] == "nvidia-dra-driver-gpu"
    terms = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert len(terms["nodeSelectorTerms"]) == 3
    assert template["spec"]["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "dra-gpu", "effect": "NoSchedule"}
    ]


@pytest.mark.parametrize(
    "text, problem",
    [
        (
            BASE + "nodes: [{name: a, dra: {gpus: 1}}]\n" + DRIVER,
            "nodes[0].dra.product: expected the GPU's product name",
        ),
        (
            BASE + "nodes: [{name: a, dra: {product: X, gpus: 0}}]\n" + DRIVER,
            "nodes[0].dra.gpus: expected a whole number >= 1",
        ),
        (
            BASE + "nodes: [{name: a, dra: {product: X, gpus: 1, mig: {profile: 9g.9gb, per_gpu: 1}}}]\n" + DRIVER,
            "nodes[0].dra.mig.profile: expected one of",
        ),
        (BASE + "nodes: [{name: a, dra: {product: X, gpus: 1, sockets: 2}}]\n" + DRIVER, "unknown keys ['sockets']"),
        (BASE + "nodes: [{name: a, dra: {product: X, gpus: 1}}]\n", "dra_driver: nodes with `dra` need the driver"),
        (BASE + "nodes: [{name: a}]\npods: {items: [{name: p, gpus: 1}]}\n", "pods.items[0].node: None is not a node"),
        (
            BASE + "nodes: [{name: a}]\npods: {items: [{name: p, claim: {count: 1}}]}\n",
            "pods.items[0].claim.device_class: expected a DeviceClass name",
        ),
    ],
)
def test_malformed_dra_entries_name_file_and_problem(tmp_path, text, problem):
    with pytest.raises(fleet.FleetError) as info:
        fleet.load(write(tmp_path, text))
    assert problem in str(info.value)
