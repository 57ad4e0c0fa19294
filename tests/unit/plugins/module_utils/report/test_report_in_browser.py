"""The HTML fleet report as headless chromium renders it, from the real module outputs of
tests/unit/fixtures/report (see its README); no cluster needed. The rendered tables hold the JSON's
numbers and node locations (a dash where the facts carry none), the page asks for nothing beyond itself, and a screenshot is kept in
tests/output/fleet-report/ (git-ignored). Without chromium the tests fail, naming what to install."""

import json
from pathlib import Path

from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.files import report_files, write_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.model import build_report
from tests.browser import rendered_dom, requests_leaving, screenshot
from tests.html_tables import assert_tables_hold_the_report, html_tables

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "report"
ARTEFACTS = Path(__file__).resolve().parents[4] / "output" / "fleet-report"
SOURCES = ("fleet", "device_plugin", "pod_audit", "placement")


def fixture_cluster(name: str) -> dict:
    return {
        "name": name,
        **{s: json.loads((FIXTURES / f"local-{s}.json").read_text()) for s in SOURCES},
        "elapsed_seconds": 2.5,
    }


def written_report(folder: Path) -> tuple[dict, Path]:
    """The report of two clusters read and one that failed, written as the module writes it."""
    down = {"name": "us", "error": {"task": "Gather the GPU fleet facts", "message": "connection refused"}}
    clusters = [fixture_cluster("eu"), fixture_cluster("ap"), down]
    report = build_report(clusters, generated_at="2025-01-01T00:00:00+00:00")
    for path, text in report_files(report, str(folder), "gpu-fleet-report", ["json", "html"]).values():
        write_text(path, text)
    return json.loads((folder / "gpu-fleet-report.json").read_text()), folder / "gpu-fleet-report.html"


def test_rendered_tables_hold_the_json_and_a_screenshot_is_kept(tmp_path):
    report, page = written_report(tmp_path)
    tables = html_tables(rendered_dom(page))
    assert_tables_hold_the_report(tables, report)
    failed = "failed in 'Gather the GPU fleet facts': connection refused"
    assert [row["status"] for row in tables["clusters"]] == ["ok", "ok", failed]
    assert len(tables["problems-0"]) == len(report["clusters"][0]["problems"]) > 0
    assert len(tables["bypass-0"]) == len(report["clusters"][0]["bypass"]) > 0
    assert len(tables["pending-0"]) == len(report["clusters"][0]["placement"]["pending"]) > 0
    png = screenshot(page, ARTEFACTS / "fixtures.png")
    assert png.stat().st_size > 10_000  # a blank page compresses to far less


def test_the_page_loads_nothing_from_outside(tmp_path):
    _report, page = written_report(tmp_path)
    assert requests_leaving(page) == []
    # The check sees a page that does ask for something outside.
    leaky = tmp_path / "leaky.html"
    leaky.write_text('<!DOCTYPE html><html><body><img src="http://assets.example.test/logo.png"></body></html>')
    assert any("assets.example.test" in line for line in requests_leaving(leaky))
