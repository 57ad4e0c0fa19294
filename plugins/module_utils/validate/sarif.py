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

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.live_objects import LIVE_WORKLOAD_PATHS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import ObjectRef
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import NON_FILE_SOURCES, Report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.findings import Finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import (
    RULES,
    TOOL_NAME,
    TOOL_URI,
    TOOL_VERSION,
)

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

# Objects that are not in a file are located by their API path, relative to one of these bases.
CLUSTER_BASE_ID = "KUBERNETES_API"
DEFINITION_BASE_ID = "INLINE_DEFINITION"
URI_BASES = {
    "cluster": (
        CLUSTER_BASE_ID,
        "The API server the live audit read; each URI is the API path of an object (kubectl get --raw /URI).",
    ),
    "definition": (
        DEFINITION_BASE_ID,
        "Objects given inline in the definition option; each URI is the API path the object would have.",
    ),
}
RESOURCE_OF_KIND = {kind: resource for _api_version, kind, resource in LIVE_WORKLOAD_PATHS} | {"Pod": "pods"}


def artifact_uri(source: str, base: str | None = None) -> str:
    """A path relative to `base` (the working directory) when inside it, else a file: URI."""
    path = Path(source)
    root = Path(base or os.getcwd()).resolve()
    try:
        relative = path.resolve().relative_to(root)
    except (ValueError, OSError):
        return path.resolve().as_uri() if path.is_absolute() else quote(path.as_posix())
    return quote(relative.as_posix())


def object_uri(ref: ObjectRef) -> str:
    """The API path of the object, without the leading slash: stable across runs, unique per object."""
    resource = RESOURCE_OF_KIND.get(ref.kind) or f"{ref.kind.lower() or 'object'}s"
    path = api_path(ref.api_version or "v1", resource, ref.name or None, namespace=ref.namespace or None)
    return quote(path.lstrip("/"), safe="/%")  # names are quoted already; an inline apiVersion may need it


def _in_file(ref: ObjectRef) -> bool:
    return bool(ref.source) and ref.source not in NON_FILE_SOURCES


def artifact_location(ref: ObjectRef, base: str | None) -> dict[str, Any]:
    """A file as a path (see artifact_uri); an object from the cluster or a definition as its API path."""
    if _in_file(ref):
        return {"uri": artifact_uri(str(ref.source), base)}
    base_id, _description = URI_BASES["cluster" if ref.source == "cluster" else "definition"]
    return {"uri": object_uri(ref), "uriBaseId": base_id}


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


def _file_location(source: str | None, line: int | None, base: str | None) -> dict[str, Any] | None:
    if not source or source in NON_FILE_SOURCES:
        return None
    physical: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(source, base)}}
    if line:
        physical["region"] = {"startLine": line}
    return {"physicalLocation": physical}


def physical_location(finding: Finding, base: str | None) -> dict[str, Any]:
    """Where the finding is: its file and line, or the API path of its object (no lines there)."""
    ref = finding.ref
    physical: dict[str, Any] = {"artifactLocation": artifact_location(ref, base)}
    line = finding.line or ref.line
    if line and _in_file(ref):
        physical["region"] = {"startLine": line}
    return physical


def _fingerprint(finding: Finding) -> str:
    ref = finding.ref
    key = "|".join((finding.rule, ref.kind, ref.namespace, ref.name, finding.container or "", finding.path))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def sarif_result(
    finding: Finding, rule_index: Mapping[str, int], base: str | None, allowed_reason: str | None = None
) -> dict[str, Any]:
    ref = finding.ref
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
        "locations": [{"physicalLocation": physical_location(finding, base), "logicalLocations": [logical]}],
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
        location = _file_location(error.source, error.line, base)
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
                "originalUriBaseIds": {
                    base_id: {"description": {"text": description}} for base_id, description in URI_BASES.values()
                },
                "invocations": [
                    {"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}
                ],
                "results": results,
            }
        ],
    }
