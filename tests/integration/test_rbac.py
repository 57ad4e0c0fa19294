"""The playbooks run with the RBAC in rbac/ and nothing more, as a ServiceAccount would in a pipeline.

The roles are applied from the files as shipped (with the admin certificate), bound to
ServiceAccounts of a namespace made for the test, and the playbooks are run with a token from the
TokenRequest API, never with the admin certificate. With one verb taken out of a role the run fails
with a message that names the verb and the resource. Everything the test creates is deleted after,
and every node gets back the accelerator label it had. The sample pod the tests run has a name of its
own, so that the one `make site` leaves in gpu-samples is never touched.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import LocalCluster, ansible_env, run_ansible_module, wait_until, write_token_kubeconfig
from test_device_quarantine_runbook_live import free_device

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine import device as device_plan
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    PROOF_NAMESPACE,
    SAMPLE_TOLERATIONS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import RECORD_ANNOTATION
from tests.cluster import versions

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
RBAC_DIR = REPO / "rbac"
PLAYBOOKS = REPO / "playbooks"
RBAC_API = "/apis/rbac.authorization.k8s.io/v1"
SAMPLE_NAMESPACE = "gpu-samples"
SAMPLE_POD = "rbac-tensorflow-mnist"
KEY = "accelerator"
# What the playbooks are run with: the fleet has broken nodes and bypassing pods on purpose, so the
# checks report them here instead of failing the run (RBAC is what is tested); the sample pod is
# this test's own.
SAMPLE = {"sample_workload_name": SAMPLE_POD}
REPORT_ONLY = {"device_plugin_check_report_only": True, "pod_audit_fail_on": "never", **SAMPLE}
# Keeps every other pod off the node the release test makes; its proof pod tolerates it.
RELEASE_TEST_TAINT = {"key": "kubegpu.test/release", "value": "true", "effect": "NoSchedule"}
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|MODULE FAILURE|module_stderr")


# --- objects ---------------------------------------------------------------------------------


def rbac_documents(name: str) -> list[dict[str, Any]]:
    """The objects of one file of rbac/, in order (the items of a List one by one)."""
    with open(RBAC_DIR / name, encoding="utf-8") as handle:
        documents = [doc for doc in yaml.safe_load_all(handle) if doc]
    return [item for doc in documents for item in (doc["items"] if doc["kind"] == "List" else [doc])]


def object_path(obj: dict[str, Any], *, named: bool = True) -> str:
    kind, metadata = obj["kind"], obj["metadata"]
    collection = {
        "Namespace": "/api/v1/namespaces",
        "ServiceAccount": f"/api/v1/namespaces/{metadata.get('namespace')}/serviceaccounts",
        "ClusterRole": f"{RBAC_API}/clusterroles",
        "ClusterRoleBinding": f"{RBAC_API}/clusterrolebindings",
        "Role": f"{RBAC_API}/namespaces/{metadata.get('namespace')}/roles",
        "RoleBinding": f"{RBAC_API}/namespaces/{metadata.get('namespace')}/rolebindings",
    }[kind]
    return f"{collection}/{metadata['name']}" if named else collection


def apply(cluster: LocalCluster, obj: dict[str, Any]) -> bool:
    """Create the object, or replace an existing one; True when it was created."""
    status, reply = cluster.create(object_path(obj, named=False), obj)
    if status == 201:
        return True
    assert status == 409, f"creating {obj['kind']} {obj['metadata']['name']}: {status} {reply}"
    if obj["kind"] != "Namespace":
        current = cluster.get(object_path(obj))
        body = copy.deepcopy(obj)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        status, reply = cluster.api.request("PUT", object_path(obj), body)
        assert status == 200, f"replacing {obj['kind']} {obj['metadata']['name']}: {status} {reply}"
    return False


@dataclass
class Identity:
    """A ServiceAccount with a token, and a kubeconfig that uses that token and the cluster's CA."""

    namespace: str
    name: str
    kubeconfig: Path

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"


