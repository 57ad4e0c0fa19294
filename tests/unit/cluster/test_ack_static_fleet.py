"""The local fleet's ACK static device-plugin pods: on the ACK nodes instead of the DaemonSet, shaped as
the kubelet shows a static pod, found by the device-plugin check as ACK static pods, and known to the
audit as the NVIDIA device plugin."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.projection import project_plugin_pod
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import BUILTIN_CATALOGUE, NO_CATALOGUE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    DEFAULT_DEVICE_PLUGIN_SELECTORS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import parse_label_selector
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import Document
from tests.cluster import ack, fleet
from tests.cluster import cluster as local_cluster


def shipped() -> dict:
    return fleet.load(local_cluster.HERE / "fleet.yaml")


def test_every_ack_node_runs_the_static_pod_and_no_daemonset_pod():
    spec = shipped()
    ack_nodes = [n["name"] for n in spec["nodes"] if n["name"].startswith("ack-")]
    assert ack_nodes and ack.static_nodes(spec) == ack_nodes
    selector = spec["device_plugin"]["node_selector"].items()
    assert all(not selector <= n["labels"].items() for n in spec["nodes"] if n["name"] in ack_nodes)
    assert any(selector <= n["labels"].items() for n in spec["nodes"]), "other GPU nodes keep the DaemonSet"


def test_the_mirror_pod_is_shaped_as_the_kubelet_shows_a_static_pod():
    pod = ack.mirror_pod("ack-v100", "0b6f-uid")
    metadata = pod["metadata"]
    assert (metadata["namespace"], metadata["name"]) == ("kube-system", "nvidia-device-plugin-ack-v100")
    assert metadata["labels"] == {"component": "nvidia-device-plugin"}
    assert metadata["annotations"]["kubernetes.io/config.source"] == "file"
    assert (
        metadata["annotations"]["kubernetes.io/config.mirror"] == metadata["annotations"]["kubernetes.io/config.hash"]
    )
    assert metadata["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "ack-v100", "uid": "0b6f-uid", "controller": True}
    ]
    assert pod["spec"]["nodeName"] == "ack-v100"
    assert "--pass-device-specs" in pod["spec"]["containers"][0]["args"]
    assert (
        ack.mirror_pod("ack-a10-0", "u")["metadata"]["annotations"]["kubernetes.io/config.hash"]
        != (metadata["annotations"]["kubernetes.io/config.hash"])
    )


def test_the_device_plugin_check_finds_it_as_an_ack_static_pod():
    pod = ack.mirror_pod("ack-v100", "uid")
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    selectors = [parse_label_selector(s) for s in DEFAULT_DEVICE_PLUGIN_SELECTORS]
    assert any(s.matches(pod["metadata"]["labels"]) for s in selectors)
    projected = project_plugin_pod(pod)
    assert projected is not None
    assert (projected["node"], projected["static"], projected["deployment"], projected["ready"]) == (
        "ack-v100",
        True,
        "ack-static",
        True,
    )


def test_the_audit_knows_it_as_the_nvidia_device_plugin_and_judges_an_impostor():
    pod = ack.mirror_pod("ack-v100", "uid")
    assert BUILTIN_CATALOGUE.recognise(pod["spec"]).name == "NVIDIA device plugin"
    report = validate_documents([Document("ack.yaml", 0, pod, 1)], RuleConfig())
    assert report.findings == []
    assert {a.reason for a in report.allowed} == {"known GPU system component: NVIDIA device plugin"}
    judged = validate_documents([Document("ack.yaml", 0, pod, 1)], RuleConfig(components=NO_CATALOGUE))
    assert judged.findings, "privileged with NVIDIA_VISIBLE_DEVICES=all: findings the catalogue allows"

    impostor = copy.deepcopy(pod)
    impostor["spec"]["containers"][0]["command"] = ["python", "train.py"]
    assert any(f.severity == "error" for f in validate_documents([Document("x.yaml", 0, impostor, 1)]).findings)


def test_a_malformed_static_plugin_flag_names_the_file_and_problem(tmp_path: Path):
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "device_plugin: {namespace: kube-system, name: p}\nnodes: [{name: a, ack_static_device_plugin: 1}]\n"
    )
    with pytest.raises(fleet.FleetError) as info:
        fleet.load(path)
    assert str(info.value) == f"{path}: nodes[0].ack_static_device_plugin: expected true or false, got 1"
