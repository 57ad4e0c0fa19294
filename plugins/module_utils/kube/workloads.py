# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Walk Kubernetes objects to the pod specs they carry, with the JSON path of each.

Only the built-in kinds whose pod template the API server validates are walked, and the
ResourceClaims and ResourceClaimTemplates of Dynamic Resource Allocation, whose device requests
are checked on their own. Every other object is reported as not checked, with the reason, so
that nothing passes silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping, as_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import FINISHED_POD_PHASES

# (API group, kind) -> keys from the object to its PodTemplateSpec (None: the object is a Pod).
_TEMPLATE_KEYS: dict[tuple[str, str], tuple[str, ...] | None] = {
    ("", "Pod"): None,
    ("", "PodTemplate"): ("template",),
    ("", "ReplicationController"): ("spec", "template"),
    ("apps", "Deployment"): ("spec", "template"),
    ("apps", "ReplicaSet"): ("spec", "template"),
    ("apps", "StatefulSet"): ("spec", "template"),
    ("apps", "DaemonSet"): ("spec", "template"),
    ("batch", "Job"): ("spec", "template"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template"),
}

# (API group, kind) -> keys from the object to its ResourceClaimSpec.
_CLAIM_SPEC_KEYS: dict[tuple[str, str], tuple[str, ...]] = {
    ("resource.k8s.io", "ResourceClaim"): ("spec",),
    ("resource.k8s.io", "ResourceClaimTemplate"): ("spec", "spec"),
}

# Groups that served the same kinds in older releases.
_GROUP_ALIASES = {"extensions": "apps"}
_KEYS_BY_KIND = {kind: keys for (_group, kind), keys in _TEMPLATE_KEYS.items()}
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")

# Bounds for searching an unknown object for an embedded pod spec: the document may be hostile.
_SEARCH_MAX_NODES = 20_000
_SEARCH_MAX_DEPTH = 40

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


@dataclass(frozen=True)
class ObjectRef:
    """Which object a finding is about, and where it came from."""

    kind: str
    api_version: str
    namespace: str
    name: str
    source: str | None = None
    document: int | None = None
    line: int | None = None


@dataclass(frozen=True)
class PodSpecSite:
    """One pod spec inside an object. `path` leads from the document root to the spec."""

    ref: ObjectRef
    spec: Mapping[str, Any]
    path: str
    pod_metadata: Mapping[str, Any]
    object_metadata: Mapping[str, Any]
    metadata_path: str  # of the pod metadata: where annotations that reach the pod live
    prefix: str = ""  # `items[3]` for an item of a List: the API server sees the item alone
    container_lists: tuple[str, ...] = CONTAINER_LISTS
    pod_level: bool = True  # False: only the listed containers are checked, not the pod's own fields
    claim_spec: Mapping[str, Any] | None = None  # the ResourceClaimSpec of a claim or claim template, at `path`

    @property
    def api_path(self) -> str:
        """The path as the API server reports it, without the List item prefix."""
        return self.path[len(self.prefix) + 1 :] if self.prefix else self.path


@dataclass(frozen=True)
class ContainerSite:
    container: Mapping[str, Any]
    name: str
    list_name: str
    path: str


@dataclass(frozen=True)
class NotChecked:
    ref: ObjectRef
    reason: str
    path: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.ref.kind,
            "api_version": self.ref.api_version,
            "namespace": self.ref.namespace,
            "name": self.ref.name,
            "source": self.ref.source,
            "document": self.ref.document,
            "path": self.path,
            "reason": self.reason,
        }


def join_path(base: str, key: str) -> str:
    return f"{base}.{key}" if base else key


def key_path(base: str, key: str) -> str:
    """A map key in bracket form, for keys such as `nvidia.com/gpu` that contain dots."""
    return f"{base}['{key}']"


def api_group(api_version: str) -> str:
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    return _GROUP_ALIASES.get(group, group)


def object_ref(
    obj: Mapping[str, Any], *, source: str | None = None, document: int | None = None, line: int | None = None
) -> ObjectRef:
    metadata = as_mapping(obj.get("metadata"))
    return ObjectRef(
        kind=as_text(obj.get("kind")),
        api_version=as_text(obj.get("apiVersion")),
        namespace=as_text(metadata.get("namespace")),
        name=as_text(metadata.get("name")) or as_text(metadata.get("generateName")),
        source=source,
        document=document,
        line=line,
    )


def walk_document(
    data: Any, *, source: str | None = None, document: int | None = None, line: int | None = None
) -> tuple[list[PodSpecSite], list[NotChecked]]:
    """All pod specs in one document (items of a List included), and what was not checked."""
    sites: list[PodSpecSite] = []
    skipped: list[NotChecked] = []
    pending: list[tuple[Any, str]] = [(data, "")]
    while pending:
        obj, prefix = pending.pop()
        if not isinstance(obj, dict):
            ref = ObjectRef("", "", "", "", source, document, line)
            skipped.append(NotChecked(ref, f"not a Kubernetes object: the document is a {type(obj).__name__}", prefix))
            continue
        ref = object_ref(obj, source=source, document=document, line=line)
        items = obj.get("items")
        if ref.kind == "List" or (ref.kind.endswith("List") and isinstance(items, list)):
            if not isinstance(items, list):
                skipped.append(NotChecked(ref, f"{ref.kind} has no items list", prefix))
                continue
            # Reversed so that items come out of the stack in document order.
            for index in range(len(items) - 1, -1, -1):
                pending.append((items[index], f"{join_path(prefix, 'items')}[{index}]"))
            continue
        site = pod_spec_site(obj, ref, prefix)
        if isinstance(site, PodSpecSite):
            sites.append(site)
        else:
            skipped.append(site)
    return sites, skipped


