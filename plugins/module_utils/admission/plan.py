# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure decisions of the admission module: which APIs it needs, whether the policies are in force,
and what the API server's type checking warns about. What an apply would change is write/owned.py's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping

# kind: resource, all cluster-scoped in the group's v1
RESOURCES = {
    "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
    "MutatingAdmissionPolicy": "mutatingadmissionpolicies",
    "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings",
}
VALIDATING_RESOURCES = ("validatingadmissionpolicies", "validatingadmissionpolicybindings")
MUTATING_RESOURCES = ("mutatingadmissionpolicies", "mutatingadmissionpolicybindings")


def missing_apis(served: list[str], mutating: bool) -> list[str]:
    wanted = VALIDATING_RESOURCES + (MUTATING_RESOURCES if mutating else ())
    return [r for r in wanted if r not in served]


def type_checking_warnings(policy: Mapping[str, Any]) -> list[str]:
    """The API server's type-checking warnings of a ValidatingAdmissionPolicy, one line each."""
    checking = as_mapping(as_mapping(policy.get("status")).get("typeChecking"))
    return [
        f"{as_mapping(w).get('fieldRef')}: {as_mapping(w).get('warning')}"
        for w in as_list(checking.get("expressionWarnings"))
    ]


def policy_in_force(policy: Mapping[str, Any] | None, binding: Mapping[str, Any] | None) -> list[str]:
    """The validation actions a policy is enforced with: empty when it or its binding is missing."""
    if policy is None or binding is None:
        return []
    return [str(a) for a in as_list(as_mapping(binding.get("spec")).get("validationActions"))]


def type_checked(policy: Mapping[str, Any]) -> bool:
    """Whether the API server has type-checked the policy's current generation."""
    metadata, status = as_mapping(policy.get("metadata")), as_mapping(policy.get("status"))
    return status.get("observedGeneration") == metadata.get("generation") and "typeChecking" in status


UNKNOWN = "unknown"


def enforcement_status(live: Mapping[str, tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]]) -> dict[str, Any]:
    """Which of the collection's validating policies are in force, from each policy's (policy,
    binding) as read: both must exist; Deny among the actions means it refuses."""
    policies = []
    for name, (policy, binding) in live.items():
        actions = policy_in_force(policy, binding)
        policies.append(
            {
                "name": name,
                "policy": policy is not None,
                "binding": binding is not None,
                "in_force": bool(actions),
                "validation_actions": actions,
                "deny": "Deny" in actions,
            }
        )
    return {"state": "read", "reason": None, "policies": policies}


def enforcement_unknown(reason: str) -> dict[str, Any]:
    """What is said when the policies cannot be read: never a failure of the audit."""
    return {"state": UNKNOWN, "reason": reason, "policies": []}


def enforcement_summary(status: Mapping[str, Any]) -> str:
    """One line for notes and reports."""
    if status.get("state") == UNKNOWN:
        return f"admission policies: unknown ({status.get('reason')})"
    parts = []
    for entry in as_list(status.get("policies")):
        entry = as_mapping(entry)
        if entry.get("in_force"):
            parts.append(f"{entry.get('name')} in force ({', '.join(entry.get('validation_actions') or [])})")
        else:
            missing = [what for what in ("policy", "binding") if not entry.get(what)]
            parts.append(f"{entry.get('name')} not in force (no {' and no '.join(missing)})")
    return "admission policies: " + "; ".join(parts)
