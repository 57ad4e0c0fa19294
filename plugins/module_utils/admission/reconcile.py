# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission objects brought to the cluster: each applied with server-side apply only where a
dry run says it would change, the stale ones (the mutating policy switched off) removed, and what
the API server then enforces read back; or every object removed, bindings first. In check mode
nothing is written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission import plan, policy, reads
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient


@dataclass
class Changes:
    """What a run changed (or would change in check mode), with a diff per object, and the objects
    as the cluster holds them afterwards by (kind, name)."""

    keys: list[str] = field(default_factory=list)
    diffs: list[dict[str, Any]] = field(default_factory=list)
    applied: dict[tuple[str, str], Any] = field(default_factory=dict)

    def add(self, key: str, before: Any, after: Any) -> None:
        self.keys.append(key)
        self.diffs.append({"before_header": key, "after_header": key, "before": before, "after": after})


def apply_changed(client: KubeClient, objects: list[dict[str, Any]], check_mode: bool, changes: Changes) -> None:
    for obj in objects:
        live = reads.read_object(client, obj)
        wanted = reads.apply_object(client, obj, dry_run=True)
        before, after = plan.comparable(live), plan.comparable(wanted)
        if before != after:
            changes.add(policy.object_key(obj), before or {}, after)
            if not check_mode:
                wanted = reads.apply_object(client, obj, dry_run=False)
        changes.applied[obj["kind"], obj["metadata"]["name"]] = wanted if before != after else live


def remove_stale(client: KubeClient, stale: list[dict[str, Any]], check_mode: bool, changes: Changes) -> None:
    for obj in stale:
        if reads.read_object(client, obj) is not None:
            changes.add(policy.object_key(obj), {"exists": True}, {})
            if not check_mode:
                reads.delete_object(client, obj)


def enforced(
    client: KubeClient, objects: list[dict[str, Any]], check_mode: bool, applied: dict[tuple[str, str], Any]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per validating policy, what the API server enforces and its type-checking warnings."""
    in_force, checking = {}, {}
    for obj in objects:
        if obj["kind"] != "ValidatingAdmissionPolicy":
            continue
        name = obj["metadata"]["name"]
        live_policy = applied.get(("ValidatingAdmissionPolicy", name))
        if not check_mode and live_policy is not None:
            live_policy = reads.wait_type_checked(client, obj, plan.type_checked) or live_policy
        in_force[name] = plan.policy_in_force(live_policy, applied.get(("ValidatingAdmissionPolicyBinding", name)))
        checking[name] = plan.type_checking_warnings(live_policy or {})
    return in_force, checking


def present(
    client: KubeClient, objects: list[dict[str, Any]], stale: list[dict[str, Any]], check_mode: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The result of state=present (changed, changes, in_force, type_checking) and the diffs."""
    changes = Changes()
    apply_changed(client, objects, check_mode, changes)
    remove_stale(client, stale, check_mode, changes)
    in_force, checking = enforced(client, objects, check_mode, changes.applied)
    result = {"changed": bool(changes.keys), "changes": changes.keys, "in_force": in_force, "type_checking": checking}
    return result, changes.diffs


def absent(client: KubeClient, objects: list[dict[str, Any]], check_mode: bool) -> dict[str, Any]:
    changes = []
    # Bindings before their policies, so that no binding is left naming a missing policy.
    for obj in reversed(objects):
        if reads.read_object(client, obj) is not None:
            changes.append(policy.object_key(obj))
            if not check_mode:
                reads.delete_object(client, obj)
    return {"changed": bool(changes), "changes": changes}
