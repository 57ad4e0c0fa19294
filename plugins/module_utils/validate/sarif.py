# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SARIF 2.1.0 reports of a validation run, for code scanning."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import NON_FILE_SOURCES, Report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.findings import Finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import (
    RULES,
    TOOL_NAME,
    TOOL_URI,
    TOOL_VERSION,
)

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def artifact_uri(source: str, base: str | None = None) -> str:
    """A path relative to `base` (the working directory) when inside it, else a file: URI."""
    path = Path(source)
    root = Path(base or os.getcwd()).resolve()
    try:
        relative = path.resolve().relative_to(root)
    except (ValueError, OSError):
        return path.resolve().as_uri() if path.is_absolute() else quote(path.as_posix())
    return quote(relative.as_posix())


def sarif_rules() -> list[dict[str, Any]]:
    return [
        {
            "id": rule.id,
            "name": rule.name,
            "shortDescription": {"text": rule.title},
            "fullDescription": {"text": rule.title},
            "help": {"text": rule.remedy, "markdown": f"**{rule.title}.** {rule.remedy}"},
            "helpUri": f"{TOOL_URI}#{rule.id.lower()}",
            "defaultConfiguration": {"level": rule.severity},
            "properties": {"tags": ["security", "kubernetes", "gpu"], "precision": "high"},
        }
        for rule in RULES.values()
    ]


def _location(source: str | None, line: int | None, base: str | None) -> dict[str, Any] | None:
    if not source or source in NON_FILE_SOURCES:
        return None
    physical: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(source, base)}}
    if line:
        physical["region"] = {"startLine": line}
    return {"physicalLocation": physical}


def _fingerprint(finding: Finding) -> str:
    ref = finding.ref
    key = "|".join((finding.rule, ref.kind, ref.namespace, ref.name, finding.container or "", finding.path))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def sarif_result(
    finding: Finding, rule_index: Mapping[str, int], base: str | None, allowed_reason: str | None = None
) -> dict[str, Any]:
    ref = finding.ref
    location = _location(ref.source, finding.line or ref.line, base)
    logical = {
        "name": finding.container or ref.name,
        "kind": "resource",
        "fullyQualifiedName": "/".join(p for p in (ref.kind, ref.namespace, ref.name, finding.container) if p),
    }
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": rule_index[finding.rule],
        "level": finding.severity,
        "message": {"text": f"{finding.message}. Remedy: {finding.remedy}"},
        "locations": [{**(location or {}), "logicalLocations": [logical]}],
        "partialFingerprints": {"kubegpuFinding/v1": _fingerprint(finding)},
        "properties": {
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
            "container": finding.container,
            "path": finding.path,
            "document": ref.document,
        },
    }
    if allowed_reason is not None:
        result["suppressions"] = [{"kind": "inSource", "justification": allowed_reason}]
    return result


def sarif_report(report: Report, base: str | None = None) -> dict[str, Any]:
    rules = sarif_rules()
    rule_index = {rule["id"]: index for index, rule in enumerate(rules)}
    results = [sarif_result(f, rule_index, base) for f in report.findings]
    results += [sarif_result(a.finding, rule_index, base, a.reason) for a in report.allowed]
    notifications = []
    for error in report.errors:
        notification: dict[str, Any] = {
            "level": "error",
            "message": {"text": error.message},
            "descriptor": {"id": "load-error"},
        }
        location = _location(error.source, error.line, base)
        if location:
            notification["locations"] = [location]
        notifications.append(notification)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {"name": TOOL_NAME, "version": TOOL_VERSION, "informationUri": TOOL_URI, "rules": rules}
                },
                "invocations": [
                    {"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}
                ],
                "results": results,
            }
        ],
    }
