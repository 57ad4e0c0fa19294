# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission objects generated from the validator's kinds in the registry: a ValidatingAdmissionPolicy for the
error rules and one for the warning rules that admission can decide, their bindings (the exempt
namespaces in their namespace selector), and the optional MutatingAdmissionPolicy that sets
NVIDIA_VISIBLE_DEVICES=void on containers that request no GPU. Pure: objects in, objects out.

The exemptions are in the bindings, not in a params ConfigMap: the API server stops watching a
built-in paramKind for good once no binding uses it for a moment (a removal and reinstall does
that), and from then on it judges by params as they were, or by none (kubernetes/kubernetes#130887)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.cel import (
    MUTATING_VARIABLES,
    POD,
    VARIABLES,
    admission_workload_kinds,
    cel_string,
    per_pod,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_VALIDATOR, Kind
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import BUILTIN_CATALOGUE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import GPU_SYSTEM_NAMESPACES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import VISIBLE_DEVICES, VOID
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.owned import marked

API_GROUP = "admissionregistration.k8s.io"
API_VERSION = f"{API_GROUP}/v1"
POLICY_NAME = "kubegpu-gpu-bypass"
WARNINGS_POLICY_NAME = "kubegpu-gpu-bypass-warnings"
VALIDATING_POLICY_NAMES = (POLICY_NAME, WARNINGS_POLICY_NAME)
MUTATING_POLICY_NAME = "kubegpu-gpu-void"
ENFORCEMENTS = ("warn", "deny")
# Deny and Warn cannot be on one binding; Audit goes with both.
VALIDATION_ACTIONS = {"warn": ["Warn", "Audit"], "deny": ["Deny", "Audit"]}

POD_CONTROLLERS = (
    ("apps", ("deployments", "statefulsets", "daemonsets", "replicasets")),
    ("batch", ("jobs", "cronjobs")),
)


# Namespaces that hold everyone's workloads, not only GPU system components: the catalogue names
# them as where a component is often found, but exempting them would exempt every pod there.
GENERIC_NAMESPACES = frozenset(("default", "monitoring"))


def default_exempt_namespaces() -> tuple[str, ...]:
    """The namespaces the GPU system components are deployed in (their catalogue, and the DRA
    drivers'): they set NVIDIA_VISIBLE_DEVICES=all without limits, privileged, by design. Generic
    namespaces are left out; a component deployed there is exempted by name (extra_exempt_namespaces)."""
    names = set(GPU_SYSTEM_NAMESPACES)
    for component in BUILTIN_CATALOGUE.components:
        names.update(component.namespaces)
    return tuple(sorted(names - GENERIC_NAMESPACES))


@dataclass(frozen=True)
class AdmissionSettings:
    enforcement: str = "warn"  # of the error rules
    warnings_enforcement: str = "warn"  # of the warning rules
    exempt_namespaces: tuple[str, ...] = ()
    extra_exempt_namespaces: tuple[str, ...] = ()
    mutating: bool = False


def admission_rules(severity: str, rules: Iterable[Kind] | None = None) -> list[Kind]:
    """The rules of one severity that admission decides (those with CEL findings)."""
    return [
        r
        for r in (KINDS.of_check(CHECK_VALIDATOR) if rules is None else rules)
        if r.admission is not None and r.admission.findings and r.severity == severity
    ]


def _variable_name(rule: Kind) -> str:
    return rule.id.lower()


def message_expression(rule: Kind) -> str:
    """One line naming the rule, what was found (each naming its container) and the remedy."""
    head = cel_string(f"{rule.id} {rule.name}: ")
    tail = cel_string(f". {rule.remedy}".replace("\n", " "))
    found = f"variables.{_variable_name(rule)}.filter(f, f.size() > 0).map(f, f.join('; ')).join('; ')"
    return f"{head} + {found} + {tail}"


def findings_expression(rule: Kind) -> str:
    """The rule's findings in each pod template of the object: a list of lists of lines."""
    if rule.admission is None:
        raise ValueError(f"{rule.id} carries no CEL: admission cannot decide it")
    return f"variables.pods.map({POD}, {per_pod(rule.admission.findings)})"


def passes_expression(rule: Kind) -> str:
    return f"variables.{_variable_name(rule)}.all(f, f.size() == 0)"


def _metadata(name: str) -> dict[str, Any]:
    return {"name": name}


def _resource_rules() -> list[dict[str, Any]]:
    rules = [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/ephemeralcontainers"]},
    ]
    rules += [
        {"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": list(kinds)}
        for group, kinds in POD_CONTROLLERS
    ]
    # A resource the cluster does not serve matches nothing: the policy stands without the CRD.
    for kind in admission_workload_kinds():
        rules.append(
            {
                "apiGroups": [kind.group],
                "apiVersions": list(kind.versions),
                "operations": ["CREATE", "UPDATE"],
                "resources": [kind.resource],
            }
        )
    return rules


def validating_policy(name: str, rules: list[Kind]) -> dict[str, Any]:
    variables = [{"name": n, "expression": e} for n, e in VARIABLES]
    variables += [{"name": _variable_name(r), "expression": findings_expression(r)} for r in rules]
    validations = [
        {
            "expression": passes_expression(r),
            "messageExpression": message_expression(r),
            "message": f"{r.id} {r.name}: {r.title}",
            "reason": "Forbidden",
        }
        for r in rules
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": _metadata(name),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _resource_rules()},
            "variables": variables,
            "validations": validations,
        },
    }


