# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Summaries, JSON and text reports, and the pass/fail verdict of a validation run."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING, plural
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import KubegpuError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import gc_paused
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import (
    Report,
    validate_documents,
    with_line,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.findings import Allowed, Finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import LineLocator, Manifests
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.parallel import parallel_validate
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import RULES, TOOL_NAME, TOOL_VERSION

FAIL_ON_CHOICES = ("error", "warning", "never")


def offline_report(manifests: Manifests, config: RuleConfig, jobs: int = 1) -> Report:
    """Check the manifests as they load (with `jobs` worker processes: the same report), then place
    each finding on its line."""
    with gc_paused():
        result = parallel_validate(manifests, config, jobs) if jobs > 1 else validate_documents(manifests, config)
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
        result.notes,
    )


def merge_reports(reports: Iterable[Report]) -> Report:
    merged = Report()
    for report in reports:
        merged.extend(report)
    return merged


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


def severity_fails(severity: str, fail_on: str) -> bool:
    """Whether a finding of this severity fails the run."""
    if fail_on == "never":
        return False
    return fail_on == "warning" or severity == ERROR


def failed(summary: Mapping[str, Any], fail_on: str) -> bool:
    """Whether the run fails. A file that could not be loaded fails it too, unless fail_on is never."""
    if fail_on == "never":
        return False
    if summary["load_errors"]:
        return True
    if fail_on == "warning":
        return summary["findings"] > 0
    return summary["by_severity"].get(ERROR, 0) > 0


def summary_line(summary: Mapping[str, Any]) -> str:
    severities = summary["by_severity"]
    parts = [f"{plural(severities.get(ERROR, 0), 'error')}, {plural(severities.get(WARNING, 0), 'warning')}"]
    if summary["allowed"]:
        parts.append(f"{summary['allowed']} allowed")
    text = f"{', '.join(parts)} in {plural(summary['objects_checked'], 'pod spec')}"
    if summary["files"]:
        text += f" from {plural(summary['files'], 'file')}"
    if summary["not_checked"]:
        text += f"; {plural(summary['not_checked'], 'object')} not checked"
    if summary["load_errors"]:
        text += f"; {plural(summary['load_errors'], 'file or document')} could not be loaded"
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


class ReportWriteError(KubegpuError):
    """A report file that could not be written."""


def write_text(path: str, text: str) -> None:
    """Write atomically (a temporary file in the same directory, then a rename), creating parent directories."""
    target = os.path.abspath(os.path.expanduser(path))
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".report-", dir=os.path.dirname(target))
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        raise ReportWriteError(f"cannot write report {path}: {exc.strerror or exc}") from exc


def write_json(path: str, content: Mapping[str, Any]) -> None:
    write_text(path, json.dumps(content, indent=2, sort_keys=False, default=str) + "\n")


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
