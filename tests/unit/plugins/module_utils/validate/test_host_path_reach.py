"""What a hostPath of / or of a directory above the GPU paths reaches (KGPU203), and where a pod runs:
a parent mount is GPU device access only beside privilege, a writable mount or GPU intent, and never on
another vendor's accelerator nodes; a node label naming another vendor's accelerator is no sign of
NVIDIA GPU use (KGPU301). Published manifests that were false errors, impostors that stay errors."""

from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import NO_CATALOGUE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.other_accelerators import (
    names_other_accelerator,
    requirement_names_other,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.analysis import (
    other_accelerator_placement,
    pod_gpu_intent,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import Document, parse_text

MANIFESTS = Path(__file__).resolve().parents[3] / "fixtures" / "manifests"
PRIVILEGED = "spec.template.spec.containers[0].securityContext.privileged"


def judged(relative):
    documents, error = parse_text((MANIFESTS / relative).read_text(encoding="utf-8"), relative)
    assert error is None
    return validate_documents(documents, RuleConfig(components=NO_CATALOGUE))


def findings(*objects):
    documents = [Document("test.yaml", i, obj, i + 1) for i, obj in enumerate(objects)]
    report = validate_documents(documents, RuleConfig(components=NO_CATALOGUE))
    return sorted((f.rule, f.severity) for f in report.findings)


def pod(container, volumes=(), **spec):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [container], "volumes": list(volumes), **spec},
    }


def agent(mount, **extra):
    return {"name": "agent", "image": "registry.example.com/tools/agent:3", "volumeMounts": [mount], **extra}


ROOT = {"name": "root", "hostPath": {"path": "/"}}
HOME = {"name": "home", "hostPath": {"path": "/home"}}
READ_ONLY_ROOT = {"name": "root", "mountPath": "/host", "readOnly": True}
WRITABLE_ROOT = {"name": "root", "mountPath": "/host"}
READ_ONLY_HOME = {"name": "home", "mountPath": "/host/home", "readOnly": True}
WRITABLE_HOME = {"name": "home", "mountPath": "/home"}
TPU = {"nodeSelector": {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"}}
PARENT = ("KGPU203", "error")


# --- published manifests: each gave a false error before (KGPU203 or KGPU301), none now -----------------


@pytest.mark.parametrize(
    "name, expected",
    [
        # Node monitoring agents: the host's / (and /var/run) read-only, unprivileged, no sign of GPU use.
        ("published/kube-prometheus-node-exporter.yaml", set()),
        ("published/cadvisor-daemonset.yaml", set()),
        # AWS Neuron's device plugin: the host's /run, on Inferentia and Trainium instance types only.
        ("published/neuron-device-plugin.yaml", set()),
        ("published/neuron-helm-chart-device-plugin.yaml", set()),
        # Ascend's device plugin: privileged, node selector accelerator=huawei-Ascend910; a warning only.
        ("published/ascend-device-plugin-910.yaml", {("KGPU302", PRIVILEGED)}),
        ("published/ascend-device-plugin-310p.yaml", {("KGPU302", PRIVILEGED)}),
    ],
)
def test_published_manifests_that_reach_no_gpu_give_no_error(name, expected):
    assert {(f.rule, f.path) for f in judged(name).findings} == expected


@pytest.mark.parametrize("name", ["good/host-root-read-only.yaml", "good/other-accelerator-home.yaml"])
def test_read_only_roots_and_other_accelerators_homes_are_clean(name):
    assert judged(name).findings == []


# --- impostors: the same look with what reaches GPUs -------------------------------------------------------

IMPOSTORS = {
    "root-read-only-privileged": {"KGPU203"},
    "root-read-only-sys-admin": {"KGPU203"},
    "dev-read-only": {"KGPU201"},
    "driver-root-read-only": {"KGPU201"},
    "root-writable-nvidia-env": {"KGPU101", "KGPU203"},
    "root-read-only-cuda-image": {"KGPU203"},
    "home-read-only-gpu-command": {"KGPU203"},
    "home-read-only-gpu-limit": {"KGPU203"},
    "tpu-selector-privileged-root": {"KGPU203"},
    "ascend-selector-nvidia-gpu-writable-root": {"KGPU203"},
    "tpu-or-nvidia-affinity-writable-root": {"KGPU203"},
    "amd64-writable-run": {"KGPU203"},
    "ascend-plugin-with-nvidia-env": {"KGPU101", "KGPU301"},
    "nvidia-accelerator-selector-privileged": {"KGPU301"},
}


def test_each_impostor_still_gives_its_errors():
    report = judged("impostors/host-path-impostors.yaml")
    errors: dict[str, set[str]] = {}
    for f in report.findings:
        if f.severity == "error":
            errors.setdefault(f.ref.name, set()).add(f.rule)
    assert errors == IMPOSTORS


# --- the decision: privilege, placement, writability, GPU intent ------------------------------------------


def test_a_read_only_parent_mount_with_nothing_else_is_no_finding():
    assert findings(pod(agent(READ_ONLY_ROOT), [ROOT])) == []
    assert findings(pod(agent(READ_ONLY_HOME), [HOME])) == []


def test_privilege_makes_any_parent_mount_an_error_even_on_another_vendors_node():
    for security in ({"privileged": True}, {"capabilities": {"add": ["CAP_SYS_ADMIN"]}}):
        assert PARENT in findings(pod(agent(READ_ONLY_ROOT, securityContext=security), [ROOT], **TPU))
    [message] = [
        f.message
        for f in validate_documents(
            [Document("t.yaml", 0, pod(agent(READ_ONLY_ROOT, securityContext={"privileged": True}), [ROOT]), 1)],
            RuleConfig(components=NO_CATALOGUE),
        ).findings
        if f.rule == "KGPU203"
    ]
    assert "privileged: true" in message and "every device node" in message


def test_a_writable_parent_mount_is_an_error_except_on_another_vendors_node():
    assert findings(pod(agent(WRITABLE_ROOT), [ROOT])) == [PARENT]
    assert findings(pod(agent(WRITABLE_HOME), [HOME])) == [PARENT]
    assert findings(pod(agent(WRITABLE_HOME), [HOME], **TPU)) == []


@pytest.mark.parametrize(
    "extra",
    [
        {"env": [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}]},
        {"image": "nvcr.io/nvidia/pytorch:24.05-py3"},
        {"command": ["nvidia-smi"]},
        {"resources": {"limits": {"nvidia.com/gpu": 1}}},
    ],
)
def test_gpu_intent_makes_a_read_only_parent_mount_an_error(extra):
    assert PARENT in findings(pod(agent(READ_ONLY_ROOT, **extra), [ROOT]))


def test_an_nvidia_node_selector_is_gpu_intent_for_a_read_only_parent_mount():
    spec = {"nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"}}
    assert findings(pod(agent(READ_ONLY_HOME), [HOME], **spec)) == [PARENT]


