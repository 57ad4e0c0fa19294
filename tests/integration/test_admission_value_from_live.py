"""The device-list variables set through valueFrom, and the corpus's bypasses, on the local cluster's real
kube-apiserver with gpu_admission_policy installed as a user would (error rules in Deny, warning rules in
Warn): a container that takes NVIDIA_VISIBLE_DEVICES from a ConfigMap or Secret key with no GPU limit is
refused (KGPU104), one with a GPU limit admitted with a warning (KGPU103); and no bypass of the corpus is
admitted as sent: each is refused by the validating policy or, where admission cannot read it (envFrom, an
image's env), neutralised by the mutating policy's NVIDIA_VISIBLE_DEVICES=void. Everything made here is
removed at the end."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path

import pytest
from conftest import LocalCluster, run_ansible_module, wait_until

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission import policy
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import (
    DEVICE_VARIABLES,
    VISIBLE_DEVICES,
    VOID,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import walk_document
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import parse_text
from tests.cluster import versions

CORPUS = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "manifests"
MODULE = "gpu_admission_policy"
DENY = {"enforcement": "deny"}  # the warning rules stay in Warn, the module's default
REFERENCES = {
    "configMapKeyRef": {"configMapKeyRef": {"name": "gpu-selection", "key": "devices"}},
    "secretKeyRef": {"secretKeyRef": {"name": "gpu-selection", "key": "devices"}},
    "fieldRef": {"fieldRef": {"fieldPath": "metadata.annotations['gpus']"}},
    "resourceFieldRef": {"resourceFieldRef": {"resource": "limits.cpu"}},
}
# What NVIDIA_VISIBLE_DEVICES=void in the container's own env neutralises: a device variable the container
# gets from elsewhere (envFrom, an image), the NVIDIA runtime class. Every other bypass must be refused.
NEUTRALISED_BY_VOID = frozenset(("KGPU101", "KGPU104", "KGPU501", "KGPU601"))
BYPASS_WARNINGS = frozenset(("KGPU501", "KGPU601"))  # warnings about a device list the runtime would read
RESOURCE_IS_GPU = gpu_resource_matcher()


def pod(name: str, value_from: dict | None = None, gpu: bool = False) -> dict:
    container: dict = {"name": "main", "image": "registry.example.com/ml/train:1.0"}
    if value_from is not None:
        container["env"] = [{"name": VISIBLE_DEVICES, "valueFrom": value_from}]
    if gpu:
        container["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container]}}


def collection(obj: dict, namespace: str) -> str:
    api_version, kind = obj["apiVersion"], obj["kind"]
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    return f"{base}/namespaces/{namespace}/{kind.lower()}s"


def message_of(reply) -> str:
    return reply.get("message", "") if isinstance(reply, dict) else str(reply)


def install(cluster: LocalCluster, args: dict) -> dict:
    status, result, _done = run_ansible_module(cluster.kubeconfig, MODULE, args)
    assert status in ("SUCCESS", "CHANGED"), result
    return result


def remove_everything(cluster: LocalCluster) -> None:
    run_ansible_module(cluster.kubeconfig, MODULE, {"state": "absent"})


@pytest.fixture(scope="module")
def namespace(cluster: LocalCluster):
    """A namespace with the ConfigMap and Secret the pods refer to; the policies removed at the end."""
    name = f"t-vf-{uuid.uuid4().hex[:8]}"
    status, reply = cluster.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert status == 201, reply
    for kind, field, value in (("ConfigMap", "data", "all"), ("Secret", "stringData", "0,1")):
        body = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "gpu-selection"}, field: {"devices": value}}
        status, reply = cluster.create(f"/api/v1/namespaces/{name}/{kind.lower()}s", body)
        assert status == 201, reply
    try:
        yield name
    finally:
        remove_everything(cluster)
        cluster.api.request("DELETE", f"/api/v1/namespaces/{name}")
        wait_until(
            lambda: cluster.api.request("GET", f"/api/v1/namespaces/{name}")[0] == 404, timeout=60, what=f"{name} to go"
        )


def wait_denied(cluster: LocalCluster, namespace: str) -> None:
    probe = pod(f"probe-{uuid.uuid4().hex[:6]}", REFERENCES["configMapKeyRef"])
    wait_until(
        lambda: cluster.api.request("POST", collection(probe, namespace) + "?dryRun=All", probe)[0] == 403,
        timeout=60,
        what="the policy to refuse valueFrom",
    )


@pytest.fixture(scope="module")
def denying(cluster: LocalCluster, namespace: str):
    result = install(cluster, DENY)
    assert result["in_force"][policy.POLICY_NAME] == ["Deny", "Audit"]
    assert result["in_force"][policy.WARNINGS_POLICY_NAME] == ["Warn", "Audit"]
    assert result["type_checking"] == {policy.POLICY_NAME: [], policy.WARNINGS_POLICY_NAME: []}
    wait_denied(cluster, namespace)
    return namespace


@pytest.mark.every_release
@pytest.mark.parametrize("reference", sorted(REFERENCES))
def test_a_value_from_without_a_gpu_limit_is_refused_whatever_it_holds(cluster, denying, reference):
    sent = pod(f"vf-{reference.lower()}", REFERENCES[reference])
    status, reply = cluster.create(collection(sent, denying), sent)
    message = message_of(reply)
    assert status == 403 and "ValidatingAdmissionPolicy" in message, f"{status}: {message}"
    assert "KGPU104 visible-devices-unknown-without-gpu" in message
    assert "container 'main': NVIDIA_VISIBLE_DEVICES comes from valueFrom" in message
    assert "set NVIDIA_VISIBLE_DEVICES=void as a literal value" in message
    assert cluster.api.request("GET", f"{collection(sent, denying)}/{sent['metadata']['name']}")[0] == 404


@pytest.mark.every_release
@pytest.mark.parametrize("reference", ["configMapKeyRef", "secretKeyRef"])
def test_a_value_from_beside_a_gpu_limit_is_admitted_with_a_warning(cluster, denying, reference):
    sent = pod(f"vf-gpu-{reference.lower()}", REFERENCES[reference], gpu=True)
    path = collection(sent, denying)
    status, reply, warnings = cluster.api.request_with_warnings("POST", path, sent)
    try:
        assert status == 201, reply
        assert any("KGPU103 visible-devices-unknown" in w and "container 'main'" in w for w in warnings), warnings
        assert reply["spec"]["containers"][0]["env"] == sent["spec"]["containers"][0]["env"]
    finally:
        cluster.api.request("DELETE", f"{path}/{sent['metadata']['name']}")


# --- The corpus: every bypass refused or neutralised, none admitted as sent ------------------------------


def corpus():
    """Each object of the validator's bad and published fixtures with its offline findings."""
    for folder in ("bad", "published"):
        for path in sorted((CORPUS / folder).glob("*.yaml")):
            documents, error = parse_text(path.read_text(encoding="utf-8"), path.name)
            assert error is None
            findings = validate_documents(documents, RuleConfig()).findings
            for document in documents:
                data = document.data
                for obj in data.get("items", []) if data.get("kind") == "List" else [data]:
                    if obj.get("kind") in ("ConfigMap", "Secret"):
                        continue
                    name = obj["metadata"].get("name", "")
                    mine = [f for f in findings if (f.ref.kind, f.ref.name) == (obj["kind"], name)]
                    shown = name or obj["metadata"].get("generateName", "")
                    yield f"{folder}/{path.name}:{obj['kind']}/{shown}", obj, mine


