# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Walk Kubernetes objects to the pod specs they carry, with the JSON path of each.

The built-in kinds whose pod template the API server validates are walked by their template
keys; the custom resources of ML platforms by the table in `workload_kinds.py`; the
ResourceClaims and ResourceClaimTemplates of Dynamic Resource Allocation are checked on their
own. Any other object is searched by shape for embedded pod specs (a `containers` list of
mappings with an `image`), bounded; each one found is checked and marked as found by shape.
An object with none is reported as not checked, with the reason, so that nothing passes
silently.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_mapping, as_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.template_views import (
    dynamo_pod,
    node_with_resources,
    trainer_fields,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workload_kinds import (
    ARGO_TEMPLATE,
    CONTAINER_FIELDS,
    DYNAMO_COMPONENT,
    EACH_ITEM,
    EACH_VALUE,
    POD_SPEC,
    POD_SPEC_BESIDE_METADATA,
    WORKLOAD_KIND_BY_NAME,
    TemplatePath,
    WorkloadKind,
)

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

_NOT_BUILT_IN = ("not a built-in kind",)  # a sentinel: None in _TEMPLATE_KEYS means a Pod
# Groups that served the same kinds in older releases.
_GROUP_ALIASES = {"extensions": "apps"}
_KEYS_BY_KIND = {kind: keys for (_group, kind), keys in _TEMPLATE_KEYS.items()}
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
# An Argo template's container lists; `containerSet.containers` is nested (a dotted name).
ARGO_CONTAINER_LISTS = ("initContainers", "containerSet.containers", "sidecars")
ARGO_SINGLE_CONTAINERS = ("container", "script")

# Bounds for searching an unknown object for an embedded pod spec: the document may be hostile.
_SEARCH_MAX_NODES = 20_000
_SEARCH_MAX_DEPTH = 40


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
    single_containers: tuple[str, ...] = ()  # keys of `spec` that hold one container each (Argo, KServe)
    by_shape: bool = False  # found by the shape search in an object of a kind the walker does not know

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
        keys = _TEMPLATE_KEYS.get((api_group(ref.api_version), ref.kind), _NOT_BUILT_IN)
        if keys is not _NOT_BUILT_IN:  # the fast path: built-in kinds pay for nothing else
            site = built_in_site(obj, ref, keys, prefix)
            if isinstance(site, PodSpecSite):
                sites.append(site)
            else:
                skipped.append(site)
            continue
        found, not_found = object_sites(obj, ref, prefix)
        sites += found
        skipped += not_found
    return sites, skipped


def object_sites(
    obj: Mapping[str, Any], ref: ObjectRef, prefix: str = ""
) -> tuple[list[PodSpecSite], list[NotChecked]]:
    """The pod specs of one object, by kind (built-in, claim, table of custom resources) or by shape."""
    group = api_group(ref.api_version)
    key = (group, ref.kind)
    if key in _TEMPLATE_KEYS:  # the fast path: built-in kinds pay for nothing else
        return _one(built_in_site(obj, ref, _TEMPLATE_KEYS[key], prefix))
    if key in _CLAIM_SPEC_KEYS:
        return _one(claim_site(obj, ref, _CLAIM_SPEC_KEYS[key], prefix))
    if not ref.api_version and ref.kind in _KEYS_BY_KIND:
        return _one(built_in_site(obj, ref, _KEYS_BY_KIND[ref.kind], prefix))  # a snippet: judged by its kind
    if not ref.kind:
        return [], [NotChecked(ref, "no kind: not a Kubernetes object", prefix)]
    known = WORKLOAD_KIND_BY_NAME.get(key)
    if known is not None:
        return custom_resource_sites(obj, ref, known, prefix)
    sites = shape_sites(obj, ref, prefix)
    return (sites, []) if sites else ([], [_not_walked(obj, ref, group, prefix)])


def follow(node: Any, steps: tuple[str, ...], path: str) -> list[tuple[Any, str]]:
    """The values at the end of a template path, with their paths, fanning out over maps and lists."""
    frontier: list[tuple[Any, str]] = [(node, path)]
    for step in steps:
        reached: list[tuple[Any, str]] = []
        for value, where in frontier:
            if step == EACH_VALUE and isinstance(value, dict):
                reached += [(v, member_path(where, k)) for k, v in value.items() if isinstance(k, str)]
            elif step == EACH_ITEM and isinstance(value, list):
                reached += [(v, f"{where}[{index}]") for index, v in enumerate(value)]
            elif isinstance(value, dict) and step in value:
                reached.append((value[step], join_path(where, step)))
        frontier = reached
    return frontier


def member_path(base: str, key: str) -> str:
    """A map key as a path step: dotted when it is a plain name, bracketed otherwise."""
    return join_path(base, key) if key.isidentifier() else key_path(base, key)


def custom_resource_sites(
    obj: Mapping[str, Any], ref: ObjectRef, known: WorkloadKind, prefix: str
) -> tuple[list[PodSpecSite], list[NotChecked]]:
    object_metadata = as_mapping(obj.get("metadata"))
    sites: list[PodSpecSite] = []
    skipped: list[NotChecked] = []
    runtime_only: list[NotChecked] = []  # a TrainJob without trainer fields: said only when nothing else is checked
    for template in known.templates:
        given = follow(obj, template.inherited, prefix) if template.inherited else []
        inherited = given[0][0] if given else None
        for value, path in reached(obj, template, prefix):
            site: PodSpecSite | NotChecked
            if template.form == DYNAMO_COMPONENT and isinstance(value, dict):
                site = dynamo_component_site(value, path, ref, object_metadata, prefix, inherited)
            else:
                site = template_site(value, path, template, ref, object_metadata, prefix)
            if isinstance(site, PodSpecSite):
                sites.append(with_inherited(site, template, inherited))
            elif template.form == CONTAINER_FIELDS and isinstance(value, dict):
                runtime_only.append(site)
            else:
                skipped.append(site)
    if not sites:
        skipped = runtime_only + skipped
    if not sites and not skipped:
        where = " or ".join(t.text() for t in known.templates)
        skipped.append(NotChecked(ref, f"{ref.kind} ({known.group}) has no pod template at {where}", prefix))
    return sites, skipped


def reached(obj: Mapping[str, Any], template: TemplatePath, prefix: str) -> list[tuple[Any, str]]:
    """The values at a template path; for a pod spec beside its metadata, the mapping that holds both."""
    if template.form != POD_SPEC_BESIDE_METADATA:
        return follow(obj, template.steps, prefix)
    key = template.steps[-1]
    return [(v, p) for v, p in follow(obj, template.steps[:-1], prefix) if isinstance(v, dict) and key in v]


def with_inherited(site: PodSpecSite, template: TemplatePath, inherited: Any) -> PodSpecSite:
    """A TrainJob's patch of the runtime's `node` container with the trainer's `resourcesPerNode`."""
    if template.form == DYNAMO_COMPONENT or not isinstance(inherited, dict):
        return site
    return replace(site, spec=node_with_resources(site.spec, inherited))


def template_site(
    value: Any, path: str, template: TemplatePath, ref: ObjectRef, object_metadata: Mapping[str, Any], prefix: str
) -> PodSpecSite | NotChecked:
    """One pod template of a custom resource, in the form its table row names."""
    if not isinstance(value, dict):
        return NotChecked(ref, f"{ref.kind} has no {template.form} mapping at {path}", path)
    if template.form == ARGO_TEMPLATE:
        return PodSpecSite(
            ref,
            value,
            path,
            as_mapping(value.get("metadata")),
            object_metadata,
            join_path(path, "metadata"),
            prefix,
            ARGO_CONTAINER_LISTS,
            single_containers=ARGO_SINGLE_CONTAINERS,
        )
    if template.form == POD_SPEC_BESIDE_METADATA:
        key = template.steps[-1]
        spec_path = join_path(path, key)
        if not isinstance(value.get(key), dict):
            return NotChecked(ref, f"{ref.kind} has no pod spec mapping at {spec_path}", spec_path)
        return PodSpecSite(ref, value[key], spec_path, value, object_metadata, path, prefix)
    if template.form == POD_SPEC:
        # KServe: the component's own `annotations` and `labels` reach its pods.
        return PodSpecSite(
            ref, value, path, value, object_metadata, path, prefix, single_containers=template.containers
        )
    if template.form == CONTAINER_FIELDS:
        if not any(isinstance(value.get(key), dict) for key in template.containers):
            fields = " or ".join(join_path(path, key) for key in template.containers)
            return NotChecked(
                ref, f"{ref.kind} sets no {fields}: its pods are those of the runtime it names, checked there", path
            )
        return PodSpecSite(
            ref,
            trainer_fields(value, template.containers),
            path,
            {},
            object_metadata,
            join_path(prefix, "metadata"),
            prefix,
            (),
            pod_level=False,
            single_containers=template.containers,
        )
    return pod_template_site(value, path, ref, object_metadata, prefix)


def dynamo_component_site(
    component: Mapping[str, Any],
    path: str,
    ref: ObjectRef,
    object_metadata: Mapping[str, Any],
    prefix: str,
    graph_env: Any,
) -> PodSpecSite:
    """One Dynamo component as its pods: `extraPodSpec` with the main container the operator builds.

    Findings on the env of `envs` or on `resources` name the main container's fields in the path.
    """
    pod_spec, metadata = dynamo_pod(component, graph_env)
    spec_path = join_path(path, "extraPodSpec")
    return PodSpecSite(
        ref,
        pod_spec,
        spec_path,
        metadata,
        object_metadata,
        join_path(path, "extraPodMetadata"),
        prefix,
        single_containers=("mainContainer",),
    )


def shape_sites(obj: Mapping[str, Any], ref: ObjectRef, prefix: str) -> list[PodSpecSite]:
    """Every embedded mapping shaped like a pod spec, as a site marked `by_shape`."""
    object_metadata = as_mapping(obj.get("metadata"))
    sites = []
    for spec, path, parent in find_pod_spec_shapes(obj):
        full = join_path(prefix, path)
        template = path == "spec" or path.endswith(".spec")
        pod_metadata: Any = parent.get("metadata") if parent is not None and template else None
        if isinstance(pod_metadata, dict):
            metadata_path = join_path(prefix, path[: -len("spec")] + "metadata")
        else:
            pod_metadata, metadata_path = {}, join_path(full, "metadata")
        sites.append(PodSpecSite(ref, spec, full, pod_metadata, object_metadata, metadata_path, prefix, by_shape=True))
    return sites


def _one(site: PodSpecSite | NotChecked) -> tuple[list[PodSpecSite], list[NotChecked]]:
    return ([site], []) if isinstance(site, PodSpecSite) else ([], [site])


def built_in_site(
    obj: Mapping[str, Any], ref: ObjectRef, keys: tuple[str, ...] | None, prefix: str = ""
) -> PodSpecSite | NotChecked:
    """The pod spec of a built-in kind, at its template keys (None: the object is a Pod)."""
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
    return pod_template_site(template, path, ref, object_metadata, prefix)


def pod_template_site(
    template: Any, path: str, ref: ObjectRef, object_metadata: Mapping[str, Any], prefix: str
) -> PodSpecSite | NotChecked:
    """The spec of a PodTemplateSpec at `path`; its own metadata is what reaches the pods."""
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
            f"{ref.kind}, and nothing in it is shaped like a pod spec (containers with an image)"
        )
        embedded = find_embedded_pod_spec(obj)
        return NotChecked(ref, reason, join_path(prefix, embedded) if embedded else prefix)
    embedded = find_embedded_pod_spec(obj)
    if embedded is not None:
        return NotChecked(
            ref,
            f"{ref.kind} ({ref.api_version or 'no apiVersion'}) has containers at {embedded}, none with an "
            "image, so nothing there is known to run as a pod (live mode checks the pods its controller creates)",
            join_path(prefix, embedded),
        )
    return NotChecked(ref, f"{ref.kind} carries no pod spec", prefix)