class Identities:
    """Creates ServiceAccounts bound to given roles; deletes every binding it made."""

    def __init__(self, cluster: LocalCluster, namespace: str, folder: Path) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.folder = folder
        self.created: list[dict[str, Any]] = []

    def make(
        self,
        name: str,
        cluster_roles: tuple[str, ...] = (),
        roles: tuple[tuple[str, str], ...] = (),
        cluster_roles_in: tuple[tuple[str, str], ...] = (),
    ) -> Identity:
        """A ServiceAccount bound to these ClusterRoles (cluster-wide), (namespace, Role) pairs and
        (namespace, ClusterRole) pairs (a RoleBinding to a ClusterRole: its rules in that namespace only)."""
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": self.namespace}}
        apply(self.cluster, sa)
        subject = [{"kind": "ServiceAccount", "name": name, "namespace": self.namespace}]
        for role in cluster_roles:
            self._bind(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": f"{self.namespace}-{name}-{role}"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": subject,
                }
            )
        bound = [(namespace, "Role", role) for namespace, role in roles]
        bound += [(namespace, "ClusterRole", role) for namespace, role in cluster_roles_in]
        for namespace, kind, role in bound:
            self._bind(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": f"{self.namespace}-{name}-{role}", "namespace": namespace},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
                    "subjects": subject,
                }
            )
        return Identity(self.namespace, name, self._kubeconfig(name))

    def _bind(self, binding: dict[str, Any]) -> None:
        apply(self.cluster, binding)
        self.created.append(binding)

    def _kubeconfig(self, name: str) -> Path:
        status, reply = self.cluster.create(
            f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
        )
        assert status == 201, f"TokenRequest for {name}: {status} {reply}"
        assert isinstance(reply, dict)
        path = self.folder / f"{name}.kubeconfig"
        write_token_kubeconfig(path, self.cluster, reply["status"]["token"])
        return path

    def remove(self) -> None:
        for obj in reversed(self.created):
            self.cluster.delete(object_path(obj))
        self.created.clear()


def allowed(
    cluster: LocalCluster,
    identity: Identity,
    verb: str,
    resource: str,
    group: str = "",
    namespace: str | None = None,
    subresource: str | None = None,
) -> bool:
    """What the authorizer answers for this identity now (a SubjectAccessReview, as admin)."""
    attributes: dict[str, Any] = {"verb": verb, "resource": resource, "group": group}
    if namespace:
        attributes["namespace"] = namespace
    if subresource:
        attributes["subresource"] = subresource
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": identity.user,
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{identity.namespace}",
                "system:authenticated",
            ],
            "resourceAttributes": attributes,
        },
    }
    status, reply = cluster.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert status == 201, reply
    assert isinstance(reply, dict)
    return bool(reply["status"].get("allowed"))


# --- running the playbooks -------------------------------------------------------------------


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str

    @property
    def failures(self) -> list[dict[str, Any]]:
        """The results of the failed tasks (`fatal: [localhost]: FAILED! => {...}`)."""
        decoder = json.JSONDecoder()
        found = []
        for part in self.stdout.split("FAILED! => ")[1:]:
            try:
                value = decoder.raw_decode(part)[0]
            except ValueError:
                continue
            found.append(value)
        return found

    def explain(self) -> str:
        return f"rc {self.rc}\n{self.stdout[-6000:]}\n{self.stderr[-2000:]}"


def run_playbook(identity: Identity, playbook: str, extra: dict[str, Any] | None = None, check: bool = False) -> Run:
    env = ansible_env(identity.kubeconfig, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    command = [str(BIN / "ansible-playbook"), str(PLAYBOOKS / playbook), *(["--check"] if check else [])]
    if extra:
        command += ["-e", json.dumps(extra)]
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=600)
    return Run(done.returncode, done.stdout, done.stderr)


def assert_passes(run: Run) -> None:
    assert run.rc == 0, run.explain()
    assert "forbidden" not in run.stdout.lower(), run.explain()
    assert not TRACEBACK.search(run.stdout + run.stderr), run.explain()


def assert_fails_naming(run: Run, verb: str, resource: str, group: str, scope: str) -> str:
    """The run failed on RBAC with one message that names the verb and the resource; that message."""
    assert run.rc != 0, run.explain()
    assert not TRACEBACK.search(run.stdout + run.stderr), run.explain()
    failures = run.failures
    assert failures, run.explain()
    message = failures[-1]["msg"]
    assert isinstance(message, str), run.explain()
    assert f'cannot {verb} resource "{resource}" {scope}' in message, message
    assert f'grant the verb "{verb}" on "{resource}" (apiGroup "{group}")' in message, message
    assert not any("exception" in f for f in failures), run.explain()
    return message


