import base64
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS as REGISTRY
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_VALIDATOR
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import device_selection
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import format_quantity
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.analysis import (
    gpu_host_path,
    parent_of_gpu_paths,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig, unknown_rules
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.env import (
    DocumentEnvSources,
    EnvValue,
    ResolvedEnv,
    expand_references,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.images import known_family
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import Document, parse_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.reads import ClusterEnvSources
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import CHECKS, RULES

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "manifests"
GPU = "nvidia.com/gpu"


def container(
    name="main", image="registry.example.com/app:1", env=None, env_from=None, limits=None, requests=None, **extra
):
    c = {"name": name, "image": image, **extra}
    if env is not None:
        c["env"] = [{"name": k, "value": v} if not isinstance(v, dict) else {"name": k, **v} for k, v in env]
    if env_from is not None:
        c["envFrom"] = env_from
    resources = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    if resources:
        c["resources"] = resources
    return c


def pod(*containers, annotations=None, namespace="ns", **spec):
    metadata = {"name": "p", "namespace": namespace}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": list(containers), **spec}}


def check(*objects, **config):
    documents = [Document("test.yaml", i, obj, i + 1) for i, obj in enumerate(objects)]
    return validate_documents(documents, RuleConfig(**config))


def found(*objects, **config):
    return [(f.rule, f.path) for f in check(*objects, **config).findings]


def rules(*objects, **config):
    return sorted(f.rule for f in check(*objects, **config).findings)


def fixture_result(relative):
    documents, error = parse_text((FIXTURES / relative).read_text(), relative)
    assert error is None
    return validate_documents(documents, RuleConfig())


# ---------------------------------------------------------------------------------------------
# Fixtures: bad and good manifests per rule and per kind

BAD = {
    "env-all.yaml": {("KGPU101", "spec.template.spec.containers[0].env[1].value")},
    "env-override.yaml": {("KGPU102", "spec.containers[0].env[0].value")},
    "env-from-configmap.yaml": {("KGPU101", "items[1].spec.template.spec.containers[0].envFrom[0].configMapRef")},
    "env-unknown-secret.yaml": {("KGPU104", "spec.containers[0].env[0].valueFrom.secretKeyRef")},
    "env-unknown-with-gpu.yaml": {("KGPU103", "spec.containers[0].env[0].valueFrom.configMapKeyRef")},
    "device-host-path.yaml": {("KGPU201", "spec.template.spec.volumes[0].hostPath.path")},
    "device-list-mount.yaml": {("KGPU202", "spec.containers[0].volumeMounts[0].mountPath")},
    "host-root.yaml": {("KGPU203", "spec.template.spec.volumes[0].hostPath.path")},
    "privileged-gpu.yaml": {
        ("KGPU301", "spec.template.spec.containers[0].securityContext.privileged"),
        ("KGPU501", "spec.template.spec.containers[0].image"),
    },
    "privileged-plain.yaml": {("KGPU302", "spec.containers[0].securityContext.capabilities.add[1]")},
    "requests-only.yaml": {("KGPU401", "spec.template.spec.containers[0].resources.requests['nvidia.com/gpu']")},
    "requests-not-limits.yaml": {("KGPU402", "spec.containers[0].resources.requests['nvidia.com/gpu']")},
    "fractional.yaml": {("KGPU403", "spec.containers[0].resources.limits['nvidia.com/gpu']")},
    "negative.yaml": {("KGPU404", "spec.containers[0].resources.limits['nvidia.com/gpu']")},
    "malformed.yaml": {("KGPU405", "spec.containers[0].resources.limits['nvidia.com/gpu']")},
    "pod-level.yaml": {("KGPU406", "spec.resources.limits['nvidia.com/gpu']")},
    "ephemeral-resources.yaml": {("KGPU407", "spec.ephemeralContainers[0].resources")},
    "cuda-image-no-gpu.yaml": {("KGPU501", "spec.template.spec.containers[0].image")},
    "runtime-class.yaml": {("KGPU601", "spec.runtimeClassName")},
    "cdi-annotation.yaml": {("KGPU602", "spec.jobTemplate.spec.template.metadata.annotations['cdi.k8s.io/gpu']")},
    "cdi-annotation-beside-gpu.yaml": {("KGPU604", "metadata.annotations['cdi.k8s.io/gpu']")},
    "gke-device-injection.yaml": {
        ("KGPU603", "spec.template.metadata.annotations['devices.gke.io/container.main']"),
    },
    "claim-admin-access.yaml": {("KGPU701", "spec.devices.requests[0].exactly.adminAccess")},
    "allow-no-reason.yaml": {
        ("KGPU101", "spec.containers[0].env[0].value"),
        ("KGPU901", "metadata.annotations['kubegpu.io/allow-bypass']"),
    },
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_bad_fixture_gives_exactly_its_findings(name):
    result = fixture_result(f"bad/{name}")
    assert {(f.rule, f.path) for f in result.findings} == BAD[name]
    for finding in result.findings:
        assert finding.severity == RULES[finding.rule].severity
        assert finding.message and finding.remedy == RULES[finding.rule].remedy
        assert finding.ref.source == f"bad/{name}"


def test_every_rule_has_a_bad_fixture():
    covered = {rule for expected in BAD.values() for rule, _path in expected}
    assert covered == set(RULES)
    assert sorted(p.name for p in (FIXTURES / "bad").glob("*.yaml")) == sorted(BAD)


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "good").glob("*.yaml")))
def test_legitimate_patterns_give_no_findings(name):
    result = fixture_result(f"good/{name}")
    assert result.findings == []
    assert result.objects_checked >= 1 or [n.ref.kind for n in result.not_checked] == ["ConfigMap"]


