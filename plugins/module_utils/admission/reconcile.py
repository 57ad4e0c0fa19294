# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission objects brought to the cluster, as write/owned.py writes the collection's objects:
every object read first, the whole run refused when one of our names is someone else's, only the
objects that would change applied, the stale ones of ours (the mutating policy switched off)
removed, and what the API server then enforces read back; or every object of ours removed, bindings
first. What is this feature's: which objects, their order, and the wait for the type checking. In
check mode nothing is written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission import plan, reads
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write import owned
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun

VALIDATING_POLICY = "ValidatingAdmissionPolicy"
VALIDATING_BINDING = "ValidatingAdmissionPolicyBinding"


def enforced(
    client: KubeClient,
    objects: Sequence[Mapping[str, Any]],
    check_mode: bool,
    after: Mapping[str, Mapping[str, Any] | None],
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per validating policy, what the API server enforces and its type-checking warnings, from the
    objects as the cluster holds them after the run (`after`, by key)."""
    in_force, checking = {}, {}
    for obj in objects:
        if obj["kind"] != VALIDATING_POLICY:
            continue
        name = obj["metadata"]["name"]
        live_policy = after.get(owned.object_key(obj))
        if not check_mode and live_policy is not None:
            live_policy = reads.wait_type_checked(client, obj, plan.type_checked) or live_policy
        binding = after.get(owned.object_key(reads.stub(VALIDATING_BINDING, name)))
        in_force[name] = plan.policy_in_force(live_policy, binding)
        checking[name] = plan.type_checking_warnings(live_policy or {})
    return in_force, checking


def type_checking_warnings(checking: Mapping[str, list[str]]) -> list[str]:
    return [
        f"{VALIDATING_POLICY} {name}: type checking: {warning}"
        for name, warnings in checking.items()
        for warning in warnings
    ]


def present(
    client: KubeClient, objects: Sequence[Mapping[str, Any]], stale: Sequence[Mapping[str, Any]], check_mode: bool
) -> WriteRun:
    """state=present: the result (changes, in_force, type_checking) with a diff per object changed."""
    plans = owned.plan(client, reads.OWNER, objects, stale)
    after = owned.write(client, reads.OWNER, plans, check_mode)
    in_force, checking = enforced(client, objects, check_mode, after)
    changes = owned.changed(plans)
    result = {"changes": [p.key for p in changes], "in_force": in_force, "type_checking": checking}
    warnings = type_checking_warnings(checking) + owned.left_alone_warnings(plans)
    return WriteRun(result, bool(changes), [p.diff() for p in changes], warnings)


def absent(client: KubeClient, objects: Sequence[Mapping[str, Any]], check_mode: bool) -> WriteRun:
    """state=absent: every object of ours removed, bindings before their policies, so that no binding
    is left naming a missing policy; anyone else's left alone, and named."""
    return owned.remove(client, reads.OWNER, reversed(objects), check_mode)