# --- fixtures --------------------------------------------------------------------------------


def namespace_usable(cluster: LocalCluster, name: str) -> bool:
    status, body = cluster.api.request("GET", f"/api/v1/namespaces/{name}")
    return status == 404 or (status == 200 and isinstance(body, dict) and "deletionTimestamp" not in body["metadata"])


@pytest.fixture(scope="module")
def shipped_rbac(cluster: LocalCluster) -> Iterator[dict[str, dict[str, Any]]]:
    """Every object of rbac/*.yaml applied as shipped, by kind/name; what was created is deleted after."""
    objects: dict[str, dict[str, Any]] = {}
    created: list[dict[str, Any]] = []
    for filename in (
        "kubegpu-reader.yaml",
        "kubegpu-reader-secrets.yaml",
        "kubegpu-writer.yaml",
        "kubegpu-gpu-health-source.yaml",
    ):
        for obj in rbac_documents(filename):
            objects[f"{obj['kind']}/{obj['metadata']['name']}"] = obj
            if obj["kind"] == "Namespace":
                namespace = obj["metadata"]["name"]
                wait_until(
                    lambda namespace=namespace: namespace_usable(cluster, namespace),
                    timeout=120,
                    what=f"namespace {namespace} to finish terminating",
                )
            if apply(cluster, obj):
                created.append(obj)
    yield objects
    for obj in reversed(created):
        if obj["kind"] == "Namespace":
            cluster.delete(f"/api/v1/namespaces/{obj['metadata']['name']}/pods/{SAMPLE_POD}")
        cluster.delete(object_path(obj))


@pytest.fixture(scope="module")
def identities(cluster: LocalCluster, shipped_rbac, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Identities]:
    namespace = f"kubegpu-rbac-{uuid.uuid4().hex[:8]}"
    status, reply = cluster.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    assert status == 201, reply
    made = Identities(cluster, namespace, tmp_path_factory.mktemp("rbac"))
    yield made
    made.remove()
    cluster.delete(f"/api/v1/namespaces/{namespace}")


def node_labels(cluster: LocalCluster) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in cluster.get("/api/v1/nodes")["items"]}


def sample_pod_gone(cluster: LocalCluster) -> None:
    cluster.delete(f"/api/v1/namespaces/{SAMPLE_NAMESPACE}/pods/{SAMPLE_POD}?gracePeriodSeconds=0")
    wait_until(
        lambda: cluster.api.request("GET", f"/api/v1/namespaces/{SAMPLE_NAMESPACE}/pods/{SAMPLE_POD}")[0] == 404,
        timeout=60,
        what="the sample pod to go",
    )


def variant(role: dict[str, Any], suffix: str, resource: str, verb: str) -> dict[str, Any]:
    """A copy of a shipped role, renamed, with one verb taken away from one resource."""
    changed = copy.deepcopy(role)
    changed["metadata"]["name"] = f"{role['metadata']['name']}-{suffix}"
    rules = []
    for rule in changed["rules"]:
        if resource in rule["resources"] and verb in rule["verbs"]:
            rest = [r for r in rule["resources"] if r != resource]
            if rest:
                rules.append(dict(rule, resources=rest))
            verbs = [v for v in rule["verbs"] if v != verb]
            if verbs:
                rules.append(dict(rule, resources=[resource], verbs=verbs))
        else:
            rules.append(rule)
    assert rules != changed["rules"], f"{resource} {verb} not in {role['metadata']['name']}"
    changed["rules"] = rules
    return changed


# --- tests: the shipped roles are enough -----------------------------------------------------


