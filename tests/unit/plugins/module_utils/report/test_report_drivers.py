"""The driver view in the fleet report: per cluster the GPU nodes per driver version and upgrade state, and the
nodes whose upgrade is under way or failed or whose driver pod is not current, in the JSON (its schema), the
Markdown and the HTML; on the real fleet facts of the fixtures, with driver entries as gpu_node_facts makes them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_upgrade import DriverView
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.inputs import fleet_input
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.model import build_report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.render_html import render_html
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.render_markdown import render_markdown

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "report"
SCHEMA_FILE = Path(__file__).resolve().parents[5] / "docs" / "fleet-report.schema.json"


def viewed_fleet() -> dict:
    """The fixture's fleet facts with a driver on every node: the first stuck in validation, the second failed."""
    fleet = json.loads((FIXTURES / "local-fleet.json").read_text())
    for node in fleet["nodes"]:
        node["driver"] = DriverView(
            node["name"], "550.54.15", "gpu-operator-clusterpolicy", None, None, None, True
        ).as_dict()
    fleet["nodes"][0]["driver"].update(
        upgrade_state="validation-required", state_since=7200.0, pod_revision_current=False
    )
    fleet["nodes"][1]["driver"].update(upgrade_state="upgrade-failed", version="535.183.06")
    return fleet


def report_of(fleet: dict) -> dict:
    return build_report([{"name": "eu", "fleet": fleet}], generated_at="2026-12-05T00:00:00+00:00")


def test_a_cluster_counts_its_drivers_and_lists_the_nodes_to_look_at():
    fleet = viewed_fleet()
    drivers = report_of(fleet)["clusters"][0]["drivers"]
    total = len(fleet["nodes"])
    assert drivers["versions"] == {"535.183.06": 1, "550.54.15": total - 1}
    assert drivers["upgrade_states"] == {"none": total - 2, "upgrade-failed": 1, "validation-required": 1}
    assert sorted(n["node"] for n in drivers["nodes"]) == sorted(n["name"] for n in fleet["nodes"][:2])


def test_the_report_with_drivers_follows_the_schema_and_reads_the_same_from_the_cut_facts():
    fleet = viewed_fleet()
    report = report_of(fleet)
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.validate(report, schema)
    drivers = report["clusters"][0]["drivers"]
    assert set(schema["$defs"]["drivers"]["oneOf"][1]["required"]) == set(drivers)
    assert report_of(fleet_input(copy.deepcopy(fleet)))["clusters"] == report["clusters"]
    plain = report_of(json.loads((FIXTURES / "local-fleet.json").read_text()))
    assert plain["clusters"][0]["drivers"] is None
    jsonschema.validate(plain, schema)


def test_markdown_and_html_show_the_versions_and_the_nodes():
    report = report_of(viewed_fleet())
    text = render_markdown(report)
    assert "### Drivers" in text and "upgrade states:" in text
    assert "| node | version | managed by | upgrade state | in state | pod current |" in text
    assert "validation-required | 120 min | no |" in text
    page = render_html(report)
    assert '<p id="drivers-0">' in page and 'id="drivers-0-nodes"' in page
    assert "### Drivers" not in render_markdown(report_of(json.loads((FIXTURES / "local-fleet.json").read_text())))
