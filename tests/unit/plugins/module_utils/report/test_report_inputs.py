"""What the report reads of each cluster's results (report/inputs.py): the report built from the cut-down
results is the report built from the modules' full results, on the real outputs of the fixtures."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.files import FORMATS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.inputs import (
    device_plugin_input,
    fleet_input,
    placement_input,
    pod_audit_input,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.model import build_report

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "report"


def full_results() -> dict:
    sources = ("fleet", "device_plugin", "pod_audit", "placement")
    return {s: json.loads((FIXTURES / f"local-{s}.json").read_text()) for s in sources}


def cut(results: dict) -> dict:
    return {
        "fleet": fleet_input(results["fleet"]),
        "device_plugin": device_plugin_input(results["device_plugin"]),
        "pod_audit": pod_audit_input(results["pod_audit"]),
        "placement": placement_input(results["placement"]),
    }


def test_the_report_from_the_cut_results_is_the_report_from_the_full_ones():
    full = full_results()
    # The audit fixture has no findings of its own reading of the admission policies: give it one.
    full["pod_audit"]["admission"] = {"validating": {"in_force": False}}
    clusters = [{"name": "a", **full, "elapsed_seconds": 1.5}, {"name": "b", **cut(full), "elapsed_seconds": 1.5}]
    report = build_report(clusters, generated_at="2026-12-02T00:00:00+00:00")
    a, b = report["clusters"]
    assert a["nodes"] and a["problems"] and a["bypass"], "the fixtures must exercise every section"
    assert a["placement"]["pools"] and a["placement"]["pending"] and a["placement"]["findings"]
    assert {**a, "name": "b"} == b
    for _suffix, render in FORMATS.values():
        one = build_report([clusters[0]], generated_at="2026-12-02T00:00:00+00:00")
        other = build_report([{**clusters[1], "name": "a"}], generated_at="2026-12-02T00:00:00+00:00")
        assert render(one) == render(other)


def test_the_cut_results_are_a_small_part_of_the_full_ones():
    full = full_results()
    assert len(json.dumps(cut(full))) < 0.6 * len(json.dumps(full))


def test_a_node_keeps_only_what_its_row_reads():
    node = fleet_input(
        {
            "nodes": [
                {
                    "name": "n",
                    "capacity": 8,
                    "pods": [{"name": "p"}],
                    "dra": {"devices": [1], "kubelet_plugin_ready": True},
                    "problems": [{"kind": "k", "reason": "r"}],
                }
            ]
        }
    )["nodes"][0]
    assert node == {"name": "n", "capacity": 8, "dra": {"kubelet_plugin_ready": True}, "problems": [{"kind": "k"}]}


def test_the_placement_view_keeps_no_per_node_view_and_no_what_if():
    full = {**full_results()["placement"], "nodes": [{"name": "n", "blocked": None}], "what_if": [{"object": "x"}]}
    read = placement_input(full)
    assert set(read) == {"sizes", "resource", "pools", "fleet", "pending", "findings", "notes"}
    assert read["pools"] == full["pools"] and read["fleet"] == full["fleet"]
    pending = read["pending"][0]
    assert set(pending) == {"pod", "gpus", "resource", "reason", "remedy", "message", "scheduler_said"}


def test_the_audit_counts_are_read_as_counts_or_as_the_deprecated_summary():
    audit = full_results()["pod_audit"]
    counts = dict(audit["summary"], objects_checked=7)
    assert pod_audit_input({**audit, "counts": counts})["summary"] == {"objects_checked": 7}
    assert pod_audit_input(audit)["summary"] == {"objects_checked": audit["summary"]["objects_checked"]}
