# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Summaries, JSON and SARIF 2.1.0 reports, and the pass/fail verdict of a validation run."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ansible_collections.kubegpu.scheduling.plugins.module_utils.manifests import (
    LineLocator,
    LoadError,
    Manifests,
    gc_paused,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod_rules import (
    ERROR,
    RULES,
    WARNING,
    Allowed,
    ClusterEnvSources,
    Finding,
    PodChecker,
    RuleConfig,
    ValidationResult,
    check_sites,
    pod_site,
    validate_documents,
    with_line,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.workloads import (
    LIVE_WORKLOAD_PATHS,
    NotChecked,
    PodSpecSite,
    object_ref,
    select_live_objects,
    walk_document,
    with_kind,
)

TOOL_NAME = "kubegpu.scheduling.gpu_pod_validate"
TOOL_VERSION = "1.0.0"
TOOL_URI = "https://github.com/kubegpu/scheduling"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FAIL_ON_CHOICES = ("error", "warning", "never")
# Sources that are not files: no physical location in SARIF.
NON_FILE_SOURCES = ("definition", "cluster")


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    allowed: list[Allowed] = field(default_factory=list)
    not_checked: list[NotChecked] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)
    files: int = 0
    documents: int = 0
    objects_checked: int = 0
    notes: list[str] = field(default_factory=list)


def offline_report(manifests: Manifests, config: RuleConfig) -> Report:
    """Check the manifests as they load, then place each finding on its line."""
    with gc_paused():
        result = validate_documents(manifests, config)
    locator = LineLocator(manifests)
    findings = [with_line(f, locator.line_of(f.ref.source, f.ref.document, f.path)) for f in result.findings]
    allowed = [
        Allowed(
            with_line(a.finding, locator.line_of(a.finding.ref.source, a.finding.ref.document, a.finding.path)),
            a.reason,
        )
        for a in result.allowed
    ]
    return Report(
        findings,
        allowed,
        result.not_checked,
        list(manifests.errors),
        len(manifests.files),
        result.documents,
        result.objects_checked,
    )


def merge_reports(reports: Iterable[Report]) -> Report:
    merged = Report()
    for report in reports:
        merged.findings += report.findings
        merged.allowed += report.allowed
        merged.not_checked += report.not_checked
        merged.errors += report.errors
        merged.files += report.files
        merged.documents += report.documents
        merged.objects_checked += report.objects_checked
        merged.notes += report.notes
    return merged


def collection_paths(api_version: str, resource: str, namespaces: Iterable[str] | None) -> list[str]:
    """API paths listing one resource in all namespaces, or in each of the given ones."""
    root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if not namespaces:
        return [f"{root}/{resource}"]
    return [f"{root}/namespaces/{quote(ns, safe='')}/{resource}" for ns in namespaces]


def live_report(client: Any, config: RuleConfig, namespaces: Iterable[str] | None = None) -> Report:
    """Audit the cluster: top-level workload templates, and the pods they do not cover.

    `client` needs `list_items(path)` (paginated) and `get(path)`; its errors propagate.
    """
    chosen = sorted(set(namespaces)) if namespaces else None
    workloads = [
        with_kind(item, api_version, kind)
        for api_version, kind, resource in LIVE_WORKLOAD_PATHS
        for path in collection_paths(api_version, resource, chosen)
        for item in client.list_items(path)
        if isinstance(item, dict)
    ]
    pods = [
        with_kind(item, "v1", "Pod")
        for path in collection_paths("v1", "pods", chosen)
        for item in client.list_items(path)
        if isinstance(item, dict)
    ]
    selection = select_live_objects(workloads, pods)
    sources = ClusterEnvSources(client)
    checker = PodChecker(config, sources)
    result = ValidationResult()
    for obj in selection.workloads + selection.pods:
        sites, skipped = walk_document(obj, source="cluster")
        result.not_checked += skipped
        check_sites(checker, sites, result)
    ephemeral: list[PodSpecSite] = []
    for pod in selection.ephemeral_only_pods:
        site = pod_site(pod, object_ref(pod, source="cluster"), ephemeral_only=True)
        if site is not None:
            ephemeral.append(site)
    check_sites(checker, ephemeral, result)
    notes = [
        (
            f"live: checked {len(selection.workloads)} workloads and {len(selection.pods)} pods in full, and the "
            f"ephemeral containers of {len(ephemeral)} pods; {selection.skipped_workloads} workloads are covered "
            f"by their owner's template and {selection.finished_pods} finished pods were not checked"
        ),
        *sources.problems,
    ]
    return Report(result.findings, result.allowed, result.not_checked, [], 0, 0, result.objects_checked, notes)