def test_the_device_plugin_is_allowed_with_its_reason_not_silently():
    result = fixture_result("good/device-plugin-allowed.yaml")
    assert sorted(a.finding.rule for a in result.allowed) == ["KGPU101", "KGPU201", "KGPU301"]
    assert {a.reason for a in result.allowed} == {"NVIDIA device plugin: it hands out the GPUs"}
    assert result.allowed[0].to_dict()["allowed_reason"] == "NVIDIA device plugin: it hands out the GPUs"


KIND_PATHS = {
    "pod.yaml": "spec.containers[0].env[0].value",
    "podtemplate.yaml": "template.spec.containers[0].env[0].value",
    "deployment.yaml": "spec.template.spec.containers[0].env[0].value",
    "replicaset.yaml": "spec.template.spec.containers[0].env[0].value",
    "replicationcontroller.yaml": "spec.template.spec.containers[0].env[0].value",
    "statefulset.yaml": "spec.template.spec.containers[0].env[0].value",
    "daemonset.yaml": "spec.template.spec.containers[0].env[0].value",
    "job.yaml": "spec.template.spec.containers[0].env[0].value",
    "cronjob.yaml": "spec.jobTemplate.spec.template.spec.containers[0].env[0].value",
}


@pytest.mark.parametrize("name", sorted(KIND_PATHS))
def test_every_kind_is_walked_to_its_containers(name):
    result = fixture_result(f"kinds/{name}")
    assert [(f.rule, f.path) for f in result.findings] == [("KGPU101", KIND_PATHS[name])]


def test_a_json_list_is_walked_item_by_item():
    documents, error = parse_text((FIXTURES / "kinds" / "list.json").read_text(), "list.json", as_json=True)
    assert error is None
    result = validate_documents(documents)
    assert [(f.rule, f.ref.name, f.path) for f in result.findings] == [
        ("KGPU101", "k-list-pod", "items[0].spec.containers[0].env[0].value"),
        ("KGPU101", "k-list-job", "items[2].spec.template.spec.containers[0].env[0].value"),
    ]
    assert [n.ref.name for n in result.not_checked] == ["k-list-svc"]


@pytest.mark.parametrize(
    "name, kind, path",
    [
        ("trainjob.yaml", "TrainJob", "spec"),
        ("service.yaml", "Service", ""),
    ],
)
def test_custom_resources_and_other_kinds_are_not_checked_and_say_why(name, kind, path):
    result = fixture_result(f"not-checked/{name}")
    assert result.findings == [] and result.objects_checked == 0
    [entry] = result.not_checked
    assert (entry.ref.kind, entry.path) == (kind, path)
    assert entry.reason


# ---------------------------------------------------------------------------------------------
# Rule 1: the env, as the kubelet builds it and the toolkit reads it


@pytest.mark.parametrize(
    "value, selection",
    [
        ("all", "all"),
        (" all ", "all"),
        ("0", "devices"),
        ("0,1", "devices"),
        ("0,", "devices"),
        ("GPU-8f6d2b3c-1d2e-4c5f-9a7b-0123456789ab", "devices"),
        ("MIG-GPU-8f6d2b3c/1/0", "devices"),
        ("", "void"),
        (" , ", "void"),
        ("void", "void"),
        ("void,all", "void"),
        ("none", "none"),
        ("none,all", "none"),
        ("all,0", "all"),
    ],
)
def test_device_selection_reads_the_value_as_the_toolkit_does(value, selection):
    assert device_selection(value) == selection


@pytest.mark.parametrize("value", ["all", "0", "1,2", " 3 ", "GPU-abc", "MIG-abc", "all,0"])
def test_device_values_without_a_gpu_limit_are_errors(value):
    assert found(pod(container(env=[("NVIDIA_VISIBLE_DEVICES", value)]))) == [
        ("KGPU101", "spec.containers[0].env[0].value")
    ]


@pytest.mark.parametrize("value", ["void", "", "none", " none ", "void,all"])
def test_void_empty_and_none_give_no_finding(value):
    assert found(pod(container(env=[("NVIDIA_VISIBLE_DEVICES", value)]))) == []


def test_the_variable_still_overrides_the_device_plugin_when_a_gpu_is_requested():
    result = check(pod(container(env=[("NVIDIA_VISIBLE_DEVICES", "all")], limits={GPU: 1})))
    [finding] = result.findings
    assert finding.rule == "KGPU102" and finding.severity == "error"
    assert "overrides the GPUs the device plugin assigned for its nvidia.com/gpu limit" in finding.message


@pytest.mark.parametrize("variable", ["NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES"])
def test_mig_device_variables_count_too(variable):
    [finding] = check(pod(container(env=[(variable, "all")]))).findings
    assert finding.rule == "KGPU101"
    assert "MIG" in finding.message


def test_init_and_ephemeral_containers_are_checked():
    spec_pod = pod(
        container(),
        initContainers=[container("init", env=[("NVIDIA_VISIBLE_DEVICES", "0")])],
        ephemeralContainers=[container("debug", env=[("NVIDIA_VISIBLE_DEVICES", "all")])],
    )
    assert found(spec_pod) == [
        ("KGPU101", "spec.initContainers[0].env[0].value"),
        ("KGPU101", "spec.ephemeralContainers[0].env[0].value"),
    ]


