# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one shape of a finding in every result, report and CLI output: the registry id, the
severity on the one scale, title, message, remedy and where it hit. Each check's result adds the
keys it returned before this shape (``kind``, ``problem``, ``reason``, ``node``, ``subject``,
...) beside it until 2.0.0; see `legacy`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Finding

# The keys of every finding, in this order; `where` holds the keys of WHERE_KEYS that apply.
FINDING_KEYS = ("id", "severity", "title", "message", "remedy", "where")
# Where a finding hit: on the cluster (the node, the DRA device or pool, the object as Kind namespace/name
# or the kind's subject such as a DaemonSet, the pod), and in a file (the config or file, the document,
# the path and line in it, the container).
CLUSTER_PLACES = ("node", "device", "pool", "object", "subject", "pod")
FILE_PLACES = ("config", "source", "document", "path", "line", "container")
WHERE_KEYS = CLUSTER_PLACES + FILE_PLACES


def where_of(where: Mapping[str, Any]) -> dict[str, Any]:
    """The places a hit names, without those it leaves empty."""
    return {key: where[key] for key in WHERE_KEYS if where.get(key) not in (None, "")}


def finding_result(finding: Finding, where: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A finding in the one shape; `where` replaces the hit's own places where the check knows more."""
    return {
        "id": finding.id,
        "severity": finding.severity,
        "title": finding.title,
        "message": finding.message,
        "remedy": finding.remedy,
        "where": where_of(finding.where if where is None else where),
    }


def legacy(finding: Finding, **keys: Any) -> dict[str, Any]:
    """The one shape with the keys a check returned before it (deprecated, removed in 2.0.0); ``kind``
    is the id the kind was declared with."""
    return {**finding_result(finding), "kind": finding.kind.id, **keys}


def plugin_finding(finding: Finding) -> dict[str, Any]:
    """A finding of the device-plugin check, the deployment and the quarantine: the one shape, and
    node, subject and problem (the message) as before."""
    return legacy(
        finding, node=finding.where.get("node"), subject=finding.where.get("subject"), problem=finding.message
    )


def fleet_problem(finding: Finding) -> dict[str, Any]:
    """A ``problems`` item of gpu_node_facts: the one shape, and problem (the title) and reason (the
    message) as before."""
    return legacy(finding, problem=finding.title, reason=finding.message)
