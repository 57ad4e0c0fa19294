# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A finding in the shape each check's module documents for its results (their RETURN docs)."""

from __future__ import annotations

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Finding


def plugin_finding(finding: Finding) -> dict[str, Any]:
    """gpu_device_plugin_validate's ``findings`` item: severity, kind, node, subject, problem, remedy."""
    return {
        "severity": finding.severity,
        "kind": finding.id,
        "node": finding.where.get("node"),
        "subject": finding.where.get("subject"),
        "problem": finding.message,
        "remedy": finding.remedy,
    }


def fleet_problem(finding: Finding) -> dict[str, Any]:
    """gpu_node_facts' ``problems`` item: kind, problem (the kind's title), reason and remedy."""
    return {"kind": finding.id, "problem": finding.title, "reason": finding.message, "remedy": finding.remedy}
