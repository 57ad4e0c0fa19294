# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Words the Markdown and HTML forms of the report share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

COUNT_COLUMNS = ("capacity", "allocatable", "allocated", "free", "unhealthy")
# Where the node's host is: the report's node keys, shown as they are.
LOCATION_COLUMNS = ("address", "zone", "instance_type", "provider_id")
NODE_COLUMNS = ("node", "model", *COUNT_COLUMNS, "plugin", "health", "problems", *LOCATION_COLUMNS)
# One row per problem of each GPU node that is not healthy (the cluster's `health`).
HEALTH_COLUMNS = ("node", "status", "severity", "problem", "reason", "remedy")
PROBLEM_COLUMNS = ("severity", "subject", "problem", "reason", "remedy")
# One row per GPU node whose driver upgrade is under way or failed, or whose driver pod is not current.
DRIVER_COLUMNS = ("node", "version", "managed by", "upgrade state", "in state", "pod current")
BYPASS_COLUMNS = ("rule", "severity", "object", "container", "message", "remedy")
# One row per admission policy of the cluster's `admission` (admission/plan.py's enforcement_status).
ADMISSION_COLUMNS = ("policy", "in_force", "actions", "deny")

# Where GPU work fits (the cluster's `placement`): a row per pool and the fleet, with the pods of each
# size that fit; a row per pool and size, with where they fit and the GPUs stranded; the pending GPU
# pods; the view's findings.
PLACEMENT_POOL_COLUMNS = ("pool", "nodes", "free", "withdrawn", "largest")
PLACEMENT_FIT_COLUMNS = ("pool", "gpus", "pods", "where", "stranded", "why")
PENDING_COLUMNS = ("pod", "gpus", "reason", "remedy")
PLACEMENT_FINDING_COLUMNS = ("severity", "pool", "message", "remedy")
MAX_NODES_SHOWN = 5  # of the nodes a size fits on; the JSON has them all


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
        or_dash(node.get("health")),
        ", ".join(node["problems"]) or "-",
        *(or_dash(node.get(key)) for key in LOCATION_COLUMNS),
    ]


def health_counts(health: Mapping[str, Any] | None) -> str:
    """The health view's counts in words, or why there are none."""
    if health is None:
        return "not judged (the fleet facts carry no health view)"
    unknown = f", {health['unknown']} unknown" if health.get("unknown") else ""
    return f"{health['healthy']} healthy, {health['degraded']} degraded, {health['failed']} failed{unknown} GPU nodes"


def health_rows(health: Mapping[str, Any] | None) -> list[list[str]]:
    """A row per problem of each node that is not healthy, in HEALTH_COLUMNS order."""
    rows = []
    for node in (health or {}).get("nodes") or []:
        for problem in node["problems"] or [{}]:
            rows.append([node["node"], node["status"], *cells(problem, HEALTH_COLUMNS[2:])])
    return rows


def driver_counts(drivers: Mapping[str, Any]) -> str:
    """The driver view's counts in words: nodes per version and per upgrade state."""
    versions = ", ".join(f"{version} on {count}" for version, count in drivers["versions"].items())
    states = ", ".join(f"{state} {count}" for state, count in drivers["upgrade_states"].items())
    return f"driver versions (GPU nodes): {versions}; upgrade states: {states}"


def driver_rows(drivers: Mapping[str, Any] | None) -> list[list[str]]:
    """A row per node of the driver view that needs a look, in DRIVER_COLUMNS order."""
    rows = []
    for node in (drivers or {}).get("nodes") or []:
        since = node.get("state_since")
        current = node.get("pod_revision_current")
        rows.append(
            [
                node["node"],
                or_dash(node.get("version")),
                or_dash(node.get("managed_by")),
                or_dash(node.get("upgrade_state")),
                "-" if since is None else f"{since / 60:.0f} min",
                "-" if current is None else ("yes" if current else "no"),
            ]
        )
    return rows


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


def pods_of(size: int) -> str:
    """The pool table's column of the pods of `size` GPUs that fit."""
    return f"pods of {size}"


def placement_pool_columns(placement: Mapping[str, Any]) -> tuple[str, ...]:
    return (*PLACEMENT_POOL_COLUMNS, *(pods_of(size) for size in placement["sizes"]))


def placement_pool_rows(placement: Mapping[str, Any]) -> list[list[Any]]:
    """A row per pool and one for the whole fleet (`all`), in placement_pool_columns order."""
    pools = [*placement["pools"], placement["fleet"]] if placement["pools"] else []
    return [
        [
            pool["pool"],
            pool["nodes"],
            pool["gpus_free"],
            pool["withdrawn"],
            pool["largest"],
            *(pool["fits"][str(size)]["pods"] for size in placement["sizes"]),
        ]
        for pool in pools
    ]


def where_text(nodes: Mapping[str, int], shown: int = MAX_NODES_SHOWN) -> str:
    """The nodes pods fit on with how many each takes, most first, the first `shown` of them."""
    ranked = sorted(nodes.items(), key=lambda item: (-item[1], item[0]))
    text = ", ".join(f"{name} ({count})" for name, count in ranked[:shown])
    more = len(ranked) - shown
    return f"{text} and {more} more node(s)" if more > 0 else text or "-"


def why_text(by_reason: Mapping[str, int]) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in sorted(by_reason.items())) or "-"


def placement_fit_rows(placement: Mapping[str, Any]) -> list[list[Any]]:
    """A row per pool and size (GPUs per pod) with pods that fit or GPUs stranded, in PLACEMENT_FIT_COLUMNS
    order; a pool with no free GPU has none."""
    rows = []
    for pool in placement["pools"]:
        for size in map(str, placement["sizes"]):
            fit, stranded = pool["fits"][size], pool["stranded"][size]
            if not fit["pods"] and not stranded["gpus"]:
                continue
            rows.append(
                [
                    pool["pool"],
                    size,
                    fit["pods"],
                    where_text(fit["nodes"]),
                    stranded["gpus"],
                    why_text(stranded["by_reason"]),
                ]
            )
    return rows


def pending_rows(pending: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    return [cells(entry, PENDING_COLUMNS) for entry in pending]