def summarize(report: Report) -> dict[str, Any]:
    by_severity = {ERROR: 0, WARNING: 0}
    by_rule: dict[str, dict[str, Any]] = {}
    for finding in report.findings:
        by_severity[finding.severity] = by_severity.get(finding.severity, 0) + 1
        entry = by_rule.setdefault(
            finding.rule, {"name": RULES[finding.rule].name, "severity": finding.severity, "count": 0, "allowed": 0}
        )
        entry["count"] += 1
    for allowed in report.allowed:
        rule = allowed.finding.rule
        entry = by_rule.setdefault(
            rule, {"name": RULES[rule].name, "severity": allowed.finding.severity, "count": 0, "allowed": 0}
        )
        entry["allowed"] += 1
    return {
        "findings": len(report.findings),
        "by_severity": by_severity,
        "by_rule": dict(sorted(by_rule.items())),
        "allowed": len(report.allowed),
        "not_checked": len(report.not_checked),
        "load_errors": len(report.errors),
        "objects_checked": report.objects_checked,
        "documents": report.documents,
        "files": report.files,
    }


def failed(summary: Mapping[str, Any], fail_on: str) -> bool:
    """Whether the run fails. A file that could not be loaded fails it too, unless fail_on is never."""
    if fail_on == "never":
        return False
    if summary["load_errors"]:
        return True
    if fail_on == "warning":
        return summary["findings"] > 0
    return summary["by_severity"].get(ERROR, 0) > 0


def _count(number: int, word: str) -> str:
    return f"{number} {word}{'' if number == 1 else 's'}"


def summary_line(summary: Mapping[str, Any]) -> str:
    severities = summary["by_severity"]
    parts = [f"{_count(severities.get(ERROR, 0), 'error')}, {_count(severities.get(WARNING, 0), 'warning')}"]
    if summary["allowed"]:
        parts.append(f"{summary['allowed']} allowed")
    text = f"{', '.join(parts)} in {_count(summary['objects_checked'], 'pod spec')}"
    if summary["files"]:
        text += f" from {_count(summary['files'], 'file')}"
    if summary["not_checked"]:
        text += f"; {_count(summary['not_checked'], 'object')} not checked"
    if summary["load_errors"]:
        text += f"; {_count(summary['load_errors'], 'file or document')} could not be loaded"
    return text


def failure_message(report: Report, summary: Mapping[str, Any]) -> str:
    message = f"GPU pod validation failed: {summary_line(summary)}"
    first = next((f for f in report.findings if f.severity == ERROR), report.findings[0] if report.findings else None)
    if first is not None:
        message += f". First: {first.rule} {describe_object(first)}: {first.message}"
    elif report.errors:
        message += f". First: {report.errors[0].source}: {report.errors[0].message}"
    return message


def describe_object(finding: Finding) -> str:
    ref = finding.ref
    name = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name or "(unnamed)"
    text = f"{ref.kind or 'object'} {name}"
    return f"{text} container {finding.container!r}" if finding.container else text


# ---------------------------------------------------------------------------------------------
# Module result and JSON report


def result_fields(report: Report) -> dict[str, Any]:
    return {
        "findings": [f.to_dict() for f in report.findings],
        "allowed": [a.to_dict() for a in report.allowed],
        "not_checked": [n.to_dict() for n in report.not_checked],
        "errors": [e.to_dict() for e in report.errors],
        "summary": summarize(report),
    }


def json_report(report: Report) -> dict[str, Any]:
    return {"tool": {"name": TOOL_NAME, "version": TOOL_VERSION}, **result_fields(report), "notes": report.notes}


# ---------------------------------------------------------------------------------------------
# SARIF 2.1.0


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


# ---------------------------------------------------------------------------------------------
# Files and text


class ReportWriteError(Exception):
    pass


def write_json(path: str, content: Mapping[str, Any]) -> None:
    """Write atomically (a temporary file in the same directory, then a rename), creating parent directories."""
    target = os.path.abspath(os.path.expanduser(path))
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".report-", dir=os.path.dirname(target))
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump(content, stream, indent=2, sort_keys=False, default=str)
                stream.write("\n")
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        raise ReportWriteError(f"cannot write report {path}: {exc.strerror or exc}") from exc


def format_finding(finding: Finding) -> str:
    ref = finding.ref
    where = ref.source or "(input)"
    line = finding.line or ref.line
    if line:
        where += f":{line}"
    elif ref.document is not None:
        where += f" (document {ref.document})"
    return (
        f"{where}: {finding.severity} {finding.rule} {describe_object(finding)}: {finding.message}\n"
        f"    at {finding.path}\n    fix: {finding.remedy}"
    )


def format_text(report: Report, summary: Mapping[str, Any], *, verbose: bool = False) -> str:
    lines = [format_finding(f) for f in report.findings]
    lines += [f"{e.source}{f':{e.line}' if e.line else ''}: cannot load: {e.message}" for e in report.errors]
    if verbose:
        lines += [
            f"allowed {a.finding.rule} {describe_object(a.finding)} ({a.finding.path}): {a.reason}"
            for a in report.allowed
        ]
        lines += [
            f"not checked: {n.ref.kind or 'document'} {n.ref.name} in {n.ref.source} document "
            f"{n.ref.document}: {n.reason}"
            for n in report.not_checked
        ]
    lines += report.notes
    lines.append(summary_line(summary))
    return "\n".join(lines)


def rule_table(rules: Iterable[str] | None = None) -> str:
    chosen = [RULES[r] for r in rules] if rules else list(RULES.values())
    return "\n".join(f"{r.id}  {r.severity:<7}  {r.name}: {r.title}" for r in chosen)
