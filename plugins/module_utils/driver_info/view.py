# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The driver view and the pre-flight of the nodes read: per node where its driver stands and,
for a target driver version, the pods that will block its upgrade; counted by version, state and reason."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_info.reads import (
    DriverObjects,
    driver_daemonsets,
    driver_pods,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_preflight import (
    REASONS,
    Blocker,
    gpu_daemonsets,
    prepare,
    upgrade_blockers,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_upgrade import driver_view


def _pods_by_node(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in pods:
        by_node[pod["spec"].get("nodeName")].append(pod)
    return by_node


def driver_report(objects: DriverObjects, target_driver: str | None, now: float) -> dict[str, Any]:
    """Per node (by name) its driver view and blockers; every blocker; counts; the read's notes."""
    drivers, daemonsets = driver_pods(objects), driver_daemonsets(objects)
    gpu_sets = gpu_daemonsets(objects.daemonsets)
    prepared = prepare(objects.budgets, objects.claims)
    by_node = _pods_by_node(objects.pods)
    drivers_by_node = _pods_by_node(drivers)
    nodes, blockers = [], []
    for node in sorted(objects.nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        view = driver_view(node, drivers_by_node.get(name, ()), daemonsets, objects.nvidia_drivers, now)
        found: tuple[Blocker, ...] = upgrade_blockers(
            name, by_node.get(name, ()), prepared, (), gpu_sets, target_driver
        )
        blockers += [b.as_dict() for b in found]
        nodes.append({"node": name, **view.as_dict(), "blockers": len(found), "ready_to_upgrade": not found})
    reasons = Counter(b["reason"] for b in blockers)
    counts = {
        "nodes": len(nodes),
        "nodes_blocked": sum(1 for n in nodes if n["blockers"]),
        "versions": dict(Counter(n["version"] or "unknown" for n in nodes)),
        "upgrade_states": dict(Counter(n["upgrade_state"] or "none" for n in nodes)),
        "pods_not_current": sum(1 for n in nodes if n["pod_revision_current"] is False),
        "blockers": {reason: reasons.get(reason, 0) for reason in REASONS},
    }
    return {
        "target_driver": target_driver,
        "nodes": nodes,
        "blockers": blockers,
        "counts": counts,
        "notes": list(objects.notes),
    }


def report_lines(result: dict[str, Any]) -> list[str]:
    """The result as readable lines: one per node, then one per blocker."""
    lines = []
    for node in result["nodes"]:
        state = node["upgrade_state"] or "no upgrade state"
        current = {True: "current", False: "NOT on the current template", None: "template unknown"}
        pod = f", driver pod {current[node['pod_revision_current']]}" if node["pod"] else ""
        resource = f" {node['driver_resource']}" if node["driver_resource"] else ""
        lines.append(
            f"{node['node']}: driver {node['version'] or 'unknown'} ({node['managed_by']}{resource}), "
            f"{state}{pod}, {node['blockers']} blocker(s)"
        )
    for b in result["blockers"]:
        lines.append(f"  {b['node']}: {b['namespace']}/{b['pod']}: {b['reason']}: {b['detail']}")
    return lines