def test_the_reader_role_reads_and_never_secrets(cluster: LocalCluster, shipped_rbac, identities):
    reader = shipped_rbac["ClusterRole/kubegpu-reader"]
    verbs = {verb for rule in reader["rules"] for verb in rule["verbs"]}
    assert verbs <= {"get", "list"}
    assert not any("secrets" in rule["resources"] for rule in reader["rules"])
    assert not any(
        "*" in rule["resources"] or "*" in rule["verbs"]
        for obj in shipped_rbac.values()
        for rule in obj.get("rules", [])
    )
    identity = identities.make("reader-only", cluster_roles=("kubegpu-reader",))
    wait_until(lambda: allowed(cluster, identity, "list", "pods"), what="the reader binding")
    assert not allowed(cluster, identity, "get", "secrets", namespace="default")
    assert not allowed(cluster, identity, "patch", "nodes")
    assert not allowed(cluster, identity, "watch", "pods")


def test_the_gpu_health_source_role_lists_and_watches_what_the_source_follows_and_nothing_more(
    cluster: LocalCluster, identities
):
    identity = identities.make("health-source", cluster_roles=("kubegpu-gpu-health-source",))
    wait_until(lambda: allowed(cluster, identity, "watch", "nodes"), what="the source's binding")
    for resource, group in (
        ("nodes", ""),
        ("resourceslices", "resource.k8s.io"),
        ("devicetaintrules", "resource.k8s.io"),
    ):
        assert allowed(cluster, identity, "list", resource, group), resource
        assert allowed(cluster, identity, "watch", resource, group), resource
    assert not allowed(cluster, identity, "patch", "nodes")
    assert not allowed(cluster, identity, "list", "pods")


@pytest.mark.parametrize("playbook", ["preflight.yml", "fleet_facts.yml", "device_plugin_check.yml", "pod_audit.yml"])
def test_read_only_playbooks_pass_with_the_reader_role(cluster: LocalCluster, identities, playbook: str):
    identity = identities.make("reader", cluster_roles=("kubegpu-reader",))
    wait_until(lambda: allowed(cluster, identity, "list", "daemonsets", "apps"), what="the reader binding")
    assert_passes(run_playbook(identity, playbook, REPORT_ONLY))


def test_node_labels_passes_with_the_labeler_role_alone(cluster: LocalCluster, identities, unlabeled_nodes):
    identity = identities.make("labeler", cluster_roles=("kubegpu-node-labeler",))
    wait_until(lambda: allowed(cluster, identity, "patch", "nodes"), what="the labeler binding")
    run = run_playbook(identity, "node_labels.yml")
    assert_passes(run)
    labeled = {n["metadata"]["name"]: n["metadata"]["labels"].get(KEY) for n in cluster.get("/api/v1/nodes")["items"]}
    assert labeled["gke-l4"] == "nvidia-l4"
    assert labeled["ack-v100"] == "Tesla-V100-SXM2-16GB"
    # Nothing else is needed: a second run reads, decides and sends nothing.
    assert "changed=0" in run_playbook(identity, "node_labels.yml").stdout


def test_the_driver_upgrade_plans_with_the_three_roles_its_runbook_names(cluster: LocalCluster, identities):
    roles = ("kubegpu-driver-upgrade", "kubegpu-node-quarantine", "kubegpu-node-release")
    identity = identities.make("driver-upgrade", cluster_roles=roles)
    wait_until(lambda: allowed(cluster, identity, "list", "poddisruptionbudgets", "policy"), what="the roll's binding")
    extra = {
        "driver_upgrade_target_version": "999.0.0",
        "driver_upgrade_mode": "operator",
        "driver_upgrade_label_selectors": ["type=kwok"],
    }
    run = run_playbook(identity, "driver_upgrade.yml", extra, check=True)
    assert_passes(run)
    assert "batches in order, the canary first" in run.stdout, run.explain()


