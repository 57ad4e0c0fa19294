"""One result vocabulary across the modules: a key means the same in every module that returns it.

Read from each module's RETURN (the string, by `ast`, loaded with yaml): a module that talks to the API
documents `api_requests`; a write module documents `changed`, `writes` and `diff`; `report` is the
readable report as a list of lines; counts of outcomes are `counts` (a count under `summary` is only
kept, deprecated, until 2.0.0); every list of findings documents the one shape with the same text.
Each failure names the module and the key."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import FINDING_KEYS
from tests.unit.test_code_shape import WRITE_MODULES

MODULES_DIR = Path(__file__).resolve().parents[2] / "plugins" / "modules"
MODULES = sorted(p.stem for p in MODULES_DIR.glob("gpu_*.py"))
CONNECTION_FRAGMENT = "kubegpu.scheduling.connection"
REMOVAL = "2.0.0"

# The one shape of a finding (docs/findings.md, "The one shape"), as every RETURN documents it in the
# `contains` of a list of findings: the same description and type in every module.
FINDING_CONTAINS: dict[str, dict[str, str]] = {
    "id": {
        "description": (
            "The registry id: a validator rule's code (V(KGPU101)), any other kind C(<check>.<name>) "
            "(V(device_plugin.no_gpu_capacity)); docs/findings.md lists them all."
        ),
        "type": "str",
    },
    "severity": {"description": "V(error), V(warning) or V(info): one scale for every check.", "type": "str"},
    "title": {"description": "What the kind is, in a line.", "type": "str"},
    "message": {"description": "What was found here.", "type": "str"},
    "remedy": {"description": "What to do.", "type": "str"},
    "where": {
        "description": (
            "The places that apply, of C(node), C(device), C(pool), C(object) (C(Kind namespace/name)), "
            "C(subject), C(pod), C(config), C(source), C(document), C(path), C(line), C(container)."
        ),
        "type": "dict",
    },
}
# Keys that hold a list of findings wherever they are documented.
FINDINGS_KEYS = ("findings", "problems")
# A `report` kept with another meaning, deprecated, until 2.0.0: the module and what it returns instead.
REPORT_KEPT = {"gpu_fleet_report": "data"}


def docs_of(source: str) -> dict[str, Any]:
    """DOCUMENTATION and RETURN of a module's source, loaded."""
    docs = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            value = node.value.value if isinstance(node.value, ast.Constant) else None
            if name in ("DOCUMENTATION", "RETURN") and isinstance(value, str):
                docs[name] = yaml.safe_load(value) or {}
    return docs


def module_docs(module: str) -> dict[str, Any]:
    return docs_of((MODULES_DIR / f"{module}.py").read_text())


def talks_to_api(docs: dict[str, Any]) -> bool:
    fragments = docs.get("DOCUMENTATION", {}).get("extends_documentation_fragment") or []
    return CONNECTION_FRAGMENT in ([fragments] if isinstance(fragments, str) else fragments)