def _namespace_selector(settings: AdmissionSettings) -> dict[str, Any]:
    """Every namespace but the exempt ones, the default (or given) list and the extra."""
    names = sorted({*settings.exempt_namespaces, *settings.extra_exempt_namespaces})
    if not names:
        return {}
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": names}]}


def binding(policy: str, enforcement: str, settings: AdmissionSettings) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": _metadata(policy),
        "spec": {
            "policyName": policy,
            "validationActions": list(VALIDATION_ACTIONS[enforcement]),
            "matchResources": {"namespaceSelector": _namespace_selector(settings)},
        },
    }


def _void_entries(list_name: str) -> str:
    """Apply-configuration entries for one container list: the variable set to void (env merges by name)."""
    env = f"Object.spec.{list_name}.env{{name: {cel_string(VISIBLE_DEVICES)}, value: {cel_string(VOID)}}}"
    return (
        f"object.spec.?{list_name}.orValue([]).filter(c, !(c.name in variables.leftAlone))"
        f".map(c, Object.spec.{list_name}{{name: c.name, env: [{env}]}})"
    )


def mutating_policy(settings: AdmissionSettings) -> dict[str, Any]:
    has_init = "object.spec.?initContainers.orValue([]).exists(c, !(c.name in variables.leftAlone))"
    containers, init = _void_entries("containers"), _void_entries("initContainers")
    expression = (
        f"{has_init} ? Object{{spec: Object.spec{{containers: {containers}, initContainers: {init}}}}} : "
        f"Object{{spec: Object.spec{{containers: {containers}}}}}"
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingAdmissionPolicy",
        "metadata": _metadata(MUTATING_POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "IfNeeded",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                ]
            },
            "variables": [{"name": n, "expression": e} for n, e in MUTATING_VARIABLES],
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}],
        },
    }


def mutating_binding(settings: AdmissionSettings) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": _metadata(MUTATING_POLICY_NAME),
        "spec": {
            "policyName": MUTATING_POLICY_NAME,
            "matchResources": {"namespaceSelector": _namespace_selector(settings)},
        },
    }


def admission_objects(settings: AdmissionSettings) -> list[dict[str, Any]]:
    """Everything to apply, in order: each policy before its binding, each with the collection's mark
    (the managed-by label and the digest of its rendering)."""
    objects: list[dict[str, Any]] = []
    for name, severity, enforcement in (
        (POLICY_NAME, ERROR, settings.enforcement),
        (WARNINGS_POLICY_NAME, WARNING, settings.warnings_enforcement),
    ):
        objects += [validating_policy(name, admission_rules(severity)), binding(name, enforcement, settings)]
    if settings.mutating:
        objects += [mutating_policy(settings), mutating_binding(settings)]
    return [marked(obj) for obj in objects]