def test_the_last_duplicate_wins():
    assert rules(pod(container(env=[("NVIDIA_VISIBLE_DEVICES", "void"), ("NVIDIA_VISIBLE_DEVICES", "all")]))) == [
        "KGPU101"
    ]
    assert rules(pod(container(env=[("NVIDIA_VISIBLE_DEVICES", "all"), ("NVIDIA_VISIBLE_DEVICES", "void")]))) == []
    assert found(pod(container(env=[("NVIDIA_VISIBLE_DEVICES", "0"), ("NVIDIA_VISIBLE_DEVICES", "1")]))) == [
        ("KGPU101", "spec.containers[0].env[1].value")
    ]


def config_map(name, data, namespace="ns"):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def secret(name, data, namespace="ns", string_data=None):
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}, "data": encoded}
    if string_data:
        obj["stringData"] = string_data
    return obj


def test_env_from_with_a_prefix_resolves_from_the_same_input_in_any_order():
    workload = pod(container(env_from=[{"prefix": "NVIDIA_", "configMapRef": {"name": "gpus"}}]))
    for objects in (
        (config_map("gpus", {"VISIBLE_DEVICES": "all"}), workload),
        (workload, config_map("gpus", {"VISIBLE_DEVICES": "all"})),
    ):
        [finding] = check(*objects).findings
        assert finding.rule == "KGPU101"
        assert finding.path == "spec.containers[0].envFrom[0].configMapRef"
        assert "key VISIBLE_DEVICES of ConfigMap gpus" in finding.message and "prefix 'NVIDIA_'" in finding.message


def test_env_overrides_env_from_and_later_env_from_overrides_earlier():
    sources = [config_map("a", {"NVIDIA_VISIBLE_DEVICES": "all"}), config_map("b", {"NVIDIA_VISIBLE_DEVICES": "void"})]
    ab = pod(container(env_from=[{"configMapRef": {"name": "a"}}, {"configMapRef": {"name": "b"}}]))
    ba = pod(container(env_from=[{"configMapRef": {"name": "b"}}, {"configMapRef": {"name": "a"}}]))
    overridden = pod(container(env_from=[{"configMapRef": {"name": "a"}}], env=[("NVIDIA_VISIBLE_DEVICES", "void")]))
    assert rules(*sources, ab) == []
    assert rules(*sources, ba) == ["KGPU101"]
    assert rules(*sources, overridden) == []


def test_config_maps_match_by_namespace_and_namespaceless_ones_match_any():
    workload = pod(container(env_from=[{"configMapRef": {"name": "gpus"}}]), namespace="team-a")
    assert rules(config_map("gpus", {"NVIDIA_VISIBLE_DEVICES": "all"}, namespace="team-b"), workload) == []
    assert rules(config_map("gpus", {"NVIDIA_VISIBLE_DEVICES": "all"}, namespace=""), workload) == ["KGPU101"]