def entries(returned: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every documented key at every depth, as ('a.b.c', entry)."""
    for key, entry in (returned or {}).items():
        if isinstance(entry, dict):
            yield ".".join((*path, key)), entry
            yield from entries(entry.get("contains") or {}, (*path, key))


def text(entry: dict[str, Any]) -> str:
    description = entry.get("description") or ""
    return " ".join(description) if isinstance(description, list) else str(description)


def deprecated(entry: dict[str, Any]) -> bool:
    return "deprecated" in text(entry).lower() and REMOVAL in text(entry)


def is_count(entry: dict[str, Any]) -> bool:
    """A dict of counts: said so, or shown with numbers."""
    sample = entry.get("sample")
    counted = isinstance(sample, dict) and any(isinstance(v, int) and not isinstance(v, bool) for v in sample.values())
    return entry.get("type") == "dict" and (counted or "count" in text(entry).lower())


def shape_problems(key: str, entry: dict[str, Any]) -> list[str]:
    if entry.get("elements") != "dict":
        return (
            []
            if key.split(".")[-1] == "problems"
            else [f"{key}: a list of findings with elements {entry.get('elements')}"]
        )
    contains = entry.get("contains") or {}
    found = []
    for name, canonical in FINDING_CONTAINS.items():
        documented = contains.get(name)
        if documented is None:
            found.append(f"{key}.{name}: not documented")
        elif text(documented) != canonical["description"] or documented.get("type") != canonical["type"]:
            found.append(
                f"{key}.{name}: not the one shape's text (tests/unit/test_result_contract.py FINDING_CONTAINS)"
            )
    return found


def problems(module: str, docs: dict[str, Any]) -> list[str]:
    """How the module's RETURN departs from the result vocabulary, as 'module: key: what'."""
    returned = docs.get("RETURN") or {}
    found = []
    if talks_to_api(docs) and "api_requests" not in returned:
        found.append("api_requests: not documented at the top level by a module that talks to the API")
    if module in WRITE_MODULES:
        found += [
            f"{key}: not documented by a write module" for key in ("changed", "writes", "diff") if key not in returned
        ]
    for key, entry in entries(returned):
        name = key.split(".")[-1]
        if name == "report" and entry.get("type") != "list":
            kept = module in REPORT_KEPT and key == "report" and deprecated(entry)
            if not kept:
                found.append(f"{key}: type {entry.get('type')}, not the report as a list of lines")
        if name == "summary" and is_count(entry) and not deprecated(entry):
            found.append(f"{key}: counts under summary without a deprecation note (call them counts)")
        if name in FINDINGS_KEYS and entry.get("type") == "list":
            found += shape_problems(key, entry)
    return [f"{module}: {p}" for p in found]


@pytest.mark.parametrize("module", MODULES)
def test_the_module_returns_the_one_vocabulary(module):
    assert problems(module, module_docs(module)) == []


@pytest.mark.parametrize("module", sorted(REPORT_KEPT))
def test_a_kept_report_has_its_new_key(module):
    returned = module_docs(module)["RETURN"]
    assert REPORT_KEPT[module] in returned, f"{module}: {REPORT_KEPT[module]}: not documented"


def test_every_write_module_is_a_module():
    assert set(WRITE_MODULES) <= set(MODULES)


def test_the_canonical_shape_is_the_findings_shape():
    assert tuple(FINDING_CONTAINS) == FINDING_KEYS


# Made-up RETURN blocks, each with one departure the contract must name.
SHAPE = {name: dict(entry) for name, entry in FINDING_CONTAINS.items()}
CONNECTED = {"extends_documentation_fragment": [CONNECTION_FRAGMENT]}
WRITE_RETURN = {
    "changed": {"type": "bool"},
    "writes": {"type": "int"},
    "diff": {"type": "list"},
    "api_requests": {"type": "int"},
}
MADE_UP = [
    pytest.param("gpu_reader", CONNECTED, {}, "gpu_reader: api_requests: not documented", id="api-requests"),
    pytest.param(
        "gpu_reader",
        CONNECTED,
        {"outer": {"type": "dict", "contains": {"api_requests": {"type": "int"}}}},
        "gpu_reader: api_requests: not documented at the top level",
        id="api-requests-nested-only",
    ),
    *[
        pytest.param(
            "gpu_pod",
            CONNECTED,
            {k: v for k, v in WRITE_RETURN.items() if k != missing},
            f"gpu_pod: {missing}: not documented by a write module",
            id=f"write-{missing}",
        )
        for missing in ("changed", "writes", "diff")
    ],
    pytest.param(
        "gpu_reader",
        {},
        {"report": {"type": "str", "description": "The readable report."}},
        "gpu_reader: report: type str",
        id="report-str",
    ),
    pytest.param(
        "gpu_fleet_report",
        {},
        {"report": {"type": "dict", "description": "The data model."}},
        "gpu_fleet_report: report: type dict",
        id="kept-report-without-deprecation",
    ),
    pytest.param(
        "gpu_reader",
        {},
        {"summary": {"type": "dict", "description": "Counts of findings.", "sample": {"findings": 3}}},
        "gpu_reader: summary: counts under summary without a deprecation note",
        id="summary-counts",
    ),
    pytest.param(
        "gpu_reader",
        {},
        {
            "findings": {
                "type": "list",
                "elements": "dict",
                "contains": {k: v for k, v in SHAPE.items() if k != "where"},
            }
        },
        "gpu_reader: findings.where: not documented",
        id="findings-without-where",
    ),
    pytest.param(
        "gpu_reader",
        {},
        {
            "findings": {
                "type": "list",
                "elements": "dict",
                "contains": {**SHAPE, "remedy": {"description": "How to fix it.", "type": "str"}},
            }
        },
        "gpu_reader: findings.remedy: not the one shape's text",
        id="findings-other-text",
    ),
    pytest.param(
        "gpu_reader",
        {},
        {
            "facts": {
                "type": "dict",
                "contains": {
                    "health": {"type": "dict", "contains": {"problems": {"type": "list", "elements": "dict"}}}
                },
            }
        },
        "gpu_reader: facts.health.problems.id: not documented",
        id="nested-problems",
    ),
    pytest.param(
        "gpu_reader",
        {},
        {"findings": {"type": "list", "elements": "str"}},
        "gpu_reader: findings: a list of findings with elements str",
        id="findings-of-strings",
    ),
]


@pytest.mark.parametrize(("module", "documentation", "returned", "expected"), MADE_UP)
def test_each_departure_is_named(module, documentation, returned, expected):
    found = problems(module, {"DOCUMENTATION": documentation, "RETURN": returned})
    assert any(p.startswith(expected) for p in found), found


def test_a_deprecated_summary_and_a_kept_report_pass():
    returned = {
        "summary": {"type": "dict", "description": "Deprecated, removed in 2.0.0: use counts.", "sample": {"a": 1}},
        "report": {"type": "dict", "description": "Deprecated, removed in 2.0.0: use data."},
        "findings": {"type": "list", "elements": "dict", "contains": SHAPE},
    }
    assert problems("gpu_fleet_report", {"DOCUMENTATION": {}, "RETURN": returned}) == []