def bypasses(findings) -> list:
    return [f for f in findings if f.severity == ERROR or f.rule in BYPASS_WARNINGS]


def pods_of(obj: dict) -> list[tuple[str, dict]]:
    """The pods a controller (or the object itself, for a Pod) creates: (the spec's path, the pod)."""
    sites, _skipped = walk_document(copy.deepcopy(obj))
    made = []
    for index, site in enumerate(s for s in sites if s.pod_level):
        metadata = {k: v for k, v in site.pod_metadata.items() if k in ("labels", "annotations")}
        base = obj["metadata"].get("name") or obj["metadata"].get("generateName", "pod")
        metadata["name"] = f"{base}-{index}"[:60].lower().strip("-")
        made.append((site.path, {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": dict(site.spec)}))
    return made


def told_void(container: dict) -> bool:
    values = [e for e in container.get("env", []) if e["name"] == VISIBLE_DEVICES]
    return values[-1:] == [{"name": VISIBLE_DEVICES, "value": VOID}]


def requests_gpu(container: dict) -> bool:
    resources = container.get("resources", {})
    return bool(resources.get("claims")) or any(
        RESOURCE_IS_GPU(name) and str(value) not in ("0", "0m") for name, value in resources.get("limits", {}).items()
    )


def judge(cluster: LocalCluster, namespace: str, where: str, obj: dict, findings: list) -> str:
    """refused, neutralised, or (a failure) admitted as sent: each bypass of the object is refused at its
    own admission, or every pod it makes is admitted with the containers of its bypasses told void."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = namespace
    status, reply = cluster.api.request("POST", collection(obj, namespace) + "?dryRun=All", obj)
    if status >= 400:
        return "refused"
    assert status in (200, 201), f"{where}: {status} {reply}"
    for site_path, made in pods_of(obj):
        found = [f for f in bypasses(findings) if f.path.startswith(site_path)]
        if not found:
            continue
        status, reply = cluster.api.request("POST", collection(made, namespace) + "?dryRun=All", made)
        if status == 403:
            continue  # refused when the controller makes the pod
        assert status == 201, f"{where}: the pod of {site_path}: {status} {message_of(reply)}"
        unneutralised = sorted({f.rule for f in found} - NEUTRALISED_BY_VOID)
        assert not unneutralised, f"{where}: admitted as sent with {unneutralised}"
        admitted = {c["name"]: c for c in reply["spec"].get("containers", []) + reply["spec"].get("initContainers", [])}
        named = {f.container for f in found if f.container} or {n for n, c in admitted.items() if not requests_gpu(c)}
        for name in named:
            container = admitted[name]
            assert told_void(container), f"{where}: container {name!r} admitted as sent: {container.get('env')}"
            assert not any(e["name"] in DEVICE_VARIABLES and "valueFrom" in e for e in container.get("env", [])), (
                f"{where}: {name!r}"
            )
    return "neutralised"


def test_no_bypass_of_the_corpus_is_admitted_as_sent(cluster, denying):
    """With both policies: each bypass the validating policy can see is refused, and what it cannot see
    (envFrom, an image's env, the runtime class) has NVIDIA_VISIBLE_DEVICES=void in every pod it makes.
    Without the mutating policy, what is admitted is exactly what the validating policy cannot see."""
    if not versions.serves(versions.MUTATING_ADMISSION_POLICY):
        pytest.skip("this release does not serve MutatingAdmissionPolicy")
    cases = [(where, obj, findings) for where, obj, findings in corpus() if bypasses(findings)]
    assert len(cases) > 20
    try:
        install(cluster, {**DENY, "mutating": True})
        baked = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "baked"},
            "spec": {"containers": [{"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04"}]},
        }

        def mutating() -> bool:
            status, reply = cluster.api.request("POST", collection(baked, denying) + "?dryRun=All", baked)
            return status == 201 and told_void(reply["spec"]["containers"][0])

        wait_until(mutating, timeout=60, what="the mutating policy")
        verdicts = {where: judge(cluster, denying, where, obj, findings) for where, obj, findings in cases}
        assert verdicts["bad/env-unknown-secret.yaml:Pod/env-unknown"] == "refused"
        assert verdicts["published/lsf-kube-template.yaml:Pod/lsf-205-cluster0-0-0-0"] == "refused"
        assert verdicts["published/cobalt-dind-configmap-visible-devices.yaml:Deployment/test"] == "refused"
        assert verdicts["bad/env-from-configmap.yaml:StatefulSet/env-from"] == "neutralised"
        assert verdicts["bad/cuda-image-no-gpu.yaml:ReplicaSet/cuda-image"] == "neutralised"
        assert set(verdicts.values()) <= {"refused", "neutralised"}
    finally:
        install(cluster, DENY)
        wait_denied(cluster, denying)

    # The validating policy alone: what it admits is what only the mutating policy covers.
    for where, obj, findings in cases:
        sent = copy.deepcopy(obj)
        sent["metadata"]["namespace"] = denying
        status, reply = cluster.api.request("POST", collection(sent, denying) + "?dryRun=All", sent)
        if status < 400:
            unseen = {f.rule for f in bypasses(findings) if ".envFrom[" in f.path or f.rule in BYPASS_WARNINGS}
            assert {f.rule for f in bypasses(findings)} == unseen, f"{where}: {status} {message_of(reply)}"