def test_node_quarantine_passes_with_its_role_alone(cluster: LocalCluster, identities, namespace: str):
    identity = identities.make("quarantine", cluster_roles=("kubegpu-node-quarantine",))
    wait_until(
        lambda: allowed(cluster, identity, "create", "pods", subresource="eviction"), what="the quarantine binding"
    )
    name = f"rbac-quarantine-{uuid.uuid4().hex[:6]}"
    resources = {"nvidia.com/gpu": "8", "cpu": "8", "memory": "32Gi", "pods": "110"}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok", "nvidia.com/gpu.product": f"NVIDIA-RBAC-{name}"},
        },
        "status": {"capacity": resources, "allocatable": resources},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu-job", "namespace": namespace},
        "spec": {
            "nodeName": name,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }
    pod_path = f"/api/v1/namespaces/{namespace}/pods/gpu-job"
    try:
        assert cluster.create("/api/v1/nodes", node)[0] == 201
        assert cluster.create(f"/api/v1/namespaces/{namespace}/pods", pod)[0] == 201
        wait_until(lambda: cluster.get(pod_path).get("status", {}).get("phase") == "Running", what="the GPU pod")
        extra = {
            "node_quarantine_nodes": [name],
            "node_quarantine_reason": "rbac test",
            "node_quarantine_evict": True,
            "node_quarantine_max_share": 1.0,
        }
        assert_passes(run_playbook(identity, "node_quarantine.yml", extra))
        assert cluster.get(f"/api/v1/nodes/{name}")["spec"].get("unschedulable") is True
        wait_until(lambda: cluster.api.request("GET", pod_path)[0] == 404, what="the GPU pod evicted")
    finally:
        cluster.api.request("DELETE", pod_path)
        wait_until(lambda: cluster.api.request("GET", pod_path)[0] == 404, what="the GPU pod gone")
        cluster.delete(f"/api/v1/nodes/{name}")


def test_device_quarantine_passes_with_its_role_alone(cluster: LocalCluster, identities):
    """A free device of dra-h100 is quarantined (evictions asked for, none needed) and released by an identity
    bound to kubegpu-device-quarantine alone; where DeviceTaintRules are not served (1.34), the run is refused
    naming them, with no write."""
    identity = identities.make("device-quarantine", cluster_roles=("kubegpu-device-quarantine",))
    wait_until(
        lambda: allowed(cluster, identity, "create", "devicetaintrules", "resource.k8s.io"),
        what="the device quarantine binding",
    )
    device = free_device(cluster)
    rule = f"/apis/resource.k8s.io/v1/devicetaintrules/{device_plan.rule_name(device)}"
    extra = {
        "device_quarantine_devices": [{"driver": device.driver, "pool": device.pool, "device": device.device}],
        "device_quarantine_reason": "rbac test",
        "device_quarantine_evict": True,
        "device_quarantine_max_share": 1.0,
    }
    if not versions.serves(versions.DEVICE_TAINT_RULES):
        refused = run_playbook(identity, "device_quarantine.yml", extra)
        assert refused.rc != 0 and "does not serve devicetaintrules" in refused.stdout, refused.explain()
        assert "forbidden" not in refused.stdout.lower() and not TRACEBACK.search(refused.stdout + refused.stderr)
        return
    try:
        assert_passes(run_playbook(identity, "device_quarantine.yml", extra))
        assert cluster.get(rule)["spec"]["taint"]["effect"] == "NoSchedule"
        assert_passes(run_playbook(identity, "device_quarantine.yml", {**extra, "device_quarantine_state": "absent"}))
        assert cluster.api.request("GET", rule)[0] == 404
    finally:
        cluster.api.request("DELETE", rule)


