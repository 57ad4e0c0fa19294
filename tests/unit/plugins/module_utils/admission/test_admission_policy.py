import json
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission import cel, plan, policy, reads
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import BUILTIN_CATALOGUE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.toolkit import DEVICE_LIST_MOUNT_ROOTS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workload_kinds import (
    EACH_ITEM,
    EACH_VALUE,
    TemplatePath,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.analysis import (
    device_list_mount,
    gpu_host_path,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import RULES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.owned import (
    NOT_OURS,
    RENDERED_DIGEST_ANNOTATION,
    UNCHANGED,
    UPDATE,
    object_key,
    plan_apply,
)
from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_admission_policy as module

DECIDED_AT_ADMISSION = {
    "KGPU101",
    "KGPU102",
    "KGPU103",
    "KGPU104",
    "KGPU201",
    "KGPU202",
    "KGPU601",
    "KGPU602",
    "KGPU603",
}


def objects(**settings):
    return {object_key(o): o for o in policy.admission_objects(policy.AdmissionSettings(**settings))}


def referenced_variables(expression):
    return set(re.findall(r"variables\.(\w+)", expression))


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_every_rule_says_whether_admission_decides_it(rule_id):
    admission = RULES[rule_id].admission
    assert admission is not None, f"{rule_id}: give it admission CEL, or say in Admission(unseen=...) why not"
    assert bool(admission.findings) != bool(admission.unseen), rule_id


@pytest.mark.parametrize("rule_id", sorted(DECIDED_AT_ADMISSION))
def test_rules_admission_can_decide_carry_cel(rule_id):
    assert RULES[rule_id].admission.findings


def test_each_decided_rule_is_in_the_policy_of_its_severity():
    by_name = objects()
    names = {
        policy.POLICY_NAME: ERROR,
        policy.WARNINGS_POLICY_NAME: WARNING,
    }
    seen = set()
    for name, severity in names.items():
        spec = by_name[f"ValidatingAdmissionPolicy {name}"]["spec"]
        for validation in spec["validations"]:
            rule = RULES[validation["message"].split()[0]]
            assert rule.severity == severity
            seen.add(rule.id)
            assert validation["expression"] == f"variables.{rule.id.lower()}.all(f, f.size() == 0)"
            assert (
                rule.id in validation["messageExpression"]
                and cel.cel_string(f". {rule.remedy}")[1:-1] in (validation["messageExpression"])
            )
    assert seen == {r.id for r in RULES.values() if r.admission and r.admission.findings}


def test_variables_read_only_earlier_ones_and_rules_only_defined_ones():
    spec = objects()[f"ValidatingAdmissionPolicy {policy.POLICY_NAME}"]["spec"]
    defined = set()
    for variable in spec["variables"]:
        assert referenced_variables(variable["expression"]) <= defined, variable["name"]
        defined.add(variable["name"])
    for validation in spec["validations"]:
        assert referenced_variables(validation["expression"] + validation["messageExpression"]) <= defined
    pod_defined = {cel.TEMPLATE}
    for name, expression in cel.POD_VARIABLES:
        assert referenced_variables(expression) <= pod_defined, name
        pod_defined.add(name)
    for rule in RULES.values():
        if rule.admission and rule.admission.findings:
            assert referenced_variables(rule.admission.findings) <= set(cel.POD_VARIABLE_NAMES), rule.id


def test_rules_read_the_pod_variables_of_each_template():
    findings = RULES["KGPU101"].admission.findings
    assert cel.per_pod(findings) == findings.replace("variables.deviceEnv", "pod.deviceEnv")
    record = cel.pod_record("t")
    assert record.startswith("[t].map(template, [dyn(template).spec].map(spec, ")
    assert "variables." not in record
    assert record.count(".map(") >= len(cel.POD_VARIABLES) + 1


def test_custom_resource_kinds_are_matched_from_the_workload_table():
    rules = objects()[f"ValidatingAdmissionPolicy {policy.POLICY_NAME}"]["spec"]["matchConstraints"]["resourceRules"]
    matched = {
        (g, v, r) for rule in rules for g in rule["apiGroups"] for v in rule["apiVersions"] for r in rule["resources"]
    }
    assert ("kubeflow.org", "v1", "pytorchjobs") in matched
    assert ("ray.io", "v1", "rayclusters") in matched
    assert ("jobset.x-k8s.io", "v1alpha2", "jobsets") in matched
    assert ("batch.volcano.sh", "v1alpha1", "jobs") in matched
    kinds = {k.kind for k in cel.admission_workload_kinds()}
    assert {"PyTorchJob", "RayCluster", "RayJob", "JobSet", "LeaderWorkerSet"} <= kinds
    # Not pod templates: Argo's templates, KServe's inline specs, the Trainer's container fields.
    assert not kinds & {"Workflow", "InferenceService", "TrainJob"}
    for kind in cel.admission_workload_kinds():
        assert (kind.group, kind.versions[0], kind.resource) in matched
        assert f'request.resource.resource == "{kind.resource}"' in cel.templates_expression()


def test_template_paths_fan_out_over_maps_and_lists():
    replica_specs = TemplatePath(("spec", "pytorchReplicaSpecs", EACH_VALUE, "template"))
    assert cel.template_path_expression(replica_specs) == (
        "[dyn(object).?spec.?pytorchReplicaSpecs.orValue({})].map(m, m.map(k, m[k]))[0]"
        ".map(x, optional.of(x).?template).filter(o, o.hasValue()).map(o, o.value())"
    )
    worker_groups = TemplatePath(("spec", "workerGroupSpecs", EACH_ITEM, "template"))
    assert cel.template_path_expression(worker_groups).startswith("dyn(object).?spec.?workerGroupSpecs.orValue([])")
    head = TemplatePath(("spec", "headGroupSpec", "template"))
    assert cel.template_path_expression(head) == (
        "[dyn(object).?spec.?headGroupSpec.?template].filter(o, o.hasValue()).map(o, o.value())"
    )
    with pytest.raises(ValueError, match="one map or list at most"):
        cel.template_path_expression(TemplatePath(("spec", "a", EACH_ITEM, "b", EACH_VALUE, "template")))


def test_pods_ephemeral_containers_and_controllers_are_matched():
    rules = objects()[f"ValidatingAdmissionPolicy {policy.POLICY_NAME}"]["spec"]["matchConstraints"]["resourceRules"]
    matched = {(r, tuple(rule["operations"])) for rule in rules for r in rule["resources"]}
    assert ("pods", ("CREATE",)) in matched
    assert ("pods/ephemeralcontainers", ("UPDATE",)) in matched
    for kind in ("deployments", "statefulsets", "daemonsets", "replicasets", "jobs", "cronjobs"):
        assert (kind, ("CREATE", "UPDATE")) in matched


@pytest.mark.parametrize(("enforcement", "actions"), [("warn", ["Warn", "Audit"]), ("deny", ["Deny", "Audit"])])
def test_bindings_never_combine_deny_and_warn(enforcement, actions):
    by_name = objects(enforcement=enforcement)
    binding = by_name[f"ValidatingAdmissionPolicyBinding {policy.POLICY_NAME}"]["spec"]
    assert binding["validationActions"] == actions
    warnings = by_name[f"ValidatingAdmissionPolicyBinding {policy.WARNINGS_POLICY_NAME}"]["spec"]
    assert warnings["validationActions"] == ["Warn", "Audit"]


def test_no_policy_reads_params():
    """A ConfigMap paramKind stops being followed by the API server once unbound for a moment
    (kubernetes/kubernetes#130887): the exemptions live in the bindings."""
    by_name = objects(extra_exempt_namespaces=("ml",), mutating=True)
    assert all(obj["kind"] != "ConfigMap" for obj in by_name.values())
    assert not any("paramKind" in obj["spec"] or "paramRef" in obj["spec"] for obj in by_name.values())
    assert "params" not in json.dumps(by_name)


def test_exemptions_go_by_namespace_selector():
    by_name = objects(exempt_namespaces=("gpu-operator", "kube-system"), extra_exempt_namespaces=("ml-b", "ml-a"))
    for name in policy.VALIDATING_POLICY_NAMES:
        selector = by_name[f"ValidatingAdmissionPolicyBinding {name}"]["spec"]["matchResources"]
        assert selector["namespaceSelector"]["matchExpressions"] == [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["gpu-operator", "kube-system", "ml-a", "ml-b"],
            }
        ]
    assert "serviceAccount" not in str(by_name)


def test_the_default_exemptions_are_the_gpu_system_namespaces():
    exempt = policy.default_exempt_namespaces()
    assert {"kube-system", "gpu-operator", "nvidia-dra-driver-gpu", "dcgm-exporter"} <= set(exempt)


def test_the_default_exemptions_leave_out_generic_namespaces():
    catalogued = {n for c in BUILTIN_CATALOGUE.components for n in c.namespaces}
    assert "monitoring" in catalogued  # the DCGM exporter is often deployed there
    assert not {"monitoring", "default"} & set(policy.default_exempt_namespaces())
    binding = objects(exempt_namespaces=policy.default_exempt_namespaces())
    values = binding[f"ValidatingAdmissionPolicyBinding {policy.POLICY_NAME}"]["spec"]["matchResources"]
    assert "monitoring" not in values["namespaceSelector"]["matchExpressions"][0]["values"]


def test_the_mutating_policy_is_off_by_default():
    assert not [k for k in objects() if k.startswith("Mutating")]
    by_name = objects(mutating=True, exempt_namespaces=("kube-system",), extra_exempt_namespaces=("ml",))
    mutating = by_name[f"MutatingAdmissionPolicy {policy.MUTATING_POLICY_NAME}"]["spec"]
    expression = mutating["mutations"][0]["applyConfiguration"]["expression"]
    assert '"NVIDIA_VISIBLE_DEVICES"' in expression and '"void"' in expression
    selector = by_name[f"MutatingAdmissionPolicyBinding {policy.MUTATING_POLICY_NAME}"]["spec"]["matchResources"]
    assert selector["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "ml"]


@pytest.mark.parametrize(
    "name",
    [
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/mig-1g.5gb",
        "amd.com/gpu",
        "aliyun.com/gpu-mem",
        "nvidia.com/gpux",
        "cpu",
        "memory",
        "example.com/gpus",
        "nvidia.com/gpumem",
        "nvidiaXcom/gpu",
        "nvidia.com/pgpu",
        "nvidia.com/GA102GL_A10",
        "nvidia.com/TU104GL_TESLA_T4",
        "nvidia.com/nvswitch",
        "nvidia.com/GA10",
        "nvidia.com/[A-Z]102",
    ],
)
def test_the_gpu_resource_regex_matches_what_the_validator_counts(name):
    assert bool(re.fullmatch(cel.GPU_RESOURCE_REGEX, name)) == gpu_resource_matcher()(name)


@pytest.mark.parametrize(
    "path",
    [
        "/dev",
        "/dev/",
        "/dev/nvidia0",
        "/dev/nvidiactl",
        "/dev/char",
        "/run/nvidia/driver",
        "/var/run/nvidia",
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "/usr/bin/nvidia-smi",
        "/var/lib/kubelet/device-plugins",
        "/dev/null",
        "/run/nvidia-container-devices",
        "/data",
        "/usr/local/nvidia/lib64",
        "/home/kubernetes/bin/nvidia",
    ],
)
def test_the_host_path_regex_agrees_with_the_validator(path):
    assert bool(re.fullmatch(cel.GPU_HOST_PATH_REGEX, path)) == gpu_host_path(path)


@pytest.mark.parametrize("path", [*DEVICE_LIST_MOUNT_ROOTS, "/var/run/nvidia-container-devices/all", "/var/run/x"])
def test_the_device_list_regex_agrees_with_the_validator(path):
    assert bool(re.fullmatch(cel.DEVICE_LIST_MOUNT_REGEX, path)) == device_list_mount(path)


def test_messages_are_one_line():
    for rule in RULES.values():
        assert "\n" not in policy.message_expression(rule)


def test_type_checking_warnings_and_in_force():
    live = {
        "metadata": {"generation": 2},
        "status": {
            "observedGeneration": 2,
            "typeChecking": {"expressionWarnings": [{"fieldRef": "spec.validations[0].expression", "warning": "x"}]},
        },
    }
    assert plan.type_checking_warnings(live) == ["spec.validations[0].expression: x"]
    assert plan.type_checked(live)
    assert not plan.type_checked({"metadata": {"generation": 3}, "status": live["status"]})
    binding = {"spec": {"validationActions": ["Deny", "Audit"]}}
    assert plan.policy_in_force(live, binding) == ["Deny", "Audit"]
    assert plan.policy_in_force(live, None) == []


def test_missing_apis_name_the_resources():
    served = ["validatingadmissionpolicies", "validatingadmissionpolicybindings"]
    assert plan.missing_apis(served, mutating=False) == []
    assert plan.missing_apis(served, mutating=True) == ["mutatingadmissionpolicies", "mutatingadmissionpolicybindings"]


def as_stored(obj):
    """An admission object as the API server returns it: server fields and defaults added."""
    stored = json.loads(json.dumps(obj))
    stored["metadata"].update(uid="u", resourceVersion="7", generation=1, managedFields=[{"manager": "m"}])
    stored["spec"].setdefault("failurePolicy", "Fail")
    stored["status"] = {"observedGeneration": 1}
    return stored


def test_objects_carry_the_mark_and_compare_unchanged_as_stored():
    rendered = policy.admission_objects(policy.AdmissionSettings(mutating=True))
    for obj in rendered:
        assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "kubegpu.scheduling"}
        assert RENDERED_DIGEST_ANNOTATION in obj["metadata"]["annotations"]
    live = {object_key(o): as_stored(o) for o in rendered}
    assert {p.action for p in plan_apply(rendered, live)} == {UNCHANGED}
    denying = policy.admission_objects(policy.AdmissionSettings(enforcement="deny", mutating=True))
    changed = [p.key for p in plan_apply(denying, live) if p.action == UPDATE]
    assert changed == [f"ValidatingAdmissionPolicyBinding {policy.POLICY_NAME}"]


def test_an_object_of_our_name_without_the_mark_is_not_ours():
    (first, *_rest) = policy.admission_objects(policy.AdmissionSettings())
    foreign = as_stored(first)
    del foreign["metadata"]["labels"]
    assert [p.action for p in plan_apply([first], {object_key(first): foreign})] == [NOT_OURS]


def test_module_documents_its_defaults_and_the_role_follows():
    documented = yaml.safe_load(module.DOCUMENTATION)["options"]
    spec = module.argument_spec()
    for option, doc in documented.items():
        assert spec[option].get("default") == doc.get("default"), option
        assert spec[option]["type"] == doc["type"], option
    assert set(documented) <= set(spec)
    role = Path(__file__).resolve().parents[5] / "roles" / "admission_policy" / "defaults" / "main.yml"
    defaults = yaml.safe_load(role.read_text())
    for option in ("enforcement", "warnings_enforcement", "extra_exempt_namespaces", "mutating"):
        assert defaults[f"admission_policy_{option}"] == spec[option]["default"], option


class DiscoveryClient:
    """Answers the admissionregistration.k8s.io/v1 discovery document, or 404."""

    def __init__(self, resources):
        self.resources = resources

    def find(self, path):
        """KubeClient.find over this fake's get: None for a 404."""
        try:
            return self.get(path)
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    def get(self, path):
        assert path == "/apis/admissionregistration.k8s.io/v1"
        if self.resources is None:
            raise ClusterError("404 Not Found", 404)
        return {"resources": [{"name": r} for r in self.resources]}


@pytest.mark.parametrize(
    ("resources", "mutating", "missing"),
    [
        (None, False, "validatingadmissionpolicies, validatingadmissionpolicybindings"),
        (["validatingadmissionpolicies", "validatingadmissionpolicybindings"], True, "mutatingadmissionpolicies"),
    ],
)
def test_a_cluster_without_the_apis_gets_a_clear_error(resources, mutating, missing):
    with pytest.raises(ClusterError) as raised:
        reads.require_apis(DiscoveryClient(resources), mutating)
    assert missing in raised.value.message and "1.30" in raised.value.message


def test_a_cluster_with_the_apis_passes():
    served = ["validatingadmissionpolicies", "validatingadmissionpolicybindings", "mutatingadmissionpolicies"]
    reads.require_apis(DiscoveryClient([*served, "mutatingadmissionpolicybindings"]), mutating=True)


class EnforcementClient(DiscoveryClient):
    """Discovery as DiscoveryClient, and the named objects (404 for the rest, or one status for all)."""

    def __init__(self, resources, objects=None, status=None):
        super().__init__(resources)
        self.objects, self.status = objects or {}, status

    def get(self, path):
        if path.startswith(f"/apis/{policy.API_VERSION}/"):
            if self.status is not None:
                raise ClusterError("forbidden", self.status)
            if path not in self.objects:
                raise ClusterError("not found", 404)
            return self.objects[path]
        return super().get(path)


def test_enforcement_reads_policy_and_binding_and_judges_deny():
    prefix = f"/apis/{policy.API_VERSION}"
    binding = {"spec": {"validationActions": ["Deny", "Audit"]}}
    served = list(plan.VALIDATING_RESOURCES)
    objects_live = {
        f"{prefix}/validatingadmissionpolicies/{policy.POLICY_NAME}": {"spec": {}},
        f"{prefix}/validatingadmissionpolicybindings/{policy.POLICY_NAME}": binding,
        f"{prefix}/validatingadmissionpolicies/{policy.WARNINGS_POLICY_NAME}": {"spec": {}},
    }
    status = reads.read_enforcement(EnforcementClient(served, objects_live))
    by_name = {p["name"]: p for p in status["policies"]}
    assert status["state"] == "read"
    assert by_name[policy.POLICY_NAME] == {
        "name": policy.POLICY_NAME,
        "policy": True,
        "binding": True,
        "in_force": True,
        "validation_actions": ["Deny", "Audit"],
        "deny": True,
    }
    assert not by_name[policy.WARNINGS_POLICY_NAME]["in_force"]
    summary = plan.enforcement_summary(status)
    assert f"{policy.POLICY_NAME} in force (Deny, Audit)" in summary
    assert f"{policy.WARNINGS_POLICY_NAME} not in force (no binding)" in summary


@pytest.mark.parametrize(
    ("resources", "status", "reason"),
    [(None, None, "does not serve"), (list(plan.VALIDATING_RESOURCES), 403, "forbidden")],
)
def test_enforcement_is_unknown_not_a_failure(resources, status, reason):
    result = reads.read_enforcement(EnforcementClient(resources, status=status))
    assert result["state"] == plan.UNKNOWN and reason in result["reason"] and result["policies"] == []
    assert plan.enforcement_summary(result).startswith("admission policies: unknown (")


def test_a_value_from_without_a_gpu_is_refused_by_the_error_policy_and_warned_beside_one():
    """KGPU104 (error policy, Deny by default) and KGPU103 (warnings policy) split the containers with a
    device variable from valueFrom between them by whether the container holds a GPU: none falls between."""
    by_name = objects(enforcement="deny", mutating=True)
    errors = by_name[f"ValidatingAdmissionPolicy {policy.POLICY_NAME}"]["spec"]
    warnings = by_name[f"ValidatingAdmissionPolicy {policy.WARNINGS_POLICY_NAME}"]["spec"]
    assert "KGPU104" in {v["message"].split()[0] for v in errors["validations"]}
    assert "KGPU103" in {v["message"].split()[0] for v in warnings["validations"]}
    assert by_name[f"ValidatingAdmissionPolicyBinding {policy.POLICY_NAME}"]["spec"]["validationActions"] == [
        "Deny",
        "Audit",
    ]
    without, beside = RULES["KGPU104"].admission.findings, RULES["KGPU103"].admission.findings
    assert without.startswith("variables.deviceEnv.filter(e, !e.gpu && e.unknown.size() > 0)")
    assert beside.startswith("variables.deviceEnv.filter(e, e.gpu && e.unknown.size() > 0)")
    # unknown: the variable's last env entry has valueFrom, whatever its source (ConfigMap, Secret, field).
    [device_env] = [e for n, e in cel.POD_VARIABLES if n == "deviceEnv"]
    unknown = device_env.split("'unknown': ")[1]
    assert "has(c.?env.orValue([]).filter(e, e.name == v)[" in unknown and ".valueFrom)" in unknown
    for ref in ("configMapKeyRef", "secretKeyRef", "fieldRef", "resourceFieldRef"):
        assert ref not in unknown
    # The mutating policy leaves such a container to the validating policies, which run after it.
    [left_alone] = [e for n, e in cel.MUTATING_VARIABLES if n == "leftAlone"]
    assert "c.?env.orValue([]).exists(e, e.name in [" in left_alone
    message = policy.message_expression(RULES["KGPU104"])
    assert "set NVIDIA_VISIBLE_DEVICES=void as a literal value" in message
    assert "\n" not in message
