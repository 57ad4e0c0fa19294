"""gpu_device_plugin and the device_plugin runbook on the local cluster, its writes as the API server
counts them.

NVIDIA's static DaemonSet of v0.17.4 is deployed, with a time-sliced config, on scratch KWOK GPU nodes
of a namespace made for the test, selected by a label only they carry (the fleet's own device plugin
in kube-system serves the fleet's nodes and is left alone); a DRA node with that label gets no pod. A
rerun sends no write, `--check` none either; the upgrade to v0.18.2 is one server-side apply (verb APPLY) of the DaemonSet and
ends with a Ready v0.18.2 pod on every node; a bad config, an object of the same name the collection
did not make, and another device plugin on the nodes are refused with no write; `state: absent` deletes
what the module made and nothing else. The runbook does the same and verifies the capacity.

The counts come from kube-apiserver's `/metrics` (`apiserver_request_total`): write verbs on DaemonSets
and ConfigMaps, not their status (the DaemonSet controller writes `daemonsets/status`). The namespace,
the scratch nodes and everything in them are removed after.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ANSIBLE_BIN, REPO_ROOT, LocalCluster, ansible_env, run_ansible_module, wait_until

from tests.cluster import fleet as fleet_file

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

_REQUESTS = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"}
WATCHED = {"daemonsets", "configmaps"}
DAEMONSET = "nvidia-device-plugin-daemonset"
CONFIG_MAP = "nvidia-device-plugin-config"
DRA_LABEL = "nvidia.com/dra-kubelet-plugin"
TIME_SLICED = {
    "version": "v1",
    "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
}
BAD_CONFIG = REPO_ROOT / "tests" / "unit" / "fixtures" / "plugin_config" / "bad" / "issue-1433-configmap.yaml"


def writes(cluster: LocalCluster) -> Counter[tuple[str, str]]:
    """Write requests on DaemonSets and ConfigMaps (not their subresources) answered so far, by (verb, resource)."""
    status, text = cluster.api.request("GET", "/metrics")
    assert status == 200 and isinstance(text, str), f"GET /metrics: {status}"
    counts: Counter[tuple[str, str]] = Counter()
    for match in _REQUESTS.finditer(text):
        labels = dict(_LABEL.findall(match["labels"]))
        if labels.get("verb") in WRITE_VERBS and labels.get("resource") in WATCHED and not labels.get("subresource"):
            counts[labels["verb"], labels["resource"]] += int(float(match["value"]))
    return counts


def sent(before: Counter, after: Counter) -> dict[tuple[str, str], int]:
    return {key: after[key] - before[key] for key in after if after[key] != before[key]}


class Scratch:
    def __init__(self, cluster: LocalCluster, run: str):
        self.cluster = cluster
        self.run = run
        self.namespace = f"dp-{run}"
        self.label = {"kubegpu.io/device-plugin-test": run}
        self.nodes = [f"dp-{run}-0", f"dp-{run}-1"]
        self.dra_node = f"dp-{run}-dra"

    def args(self, **extra: Any) -> dict[str, Any]:
        return {"namespace": self.namespace, "node_selector": self.label, "wait_timeout": 120, **extra}

    def module(self, *flags: str, **extra: Any) -> tuple[str, dict]:
        status, result, _done = run_ansible_module(
            self.cluster.kubeconfig, "gpu_device_plugin", self.args(**extra), *flags
        )
        return status, result

    def path(self, kind: str, name: str) -> str:
        if kind == "ConfigMap":
            return f"/api/v1/namespaces/{self.namespace}/configmaps/{name}"
        return f"/apis/apps/v1/namespaces/{self.namespace}/daemonsets/{name}"

    def pods(self, daemonset: str = DAEMONSET) -> list[dict]:
        items = self.cluster.get(f"/api/v1/namespaces/{self.namespace}/pods")["items"]
        return [
            p
            for p in items
            if any(o.get("name") == daemonset for o in p["metadata"].get("ownerReferences", []))
            and "deletionTimestamp" not in p["metadata"]
        ]


def node_spec(name: str, labels: dict[str, str], gpus: int | None) -> dict[str, Any]:
    return {
        "name": name,
        "cpu": "32",
        "memory": "256Gi",
        "gpus": gpus,
        "allocatable_gpus": gpus,
        "labels": labels,
        "taints": [],
    }


@pytest.fixture(scope="module")
def scratch(cluster: LocalCluster) -> Iterator[Scratch]:
    made = Scratch(cluster, uuid.uuid4().hex[:6])
    status, reply = cluster.create("/api/v1/namespaces", {"metadata": {"name": made.namespace}})
    assert status == 201, reply
    # Two GPUs each, time-sliced four ways: the fleet gives them the capacity the plugin would advertise.
    gpu_labels = {**made.label, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "2"}
    specs = [node_spec(name, gpu_labels, 8) for name in made.nodes]
    specs.append(node_spec(made.dra_node, {**made.label, DRA_LABEL: "true"}, None))
    try:
        for spec in specs:
            status, reply = cluster.create("/api/v1/nodes", fleet_file.node_object(spec))
            assert status == 201, reply
        yield made
    finally:
        run_ansible_module(cluster.kubeconfig, "gpu_device_plugin", {"state": "absent", "namespace": made.namespace})
        cluster.delete(f"/api/v1/namespaces/{made.namespace}")
        for spec in specs:
            cluster.delete(f"/api/v1/nodes/{spec['name']}")
        wait_until(
            lambda: (
                not {s["name"] for s in specs} & {n["metadata"]["name"] for n in cluster.get("/api/v1/nodes")["items"]}
            ),
            timeout=60,
            what="the scratch nodes to go",
        )


def image_of(pod_or_daemonset: dict) -> str:
    spec = pod_or_daemonset["spec"]
    return (spec["template"]["spec"] if "template" in spec else spec)["containers"][0]["image"]


def ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


def test_install_on_the_labelled_gpu_nodes_only_then_a_rerun_and_check_mode_send_no_write(scratch: Scratch):
    before = writes(scratch.cluster)
    status, result = scratch.module(version="v0.17.4", config=TIME_SLICED)
    assert status == "CHANGED", result.get("msg")
    assert sent(before, writes(scratch.cluster)) == {("APPLY", "configmaps"): 1, ("APPLY", "daemonsets"): 1}
    assert result["writes"] == 2
    assert result["targeted_nodes"] == scratch.nodes and result["rollout"] == {"done": True, "waiting": []}
    assert [c["as_expected"] for c in result["capacity"]] == [True, True]
    assert result["capacity"][0]["resources"] == {"nvidia.com/gpu": {"expected": 8, "capacity": 8}}
    pods = scratch.pods()
    assert sorted(p["spec"]["nodeName"] for p in pods) == scratch.nodes and all(map(ready, pods))
    assert {image_of(p) for p in pods} == {"nvcr.io/nvidia/k8s-device-plugin:v0.17.4"}
    daemonset = scratch.cluster.get(scratch.path("DaemonSet", DAEMONSET))
    assert daemonset["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubegpu.scheduling"
    managers = {m["manager"] for m in daemonset["metadata"]["managedFields"] if m["operation"] == "Apply"}
    assert managers == {"kubegpu-device-plugin"}

    before = writes(scratch.cluster)
    status, result = scratch.module(version="v0.17.4", config=TIME_SLICED)
    assert status == "SUCCESS" and result["changes"] == [] and result["writes"] == 0, result
    status, result = scratch.module("--check", "--diff", version="v0.18.2", config=TIME_SLICED)
    assert status == "CHANGED" and result["changes"] == [f"DaemonSet {scratch.namespace}/{DAEMONSET}"], result
    assert result["writes"] == 0
    assert sent(before, writes(scratch.cluster)) == {}
    assert image_of(scratch.cluster.get(scratch.path("DaemonSet", DAEMONSET))).endswith(":v0.17.4")


def test_the_upgrade_is_one_apply_and_ends_with_a_ready_pod_of_the_new_release_on_every_node(scratch: Scratch):
    before = writes(scratch.cluster)
    status, result = scratch.module(version="v0.18.2", config=TIME_SLICED)
    assert status == "CHANGED", result.get("msg")
    assert sent(before, writes(scratch.cluster)) == {("APPLY", "daemonsets"): 1}
    assert result["rollout"]["done"] is True
    daemonset = scratch.cluster.get(scratch.path("DaemonSet", DAEMONSET))
    generation = str(daemonset["metadata"]["generation"])
    pods = scratch.pods()
    assert sorted(p["spec"]["nodeName"] for p in pods) == scratch.nodes
    assert {image_of(p) for p in pods} == {"nvcr.io/nvidia/k8s-device-plugin:v0.18.2"} and all(map(ready, pods))
    assert {p["metadata"]["labels"]["pod-template-generation"] for p in pods} == {generation}


def test_a_bad_config_is_refused_before_anything_is_sent(scratch: Scratch):
    config = yaml.safe_load(BAD_CONFIG.read_text())["data"]["any"]
    version = scratch.cluster.get(scratch.path("ConfigMap", CONFIG_MAP))["metadata"]["resourceVersion"]
    before = writes(scratch.cluster)
    status, result = scratch.module(version="v0.18.2", config=config)
    assert status == "FAILED!" and {f["kind"] for f in result["findings"]} == {"deploy_config_invalid"}
    assert sent(before, writes(scratch.cluster)) == {}
    assert scratch.cluster.get(scratch.path("ConfigMap", CONFIG_MAP))["metadata"]["resourceVersion"] == version


def foreign_daemonset(name: str, namespace: str, pod_labels: dict[str, str], selector: dict[str, str]) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": pod_labels},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "nodeSelector": selector,
                    "containers": [{"name": "plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}],
                },
            },
        },
    }


def test_another_device_plugin_on_the_nodes_and_an_object_not_ours_are_refused_with_no_write(scratch: Scratch):
    cluster = scratch.cluster
    operator = foreign_daemonset(
        "operator-plugin",
        scratch.namespace,
        {"app": "nvidia-device-plugin-daemonset"},
        {**scratch.label, "nvidia.com/gpu.present": "true"},
    )
    status, reply = cluster.create(f"/apis/apps/v1/namespaces/{scratch.namespace}/daemonsets", operator)
    assert status == 201, reply
    try:
        wait_until(lambda: len(scratch.pods("operator-plugin")) == 2, timeout=60, what="the other plugin's pods")
        before = writes(cluster)
        status, result = scratch.module(version="v0.18.2", config=TIME_SLICED, priority_class="")
        assert status == "FAILED!", result
        (finding,) = result["findings"]
        assert finding["kind"] == "deploy_already_served" and "NVIDIA GPU Operator" in finding["problem"]
        assert sent(before, writes(cluster)) == {}
    finally:
        cluster.delete(scratch.path("DaemonSet", "operator-plugin"))
        wait_until(lambda: not scratch.pods("operator-plugin"), timeout=60, what="the other plugin's pods to go")

    # The fleet's own plugin in kube-system has the published name, without the collection's label.
    before = writes(cluster)
    status, result = scratch.module(version="v0.18.2", namespace="kube-system")
    assert status == "FAILED!", result
    assert "deploy_not_owned" in {f["kind"] for f in result["findings"]}
    assert sent(before, writes(cluster)) == {}


def test_absent_removes_what_the_module_made_and_nothing_else(scratch: Scratch):
    cluster = scratch.cluster
    # An object of a name the module uses, not made by it.
    theirs = foreign_daemonset("gpu-feature-discovery", scratch.namespace, {"app": "theirs"}, {"no-such": "node"})
    status, reply = cluster.create(f"/apis/apps/v1/namespaces/{scratch.namespace}/daemonsets", theirs)
    assert status == 201, reply
    before = writes(cluster)
    status, result = run_ansible_module(
        cluster.kubeconfig, "gpu_device_plugin", {"state": "absent", "namespace": scratch.namespace}, "--check"
    )[:2]
    assert status == "CHANGED" and sent(before, writes(cluster)) == {}
    status, result = run_ansible_module(
        cluster.kubeconfig, "gpu_device_plugin", {"state": "absent", "namespace": scratch.namespace}
    )[:2]
    assert status == "CHANGED", result.get("msg")
    assert sorted(result["changes"]) == [
        f"ConfigMap {scratch.namespace}/{CONFIG_MAP}",
        f"DaemonSet {scratch.namespace}/{DAEMONSET}",
    ]
    assert result["left_alone"] == [f"DaemonSet {scratch.namespace}/gpu-feature-discovery"]
    assert sent(before, writes(cluster)) == {("DELETE", "configmaps"): 1, ("DELETE", "daemonsets"): 1}
    status, gone = cluster.api.request("GET", scratch.path("DaemonSet", DAEMONSET))
    assert status == 404 or "deletionTimestamp" in gone["metadata"]
    assert cluster.api.request("GET", scratch.path("DaemonSet", "gpu-feature-discovery"))[0] == 200
    assert cluster.api.request("GET", scratch.path("ConfigMap", CONFIG_MAP))[0] == 404
    cluster.delete(scratch.path("DaemonSet", "gpu-feature-discovery"))


def run_runbook(cluster: LocalCluster, extra: dict[str, Any], *flags: str) -> subprocess.CompletedProcess:
    command = [
        str(ANSIBLE_BIN / "ansible-playbook"),
        str(REPO_ROOT / "playbooks" / "device_plugin.yml"),
        "-e",
        json.dumps(extra),
        *flags,
    ]
    done = subprocess.run(
        command, env=ansible_env(cluster.kubeconfig), capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return done


def test_the_runbook_installs_verifies_the_capacity_reruns_unchanged_and_removes(scratch: Scratch):
    cluster = scratch.cluster
    wait_until(lambda: not scratch.pods(), timeout=60, what="the plugin pods of the earlier test to go")
    extra = {
        "device_plugin_namespace": scratch.namespace,
        "device_plugin_node_selector": scratch.label,
        "device_plugin_config": TIME_SLICED,
        "device_plugin_version": "v0.17.4",
        "device_plugin_wait_timeout": 120,
    }
    done = run_runbook(cluster, extra)
    assert re.search(r"changed=1\b", done.stdout) and "Require the capacity the config gives" in done.stdout
    before = writes(cluster)
    assert re.search(r"changed=0\b", run_runbook(cluster, extra).stdout)
    checked = run_runbook(cluster, {**extra, "device_plugin_version": "v0.18.2"}, "--check")
    assert re.search(r"changed=1\b", checked.stdout)
    assert sent(before, writes(cluster)) == {}
    run_runbook(cluster, {**extra, "device_plugin_state": "absent"})
    assert cluster.api.request("GET", scratch.path("ConfigMap", CONFIG_MAP))[0] == 404


def test_the_runbook_fails_when_the_capacity_is_not_gpus_times_replicas(scratch: Scratch, tmp_path: Path):
    six = {**TIME_SLICED, "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}}}
    extra = {
        "device_plugin_namespace": scratch.namespace,
        "device_plugin_node_selector": scratch.label,
        "device_plugin_config": six,
        "device_plugin_wait_timeout": 120,
    }
    command = [str(ANSIBLE_BIN / "ansible-playbook"), str(REPO_ROOT / "playbooks" / "device_plugin.yml")]
    done = subprocess.run(
        [*command, "-e", json.dumps(extra)],
        env=ansible_env(scratch.cluster.kubeconfig),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        assert done.returncode != 0
        assert "capacity is not GPUs x replicas on" in done.stdout and "'expected': 6" in done.stdout, done.stdout[
            -3000:
        ]
    finally:
        run_runbook(scratch.cluster, {**extra, "device_plugin_state": "absent"})