def test_secret_values_decide_but_are_never_shown():
    secret_value = "GPU-0f0f0f0f-secret-uuid"
    workload = pod(
        container(env=[("NVIDIA_VISIBLE_DEVICES", {"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}})])
    )
    [finding] = check(secret("s", {"k": secret_value}), workload).findings
    assert finding.rule == "KGPU101"
    assert secret_value not in finding.message
    assert "not shown" in finding.message
    from_env = pod(container(env_from=[{"secretRef": {"name": "s"}}]))
    [finding] = check(
        secret("s", {"other": "x"}, string_data={"NVIDIA_VISIBLE_DEVICES": secret_value}), from_env
    ).findings
    assert finding.rule == "KGPU101" and secret_value not in finding.message


def test_config_map_key_refs_resolve_and_optional_missing_keys_set_nothing():
    ref = {"valueFrom": {"configMapKeyRef": {"name": "gpus", "key": "list"}}}
    optional = {"valueFrom": {"configMapKeyRef": {"name": "gpus", "key": "missing", "optional": True}}}
    required = {"valueFrom": {"configMapKeyRef": {"name": "gpus", "key": "missing"}}}
    cm = config_map("gpus", {"list": "2,3"})
    assert found(cm, pod(container(env=[("NVIDIA_VISIBLE_DEVICES", ref)]))) == [
        ("KGPU101", "spec.containers[0].env[0].valueFrom.configMapKeyRef")
    ]
    assert rules(cm, pod(container(env=[("NVIDIA_VISIBLE_DEVICES", optional)]))) == []
    assert rules(cm, pod(container(env=[("NVIDIA_VISIBLE_DEVICES", required)]))) == ["KGPU104"]


def test_dollar_references_expand_from_earlier_variables_only():
    expanded = pod(container(env=[("GPUS", "0,1"), ("NVIDIA_VISIBLE_DEVICES", "$(GPUS)")]))
    [finding] = check(expanded).findings
    assert finding.rule == "KGPU101" and "NVIDIA_VISIBLE_DEVICES=0,1" in finding.message
    # A reference to a later or undefined variable stays as written: a device named "$(GPUS)".
    later = pod(container(env=[("NVIDIA_VISIBLE_DEVICES", "$(GPUS)"), ("GPUS", "void")]))
    assert "NVIDIA_VISIBLE_DEVICES=$(GPUS)" in check(later).findings[0].message
    escaped = pod(container(env=[("V", "void"), ("NVIDIA_VISIBLE_DEVICES", "$(V)")]))
    assert rules(escaped) == []


def test_expansion_through_env_from_values():
    cm = config_map("gpus", {"WANTED": "all"})
    workload = pod(
        container(env_from=[{"configMapRef": {"name": "gpus"}}], env=[("NVIDIA_VISIBLE_DEVICES", "$(WANTED)")])
    )
    assert rules(cm, workload) == ["KGPU101"]


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("$(A)", "x"),
        ("$$(A)", "$(A)"),
        ("$(A", "$(A"),
        ("$(MISSING)", "$(MISSING)"),
        ("a$b", "a$b"),
        ("end$", "end$"),
        ("$(A)-$(A)", "x-x"),
        ("$()", "$()"),
    ],
)
def test_expand_references_follows_the_kubelet(raw, expected):
    env = ResolvedEnv()
    env.values["A"] = EnvValue("x", "p", "o")
    value, _used, note = expand_references(raw, env)
    assert (value, note) == (expected, "")


def test_exponential_expansion_is_cut_off_as_unknown():
    env_list = [("V0", "x" * 100)] + [(f"V{i}", f"$(V{i - 1})$(V{i - 1})") for i in range(1, 40)]
    env_list.append(("NVIDIA_VISIBLE_DEVICES", "$(V39)"))
    [finding] = check(pod(container(env=env_list))).findings
    assert finding.rule == "KGPU104"
    assert "longer than" in finding.message


@pytest.mark.parametrize(
    "env_entry, note",
    [
        ({"valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}, "Secret absent is not available"),
        ({"valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}, "known only at run time"),
        ({"valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}, "known only at run time"),
        ({"value": 1}, "is not a string"),
    ],
)
def test_values_that_cannot_be_known_here_are_errors_without_a_gpu_and_warnings_beside_one(env_entry, note):
    [finding] = check(pod(container(env=[("NVIDIA_VISIBLE_DEVICES", env_entry)]))).findings
    assert finding.rule == "KGPU104" and finding.severity == "error"
    assert note in finding.message and "whatever the value" in finding.message
    assert "set NVIDIA_VISIBLE_DEVICES=void as a literal value" in finding.remedy
    with_gpu = container(env=[("NVIDIA_VISIBLE_DEVICES", env_entry)], limits={"nvidia.com/gpu": 1})
    [finding] = check(pod(with_gpu)).findings
    assert finding.rule == "KGPU103" and finding.severity == "warning"
    assert note in finding.message


def test_field_refs_to_pod_annotations_are_resolved():
    entry = {"valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['gpus']"}}}
    assert rules(pod(container(env=[("NVIDIA_VISIBLE_DEVICES", entry)]), annotations={"gpus": "all"})) == ["KGPU101"]
    assert rules(pod(container(env=[("NVIDIA_VISIBLE_DEVICES", entry)]), annotations={"gpus": "void"})) == []
    # An annotation the manifest lacks may be set after creation (a scheduler sets one at dispatch).
    [finding] = check(pod(container(env=[("NVIDIA_VISIBLE_DEVICES", entry)]), annotations={})).findings
    assert finding.rule == "KGPU104" and "the manifest does not set annotations 'gpus'" in finding.message


def test_a_value_from_that_cannot_be_known_is_an_error_in_each_container_without_a_gpu():
    """Judged per container, as KGPU101 is: another container's GPU limit does not cover this one."""
    ref = {"valueFrom": {"configMapKeyRef": {"name": "elsewhere", "key": "devices"}}}
    mixed = pod(
        container("gpu", limits={"nvidia.com/gpu": 1}, env=[("NVIDIA_VISIBLE_DEVICES", ref)]),
        container("side", env=[("NVIDIA_VISIBLE_DEVICES", ref)]),
    )
    assert sorted((f.rule, f.container, f.severity) for f in check(mixed).findings) == [
        ("KGPU103", "gpu", "warning"),
        ("KGPU104", "side", "error"),
    ]


def test_env_from_an_unknown_source_warns_only_when_its_prefix_leads_to_the_variable():
    nvidia_prefix = pod(container(env_from=[{"prefix": "NVIDIA_", "configMapRef": {"name": "elsewhere"}}]))
    no_prefix = pod(container(env_from=[{"configMapRef": {"name": "elsewhere"}}]))
    assert found(nvidia_prefix) == [("KGPU104", "spec.containers[0].envFrom[0].configMapRef")]
    assert found(no_prefix) == []


# ---------------------------------------------------------------------------------------------
# Rule 2: device mounts


@pytest.mark.parametrize(
    "host_path, gpu",
    [
        ("/dev", True),
        ("/dev/", True),
        ("/dev/nvidia0", True),
        ("/dev/nvidiactl", True),
        ("/dev/nvidia-caps", True),
        ("/dev/char", True),
        ("/run/nvidia", True),
        ("/run/nvidia/driver", True),
        ("/var/run/nvidia/driver/usr/lib", True),
        ("/home/kubernetes/bin/nvidia", True),
        ("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", True),
        ("/usr/lib64/libcuda.so", True),
        ("/usr/bin/nvidia-smi", True),
        ("/dev/../dev/nvidia0", True),
        ("/var/lib/kubelet/device-plugins", False),
        ("/run/nvidia-persistenced", False),
        ("/var/log", False),
        ("/", False),
        ("", False),
    ],
)
def test_gpu_host_paths(host_path, gpu):
    assert gpu_host_path(host_path) is gpu


@pytest.mark.parametrize(
    "host_path, parent",
    [
        ("/", True),
        ("//", True),
        ("/run", True),
        ("/run/", True),
        ("/var/run/", True),
        ("/var", True),
        ("/usr/local", True),
        ("/home/kubernetes/bin", True),
        ("/home/kubernetes/bin/../bin", True),
        ("/dev", False),  # a GPU path itself (KGPU201)
        ("/run/nvidia", False),
        ("/var/lib", False),
        ("/var/log", False),
        ("/home/kubernetes/bin/gib", False),
        ("/usr/lib", False),
        ("run", False),
        ("", False),
    ],
)
def test_parents_of_the_gpu_paths(host_path, parent):
    assert parent_of_gpu_paths(host_path) is parent


def test_a_host_root_mount_is_an_error_writable_or_beside_a_gpu_limit():
    volumes = [{"name": "root", "hostPath": {"path": "/"}}, {"name": "logs", "hostPath": {"path": "/var/log"}}]
    read_only = [{"name": "root", "mountPath": "/host", "readOnly": True}, {"name": "logs", "mountPath": "/logs"}]
    writable = [{"name": "root", "mountPath": "/host"}, {"name": "logs", "mountPath": "/logs"}]
    for mounts, limits in ((writable, None), (read_only, {GPU: 1})):
        [finding] = check(pod(container(volumeMounts=mounts, limits=limits), volumes=volumes)).findings
        assert (finding.rule, finding.path, finding.severity) == ("KGPU203", "spec.volumes[0].hostPath.path", "error")
        assert "hostPath / (volume 'root') at /host" in finding.message
    # Read-only, unprivileged and with no sign of GPU use: its device cgroup opens no GPU (test_host_path_reach.py).
    assert check(pod(container(volumeMounts=read_only), volumes=volumes)).findings == []
    assert check(pod(container(), volumes=volumes)).findings == []


def test_a_gpu_host_path_volume_counts_only_where_it_is_mounted():
    volumes = [{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}]
    mounted = pod(container(volumeMounts=[{"name": "dev", "mountPath": "/dev/nvidia0"}]), volumes=volumes)
    unmounted = pod(container(), volumes=volumes)
    [finding] = check(mounted).findings
    assert (finding.rule, finding.path, finding.container) == ("KGPU201", "spec.volumes[0].hostPath.path", "main")
    assert check(unmounted).findings == []


def test_device_list_mounts_are_errors_whatever_the_volume():
    mounted = pod(
        container(volumeMounts=[{"name": "e", "mountPath": "/var/run/nvidia-container-devices/GPU-1"}]),
        volumes=[{"name": "e", "emptyDir": {}}],
    )
    assert found(mounted) == [("KGPU202", "spec.containers[0].volumeMounts[0].mountPath")]
    elsewhere = pod(container(volumeMounts=[{"name": "e", "mountPath": "/var/run/nvidia-container-devices-x"}]))
    assert found(elsewhere) == []


# ---------------------------------------------------------------------------------------------
# Rule 3: privileged containers


@pytest.mark.parametrize(
    "extra_container, pod_spec, sign",
    [
        ({"image": "nvidia/cuda:12.4.1-base-ubuntu22.04"}, {}, "image nvidia/cuda"),
        ({"limits": {GPU: 1}}, {}, "GPU resource nvidia.com/gpu"),
        ({"env": [("CUDA_VISIBLE_DEVICES", "0")]}, {}, "env CUDA_VISIBLE_DEVICES"),
        ({"command": ["python", "-c", "import torch; torch.cuda.init()"]}, {}, "command mentions cuda"),
        ({}, {"nodeSelector": {"accelerator": "nvidia-tesla-t4"}}, "node selector accelerator"),
        ({}, {"tolerations": [{"key": "sku", "value": "gpu", "effect": "NoSchedule"}]}, "toleration sku gpu"),
        (
            {},
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            "node affinity on cloud.google.com/gke-accelerator",
        ),
        ({}, {"runtimeClassName": "nvidia"}, "runtimeClassName nvidia"),
    ],
)
def test_privileged_with_any_gpu_sign_is_an_error(extra_container, pod_spec, sign):
    privileged = container(securityContext={"privileged": True}, **extra_container)
    result = check(pod(privileged, **pod_spec))
    privileged_findings = [f for f in result.findings if f.rule.startswith("KGPU3")]
    [finding] = privileged_findings
    assert finding.rule == "KGPU301" and finding.severity == "error"
    assert sign in finding.message


@pytest.mark.parametrize("capability", ["SYS_ADMIN", "CAP_SYS_ADMIN", "ALL", "sys_admin"])
def test_sys_admin_and_all_capabilities_count_as_privileged(capability):
    gpu = container(
        image="nvidia/cuda:12.4.1-base-ubuntu22.04",
        limits={GPU: 1},
        securityContext={"capabilities": {"add": ["NET_RAW", capability]}},
    )
    assert found(pod(gpu)) == [("KGPU301", "spec.containers[0].securityContext.capabilities.add[1]")]


def test_privileged_without_gpu_signs_is_never_an_error():
    result = check(pod(container(image="busybox:1.36", securityContext={"privileged": True})))
    assert [(f.rule, f.severity) for f in result.findings] == [("KGPU302", "warning")]
    assert rules(pod(container(securityContext={"privileged": False, "capabilities": {"add": ["NET_ADMIN"]}}))) == []


# ---------------------------------------------------------------------------------------------
# Rule 4: quantities, in the API server's words


@pytest.mark.parametrize(
    "value, text",
    [
        (Decimal("0.5"), "500m"),
        (Decimal("1.5"), "1500m"),
        (Decimal("0.9999"), "999900u"),
        (Decimal(1), "1"),
        (Decimal(2000), "2k"),
        (Decimal(1500), "1500"),
        (Decimal(0), "0"),
        (Decimal(-1), "-1"),
        (Decimal("1e-12"), "1n"),
    ],
)
def test_quantities_print_in_canonical_form(value, text):
    assert format_quantity(value) == text


def messages(*objects):
    return [(f.rule, f.message) for f in check(*objects).findings]


def test_requests_without_limits_quote_the_api_server():
    [(rule, message)] = messages(pod(container(requests={GPU: "1"})))
    assert rule == "KGPU401"
    assert message.startswith(
        "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"
    )


def test_requests_not_equal_to_limits_quote_the_api_server():
    assert messages(pod(container(requests={GPU: "1"}, limits={GPU: "2"}))) == [
        (
            "KGPU402",
            'spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2',
        )
    ]
    assert messages(pod(container(requests={GPU: "1000m"}, limits={GPU: 1}))) == []


def test_fractional_quantities_quote_the_api_server_or_say_it_admits_them():
    assert messages(pod(container(limits={GPU: "0.5"}))) == [
        ("KGPU403", 'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer')
    ]
    assert messages(pod(container(limits={GPU: "1500m"})))[0][1].endswith('Invalid value: "1500m": must be an integer')
    [(rule, message)] = messages(pod(container(limits={GPU: "0.9999"})))
    assert rule == "KGPU403"
    assert "The API server admits it" in message and "stores it as 1" in message


def test_template_quantity_messages_carry_the_template_path():
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [container(limits={GPU: 0.5})]}}},
    }
    assert messages(deployment)[0][1].startswith("spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]")


def test_negative_malformed_pod_level_and_ephemeral_quantities():
    assert messages(pod(container(limits={GPU: -2}))) == [
        (
            "KGPU404",
            'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "-2": must be greater '
            "than or equal to 0",
        )
    ]
    [(rule, message)] = messages(pod(container(limits={GPU: "lots"})))
    assert rule == "KGPU405" and "quantities must match the regular expression" in message
    assert [r for r, _message in messages(pod(container(limits={GPU: None})))] == ["KGPU405"]
    assert messages(pod(container(), resources={"requests": {GPU: 1}})) == [
        (
            "KGPU406",
            'spec.resources.requests[nvidia.com/gpu]: Unsupported value: "nvidia.com/gpu": supported '
            'values: "cpu", "memory"',
        )
    ]
    ephemeral = pod(container(), ephemeralContainers=[container("debug", limits={GPU: 1})])
    assert messages(ephemeral) == [
        ("KGPU407", "spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container")
    ]


def test_a_gpu_limit_of_zero_is_valid_and_requests_no_gpu():
    assert rules(pod(container(limits={GPU: 0}))) == []
    assert rules(pod(container(limits={GPU: 0}, env=[("NVIDIA_VISIBLE_DEVICES", "all")]))) == ["KGPU101"]


def test_extra_gpu_resources_are_checked_like_the_built_in_ones():
    accel = pod(container(requests={"example.com/accel": 1}))
    assert rules(accel) == []
    assert rules(accel, gpu_resources=("example.com/accel*",)) == ["KGPU401"]
    assert rules(pod(container(requests={"amd.com/gpu": 1}))) == ["KGPU401"]
    assert rules(pod(container(requests={"cpu": "500m", "memory": "1Gi"}))) == []


# ---------------------------------------------------------------------------------------------
# Rule 5: images


@pytest.mark.parametrize(
    "image, family",
    [
        ("nvidia/cuda:12.4.1-base-ubuntu22.04", True),
        ("docker.io/nvidia/cuda:11.8.0-runtime", True),
        ("mirror.example.com/nvidia/cuda@sha256:0123", True),
        ("nvcr.io/nvidia/pytorch:24.05-py3", True),
        ("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5", True),
        ("registry.example.com/base/cuda:12", True),
        ("pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", True),
        ("tensorflow/tensorflow:2.16.1-gpu", True),
        ("tensorflow/tensorflow:2.16.1", False),
        ("vllm/vllm-openai:v0.5.0", True),
        ("public.ecr.aws/mirror/vllm/vllm-openai:v0.9.1", True),
        ("vllm/vllm-openai-cpu:v0.19.0", False),
        ("nvcr.io/nim/meta/llama-3.1-8b-instruct:1.1.0", True),
        ("nvcr.io/nim/nvidia/nv-embedqa-e5-v5:1.0.0", True),
        ("rapidsai/base:25.06-cuda12.8-py3.12", True),
        ("rapidsai/notebooks:25.06-cuda12.8-py3.12", True),
        ("us-central1-docker.pkg.dev/nv-ai-infra/rapidsai/rapidsai/base:example", True),
        ("rapidsai/rapidsai-core:23.02-cuda11.8-runtime-ubuntu22.04-py3.10", True),
        ("rapidsai/ci-conda-lint:latest", False),
        ("registry.example.com/mirror/tritonserver:24.05-py3", True),
        ("registry.example.com/ai-dynamo/vllm-runtime:0.4.0", True),
        ("registry.example.com/ai-dynamo/frontend:0.4.0", False),
        ("busybox:1.36", False),
        ("registry.example.com/cudarecords/app:1", False),
    ],
)
def test_known_cuda_image_families(image, family):
    assert (known_family(image) is not None) is family


def test_cuda_images_without_a_gpu_limit_warn_with_the_void_remedy():
    [finding] = check(pod(container(image="nvidia/cuda:12.4.1-base-ubuntu22.04"))).findings
    assert (finding.rule, finding.severity, finding.path) == ("KGPU501", "warning", "spec.containers[0].image")
    assert "NVIDIA_VISIBLE_DEVICES=void" in finding.remedy
    assert rules(pod(container(image="nvidia/cuda:12", limits={GPU: 1}))) == []
    assert rules(pod(container(image="nvidia/cuda:12", env=[("NVIDIA_VISIBLE_DEVICES", "void")]))) == []


def test_the_image_env_map_adds_exact_knowledge_and_overrides_families():
    private = pod(container(image="registry.example.com/train:1.4"))
    assert rules(private) == []
    assert rules(private, image_env={"registry.example.com/train:1.4": {"NVIDIA_VISIBLE_DEVICES": "all"}}) == [
        "KGPU501"
    ]
    assert rules(private, image_env={"registry.example.com/train:*": {"NVIDIA_VISIBLE_DEVICES": "0"}}) == ["KGPU501"]
    cuda = pod(container(image="nvidia/cuda:12"))
    assert rules(cuda, image_env={"nvidia/cuda:12": {}}) == []


def test_legacy_cuda_images_default_to_all_gpus():
    legacy = {"registry.example.com/old:9.0": {"CUDA_VERSION": "9.0.176"}}
    image = "registry.example.com/old:9.0"
    [finding] = check(pod(container(image=image)), image_env=legacy).findings
    assert finding.rule == "KGPU501" and "legacy CUDA image" in finding.message
    assert rules(pod(container(image=image, env=[("NVIDIA_REQUIRE_CUDA", "cuda>=9.0")])), image_env=legacy) == []
    assert rules(pod(container(image=image, env=[("NVIDIA_VISIBLE_DEVICES", "void")])), image_env=legacy) == []
    set_by_pod = pod(container(image="registry.example.com/plain:1", env=[("CUDA_VERSION", "10.0")]))
    assert rules(set_by_pod, image_env={"registry.example.com/plain:1": {}}) == ["KGPU501"]


# ---------------------------------------------------------------------------------------------
# Rule 6: runtime class and device annotations


def test_runtime_class_and_device_annotations_warn_only_without_a_gpu():
    assert rules(pod(container(), runtimeClassName="nvidia-cdi")) == ["KGPU601"]
    assert rules(pod(container(limits={GPU: 1}), runtimeClassName="nvidia")) == []
    for key in ("cdi.k8s.io/gpu", "devices.nri.io/container.main", "io.kubernetes.cri-o.Devices"):
        assert found(pod(container(), annotations={key: "x"})) == [("KGPU602", f"metadata.annotations['{key}']")]
        assert rules(pod(container(limits={GPU: 1}), annotations={key: "x"})) == []
    assert rules(pod(container(), annotations={"example.com/cdi": "x"})) == []


# ---------------------------------------------------------------------------------------------
# Allowing, skipping, configuration


@pytest.mark.parametrize(
    "key, value, what",
    [
        ("cdi.k8s.io/gpu", "nvidia.com/gpu=all", "every GPU of the node"),
        ("cdi.k8s.io/extra", "nvidia.com/gds=all, nvidia.com/gpu=0", "GPUs by name"),
        ("nvidia.cdi.k8s.io/container.main", "management.nvidia.com/gpu=all", "every GPU of the node"),
        ("cdi.k8s.io/vfio", "nvidia.com/pgpu=1", "GPUs by name"),
        ("cdi.k8s.io/amd", "amd.com/gpu=0", "GPUs by name"),
    ],
)
def test_cdi_annotations_naming_gpus_beside_a_gpu_limit_are_errors(key, value, what):
    report = check(pod(container(limits={GPU: 1}), annotations={key: value}))
    [finding] = report.findings
    assert (finding.rule, finding.severity, finding.path) == ("KGPU604", "error", f"metadata.annotations['{key}']")
    assert what in finding.message and "container 'main': nvidia.com/gpu limit" in finding.message
    # Without a GPU limit the older rule says it: devices the scheduler does not count.
    assert rules(pod(container(), annotations={key: value})) == ["KGPU602"]


def test_cdi_annotations_of_other_devices_beside_a_gpu_limit_pass():
    for value in ("nvidia.com/gds=all", "mellanox.com/rdma=mlx5_0", "vendor.example/fpga=0"):
        assert check(pod(container(limits={GPU: 1}), annotations={"cdi.k8s.io/x": value})).findings == []


def test_the_allow_annotation_on_the_object_or_the_template_moves_findings_to_allowed():
    bypass = container(env=[("NVIDIA_VISIBLE_DEVICES", "all")], limits={GPU: "0.5"})
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "annotations": {"kubegpu.io/allow-bypass": " driver installer "}},
        "spec": {"template": {"spec": {"containers": [bypass]}}},
    }
    result = check(deployment)
    assert [f.rule for f in result.findings] == ["KGPU403"]  # the API server rejects it anyway
    assert [(a.finding.rule, a.reason) for a in result.allowed] == [("KGPU102", "driver installer")]
    custom = check(
        pod(container(env=[("NVIDIA_VISIBLE_DEVICES", "all")]), annotations={"example.com/ok": "why"}),
        allow_annotation="example.com/ok",
    )
    assert custom.findings == [] and len(custom.allowed) == 1


