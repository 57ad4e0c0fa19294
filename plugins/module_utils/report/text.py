# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Words the Markdown and HTML forms of the report share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COUNT_COLUMNS = ("capacity", "allocatable", "allocated", "free", "unhealthy")
# Where the node's host is: the report's node keys, shown as they are.
LOCATION_COLUMNS = ("address", "zone", "instance_type", "provider_id")
NODE_COLUMNS = ("node", "model", *COUNT_COLUMNS, "plugin", "problems", *LOCATION_COLUMNS)
PROBLEM_COLUMNS = ("severity", "subject", "problem", "reason", "remedy")
BYPASS_COLUMNS = ("rule", "severity", "object", "container", "message", "remedy")
# One row per admission policy of the cluster's `admission` (admission/plan.py's enforcement_status).
ADMISSION_COLUMNS = ("policy", "in_force", "actions", "deny")


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def cluster_status(cluster: Mapping[str, Any]) -> str:
    error = cluster.get("error")
    if not error:
        return "ok"
    task = f" in '{error['task']}'" if error.get("task") else ""
    return f"failed{task}: {error['message']}"


def node_cells(node: Mapping[str, Any]) -> list[str]:
    """The per-node table's cells, in NODE_COLUMNS order."""
    return [
        str(node["name"]),
        str(node["model"]),
        *(str(node[key]) for key in COUNT_COLUMNS),
        str(node["plugin"]),
        ", ".join(node["problems"]) or "-",
        *(or_dash(node.get(key)) for key in LOCATION_COLUMNS),
    ]


def cells(entry: Mapping[str, Any], columns: tuple[str, ...]) -> list[str]:
    """A problem's or a finding's cells, in the order of `columns`."""
    return [or_dash(entry.get(key)) for key in columns]


def admission_cells(policy: Mapping[str, Any]) -> list[str]:
    """An admission policy's cells, in ADMISSION_COLUMNS order."""
    entry = {
        "policy": policy.get("name"),
        "in_force": "yes" if policy.get("in_force") else "no",
        "actions": ", ".join(policy.get("validation_actions") or []),
        "deny": "yes" if policy.get("deny") else "no",
    }
    return cells(entry, ADMISSION_COLUMNS)


def or_dash(value: Any) -> str:
    return "-" if value in (None, "") else str(value)
