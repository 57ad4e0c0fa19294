# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""JUnit XML reports of a validation run, for the test report views of CI systems.

One test case per finding, grouped in one test suite per source (a file, `cluster` or
`definition`). A finding that fails the run under `fail_on` is a failure; one that does not is
a passed case whose output says what was found; an allowed finding is skipped, with the reason;
a file that could not be loaded is an error (a passed case with the message under `never`).
A run without any of these has one passed case that says what was checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from xml.etree import ElementTree

from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import NON_FILE_SOURCES, Report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.findings import Finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import LoadError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.report import (
    format_finding,
    severity_fails,
    summarize,
    summary_line,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import RULES, TOOL_NAME

# Outcomes, named as the element that records them in JUnit XML (a passed case has none).
PASSED, FAILURE, ERROR, SKIPPED = "", "failure", "error", "skipped"

# Characters XML 1.0 cannot carry, even escaped; manifest values may hold them.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Case:
    suite: str
    classname: str
    name: str
    outcome: str
    message: str = ""
    kind: str = ""
    text: str = ""
    file: str | None = None
    line: int | None = None


def xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def object_name(finding: Finding) -> str:
    ref = finding.ref
    name = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name or "(unnamed)"
    return f"{ref.kind or 'object'} {name}"


def case_name(finding: Finding) -> str:
    container = f"container {finding.container} " if finding.container else ""
    rule = RULES[finding.rule].name if finding.rule in RULES else finding.rule
    return f"{finding.rule} {rule}: {container}at {finding.path}"


def _file_of(source: str | None) -> str | None:
    return source if source and source not in NON_FILE_SOURCES else None


def finding_case(finding: Finding, fail_on: str) -> Case:
    fails = severity_fails(finding.severity, fail_on)
    return Case(
        suite=finding.ref.source or "definition",
        classname=object_name(finding),
        name=case_name(finding),
        outcome=FAILURE if fails else PASSED,
        message=f"{finding.severity}: {finding.message}",
        kind=f"{finding.rule} {finding.severity}",
        text=format_finding(finding),
        file=_file_of(finding.ref.source),
        line=finding.line or finding.ref.line,
    )


def allowed_case(finding: Finding, reason: str) -> Case:
    return Case(
        suite=finding.ref.source or "definition",
        classname=object_name(finding),
        name=case_name(finding),
        outcome=SKIPPED,
        message=f"allowed: {reason}",
        file=_file_of(finding.ref.source),
        line=finding.line or finding.ref.line,
    )


def load_error_case(error: LoadError, fail_on: str) -> Case:
    where = f"document {error.document}" if error.document is not None else "file"
    return Case(
        suite=error.source,
        classname=error.source,
        name=f"load {where}",
        outcome=PASSED if fail_on == "never" else ERROR,
        message=error.message,
        kind="load-error",
        text=f"{error.source}{f':{error.line}' if error.line else ''}: cannot load: {error.message}",
        file=_file_of(error.source),
        line=error.line,
    )


def junit_cases(report: Report, fail_on: str) -> list[Case]:
    cases = [finding_case(f, fail_on) for f in report.findings]
    cases += [allowed_case(a.finding, a.reason) for a in report.allowed]
    cases += [load_error_case(e, fail_on) for e in report.errors]
    if not cases:
        summary = summary_line(summarize(report))
        cases.append(Case(suite=TOOL_NAME, classname=TOOL_NAME, name="no findings", outcome=PASSED, text=summary))
    return cases


def _counts(cases: Iterable[Case]) -> dict[str, str]:
    chosen = list(cases)
    return {
        "tests": str(len(chosen)),
        "failures": str(sum(c.outcome == FAILURE for c in chosen)),
        "errors": str(sum(c.outcome == ERROR for c in chosen)),
        "skipped": str(sum(c.outcome == SKIPPED for c in chosen)),
    }


def _testcase(parent: ElementTree.Element, case: Case) -> None:
    attributes = {"classname": xml_text(case.classname), "name": xml_text(case.name)}
    if case.file:
        attributes["file"] = xml_text(case.file)
    if case.line:
        attributes["line"] = str(case.line)
    element = ElementTree.SubElement(parent, "testcase", attributes)
    if case.outcome in (FAILURE, ERROR):
        outcome = ElementTree.SubElement(
            element, case.outcome, {"message": xml_text(case.message), "type": xml_text(case.kind)}
        )
        outcome.text = xml_text(case.text)
    elif case.outcome == SKIPPED:
        ElementTree.SubElement(element, "skipped", {"message": xml_text(case.message)})
    elif case.text:
        ElementTree.SubElement(element, "system-out").text = xml_text(case.text)


def junit_xml(report: Report, fail_on: str) -> str:
    """The report as a JUnit XML document (the schema Jenkins, GitLab and the GitHub test reporters read)."""
    cases = junit_cases(report, fail_on)
    root = ElementTree.Element("testsuites", {"name": TOOL_NAME, **_counts(cases)})
    suites: dict[str, list[Case]] = {}
    for case in cases:
        suites.setdefault(case.suite, []).append(case)
    for name, members in suites.items():
        suite = ElementTree.SubElement(root, "testsuite", {"name": xml_text(name), **_counts(members)})
        for case in members:
            _testcase(suite, case)
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"