def pod_spec_site(obj: Mapping[str, Any], ref: ObjectRef, prefix: str = "") -> PodSpecSite | NotChecked:
    """The pod spec of one object, or why it is not checked."""
    if not ref.kind:
        return NotChecked(ref, "no kind: not a Kubernetes object", prefix)
    group = api_group(ref.api_version)
    if (group, ref.kind) in _CLAIM_SPEC_KEYS:
        return claim_site(obj, ref, _CLAIM_SPEC_KEYS[(group, ref.kind)], prefix)
    if (group, ref.kind) in _TEMPLATE_KEYS:
        keys = _TEMPLATE_KEYS[(group, ref.kind)]
    elif ref.kind in _KEYS_BY_KIND and not ref.api_version:
        keys = _KEYS_BY_KIND[ref.kind]  # a snippet without apiVersion: judged by its kind
    else:
        return _not_walked(obj, ref, group, prefix)
    object_metadata = as_mapping(obj.get("metadata"))
    if keys is None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return NotChecked(ref, "Pod has no spec mapping", join_path(prefix, "spec"))
        return PodSpecSite(
            ref,
            spec,
            join_path(prefix, "spec"),
            object_metadata,
            object_metadata,
            join_path(prefix, "metadata"),
            prefix,
        )
    template: Any = obj
    path = prefix
    for key in keys or ():
        template = template.get(key) if isinstance(template, dict) else None
        path = join_path(path, key)
    spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(spec, dict):
        return NotChecked(ref, f"{ref.kind} has no pod template spec mapping", join_path(path, "spec"))
    return PodSpecSite(
        ref,
        spec,
        join_path(path, "spec"),
        as_mapping(template.get("metadata")),
        object_metadata,
        join_path(path, "metadata"),
        prefix,
    )


def claim_site(obj: Mapping[str, Any], ref: ObjectRef, keys: tuple[str, ...], prefix: str) -> PodSpecSite | NotChecked:
    """A ResourceClaim or ResourceClaimTemplate: no containers, its claim spec checked on its own."""
    spec: Any = obj
    for key in keys:
        spec = spec.get(key) if isinstance(spec, dict) else None
    path = join_path(prefix, ".".join(keys))
    if not isinstance(spec, dict):
        return NotChecked(ref, f"{ref.kind} has no claim spec mapping", path)
    metadata = as_mapping(obj.get("metadata"))
    return PodSpecSite(
        ref, {}, path, metadata, metadata, join_path(prefix, "metadata"), prefix, (), pod_level=False, claim_spec=spec
    )


def _not_walked(obj: Mapping[str, Any], ref: ObjectRef, group: str, prefix: str) -> NotChecked:
    if ref.kind in _KEYS_BY_KIND:
        reason = (
            f"custom resource: kind {ref.kind} in group {group or 'core'} is not the built-in "
            f"{ref.kind}, so its pod specs are not validated"
        )
        embedded = find_embedded_pod_spec(obj)
        return NotChecked(ref, reason, join_path(prefix, embedded) if embedded else prefix)
    embedded = find_embedded_pod_spec(obj)
    if embedded is not None:
        return NotChecked(
            ref,
            f"{ref.kind} ({ref.api_version or 'no apiVersion'}) embeds a pod spec at {embedded}; "
            "pod specs inside custom resources are not validated until their controller "
            "creates the pods (live mode checks those pods)",
            join_path(prefix, embedded),
        )
    return NotChecked(ref, f"{ref.kind} carries no pod spec", prefix)


def find_embedded_pod_spec(obj: Any) -> str | None:
    """The path of the first mapping holding a `containers` list of mappings, searched breadth-first.

    Bounded in nodes and depth, and safe for shared or cyclic structures that YAML aliases build.
    """
    seen: set[int] = set()
    queue: list[tuple[Any, str, int]] = [(obj, "", 0)]
    head = 0
    while head < len(queue) and head < _SEARCH_MAX_NODES:
        node, path, depth = queue[head]
        head += 1
        if id(node) in seen or depth > _SEARCH_MAX_DEPTH:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            containers = node.get("containers")
            if path and isinstance(containers, list) and containers and all(isinstance(c, dict) for c in containers):
                return path
            for key, value in node.items():
                if isinstance(value, (dict, list)) and isinstance(key, str):
                    queue.append((value, join_path(path, key), depth + 1))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                if isinstance(value, (dict, list)):
                    queue.append((value, f"{path}[{index}]", depth + 1))
    return None


def iter_containers(site: PodSpecSite) -> Iterator[ContainerSite]:
    for list_name in site.container_lists:
        containers = site.spec.get(list_name)
        if not isinstance(containers, list):
            continue
        base = join_path(site.path, list_name)
        for index, container in enumerate(containers):
            if isinstance(container, dict):
                yield ContainerSite(
                    container, as_text(container.get("name")) or f"{list_name}[{index}]", list_name, f"{base}[{index}]"
                )


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