def test_skipped_rules_are_not_reported():
    privileged = pod(container(securityContext={"privileged": True}))
    assert rules(privileged) == ["KGPU302"]
    assert rules(privileged, skip_rules=frozenset({"KGPU302"})) == []
    assert unknown_rules(["KGPU302", "KGPU999", "nope"]) == ["KGPU999", "nope"]


def test_findings_carry_the_object_and_location():
    [finding] = check(pod(container(env=[("NVIDIA_VISIBLE_DEVICES", "all")]))).findings
    record = finding.to_dict()
    assert record == {
        "id": "KGPU101",
        "title": RULES["KGPU101"].title,
        "where": {
            "object": "Pod ns/p",
            "source": "test.yaml",
            "document": 0,
            "line": 1,
            "container": "main",
            "path": "spec.containers[0].env[0].value",
        },
        "rule": "KGPU101",
        "name": "visible-devices-without-gpu",
        "severity": "error",
        "kind": "Pod",
        "namespace": "ns",
        "object_name": "p",
        "container": "main",
        "path": "spec.containers[0].env[0].value",
        "message": finding.message,
        "remedy": RULES["KGPU101"].remedy,
        "source": "test.yaml",
        "document": 0,
        "line": 1,
    }


def test_rule_catalogue_is_consistent():
    assert all(rule.severity in ("error", "warning") for rule in RULES.values())
    assert len({rule.name for rule in RULES.values()}) == len(RULES)
    assert [r for r in RULES if RULES[r].allowable is False] == [f"KGPU40{i}" for i in range(1, 8)]