def test_a_void_visible_devices_is_no_gpu_intent():
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert findings(pod(agent(READ_ONLY_ROOT, env=env), [ROOT])) == []


# --- where the pod runs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, resources, placed",
    [
        (TPU, [], "node selector cloud.google.com/gke-tpu-accelerator=tpu-v6e-slice"),
        ({"nodeSelector": {"accelerator": "huawei-Ascend910"}}, [], "node selector accelerator=huawei-Ascend910"),
        ({"nodeSelector": {"accelerator-type": "card-910b-2"}}, [], ""),  # no vendor named
        ({}, ["huawei.com/Ascend910"], "resource huawei.com/Ascend910"),
        ({}, ["google.com/tpu"], "resource google.com/tpu"),
        ({}, ["aws.amazon.com/neuron"], "resource aws.amazon.com/neuron"),
        ({}, ["habana.ai/gaudi"], "resource habana.ai/gaudi"),
        ({}, ["amd.com/gpu"], "resource amd.com/gpu"),
        ({}, ["gpu.intel.com/i915"], "resource gpu.intel.com/i915"),
        ({}, ["cpu", "memory"], ""),
        ({"nodeSelector": {"kubernetes.io/arch": "amd64"}}, [], ""),
        ({"nodeSelector": {"feature.node.kubernetes.io/cpu-model.vendor_id": "Intel"}}, [], ""),
        # An NVIDIA resource or runtime class beside another vendor's label: not confined to that vendor.
        ({"nodeSelector": {"accelerator": "huawei-Ascend910"}}, ["nvidia.com/gpu"], ""),
        ({**TPU, "runtimeClassName": "nvidia"}, [], ""),
    ],
)
def test_what_places_a_pod_on_another_vendors_accelerator(spec, resources, placed):
    assert other_accelerator_placement(spec, resources) == placed