def test_node_release_passes_with_its_role_alone(cluster: LocalCluster, identities):
    """A node quarantined as admin is proven and released by an identity bound to kubegpu-node-release
    alone; the proof namespace is created by the run when missing, and deleted after."""
    identity = identities.make("release", cluster_roles=("kubegpu-node-release",))
    wait_until(
        lambda: allowed(cluster, identity, "get", "pods", namespace=PROOF_NAMESPACE, subresource="log"),
        what="the release binding",
    )
    name = f"rbac-release-{uuid.uuid4().hex[:6]}"
    resources = {"nvidia.com/gpu": "2", "cpu": "8", "memory": "32Gi", "pods": "110"}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok", "nvidia.com/gpu.product": f"NVIDIA-RBAC-{name}"},
        },
        "spec": {"taints": [RELEASE_TEST_TAINT]},
        "status": {"capacity": resources, "allocatable": resources},
    }
    namespace_existed = cluster.api.request("GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}")[0] == 200
    try:
        assert cluster.create("/api/v1/nodes", node)[0] == 201
        status, result, _done = run_ansible_module(
            cluster.kubeconfig,
            "gpu_node_quarantine",
            {"names": [name], "reason": "rbac test", "max_share": 1.0},
        )
        assert status == "CHANGED", result
        quarantined = cluster.get(f"/api/v1/nodes/{name}")
        assert quarantined["spec"].get("unschedulable") is True
        assert RECORD_ANNOTATION in quarantined["metadata"]["annotations"]

        proof = {"tolerations": [*SAMPLE_TOLERATIONS, {"key": RELEASE_TEST_TAINT["key"], "operator": "Exists"}]}
        run = run_playbook(identity, "node_release.yml", {"node_release_nodes": [name], "node_release_proof": proof})
        assert_passes(run)
        released = cluster.get(f"/api/v1/nodes/{name}")
        assert released["spec"].get("unschedulable") is not True, run.explain()
        assert [t["key"] for t in released["spec"].get("taints", []) if t["key"].startswith("kubegpu.io/")] == []
        assert RECORD_ANNOTATION not in released["metadata"].get("annotations", {}), run.explain()
        pods = cluster.get(f"/api/v1/namespaces/{PROOF_NAMESPACE}/pods")["items"]
        assert [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == name] == [], "the proof pod stayed"
    finally:
        cluster.delete(f"/api/v1/nodes/{name}")
        if not namespace_existed:
            cluster.delete(f"/api/v1/namespaces/{PROOF_NAMESPACE}")
            wait_until(
                lambda: cluster.api.request("GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}")[0] == 404,
                timeout=120,
                what=f"namespace {PROOF_NAMESPACE} to go",
            )


def test_sample_workload_passes_with_its_namespace_role(cluster: LocalCluster, identities):
    identity = identities.make(
        "sample",
        cluster_roles=("kubegpu-sample-workload-nodes",),
        roles=((SAMPLE_NAMESPACE, "kubegpu-sample-workload"),),
    )
    wait_until(
        lambda: allowed(cluster, identity, "get", "pods", namespace=SAMPLE_NAMESPACE, subresource="log"),
        what="the sample workload binding",
    )
    try:
        created = run_playbook(identity, "sample_workload.yml", SAMPLE)
        assert_passes(created)
        assert f"{SAMPLE_NAMESPACE}/{SAMPLE_POD}: Running on node" in created.stdout, created.explain()
        # The log request is allowed and reaches the node, which serves logs only for the pod named
        # tensorflow-mnist (the one `make site` owns): a warning, where a 403 would fail the run.
        assert f"could not read the logs of pod {SAMPLE_NAMESPACE}/{SAMPLE_POD}: " in created.stderr, created.explain()
        removed = run_playbook(identity, "sample_workload.yml", {**SAMPLE, "sample_workload_state": "absent"})
        assert_passes(removed)
        assert cluster.api.request("GET", f"/api/v1/namespaces/{SAMPLE_NAMESPACE}/pods/{SAMPLE_POD}")[0] == 404
    finally:
        sample_pod_gone(cluster)


def test_admission_policy_passes_with_its_roles(cluster: LocalCluster, identities):
    identity = identities.make(
        "admission",
        cluster_roles=("kubegpu-admission-policy",),
    )
    wait_until(
        lambda: allowed(
            cluster, identity, "create", "validatingadmissionpolicies", group="admissionregistration.k8s.io"
        ),
        what="the admission policy bindings",
    )
    try:
        assert_passes(run_playbook(identity, "admission_policy.yml"))
        assert "changed=0" in run_playbook(identity, "admission_policy.yml").stdout
        assert_passes(run_playbook(identity, "admission_policy.yml", {"admission_policy_state": "absent"}))
    finally:
        run_ansible_module(cluster.kubeconfig, "gpu_admission_policy", {"state": "absent"})


