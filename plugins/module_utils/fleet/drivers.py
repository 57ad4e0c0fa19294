# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The driver view of the fleet facts: per GPU node where its driver stands (gpu/driver_upgrade.py),
from the node and pod lists the facts read anyway; with ``objects``, one list more each of
DaemonSets and NVIDIADrivers (where served) for the driver pod's template revision and the
NVIDIADriver that manages the node. The problems: an upgrade stuck past a set time, an upgrade that
failed, driver versions mixed within one pool (the GPU model), a driver pod on an old template."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import driver as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import fleet_problem, where_of
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_upgrade import (
    DRIVER_APP_LABEL,
    DRIVER_COMPONENT_LABEL,
    DRIVER_VERSION_LABELS,
    TERMINAL_STATES,
    UPGRADE_ANNOTATIONS,
    UPGRADE_FAILED,
    UPGRADE_STATE_LABEL,
    DriverView,
    driver_view,
    is_driver_daemonset,
    selector_keys,
    trimmed_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping, string_map

DEFAULT_STUCK_AFTER = 3600
NVIDIA_DRIVERS_PATH = api_path("nvidia.com/v1alpha1", "nvidiadrivers")
DAEMONSETS_PATH = api_path("apps/v1", "daemonsets")
_NODE_LABELS = frozenset((UPGRADE_STATE_LABEL, *DRIVER_VERSION_LABELS))


@dataclass
class DriverRead:
    """What the fleet read keeps for the driver view: nodes cut down to the driver's labels and the
    upgrade annotations (only those that carry one), the driver pods, and with ``objects`` the
    DaemonSets and NVIDIADrivers."""

    objects: bool = False
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    nvidia_drivers: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _keys: frozenset[str] = _NODE_LABELS

    def read_nvidia_drivers(self, client: KubeClient, page_size: int) -> None:
        """The NVIDIADrivers, read before the nodes so that the node labels they select on are kept."""
        if not self.objects:
            return
        try:
            self.nvidia_drivers = [_slim(d) for d in client.list_items(NVIDIA_DRIVERS_PATH, page_size=page_size)]
        except ClusterError as exc:
            if exc.status not in (403, 404):
                raise
            verb = "does not serve" if exc.status == 404 else "may not list"
            self.notes.append(f"the driver view: this cluster {verb} nvidia.com/v1alpha1 nvidiadrivers")
        self._keys = _NODE_LABELS | selector_keys(self.nvidia_drivers)

    def read_daemonsets(self, client: KubeClient, page_size: int) -> None:
        if self.objects:
            items = client.list_items(DAEMONSETS_PATH, page_size=page_size)
            self.daemonsets = [_slim(d) for d in items if is_driver_daemonset(_labels(d))]

    def nodes_seen(self, items: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The node items, passed on; those with a driver label or an upgrade annotation kept, cut down."""
        for item in items:
            metadata = as_mapping(item.get("metadata"))
            labels, annotations = _labels(item), string_map(metadata.get("annotations"))
            if any(k in labels for k in self._keys) or any(k in annotations for k in UPGRADE_ANNOTATIONS):
                self.nodes[metadata.get("name")] = trimmed_node(item, self._keys)
            yield item

    def pods_seen(self, items: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The pod items, passed on; the driver pods kept, cut down to what the view reads."""
        for item in items:
            labels = as_mapping(as_mapping(item.get("metadata")).get("labels"))
            if labels.get(DRIVER_APP_LABEL[0]) == DRIVER_APP_LABEL[1] or (
                labels.get(DRIVER_COMPONENT_LABEL[0]) == DRIVER_COMPONENT_LABEL[1]
            ):
                self.pods.append(_driver_pod(item))
            yield item


def _labels(item: Mapping[str, Any]) -> dict[str, str]:
    return string_map(as_mapping(item.get("metadata")).get("labels"))


def _slim(item: Mapping[str, Any]) -> dict[str, Any]:
    metadata = as_mapping(item.get("metadata"))
    kept = {k: metadata[k] for k in ("name", "namespace", "labels", "annotations", "ownerReferences") if k in metadata}
    return {"metadata": kept, "spec": {k: v for k, v in as_mapping(item.get("spec")).items() if k != "template"}}


def _driver_pod(item: Mapping[str, Any]) -> dict[str, Any]:
    spec = as_mapping(item.get("spec"))
    containers = [{"image": as_mapping(c).get("image")} for c in as_list(spec.get("containers"))]
    return {"metadata": _slim(item)["metadata"], "spec": {"nodeName": spec.get("nodeName"), "containers": containers}}


def _problem(kind: str, **fields: Any) -> dict[str, Any]:
    return fleet_problem(KINDS.finding(Hit(kind, fields)))


def _on(node: str | None, problem: Mapping[str, Any], **where: Any) -> dict[str, Any]:
    """A problem of the fleet's list: its node first (None for the cluster), and in its ``where``."""
    return {"node": node, **problem, "where": where_of({**problem["where"], "node": node, **where})}


def _duration(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def node_driver_problems(view: DriverView, stuck_after: int) -> list[dict[str, Any]]:
    """The problems of one node's driver view, as the node's ``problems`` hold them."""
    problems = []
    state = view.upgrade_state
    if state == UPGRADE_FAILED:
        problems.append(_problem(kinds.UPGRADE_FAILED))
    elif state and state not in TERMINAL_STATES and view.state_since is not None and view.state_since > stuck_after:
        since, limit = _duration(view.state_since), _duration(stuck_after)
        problems.append(_problem(kinds.UPGRADE_STUCK, state=state, since=since, limit=limit))
    if view.pod_revision_current is False:
        problems.append(_problem(kinds.POD_NOT_CURRENT, pod=view.pod, daemonset=view.daemonset))
    return problems


def mixed_versions(views: Mapping[str, DriverView], pools: Mapping[str, str]) -> list[dict[str, Any]]:
    """One problem per pool (node name -> pool) whose nodes run more than one known driver version."""
    by_pool: dict[str, Counter[str]] = defaultdict(Counter)
    for name, view in views.items():
        if view.version:
            by_pool[pools.get(name) or "unknown"][view.version] += 1
    problems = []
    for pool, versions in sorted(by_pool.items()):
        if len(versions) > 1:
            text = ", ".join(f"{v} on {n} node(s)" for v, n in sorted(versions.items()))
            problems.append(_on(None, _problem(kinds.VERSIONS_MIXED, pool=pool, versions=text), pool=pool))
    return problems


def add_driver_view(facts: dict[str, Any], read: DriverRead, now: float, stuck_after: int) -> None:
    """Each GPU node of the facts gets its ``driver``, and its problems; the fleet gets ``drivers`` (nodes per
    version and per upgrade state) and the problems, pools mixed included; the read's notes join the facts'."""
    views = {}
    pods_by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in read.pods:
        pods_by_node[pod["spec"].get("nodeName")].append(pod)
    for node in facts["nodes"]:
        trimmed = read.nodes.get(node["name"]) or {"metadata": {"name": node["name"]}}
        view = driver_view(trimmed, pods_by_node.get(node["name"], ()), read.daemonsets, read.nvidia_drivers, now)
        views[node["name"]] = view
        node["driver"] = view.as_dict()
        found = node_driver_problems(view, stuck_after)
        node["problems"] += found
        facts["problems"] += [_on(node["name"], p) for p in found]
    facts["problems"] += mixed_versions(views, {n["name"]: n["model"] for n in facts["nodes"]})
    facts["drivers"] = {
        "versions": dict(sorted(Counter(v.version or "unknown" for v in views.values()).items())),
        "upgrade_states": dict(sorted(Counter(v.upgrade_state or "none" for v in views.values()).items())),
        "managed_by": dict(sorted(Counter(v.managed_by for v in views.values()).items())),
        "pods_not_current": sorted(v.node for v in views.values() if v.pod_revision_current is False),
        "objects_read": read.objects,
        "stuck_after": stuck_after,
    }
    facts["notes"] += read.notes
