"""gpu_pod_validate against the local cluster: what the API server admits, the live audit finds.

Every bypass below is created through the real API server (so only what it admits exists), then
the module runs through `ansible` as a user would, with the connection from K8S_AUTH_KUBECONFIG.
The manifests the API server rejects are checked offline, and the module's message must quote
the API server's own.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
from conftest import LocalCluster, run_ansible_module, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

GPU = "nvidia.com/gpu"
CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"
SECRET_VALUE = "GPU-5ec2e7-0000-value-kept-private"


def run_module(cluster: LocalCluster, args: dict[str, Any]) -> dict[str, Any]:
    """Run gpu_pod_validate through `ansible`; return its result, whether the task failed or not."""
    status, result, done = run_ansible_module(cluster.kubeconfig, "gpu_pod_validate", args)
    result["_status"] = status
    result["_raw"] = done.stdout
    return result


def container(name: str = "main", image: str = "busybox:1.36", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **fields}


def pod(name: str, *containers: dict[str, Any], annotations: dict[str, str] | None = None, **spec: Any) -> dict:
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    tolerations = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": list(containers), "tolerations": tolerations, **spec},
    }


def create(cluster: LocalCluster, path: str, body: dict[str, Any]) -> None:
    status, reply = cluster.create(path, body)
    assert status == 201, f"{body['kind']} {body['metadata']['name']}: {status} {reply}"


def env(name: str, value: str) -> dict[str, str]:
    return {"name": name, "value": value}


@pytest.fixture
def runtime_class(cluster: LocalCluster) -> str:
    name = f"nvidia-{uuid.uuid4().hex[:8]}"
    create(
        cluster,
        "/apis/node.k8s.io/v1/runtimeclasses",
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": "nvidia"},
    )
    yield name
    cluster.delete(f"/apis/node.k8s.io/v1/runtimeclasses/{name}")


def test_live_audit_finds_every_bypass_the_api_server_admits(cluster: LocalCluster, namespace: str, runtime_class):
    ns_path = f"/api/v1/namespaces/{namespace}"
    create(
        cluster,
        f"{ns_path}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-env"}, "data": {"VISIBLE_DEVICES": "all"}},
    )
    create(
        cluster,
        f"{ns_path}/secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "gpu-secret"},
            "data": {"devices": base64.b64encode(SECRET_VALUE.encode()).decode()},
        },
    )
    gpu_limit = {"limits": {GPU: "1"}}
    pods = [
        pod("env-all", container(env=[env("NVIDIA_VISIBLE_DEVICES", "all")])),
        pod("env-override", container(env=[env("NVIDIA_VISIBLE_DEVICES", "0,1")], resources=gpu_limit)),
        pod("env-from", container(envFrom=[{"prefix": "NVIDIA_", "configMapRef": {"name": "gpu-env"}}])),
        pod(
            "from-secret",
            container(
                env=[
                    {
                        "name": "NVIDIA_VISIBLE_DEVICES",
                        "valueFrom": {"secretKeyRef": {"name": "gpu-secret", "key": "devices"}},
                    }
                ]
            ),
        ),
        pod("expanded", container(env=[env("WANTED", "3"), env("NVIDIA_VISIBLE_DEVICES", "$(WANTED)")])),
        pod("privileged", container(image=CUDA, command=["nvidia-smi"], securityContext={"privileged": True})),
        pod(
            "host-dev",
            container(volumeMounts=[{"name": "dev", "mountPath": "/dev/nvidia0"}]),
            volumes=[{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}],
        ),
        pod(
            "host-root",
            container(volumeMounts=[{"name": "root", "mountPath": "/host"}]),
            volumes=[{"name": "root", "hostPath": {"path": "/"}}],
        ),
        pod(
            "device-list",
            container(volumeMounts=[{"name": "null", "mountPath": "/var/run/nvidia-container-devices/all"}]),
            volumes=[{"name": "null", "hostPath": {"path": "/dev/null"}}],
        ),
        pod("cdi", container(), annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}),
        pod("cdi-beside-gpu", container(resources=gpu_limit), annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}),
        pod("runtime-class", container(), runtimeClassName=runtime_class),
        pod(
            "allowed",
            container(env=[env("NVIDIA_VISIBLE_DEVICES", "all")]),
            annotations={"kubegpu.io/allow-bypass": "driver validation job"},
        ),
        pod("clean-gpu", container(image=CUDA, resources=gpu_limit)),
        pod("clean-cpu", container(env=[env("NVIDIA_VISIBLE_DEVICES", "void")])),
    ]
    for body in pods:
        create(cluster, f"{ns_path}/pods", body)
    result = run_module(cluster, {"live": True, "namespaces": [namespace], "fail_on": "never"})
    assert result["_status"] == "SUCCESS", result.get("msg")
    found = {(f["object_name"], f["rule"]) for f in result["findings"]}
    expected = {
        ("env-all", "KGPU101"),
        ("env-override", "KGPU102"),
        ("env-from", "KGPU101"),
        ("from-secret", "KGPU101"),
        ("expanded", "KGPU101"),
        ("privileged", "KGPU301"),
        ("privileged", "KGPU501"),
        ("host-dev", "KGPU201"),
        ("host-root", "KGPU203"),
        ("device-list", "KGPU202"),
        ("cdi", "KGPU602"),
        ("cdi-beside-gpu", "KGPU604"),
        ("runtime-class", "KGPU601"),
    }
    assert found == expected
    assert all(f["source"] == "cluster" and f["namespace"] == namespace for f in result["findings"])

    env_from = next(f for f in result["findings"] if f["object_name"] == "env-from")
    assert f"ConfigMap {namespace}/gpu-env in the cluster" in env_from["message"]
    assert env_from["path"] == "spec.containers[0].envFrom[0].configMapRef"
    assert SECRET_VALUE not in result["_raw"]
    assert [(a["object_name"], a["rule"], a["allowed_reason"]) for a in result["allowed"]] == [
        ("allowed", "KGPU101", "driver validation job")
    ]
    assert result["changed"] is False

    failing = run_module(cluster, {"live": True, "namespaces": [namespace]})
    assert failing["_status"] == "FAILED!"
    assert failing["msg"].startswith("GPU pod validation failed: ")


def test_workload_templates_are_reported_once_and_debug_containers_on_their_pods(cluster: LocalCluster, namespace: str):
    ns_path = f"/api/v1/namespaces/{namespace}"
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "trainer"}},
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {"containers": [container(env=[env("NVIDIA_VISIBLE_DEVICES", "all")])]},
            },
        },
    }
    create(cluster, f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment)
    pods = wait_until(
        lambda: len(items := cluster.get(f"{ns_path}/pods?labelSelector=app%3Dtrainer")["items"]) == 2 and items,
        timeout=90,
        what="the Deployment's two pods",
    )
    debugged = pods[0]["metadata"]["name"]
    status, reply = cluster.api.request(
        "PATCH",
        f"{ns_path}/pods/{debugged}/ephemeralcontainers",
        {
            "spec": {
                "ephemeralContainers": [
                    {"name": "debugger", "image": "busybox:1.36", "env": [env("NVIDIA_VISIBLE_DEVICES", "all")]}
                ]
            }
        },
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 200, reply

    try:
        result = run_module(cluster, {"live": True, "namespaces": [namespace], "fail_on": "never"})
    finally:
        # Without its Deployment and ReplicaSet, nothing recreates the pods the namespace fixture deletes.
        cluster.delete(f"/apis/apps/v1/namespaces/{namespace}/deployments/trainer")
        wait_until(
            lambda: not cluster.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"],
            timeout=90,
            what="the ReplicaSet to be collected",
        )
    assert [(f["kind"], f["object_name"], f["path"]) for f in result["findings"]] == [
        ("Deployment", "trainer", "spec.template.spec.containers[0].env[0].value"),
        ("Pod", debugged, "spec.ephemeralContainers[0].env[0].value"),
    ]
    assert "1 workloads are covered by their owner's template" in result["notes"][0]


def test_a_fraction_the_api_server_admits_is_found_offline_and_stored_rounded_up(cluster: LocalCluster, namespace):
    body = pod("almost-one", container(resources={"limits": {GPU: "0.9999"}}))
    status, reply = cluster.create(f"/api/v1/namespaces/{namespace}/pods", body)
    if status != 201:
        pytest.skip(f"this API server rejects 0.9999: {reply}")
    assert reply["spec"]["containers"][0]["resources"]["limits"][GPU] == "1"
    [finding] = run_module(cluster, {"definition": body, "fail_on": "never"})["findings"]
    assert finding["rule"] == "KGPU403"
    assert "The API server admits it" in finding["message"] and "stores it as 1" in finding["message"]
    live = run_module(cluster, {"live": True, "namespaces": [namespace], "fail_on": "never"})
    assert live["findings"] == []


@pytest.mark.parametrize(
    "resources",
    [
        {"requests": {GPU: "1"}},
        {"requests": {GPU: "1"}, "limits": {GPU: "2"}},
        {"limits": {GPU: "500m"}},
        {"limits": {GPU: "-1"}},
    ],
)
def test_offline_messages_quote_the_api_server(cluster: LocalCluster, namespace: str, resources):
    body = pod("rejected", container(resources=resources))
    status, reply = cluster.create(f"/api/v1/namespaces/{namespace}/pods", body)
    assert status == 422, reply
    result = run_module(cluster, {"definition": body, "fail_on": "never"})
    quantity_findings = [f for f in result["findings"] if f["rule"].startswith("KGPU40")]
    assert quantity_findings
    for finding in quantity_findings:
        quoted = finding["message"].split(" (", 1)[0]
        assert quoted in reply["message"], f"{quoted!r} not in {reply['message']!r}"