def _nested(node: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


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


def looks_like_pod_spec(node: Mapping[str, Any]) -> bool:
    """A `containers` list of mappings, at least one of them with an `image`."""
    containers = node.get("containers")
    return (
        isinstance(containers, list)
        and bool(containers)
        and all(isinstance(c, dict) for c in containers)
        and any("image" in c for c in containers)
    )


def find_pod_spec_shapes(obj: Any) -> list[tuple[dict[str, Any], str, dict[str, Any] | None]]:
    """Every mapping below the root shaped like a pod spec, with its path and parent mapping, breadth-first.

    The object's own `metadata` and `status` are not searched, nor the inside of a pod spec found.
    Bounded in nodes and depth, and safe for shared or cyclic structures that YAML aliases build.
    """
    found: list[tuple[dict[str, Any], str, dict[str, Any] | None]] = []
    seen: set[int] = set()
    queue: list[tuple[Any, str, int, dict[str, Any] | None]] = [(obj, "", 0, None)]
    head = 0
    while head < len(queue) and head < _SEARCH_MAX_NODES:
        node, path, depth, parent = queue[head]
        head += 1
        if id(node) in seen or depth > _SEARCH_MAX_DEPTH:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            if path and looks_like_pod_spec(node):
                found.append((node, path, parent))
                continue
            for key, value in node.items():
                if (
                    isinstance(value, (dict, list))
                    and isinstance(key, str)
                    and (path or key not in ("metadata", "status"))
                ):
                    queue.append((value, member_path(path, key) if path else key, depth + 1, node))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                if isinstance(value, (dict, list)):
                    queue.append((value, f"{path}[{index}]", depth + 1, None))
    return found


def iter_containers(site: PodSpecSite) -> Iterator[ContainerSite]:
    if site.single_containers:
        for key in site.single_containers:
            container = site.spec.get(key)
            if isinstance(container, dict):
                yield ContainerSite(container, as_text(container.get("name")) or key, key, join_path(site.path, key))
    for list_name in site.container_lists:
        containers = site.spec.get(list_name) if "." not in list_name else _nested(site.spec, list_name)
        if not isinstance(containers, list):
            continue
        base = join_path(site.path, list_name)
        for index, container in enumerate(containers):
            if isinstance(container, dict):
                yield ContainerSite(
                    container, as_text(container.get("name")) or f"{list_name}[{index}]", list_name, f"{base}[{index}]"
                )