def test_every_validator_kind_has_its_check_and_every_check_its_kind():
    kinds = [kind.id for kind in REGISTRY.of_check(CHECK_VALIDATOR)]
    assert kinds == list(RULES) and sorted(CHECKS) == sorted(kinds)
    assert all(RULES[rule].name and RULES[rule].admission is not None for rule in RULES)


# ---------------------------------------------------------------------------------------------
# Env sources in the cluster


class FakeStatusError(Exception):
    def __init__(self, status):
        super().__init__(f"status {status}")
        self.status = status
        self.message = f"server said {status}"


class FakeClient:
    def __init__(self, objects, statuses=None):
        self.objects = objects
        self.statuses = statuses or {}
        self.calls = []

    def get(self, path):
        self.calls.append(path)
        if path in self.statuses:
            raise FakeStatusError(self.statuses[path])
        if path not in self.objects:
            raise FakeStatusError(404)
        return self.objects[path]


def test_cluster_sources_read_each_object_once_and_tell_absent_from_unreadable():
    client = FakeClient(
        {
            "/api/v1/namespaces/ns/configmaps/gpus": config_map("gpus", {"NVIDIA_VISIBLE_DEVICES": "all"}),
            "/api/v1/namespaces/ns/secrets/s": secret("s", {"k": "0"}),
        },
        statuses={"/api/v1/namespaces/ns/secrets/forbidden": 403},
    )
    sources = ClusterEnvSources(client)
    assert sources.config_map("ns", "gpus").values == {"NVIDIA_VISIBLE_DEVICES": "all"}
    assert sources.config_map("ns", "gpus").values == {"NVIDIA_VISIBLE_DEVICES": "all"}
    assert client.calls.count("/api/v1/namespaces/ns/configmaps/gpus") == 1
    assert sources.secret("ns", "s").values == {"k": "0"} and sources.secret("ns", "s").secret
    assert sources.config_map("ns", "missing").absent
    assert sources.secret("ns", "forbidden") is None
    assert sources.problems == ["could not read Secret ns/forbidden in the cluster: server said 403"]
    assert sources.config_map("", "gpus") is None


