"""The JSON, Markdown and HTML forms of the fleet report, from real module outputs of the local
cluster (tests/unit/fixtures/report, see its README) and from hostile cluster text."""

import json
import re
from html import escape
from pathlib import Path

import jsonschema

from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.model import build_report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.render_html import CSP, render_html
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.render_json import render_json
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.render_markdown import md, render_markdown
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.text import where_text
from tests.html_tables import assert_placement_tables_hold_the_report, html_tables

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "report"
SCHEMA_FILE = Path(__file__).resolve().parents[5] / "docs" / "fleet-report.schema.json"
COUNTS = ("capacity", "allocatable", "allocated", "free", "unhealthy")
HOSTILE = "<script>alert(1)</script> | *x* [y](javascript:z)"


def local_cluster(name: str) -> dict:
    sources = ("fleet", "device_plugin", "pod_audit", "placement")
    return {
        "name": name,
        **{s: json.loads((FIXTURES / f"local-{s}.json").read_text()) for s in sources},
        "elapsed_seconds": 1.5,
    }


def report_of_two() -> dict:
    down = {"name": "us", "error": {"task": "Gather the GPU fleet facts", "message": "connection refused"}}
    return build_report([local_cluster("eu"), down], generated_at="2025-01-01T00:00:00+00:00")


def hostile_report() -> dict:
    cluster = local_cluster(HOSTILE)
    cluster["fleet"]["nodes"][0]["model"] = HOSTILE
    cluster["pod_audit"]["findings"][0]["message"] = HOSTILE
    cluster["placement"]["pools"][0]["pool"] = HOSTILE
    cluster["placement"]["pending"][0]["reason"] = HOSTILE
    return build_report([cluster], title=HOSTILE)


def test_json_is_the_model_and_follows_the_documented_schema():
    report = report_of_two()
    assert json.loads(render_json(report)) == report
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.validate(report, schema)
    jsonschema.validate(hostile_report(), schema)
    assert set(schema["required"]) == set(report)
    cluster_schema = schema["$defs"]["cluster"]
    for entry in report["clusters"]:
        assert set(cluster_schema["required"]) == set(entry)
    assert set(schema["$defs"]["node"]["required"]) == set(report["clusters"][0]["nodes"][0])
    assert set(schema["$defs"]["problem"]["required"]) == set(report["clusters"][0]["problems"][0])
    assert set(schema["$defs"]["bypass"]["required"]) == set(report["clusters"][0]["bypass"][0])
    placement = report["clusters"][0]["placement"]
    assert set(schema["$defs"]["placement"]["required"]) == set(placement)
    assert set(schema["$defs"]["placement_pool"]["required"]) == set(placement["pools"][0]) == set(placement["fleet"])
    assert set(schema["$defs"]["pending_pod"]["required"]) == set(placement["pending"][0])
    assert set(schema["$defs"]["placement_finding"]["required"]) == set(placement["findings"][0])
    assert report["clusters"][1]["placement"] is None  # the cluster that could not be read


