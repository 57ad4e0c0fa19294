"""The local fleet's GPU Operator: its operands' DaemonSets, where they run, and that the audit knows them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import BUILTIN_CATALOGUE
from tests.cluster import cluster as local_cluster
from tests.cluster import fleet, gpu_operator


def shipped() -> dict:
    return fleet.load(local_cluster.HERE / "fleet.yaml")


def test_the_shipped_fleet_runs_the_operands_on_a_few_gpu_operator_nodes():
    spec = shipped()
    operator = spec["gpu_operator"]
    assert operator["namespace"] == "gpu-operator"
    assert {"driver", "container-toolkit", "operator-validator", "dcgm-exporter"} <= set(operator["operands"])
    for operand in operator["operands"]:
        daemonset = gpu_operator.operand_daemonset(operator["namespace"], operand)
        selector = daemonset["spec"]["template"]["spec"]["nodeSelector"]
        assert selector == {gpu_operator.DEPLOY_LABEL.format(operand=operand): "true"}
        nodes = [n["name"] for n in spec["nodes"] if selector.items() <= n["labels"].items()]
        assert 1 <= len(nodes) <= 2, operand


def test_every_operand_is_a_known_system_component_in_its_namespace_with_its_service_account():
    objects = gpu_operator.objects(shipped()["gpu_operator"])
    kinds = [obj["kind"] for _path, obj in objects]
    assert kinds[0] == "Namespace" and "ServiceAccount" in kinds
    accounts = {obj["metadata"]["name"] for _path, obj in objects if obj["kind"] == "ServiceAccount"}
    for path, obj in objects:
        if obj["kind"] != "DaemonSet":
            continue
        assert path == "/apis/apps/v1/namespaces/gpu-operator/daemonsets"
        assert obj["metadata"]["namespace"] == "gpu-operator"
        spec = obj["spec"]["template"]["spec"]
        assert spec.get("serviceAccountName") in accounts
        assert BUILTIN_CATALOGUE.recognise(spec) is not None, obj["metadata"]["name"]
    assert gpu_operator.objects(None) == [] and gpu_operator.daemonsets(None) == []


@pytest.mark.parametrize(
    "section, problem",
    [
        ("gpu_operator: [driver]", "gpu_operator: expected a mapping with namespace and operands"),
        ("gpu_operator: {namespace: gpu-operator, operands: [drivers]}", "gpu_operator.operands: expected a list"),
        ("gpu_operator: {operands: [driver]}", "gpu_operator.namespace: expected a namespace name"),
    ],
)
def test_a_malformed_gpu_operator_section_names_the_file_and_problem(tmp_path: Path, section, problem):
    path = tmp_path / "fleet.yaml"
    path.write_text(f"device_plugin: {{namespace: kube-system, name: p}}\nnodes: [{{name: a}}]\n{section}\n")
    with pytest.raises(fleet.FleetError) as info:
        fleet.load(path)
    assert str(info.value).startswith(str(path)) and problem in str(info.value)