def test_document_sources_ignore_other_kinds_and_bad_secret_data():
    sources = DocumentEnvSources()
    sources.add({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}}, "here")
    sources.add({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "%%%", "n": 5}}, "here")
    sources.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"k": "v"}}, "here")
    assert sources.config_map("", "x") is None
    assert sources.secret("any", "s").values == {"k": None, "n": None}


# ---------------------------------------------------------------------------------------------
# Random and malformed documents never raise

KEYS = st.sampled_from(
    [
        "apiVersion",
        "kind",
        "metadata",
        "spec",
        "template",
        "jobTemplate",
        "containers",
        "initContainers",
        "ephemeralContainers",
        "env",
        "envFrom",
        "name",
        "value",
        "valueFrom",
        "prefix",
        "configMapRef",
        "secretRef",
        "configMapKeyRef",
        "secretKeyRef",
        "fieldRef",
        "fieldPath",
        "key",
        "resources",
        "limits",
        "requests",
        "claims",
        "securityContext",
        "privileged",
        "capabilities",
        "add",
        "volumes",
        "volumeMounts",
        "hostPath",
        "path",
        "mountPath",
        "image",
        "annotations",
        "runtimeClassName",
        "nodeSelector",
        "tolerations",
        "affinity",
        "items",
        "data",
        "stringData",
        "command",
        "args",
        GPU,
        "NVIDIA_VISIBLE_DEVICES",
        "kubegpu.io/allow-bypass",
    ]
) | st.text(max_size=8)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=12)
    | st.sampled_from(
        [
            "all",
            "void",
            "none",
            "0.5",
            "$(A)",
            "/dev/nvidia0",
            "nvidia/cuda:12",
            "Pod",
            "v1",
            "apps/v1",
            "Deployment",
            "List",
            "ConfigMap",
            "Secret",
            "NVIDIA_VISIBLE_DEVICES",
        ]
    )
)
DOCUMENTS = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=6), max_leaves=40
)
KINDS = st.sampled_from(
    [
        ("v1", "Pod"),
        ("apps/v1", "Deployment"),
        ("batch/v1", "CronJob"),
        ("v1", "List"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("x.io/v1", "Thing"),
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(KINDS, DOCUMENTS), max_size=4))
def test_random_documents_never_raise(documents):
    objects = []
    for (api_version, kind), body in documents:
        obj = body if not isinstance(body, dict) else {"apiVersion": api_version, "kind": kind, **body}
        objects.append(obj)
    result = check(*objects)
    for finding in result.findings:
        assert finding.rule in RULES
        assert isinstance(finding.to_dict()["message"], str)
    assert result.documents == len(objects)