def test_device_plugin_passes_with_its_role_bound_in_its_namespace_and_the_reader(cluster: LocalCluster, identities):
    namespace = identities.namespace
    identity = identities.make(
        "device-plugin",
        cluster_roles=("kubegpu-reader",),
        cluster_roles_in=((namespace, "kubegpu-device-plugin"),),
    )
    wait_until(
        lambda: allowed(cluster, identity, "create", "daemonsets", "apps", namespace=namespace),
        what="the device plugin bindings",
    )
    assert not allowed(cluster, identity, "create", "daemonsets", "apps", namespace="kube-system")
    # A label no node carries: the fleet's nodes have their own plugin. Every request is sent all the same.
    extra = {"device_plugin_namespace": namespace, "device_plugin_node_selector": {"kubegpu.io/rbac-test": "none"}}
    try:
        assert_passes(run_playbook(identity, "device_plugin.yml", extra))
        assert "changed=0" in run_playbook(identity, "device_plugin.yml", extra).stdout
        assert_passes(run_playbook(identity, "device_plugin.yml", {**extra, "device_plugin_state": "absent"}))
        daemonset = f"/apis/apps/v1/namespaces/{namespace}/daemonsets/nvidia-device-plugin-daemonset"
        status, gone = cluster.api.request("GET", daemonset)
        assert status == 404 or "deletionTimestamp" in gone["metadata"]
    finally:
        run_ansible_module(cluster.kubeconfig, "gpu_device_plugin", {"state": "absent", "namespace": namespace})


def test_alert_rules_passes_with_its_role_bound_in_its_namespace(cluster: LocalCluster, identities):
    namespace = identities.namespace
    identity = identities.make("alert-rules", cluster_roles_in=((namespace, "kubegpu-alert-rules"),))
    wait_until(
        lambda: allowed(cluster, identity, "create", "prometheusrules", "monitoring.coreos.com", namespace=namespace),
        what="the alert rules binding",
    )
    assert not allowed(cluster, identity, "create", "prometheusrules", "monitoring.coreos.com", namespace="default")
    extra = {"alert_rules_namespace": namespace}
    try:
        assert_passes(run_playbook(identity, "alert_rules.yml", extra))
        assert "changed=0" in run_playbook(identity, "alert_rules.yml", extra).stdout
        assert_passes(run_playbook(identity, "alert_rules.yml", {**extra, "alert_rules_state": "absent"}))
        rule = f"/apis/monitoring.coreos.com/v1/namespaces/{namespace}/prometheusrules/kubegpu-gpu-alerts"
        assert cluster.api.request("GET", rule)[0] == 404
    finally:
        run_ansible_module(cluster.kubeconfig, "gpu_alert_rules", {"state": "absent", "namespace": namespace})


def test_site_playbook_passes_with_every_shipped_role(cluster: LocalCluster, identities, unlabeled_nodes):
    identity = identities.make(
        "site",
        cluster_roles=("kubegpu-reader", "kubegpu-node-labeler", "kubegpu-sample-workload-nodes"),
        roles=((SAMPLE_NAMESPACE, "kubegpu-sample-workload"),),
    )
    wait_until(
        lambda: allowed(cluster, identity, "create", "pods", namespace=SAMPLE_NAMESPACE), what="the site bindings"
    )
    try:
        assert_passes(run_playbook(identity, "site.yml", SAMPLE))
    finally:
        sample_pod_gone(cluster)


