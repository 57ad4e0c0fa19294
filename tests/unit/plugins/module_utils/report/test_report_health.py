"""The health view in the fleet report: per cluster the healthy, degraded and failed GPU nodes and the
problems of those that are not healthy, in the JSON (its schema), the Markdown and the HTML; on the real
fleet facts of the fixtures, with health entries as gpu_node_facts makes them given to two nodes."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.health import health_problem
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import (
    GPU_HEALTH_CONDITION,
    GPUS_WITHDRAWN,
    HealthProblem,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.inputs import fleet_input
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.model import build_report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.render_html import render_html
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.render_markdown import render_markdown

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "report"
SCHEMA_FILE = Path(__file__).resolve().parents[5] / "docs" / "fleet-report.schema.json"
XID = HealthProblem(
    GPU_HEALTH_CONDITION,
    "failed",
    {"producer": "GKE NVIDIA GPU device plugin", "condition": "XidCriticalError", "status": "True"}
    | {"reason": '{"79":true}', "message": "boot-1"},
)
WITHDRAWN = HealthProblem(
    GPUS_WITHDRAWN, "degraded", {"resource": "nvidia.com/gpu", "withdrawn": 1, "capacity": 4, "allocatable": 3}
)


def judged_fleet() -> dict:
    """The fixture's fleet facts with a health entry on every node: the first failed, the second degraded."""
    fleet = json.loads((FIXTURES / "local-fleet.json").read_text())
    for node in fleet["nodes"]:
        node["health"] = {"status": "healthy", "problems": []}
    fleet["nodes"][0]["health"] = {"status": "failed", "problems": [health_problem(XID)]}
    fleet["nodes"][1]["health"] = {"status": "degraded", "problems": [health_problem(WITHDRAWN)]}
    return fleet


def report_of(fleet: dict, *more: dict) -> dict:
    return build_report([{"name": "eu", "fleet": fleet}, *more], generated_at="2026-12-03T00:00:00+00:00")


def test_a_cluster_counts_its_nodes_by_health_and_lists_the_unhealthy_failed_first():
    fleet = judged_fleet()
    report = report_of(fleet)
    health = report["clusters"][0]["health"]
    total = len(fleet["nodes"])
    assert (health["healthy"], health["degraded"], health["failed"]) == (total - 2, 1, 1)
    assert [(n["node"], n["status"]) for n in health["nodes"]] == [
        (fleet["nodes"][0]["name"], "failed"),
        (fleet["nodes"][1]["name"], "degraded"),
    ]
    failed = health["nodes"][0]["problems"][0]
    assert failed["kind"] == "gpu_health_condition" and failed["severity"] == "error"
    assert failed["reason"] == 'GKE NVIDIA GPU device plugin: XidCriticalError=True ({"79":true}): boot-1'
    assert failed["remedy"]
    rows = {n["name"]: n["health"] for n in report["clusters"][0]["nodes"]}
    assert rows[fleet["nodes"][0]["name"]] == "failed" and rows[fleet["nodes"][2]["name"]] == "healthy"
    assert report["totals"]["health"] == {"healthy": total - 2, "unknown": 0, "degraded": 1, "failed": 1}


def test_facts_without_the_health_view_are_not_judged_and_two_clusters_add_up():
    plain = json.loads((FIXTURES / "local-fleet.json").read_text())
    report = report_of(plain)
    assert report["clusters"][0]["health"] is None
    assert report["totals"]["health"] is None
    assert {n["health"] for n in report["clusters"][0]["nodes"]} == {None}
    two = report_of(judged_fleet(), {"name": "us", "fleet": plain}, {"name": "ap", "fleet": judged_fleet()})
    assert two["totals"]["health"]["failed"] == 2
    assert two["totals"]["health"]["healthy"] == 2 * (len(plain["nodes"]) - 2)


def test_the_report_with_health_follows_the_schema_and_reads_the_same_from_the_cut_facts():
    fleet = judged_fleet()
    report = report_of(fleet, {"name": "us", "error": "connection refused"})
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.validate(report, schema)
    health = report["clusters"][0]["health"]
    assert set(schema["$defs"]["health"]["oneOf"][1]["required"]) == set(health)
    assert set(schema["$defs"]["health_problem"]["required"]) == set(health["nodes"][0]["problems"][0])
    assert report_of(fleet_input(copy.deepcopy(fleet)))["clusters"] == report_of(fleet)["clusters"]


def test_markdown_and_html_show_the_counts_and_each_problem_of_the_unhealthy_nodes():
    fleet = judged_fleet()
    report = report_of(fleet)
    counts = f"{len(fleet['nodes']) - 2} healthy, 1 degraded, 1 failed GPU nodes"
    text = render_markdown(report)
    assert "### Health" in text and f"{counts}." in text and f"Health: {counts}." in text
    header = next(line for line in text.splitlines() if line.startswith("| node | status |"))
    assert header == "| node | status | severity | problem | reason | remedy |"
    assert re.search(
        rf"\| {re.escape(fleet['nodes'][0]['name'])} \| failed \| error \| GPU health condition reported \|", text
    )
    page = render_html(report)
    assert f'<p id="health-0">{counts}.</p>' in page
    assert 'id="health-0-nodes"' in page and page.count("GPUs withdrawn by the device plugin") == 1
    assert "### Health" not in render_markdown(report_of(json.loads((FIXTURES / "local-fleet.json").read_text())))