def affinity(*terms):
    required = {"nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}


def test_required_affinity_confines_only_when_every_term_names_another_vendor():
    trainium = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["trn1.32xlarge"]}
    inferentia = {"key": "beta.kubernetes.io/instance-type", "operator": "In", "values": ["inf2.xlarge"]}
    tpu = {"key": "cloud.google.com/gke-tpu-accelerator", "operator": "Exists"}
    nvidia = {"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": ["nvidia-l4"]}
    linux = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
    assert other_accelerator_placement(affinity([linux, trainium], [inferentia]), []).startswith("node affinity")
    assert (
        other_accelerator_placement(affinity([tpu]), []) == "node affinity cloud.google.com/gke-tpu-accelerator exists"
    )
    assert other_accelerator_placement(affinity([tpu], [nvidia]), []) == ""
    assert other_accelerator_placement(affinity([linux]), []) == ""
    mixed = {**trainium, "values": ["trn1.32xlarge", "p4d.24xlarge"]}
    assert other_accelerator_placement(affinity([mixed]), []) == ""
    not_in = {**tpu, "operator": "DoesNotExist"}
    assert other_accelerator_placement(affinity([not_in]), []) == ""


@pytest.mark.parametrize(
    "text, other",
    [
        ("accelerator=huawei-Ascend910", True),
        ("accelerator=huawei-Ascend310P", True),
        ("cloud.google.com/gke-tpu-accelerator=tpu-v5-lite-podslice", True),
        ("node.kubernetes.io/instance-type=ct5lp-hightpu-4t", True),
        ("node.kubernetes.io/instance-type=inf2.48xlarge", True),
        ("node.kubernetes.io/instance-type=ml.trn1.32xlarge", True),
        ("node.kubernetes.io/instance-type=dl1.24xlarge", True),
        ("feature.node.kubernetes.io/amd-gpu=true", True),
        ("intel.feature.node.kubernetes.io/gpu=true", True),
        ("aws.amazon.com/neuroncore", True),
        ("accelerator=nvidia-tesla-t4", False),
        ("accelerator=nvidia-tpu-lookalike", False),
        ("node.kubernetes.io/instance-type=p4d.24xlarge", False),
        ("node.kubernetes.io/instance-type=g5.xlarge", False),
        ("kubernetes.io/arch=amd64", False),
        ("example.com/output=true", False),
        ("nvidia.com/gpu", False),
    ],
)
def test_names_of_other_vendors_accelerators(text, other):
    assert names_other_accelerator(text) is other


def test_a_requirement_names_another_vendor_by_its_key_or_by_every_value():
    assert requirement_names_other("cloud.google.com/gke-tpu-topology", [])
    assert requirement_names_other("accelerator", ["huawei-Ascend910", "huawei-Ascend910B"])
    assert not requirement_names_other("accelerator", ["huawei-Ascend910", "nvidia-a100"])
    assert not requirement_names_other("accelerator", [])


def test_node_labels_of_other_vendors_are_no_sign_of_nvidia_gpu_use():
    ascend = {"nodeSelector": {"accelerator": "huawei-Ascend910"}, "tolerations": [{"key": "huawei.com/Ascend910"}]}
    assert pod_gpu_intent(ascend) == []
    assert pod_gpu_intent(TPU) == []
    assert pod_gpu_intent({"tolerations": [{"key": "amd.com/gpu", "operator": "Exists"}]}) == []
    assert pod_gpu_intent(affinity([{"key": "accelerator", "operator": "In", "values": ["huawei-Ascend310P"]}])) == []
    assert pod_gpu_intent({"nodeSelector": {"accelerator": "nvidia-tesla-t4"}}) == [
        "node selector accelerator=nvidia-tesla-t4"
    ]
    assert pod_gpu_intent(affinity([{"key": "nvidia.com/gpu.present", "operator": "Exists"}])) == [
        "node affinity on nvidia.com/gpu.present"
    ]


def test_another_vendors_privileged_device_plugin_is_a_warning_not_a_gpu_workload():
    plugin = {"name": "plugin", "image": "ascend-k8sdeviceplugin:v3.0.0", "securityContext": {"privileged": True}}
    assert findings(pod(plugin, nodeSelector={"accelerator": "huawei-Ascend910"})) == [("KGPU302", "warning")]
    assert findings(pod(plugin, nodeSelector={"accelerator": "nvidia"})) == [("KGPU301", "error")]