def markdown_rows(text: str, header: str) -> list[list[str]]:
    """The rows of the first Markdown table whose header starts with `header`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_markdown_holds_the_numbers_of_the_model():
    report = report_of_two()
    text = render_markdown(report)
    clusters = markdown_rows(text, "cluster")
    assert [row[0] for row in clusters] == ["eu", "us"]
    eu = report["clusters"][0]
    assert clusters[0][4:9] == [str(eu["totals"][key]) for key in COUNTS]
    assert clusters[1][1] == "failed in 'Gather the GPU fleet facts': connection refused"
    nodes = markdown_rows(text, "node")
    assert len(nodes) == len(eu["nodes"])
    for row, node in zip(nodes, eu["nodes"], strict=True):
        assert row[2:7] == [str(node[key]) for key in COUNTS]
    assert "Failed: us." in text
    assert "nvidia-smi" in text  # a remedy


def test_markdown_escapes_cluster_text():
    text = render_markdown(hostile_report())
    assert "<script>" not in text
    assert md(HOSTILE) in text
    assert md("a|b") == "a\\|b" and md("<b>") == "&lt;b&gt;" and md("x\ny") == "x y"
    # Escaped pipes do not add cells: every row of the node table has the header's cells.
    header = next(line for line in text.splitlines() if line.startswith("| node |"))
    rows = markdown_rows(text, "node")
    assert all(len(row) == len(re.split(r"(?<!\\)\|", header)) - 2 for row in rows)


def test_html_tables_hold_the_numbers_of_the_model():
    report = report_of_two()
    tables = html_tables(render_html(report))
    assert [row["cluster"] for row in tables["clusters"]] == ["eu", "us"]
    for row, cluster in zip(tables["clusters"], report["clusters"], strict=True):
        assert {key: row[key] for key in COUNTS} == {key: str(cluster["totals"][key]) for key in COUNTS}
    assert [row["model"] for row in tables["models"]] == [m["model"] for m in report["models"]]
    nodes = report["clusters"][0]["nodes"]
    assert [{key: row[key] for key in COUNTS} for row in tables["nodes-0"]] == [
        {key: str(n[key]) for key in COUNTS} for n in nodes
    ]
    assert len(tables["problems-0"]) == len(report["clusters"][0]["problems"])
    assert len(tables["bypass-0"]) == len(report["clusters"][0]["bypass"])


def test_html_is_self_contained_with_charts():
    page = render_html(report_of_two())
    assert f'content="{escape(CSP)}"' in page
    assert not re.search(r"""(src|href)\s*=|<script|<link|url\(|@import""", page, re.IGNORECASE)
    # One chart per fleet view (clusters, models) and one per cluster with nodes; a bar per row and measure.
    assert page.count("<svg") == 3
    assert len(re.findall(r'<svg id="chart-models".*?</svg>', page, re.DOTALL)) == 1


def test_html_escapes_cluster_text():
    page = render_html(hostile_report())
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    tables = html_tables(page)
    assert tables["clusters"][0]["cluster"] == HOSTILE
    assert tables["bypass-0"][0]["message"] == HOSTILE
    assert tables["placement-0"][0]["pool"] == HOSTILE and tables["pending-0"][0]["reason"] == HOSTILE


def test_markdown_says_which_admission_policies_are_in_force_or_why_unknown():
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.render_markdown import admission_lines

    policies = [{"name": "kubegpu-gpu-bypass", "in_force": True, "validation_actions": ["Deny", "Audit"], "deny": True}]
    lines = admission_lines({"state": "read", "reason": None, "policies": policies})
    assert "| kubegpu-gpu-bypass | yes | Deny, Audit | yes |" in lines
    assert admission_lines({"state": "unknown", "reason": "forbidden", "policies": []})[-1] == "Unknown: forbidden"
    assert admission_lines(None) == []


def test_html_has_a_table_of_the_admission_policies_in_force_or_says_why_unknown():
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.plan import (
        enforcement_status,
        enforcement_unknown,
    )

    binding = {"spec": {"validationActions": ["Deny", "Audit"]}}
    # As gpu_pod_validate's live audit reads it: the error policy bound in Deny, the warnings policy unbound.
    read = enforcement_status({"kubegpu-gpu-bypass": ({}, binding), "kubegpu-gpu-bypass-warnings": ({}, None)})
    eu, west = local_cluster("eu"), local_cluster("west")
    eu["pod_audit"]["admission"] = read
    west["pod_audit"]["admission"] = enforcement_unknown(HOSTILE)
    page = render_html(build_report([eu, west, local_cluster("plain")]))
    tables = html_tables(page)
    assert tables["admission-0"] == [
        {"policy": "kubegpu-gpu-bypass", "in_force": "yes", "actions": "Deny, Audit", "deny": "yes"},
        {"policy": "kubegpu-gpu-bypass-warnings", "in_force": "no", "actions": "-", "deny": "no"},
    ]
    assert "admission-1" not in tables
    assert f'<p id="admission-1" class="muted">unknown: {escape(HOSTILE)}</p>' in page
    # A cluster whose audit did not read the policies gets no section.
    assert page.count("<h3>Admission policies</h3>") == 2


def test_markdown_says_where_gpu_work_fits_and_why_gpu_pods_are_pending():
    report = report_of_two()
    placement = report["clusters"][0]["placement"]
    text = render_markdown(report)
    pools = markdown_rows(text, "pool | nodes")
    assert [row[0] for row in pools] == [md(p["pool"]) for p in placement["pools"]] + ["all"]
    for row, pool in zip(pools, [*placement["pools"], placement["fleet"]], strict=True):
        assert row[2] == str(pool["gpus_free"]) and row[4] == str(pool["largest"])
        assert row[5:] == [str(pool["fits"][str(size)]["pods"]) for size in placement["sizes"]]
    fits = markdown_rows(text, "pool | gpus")
    t4 = {row[1]: row for row in fits if row[0] == "Tesla-T4"}
    assert t4["4"][2:] == ["0", "-", "4", "4 fragmented"]  # two nodes of 3 and 1 free: no 4-GPU pod
    assert t4["1"][3] == "gfd-t4-unhealthy (3), ack-t4-shared (1)"
    pending = {row[0]: row for row in markdown_rows(text, "pod | gpus")}
    assert set(pending) == {p["pod"] for p in placement["pending"]}
    assert pending["report-fixture/wants-16"][2].startswith("it asks for 16 nvidia.com/gpu on one node;")
    assert "the GPU models there are: NVIDIA-A10" in pending["report-fixture/wants-b200"][2]
    # The cluster that could not be read has no placement section.
    assert text.count("### Where GPU work fits") == 1


def test_html_placement_tables_hold_the_view():
    report = report_of_two()
    tables = html_tables(render_html(report))
    assert_placement_tables_hold_the_report(tables, report)
    assert len(tables["placement-findings-0"]) == len(report["clusters"][0]["placement"]["findings"]) > 0
    # A cluster with no GPU node says so; one without a placement view has no section.
    bare = local_cluster("bare")
    bare["placement"].update(pools=[], pending=[], findings=[])
    page = render_html(build_report([bare, {**local_cluster("old"), "placement": None}]))
    assert '<p id="placement-0" class="muted">No GPU nodes.</p>' in page
    assert page.count("<h3>Where GPU work fits</h3>") == 1


def test_where_names_the_nodes_that_take_most_and_counts_the_rest():
    nodes = {f"n{i}": i for i in range(1, 9)}
    assert where_text(nodes) == "n8 (8), n7 (7), n6 (6), n5 (5), n4 (4) and 3 more node(s)"
    assert where_text({"b": 1, "a": 1}) == "a (1), b (1)"
    assert where_text({}) == "-"
