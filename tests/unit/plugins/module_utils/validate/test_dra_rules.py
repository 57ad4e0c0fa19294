"""The validator on Dynamic Resource Allocation: claims are GPU requests, NVIDIA_VISIBLE_DEVICES
beside a claim is still a bypass, and claims and claim templates are read, not skipped.

The manifests come from NVIDIA's DRA driver (tests/unit/fixtures/dra, each file names its source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import Document, parse_text

DRA = Path(__file__).resolve().parents[3] / "fixtures" / "dra"


def fixture(name):
    documents, error = parse_text((DRA / name).read_text(), name)
    assert error is None
    return validate_documents(documents, RuleConfig())


def check(*objects):
    return validate_documents([Document("t.yaml", i, o, i + 1) for i, o in enumerate(objects)], RuleConfig())


def claim_pod(env=None, claims=("gpu",), pod_claims=("gpu",)):
    container = {"name": "ctr", "image": "ubuntu:22.04", "resources": {"claims": [{"name": c} for c in claims]}}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pod1", "namespace": "gpu-test1"},
        "spec": {
            "containers": [container],
            "resourceClaims": [{"name": c, "resourceClaimTemplateName": "single-gpu"} for c in pod_claims],
        },
    }


def test_the_driver_quickstart_is_read_whole_and_passes():
    result = fixture("demo-claimtemplate-pods.yaml")
    assert result.findings == []
    # The template and both pods are checked; only the Namespace carries nothing to check.
    assert result.objects_checked == 3
    assert [n.ref.kind for n in result.not_checked] == ["Namespace"]


def test_allocated_claims_and_the_extended_resource_demo_pass():
    for name in ("resourceclaim-allocated.example.yaml", "demo-extended-resource-gpu-full.yaml"):
        result = fixture(name)
        assert result.findings == [], name
        assert "ResourceClaim" not in {n.ref.kind for n in result.not_checked}


def test_visible_devices_beside_a_dra_claim_is_still_a_bypass():
    [finding] = check(claim_pod(env={"NVIDIA_VISIBLE_DEVICES": "all"})).findings
    assert (finding.rule, finding.path) == ("KGPU102", "spec.containers[0].env[0].value")
    assert "overrides the GPUs the DRA driver assigned for its resource claim 'gpu'" in finding.message


def test_a_claim_the_pod_does_not_declare_requests_nothing():
    [finding] = check(claim_pod(env={"NVIDIA_VISIBLE_DEVICES": "0"}, claims=("other",))).findings
    assert finding.rule == "KGPU101"


def test_a_container_without_the_claim_in_a_pod_with_one_is_judged_on_its_own():
    pod = claim_pod()
    pod["spec"]["containers"].append(
        {"name": "sidecar", "image": "busybox", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    )
    assert [f.rule for f in check(pod).findings] == ["KGPU101"]


def admin_claim(namespace, kind="ResourceClaim"):
    spec = {
        "devices": {
            "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "adminAccess": True}}]
        }
    }
    body = {"spec": spec} if kind == "ResourceClaimTemplate" else spec
    metadata = {"name": "watch"}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": metadata, "spec": body}


@pytest.mark.parametrize(
    "namespace, kind, path",
    [
        ("ml", "ResourceClaim", "spec.devices.requests[0].exactly.adminAccess"),
        ("ml", "ResourceClaimTemplate", "spec.spec.devices.requests[0].exactly.adminAccess"),
        ("", "ResourceClaim", "spec.devices.requests[0].exactly.adminAccess"),
    ],
)
def test_admin_access_outside_the_gpu_system_namespaces_is_a_warning(namespace, kind, path):
    [finding] = check(admin_claim(namespace, kind)).findings
    assert (finding.rule, finding.severity, finding.path, finding.container) == ("KGPU701", "warning", path, None)
    assert finding.message.startswith(f"{kind} request gpus asks for admin access in ")


@pytest.mark.parametrize("namespace", ["gpu-operator", "kube-system", "nvidia-dra-driver-gpu"])
def test_admin_access_in_a_gpu_system_namespace_is_fine(namespace):
    result = check(admin_claim(namespace), admin_claim(namespace, "ResourceClaimTemplate"))
    assert result.findings == [] and result.objects_checked == 2


def test_admin_access_is_allowed_with_a_reason():
    claim = admin_claim("ml")
    claim["metadata"]["annotations"] = {"kubegpu.io/allow-bypass": "node exporter of the platform team"}
    result = check(claim)
    assert result.findings == [] and [a.finding.rule for a in result.allowed] == ["KGPU701"]


def test_a_claim_without_a_spec_is_not_checked_and_says_why():
    result = check({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "x"}})
    [entry] = result.not_checked
    assert entry.reason == "ResourceClaimTemplate has no claim spec mapping"
