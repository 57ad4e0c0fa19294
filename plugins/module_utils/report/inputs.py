# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fleet report reads of each cluster's results (report/model.py), and nothing else: the
fleet facts, the device-plugin verdicts, the live audit and the placement view cut down to the fields
the model uses, so that a cluster's read returns a few kilobytes where the modules' full results are
megabytes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.model import COUNTS

NODE_FIELDS = (
    "name",
    "model",
    *COUNTS,
    "ready",
    "schedulable",
    "device_plugin_pod",
    "device_plugin_ready",
    "gpu_sources",
    "addresses",
    "provider_id",
    "zone",
    "region",
    "instance_type",
)
FLEET_PROBLEM_FIELDS = ("node", "kind", "problem", "reason", "remedy")
# Where each GPU node's driver stands (fleet/drivers.py).
DRIVER_FIELDS = ("version", "managed_by", "driver_resource", "upgrade_state", "state_since", "pod_revision_current")
HEALTH_PROBLEM_FIELDS = ("kind", "severity", "problem", "reason", "remedy")
PLUGIN_FINDING_FIELDS = ("node", "kind", "severity", "subject", "problem", "remedy")
AUDIT_FINDING_FIELDS = (
    "rule",
    "name",
    "severity",
    "kind",
    "namespace",
    "object_name",
    "container",
    "path",
    "message",
    "remedy",
)

# gpu_placement_info's `placement`: a pool's (and the fleet's) view, a pending pod, a finding of the view.
PLACEMENT_POOL_FIELDS = ("pool", "nodes", "gpus_free", "withdrawn", "largest", "fits", "stranded")
PENDING_FIELDS = ("pod", "gpus", "resource", "reason", "remedy", "message", "scheduler_said")
PLACEMENT_FINDING_FIELDS = ("kind", "severity", "pool", "message", "remedy")


def _fields(value: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    return {name: value[name] for name in names if name in value}


def _rows(values: Any, names: Iterable[str]) -> list[dict[str, Any]]:
    names = tuple(names)
    return [_fields(value, names) for value in values or [] if isinstance(value, Mapping)]


def fleet_node(node: Mapping[str, Any]) -> dict[str, Any]:
    row = _fields(node, NODE_FIELDS)
    if isinstance(node.get("dra"), Mapping):
        row["dra"] = _fields(node["dra"], ("kubelet_plugin_ready",))
    row["problems"] = _rows(node.get("problems"), ("kind",))
    if isinstance(node.get("driver"), Mapping):
        row["driver"] = _fields(node["driver"], DRIVER_FIELDS)
    if isinstance(node.get("health"), Mapping):
        row["health"] = {
            "status": node["health"].get("status"),
            "problems": _rows(node["health"].get("problems"), HEALTH_PROBLEM_FIELDS),
        }
    return row


def fleet_input(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The fleet facts (gpu_node_facts' `gpu_fleet`) as the report reads them."""
    return {
        "nodes": [fleet_node(node) for node in facts.get("nodes") or []],
        "totals": _fields(facts.get("totals") or {}, ("nodes", *COUNTS)),
        "problems": _rows(facts.get("problems"), FLEET_PROBLEM_FIELDS),
        "notes": list(facts.get("notes") or []),
    }


def device_plugin_input(result: Mapping[str, Any]) -> dict[str, Any]:
    """The device-plugin check's result as the report reads it."""
    return {
        "healthy": result.get("healthy"),
        "counts": _fields(result.get("counts") or {}, ("error", "warning", "info")),
        "nodes": _rows(result.get("nodes"), ("name", "problems")),
        "findings": _rows(result.get("findings"), PLUGIN_FINDING_FIELDS),
    }


def pod_audit_input(result: Mapping[str, Any]) -> dict[str, Any]:
    """The live audit's result as the report reads it."""
    # counts, or summary as gpu_pod_validate returned them before (deprecated, removed in 2.0.0)
    summary = result.get("counts") or result.get("summary") or {}
    read = {
        "findings": _rows(result.get("findings"), AUDIT_FINDING_FIELDS),
        "summary": {"objects_checked": summary.get("objects_checked", 0)},
        "notes": list(result.get("notes") or []),
    }
    if "admission" in result:
        read["admission"] = result["admission"]
    return read


def placement_input(result: Mapping[str, Any]) -> dict[str, Any]:
    """gpu_placement_info's `placement` as the report reads it: the view per pool and of the fleet, the
    pending GPU pods and the view's findings; no per-node view, no what-if."""
    return {
        "sizes": list(result.get("sizes") or []),
        "resource": result.get("resource"),
        "pools": _rows(result.get("pools"), PLACEMENT_POOL_FIELDS),
        "fleet": _fields(result.get("fleet") or {}, PLACEMENT_POOL_FIELDS),
        "pending": _rows(result.get("pending"), PENDING_FIELDS),
        "findings": _rows(result.get("findings"), PLACEMENT_FINDING_FIELDS),
        "notes": list(result.get("notes") or []),
    }
