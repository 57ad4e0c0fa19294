"""The live audit judges the custom resources of the local fleet (tests/cluster/crds): a suspended
PyTorchJob with a bypass and no pod yet is found at its path; a RayCluster that asks for its GPUs
is not; a custom resource list the identity may not read is a note, not a failure.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import LocalCluster, ansible_env, run_ansible_module, wait_until, write_token_kubeconfig

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

NAMESPACE = "ml-training"  # tests/cluster/crds/instances
READER = Path(__file__).resolve().parents[2] / "rbac" / "kubegpu-reader.yaml"
RBAC_API = "/apis/rbac.authorization.k8s.io/v1"
WORKER_ENV = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].env[0].value"


def audit(kubeconfig: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    _status, result, done = run_ansible_module(
        kubeconfig, "gpu_pod_validate", {"live": True, "namespaces": [NAMESPACE], "fail_on": "never"}, env=env
    )
    assert "findings" in result, done.stdout + done.stderr
    return result


def test_a_suspended_pytorchjob_with_a_bypass_is_found_before_it_has_pods(cluster: LocalCluster):
    job = cluster.get(f"/apis/kubeflow.org/v1/namespaces/{NAMESPACE}/pytorchjobs/pytorch-simple-queued")
    assert job["spec"]["runPolicy"]["suspend"] is True
    assert cluster.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"] == []

    result = audit(cluster.kubeconfig)
    assert [(f["kind"], f["object_name"], f["rule"], f["path"]) for f in result["findings"]] == [
        ("PyTorchJob", "pytorch-simple-queued", "KGPU101", WORKER_ENV)
    ]
    assert result["counts"]["objects_checked"] == 4  # two PyTorchJob replicas, the RayCluster's head and workers
    assert result["not_checked"] == []
    assert not any("not allowed" in note for note in result["notes"])


def test_a_forbidden_custom_resource_list_is_a_note(cluster: LocalCluster, namespace: str, tmp_path: Path):
    """The shipped reader rules without ray.io: the PyTorchJob is still judged, the RayClusters noted."""
    reader = yaml.safe_load(READER.read_text())
    name = f"kubegpu-reader-no-ray-{uuid.uuid4().hex[:8]}"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [rule for rule in reader["rules"] if "ray.io" not in rule["apiGroups"]],
    }
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "auditor", "namespace": namespace}}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "auditor", "namespace": namespace}],
    }
    assert cluster.create(f"{RBAC_API}/clusterroles", role)[0] == 201
    try:
        assert cluster.create(f"{RBAC_API}/clusterrolebindings", binding)[0] == 201
        assert cluster.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", account)[0] == 201
        status, token = cluster.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/auditor/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}},
        )
        assert status == 201 and isinstance(token, dict), token
        kubeconfig = write_token_kubeconfig(tmp_path / "auditor.kubeconfig", cluster, token["status"]["token"])

        def audited() -> dict[str, Any] | None:
            result = audit(kubeconfig, ansible_env(kubeconfig))
            return result if result["findings"] else None  # the binding may take a moment to apply

        result = wait_until(audited, timeout=30, what="an audit with the binding in force")
        assert isinstance(result, dict)
        assert [(f["kind"], f["path"]) for f in result["findings"]] == [("PyTorchJob", WORKER_ENV)]
        assert (
            f"live: not allowed to list RayCluster (/apis/ray.io/v1/namespaces/{NAMESPACE}/rayclusters), "
            "so their pod templates were not checked"
        ) in result["notes"]
    finally:
        cluster.delete(f"{RBAC_API}/clusterrolebindings/{name}")
        cluster.delete(f"{RBAC_API}/clusterroles/{name}")