def test_secret_reads_are_optional_for_the_audit(cluster: LocalCluster, identities, namespace: str):
    """Without kubegpu-reader-secrets the audit passes and says which Secret it could not read;
    with it, the variable hidden in the Secret is judged like any other."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "gpu-env", "namespace": namespace},
        "stringData": {"NVIDIA_VISIBLE_DEVICES": "all"},
    }
    assert cluster.create(f"/api/v1/namespaces/{namespace}/secrets", secret)[0] == 201
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "env-from-secret", "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "no-such-node"},
            "containers": [{"name": "main", "image": "cuda:12", "envFrom": [{"secretRef": {"name": "gpu-env"}}]}],
        },
    }
    assert cluster.create(f"/api/v1/namespaces/{namespace}/pods", pod)[0] == 201
    audit = {"pod_audit_namespaces": [namespace], "pod_audit_fail_on": "never"}

    without = identities.make("audit-no-secrets", cluster_roles=("kubegpu-reader",))
    with_secrets = identities.make("audit-secrets", cluster_roles=("kubegpu-reader", "kubegpu-reader-secrets"))
    wait_until(
        lambda: allowed(cluster, with_secrets, "get", "secrets", namespace=namespace), what="the secrets binding"
    )

    blind = run_playbook(without, "pod_audit.yml", audit)
    assert blind.rc == 0, blind.explain()
    assert not TRACEBACK.search(blind.stdout + blind.stderr), blind.explain()
    assert f"could not read Secret {namespace}/gpu-env" in blind.stdout, blind.explain()
    assert 'cannot get resource \\"secrets\\" in namespace' in blind.stdout, blind.explain()

    seeing = run_playbook(with_secrets, "pod_audit.yml", audit)
    assert_passes(seeing)
    assert "could not read Secret" not in seeing.stdout
    assert "KGPU101" in seeing.stdout, seeing.explain()
    assert "NVIDIA_VISIBLE_DEVICES (a value from a Secret (not shown))" in seeing.stdout, seeing.explain()
    assert "NVIDIA_VISIBLE_DEVICES=all" not in seeing.stdout, "a Secret value was printed"


# --- tests: a verb taken away is named -------------------------------------------------------


MISSING_VERB_CASES = [
    # (playbook, file, role kind, role, resource, verb taken away, apiGroup, scope in the message)
    ("preflight.yml", "kubegpu-reader.yaml", "ClusterRole", "kubegpu-reader", "pods", "list", "", "at cluster scope"),
    (
        "pod_audit.yml",
        "kubegpu-reader.yaml",
        "ClusterRole",
        "kubegpu-reader",
        "cronjobs",
        "list",
        "batch",
        "at cluster scope",
    ),
    (
        "node_labels.yml",
        "kubegpu-writer.yaml",
        "ClusterRole",
        "kubegpu-node-labeler",
        "nodes",
        "patch",
        "",
        "at cluster scope",
    ),
    (
        "sample_workload.yml",
        "kubegpu-writer.yaml",
        "Role",
        "kubegpu-sample-workload",
        "pods/log",
        "get",
        "",
        f'in namespace "{SAMPLE_NAMESPACE}"',
    ),
]


@pytest.mark.parametrize(
    ("playbook", "file", "kind", "role", "resource", "verb", "group", "scope"),
    MISSING_VERB_CASES,
    ids=[f"{c[0]}-{c[5]}-{c[4]}" for c in MISSING_VERB_CASES],
)
def test_a_missing_verb_is_named(
    cluster: LocalCluster,
    identities,
    unlabeled_nodes,
    playbook: str,
    file: str,
    kind: str,
    role: str,
    resource: str,
    verb: str,
    group: str,
    scope: str,
):
    shipped = next(d for d in rbac_documents(file) if d["kind"] == kind and d["metadata"]["name"] == role)
    suffix = identities.namespace.rsplit("-", 1)[-1]
    weakened = variant(shipped, suffix, resource, verb)
    apply(cluster, weakened)
    bound_roles: dict[str, Any] = {"cluster_roles": (), "roles": ()}
    if kind == "ClusterRole":
        bound_roles["cluster_roles"] = (weakened["metadata"]["name"],)
    else:
        bound_roles["roles"] = ((SAMPLE_NAMESPACE, weakened["metadata"]["name"]),)
        bound_roles["cluster_roles"] = ("kubegpu-sample-workload-nodes",)
    base, sub = (resource.split("/") + [None])[:2]
    identity = identities.make(f"no-{verb}-{base}{'-' + sub if sub else ''}", **bound_roles)
    namespace = SAMPLE_NAMESPACE if kind == "Role" else None
    kept = weakened["rules"][0]
    kept_resource, kept_sub = (kept["resources"][0].split("/") + [None])[:2]
    try:
        wait_until(
            lambda: (
                not allowed(cluster, identity, verb, base, group, namespace, sub)
                and allowed(
                    cluster, identity, kept["verbs"][0], kept_resource, kept["apiGroups"][0], namespace, kept_sub
                )
            ),
            what="the weakened binding",
        )
        before = node_labels(cluster)
        run = run_playbook(identity, playbook, REPORT_ONLY)
        message = assert_fails_naming(run, verb, resource, group, scope)
        assert identity.user in message, message
        if playbook == "node_labels.yml":
            assert node_labels(cluster) == before, "a forbidden labeling run changed a node"
    finally:
        cluster.delete(object_path(weakened))
        if playbook == "sample_workload.yml":
            sample_pod_gone(cluster)
