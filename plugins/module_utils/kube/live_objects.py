# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the live audit lists, and which of the listed objects it checks: each pod template once,
at the top-level object that owns it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping, as_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import FINISHED_POD_PHASES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workload_kinds import WORKLOAD_KINDS

# Live mode: what to list, in an order where owners come before what they own.
LIVE_WORKLOAD_PATHS = (
    ("apps/v1", "Deployment", "deployments"),
    ("apps/v1", "StatefulSet", "statefulsets"),
    ("apps/v1", "DaemonSet", "daemonsets"),
    ("apps/v1", "ReplicaSet", "replicasets"),
    ("batch/v1", "CronJob", "cronjobs"),
    ("batch/v1", "Job", "jobs"),
    ("v1", "ReplicationController", "replicationcontrollers"),
    ("v1", "PodTemplate", "podtemplates"),
)

# Live mode, where the cluster serves them: DRA claims (checked on their own) and the custom
# resources of the table, each at the first of its versions that the cluster serves.
LIVE_CLAIM_KINDS = (
    ("resource.k8s.io", "ResourceClaim", "resourceclaims", ("v1",)),
    ("resource.k8s.io", "ResourceClaimTemplate", "resourceclaimtemplates", ("v1",)),
)


@dataclass(frozen=True)
class LiveList:
    """A collection the live audit lists once discovery says the cluster serves its group-version."""

    api_version: str
    kind: str
    resource: str
    namespaced: bool = True


def served_group_versions(discovery: Any) -> set[str]:
    """The group-versions an APIGroupList (the answer to GET /apis) names."""
    return {
        as_text(as_mapping(version).get("groupVersion"))
        for group in as_list(as_mapping(discovery).get("groups"))
        for version in as_list(as_mapping(group).get("versions"))
    } - {""}


def live_custom_lists(served: set[str]) -> list[LiveList]:
    """The claim kinds and custom workload kinds to list, at the first version the cluster serves."""
    wanted = [(group, kind, resource, versions, True) for group, kind, resource, versions in LIVE_CLAIM_KINDS]
    wanted += [(k.group, k.kind, k.resource, k.versions, k.namespaced) for k in WORKLOAD_KINDS]
    chosen = []
    for group, kind, resource, versions, namespaced in wanted:
        version = next((v for v in versions if f"{group}/{v}" in served), None)
        if version is not None:
            chosen.append(LiveList(f"{group}/{version}", kind, resource, namespaced))
    return chosen


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    for owner in as_list(as_mapping(obj.get("metadata")).get("ownerReferences")):
        if isinstance(owner, dict) and owner.get("controller") is True:
            return as_text(owner.get("uid")) or None
    return None


def object_uid(obj: Mapping[str, Any]) -> str:
    return as_text(as_mapping(obj.get("metadata")).get("uid"))


@dataclass(frozen=True)
class LiveSelection:
    """What the live audit checks, out of the listed workloads and pods."""

    workloads: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    ephemeral_only_pods: list[dict[str, Any]]
    skipped_workloads: int
    finished_pods: int


def select_live_objects(workloads: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> LiveSelection:
    """Check each pod template once: at the top-level workload, not again in what it controls.

    A ReplicaSet controlled by a listed Deployment, or a Job controlled by a listed CronJob, is
    covered by its owner's template. A pod controlled by a listed workload is covered too, except
    for its ephemeral containers, which never come from a template (`kubectl debug` adds them).
    Pods without a listed controller (bare pods, static pods, pods of custom resources) are
    checked in full. Finished pods (Succeeded, Failed) hold no GPU and are not checked.
    """
    workload_list = [w for w in workloads if isinstance(w, dict)]
    listed = {object_uid(w) for w in workload_list} - {""}
    top_level = [w for w in workload_list if controller_uid(w) not in listed]
    full: list[dict[str, Any]] = []
    ephemeral_only: list[dict[str, Any]] = []
    finished = 0
    for pod in pods:
        if not isinstance(pod, dict):
            continue
        if as_text(as_mapping(pod.get("status")).get("phase")) in FINISHED_POD_PHASES:
            finished += 1
        elif controller_uid(pod) in listed:
            if as_list(as_mapping(pod.get("spec")).get("ephemeralContainers")):
                ephemeral_only.append(pod)
        else:
            full.append(pod)
    return LiveSelection(top_level, full, ephemeral_only, len(workload_list) - len(top_level), finished)


def with_kind(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """List responses omit apiVersion and kind on their items; put them back."""
    if obj.get("kind") and obj.get("apiVersion"):
        return obj
    return {**obj, "apiVersion": api_version, "kind": kind}
