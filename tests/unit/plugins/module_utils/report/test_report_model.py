"""The fleet report's data model, built from real module outputs of the local cluster
(tests/unit/fixtures/report, see its README)."""

import copy
import json
from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.report.model import SCHEMA, build_report, plugin_state

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "report"
COUNTS = ("capacity", "allocatable", "allocated", "free", "unhealthy")


def results() -> dict:
    return {
        source: json.loads((FIXTURES / f"local-{source}.json").read_text())
        for source in ("fleet", "device_plugin", "pod_audit", "placement")
    }


def cluster(name: str, **extra) -> dict:
    return {"name": name, **results(), "elapsed_seconds": 2.345, **extra}


def test_a_cluster_has_the_totals_and_nodes_of_its_fleet_facts():
    fleet = results()["fleet"]
    report = build_report([cluster("eu")], generated_at="2025-01-01T00:00:00")

    entry = report["clusters"][0]
    assert report["schema"] == SCHEMA
    assert entry["status"] == "ok" and entry["error"] is None
    assert entry["elapsed_seconds"] == 2.35
    assert entry["totals"] == {key: fleet["totals"][key] for key in ("nodes", *COUNTS)}
    assert [n["name"] for n in entry["nodes"]] == [n["name"] for n in fleet["nodes"]]
    for node, facts in zip(entry["nodes"], fleet["nodes"], strict=True):
        assert {key: node[key] for key in COUNTS} == {key: facts[key] for key in COUNTS}
    # The per-model rows add up to what gpu_node_facts says per model.
    for row in entry["models"]:
        assert {key: row[key] for key in ("nodes", *COUNTS)} == {
            key: fleet["models"][row["model"]][key] for key in ("nodes", *COUNTS)
        }


def test_the_registered_result_of_gpu_node_facts_reports_as_its_facts():
    facts = results()["fleet"]
    registered = {"changed": False, "ansible_facts": {"gpu_fleet": facts}}

    from_registered = build_report([cluster("eu", fleet=registered)], generated_at="2025-01-01T00:00:00")
    from_facts = build_report([cluster("eu")], generated_at="2025-01-01T00:00:00")

    assert from_registered == from_facts
    assert from_registered["clusters"][0]["totals"]["nodes"] == facts["totals"]["nodes"] > 0


def test_node_rows_say_how_the_gpus_reach_the_scheduler_and_what_is_wrong():
    nodes = {n["name"]: n for n in build_report([cluster("eu")])["clusters"][0]["nodes"]}

    assert nodes["gfd-h100"]["plugin"] == "Ready" and nodes["gfd-h100"]["problems"] == []
    assert nodes["gfd-a100-noplugin"]["plugin"] == "none"
    assert nodes["gfd-a100-noplugin"]["problems"] == ["no_device_plugin_pod", "no_gpu_capacity"]
    assert nodes["dra-h100"]["plugin"] == "DRA Ready"
    assert nodes["gfd-t4-unhealthy"]["unhealthy"] == 1


def test_plugin_state_of_a_not_ready_plugin_and_a_dra_node_without_its_plugin():
    assert (
        plugin_state(
            {"gpu_sources": ["device_plugin"], "device_plugin_pod": "kube-system/p", "device_plugin_ready": False}
        )
        == "not Ready"
    )
    assert plugin_state({"gpu_sources": ["dra"], "dra": {"kubelet_plugin_ready": False}}) == "DRA not Ready"


def test_node_location_is_what_the_facts_carry_and_the_address_the_preferred_one():
    data = results()
    node = data["fleet"]["nodes"][0]
    addresses = [{"type": "Hostname", "address": "gpu-0"}, {"type": "InternalIP", "address": "10.0.0.7"}]
    node.update(
        addresses=addresses,
        provider_id="aws:///eu-west-1a/i-0abc",
        zone="eu-west-1a",
        region="eu-west-1",
        instance_type="p4d.24xlarge",
    )
    rows = build_report([{"name": "eu", **data}])["clusters"][0]["nodes"]
    row = next(r for r in rows if r["name"] == node["name"])
    assert (row["address"], row["addresses"]) == ("10.0.0.7", addresses)
    assert (row["provider_id"], row["zone"], row["region"], row["instance_type"]) == (
        "aws:///eu-west-1a/i-0abc",
        "eu-west-1a",
        "eu-west-1",
        "p4d.24xlarge",
    )
    bare = next(r for r in rows if r["name"] != node["name"])
    assert (bare["address"], bare["addresses"], bare["provider_id"], bare["zone"]) == (None, [], None, None)


def test_problems_join_the_device_plugin_remedy_to_the_fleet_reason_and_sort_errors_first():
    problems = build_report([cluster("eu")])["clusters"][0]["problems"]

    unhealthy = next(p for p in problems if p["kind"] == "allocatable_below_capacity")
    assert unhealthy["severity"] == "error" and unhealthy["source"] == "device_plugin"
    assert "unhealthy by the device plugin" in unhealthy["reason"]
    assert "nvidia-smi" in unhealthy["remedy"]
    # gpu_use_outside_scheduler is a fleet problem the device-plugin check does not make.
    bypass = next(p for p in problems if p["kind"] == "gpu_use_outside_scheduler")
    assert bypass["source"] == "fleet" and bypass["severity"] is None
    severities = [p["severity"] for p in problems]
    assert severities == sorted(severities, key=("error", "warning", "info", None).index)
    assert len({(p["node"], p["kind"]) for p in problems}) == len(problems)


def test_bypass_findings_come_from_the_live_audit():
    audit = results()["pod_audit"]
    bypass = build_report([cluster("eu")])["clusters"][0]["bypass"]

    assert [b["rule"] for b in bypass] == [f["rule"] for f in audit["findings"]]
    first = audit["findings"][0]
    assert bypass[0]["object"] == f"{first['kind']} {first['namespace']}/{first['object_name']}"
    assert bypass[0]["remedy"] == first["remedy"]


def test_fleet_totals_and_models_add_up_over_clusters_and_a_failed_one_counts_nothing():
    failed = {"name": "us", "error": {"task": "Gather the GPU fleet facts", "message": "connection refused"}}
    report = build_report([cluster("eu"), cluster("ap"), failed])
    one = report["clusters"][0]

    assert report["failed_clusters"] == ["us"]
    assert report["totals"]["clusters"] == 3 and report["totals"]["clusters_failed"] == 1
    assert report["totals"]["capacity"] == 2 * one["totals"]["capacity"]
    assert report["totals"]["problems"] == 2 * len(one["problems"])
    assert all(
        m["clusters"] == 2 and m["nodes"] == 2 * next(r["nodes"] for r in one["models"] if r["model"] == m["model"])
        for m in report["models"]
    )
    us = report["clusters"][2]
    assert us["status"] == "failed" and us["error"]["message"] == "connection refused"
    assert us["totals"]["nodes"] == 0 and us["nodes"] == []


def test_a_failed_task_result_is_no_result_and_a_cluster_without_facts_failed():
    report = build_report([{"name": "x", "fleet": {"failed": True, "msg": "boom"}, "error": "boom"}, {"name": "y"}])
    assert [c["status"] for c in report["clusters"]] == ["failed", "failed"]
    assert report["clusters"][0]["error"] == {"task": None, "message": "boom"}
    assert "no fleet facts" in report["clusters"][1]["error"]["message"]


@pytest.mark.parametrize(
    ("clusters", "message"),
    [
        ({"name": "x"}, "clusters must be a list"),
        ([{"fleet": {}}], "clusters[0].name must be a non-empty string"),
        ([{"name": "x", "fleet": "text"}], "clusters[0].fleet must be a module result"),
        ([{"name": "x"}, {"name": "x"}], "repeated: x"),
        ([{"name": "x", "elapsed_seconds": "soon"}], "clusters[0].elapsed_seconds must be a number"),
    ],
)
def test_bad_input_is_named(clusters, message):
    with pytest.raises(OptionError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build_report(copy.deepcopy(clusters))


def test_the_admission_policies_in_force_come_from_the_live_audit():
    admission = {"state": "unknown", "reason": "forbidden", "policies": []}
    audit = {**results()["pod_audit"], "admission": admission}
    report = build_report([cluster("eu", pod_audit=audit), cluster("us")])
    assert report["clusters"][0]["admission"] == admission
    assert report["clusters"][1]["admission"] is None


def test_the_placement_view_is_gpu_placements_from_its_registered_result_or_the_view_itself():
    view = results()["placement"]
    registered = {"changed": False, "placement": view}
    entry = build_report([cluster("eu", placement=registered)])["clusters"][0]
    assert build_report([cluster("eu")])["clusters"][0] == entry
    placement = entry["placement"]
    assert placement["sizes"] == view["sizes"] == [1, 2, 4, 8]
    for pool, given in zip([*placement["pools"], placement["fleet"]], [*view["pools"], view["fleet"]], strict=True):
        assert pool["pool"] == given["pool"]
        assert pool["fits"] == given["fits"] and pool["stranded"] == given["stranded"]
        assert [pool[k] for k in ("nodes", "gpus_free", "withdrawn", "largest")] == [
            given[k] for k in ("nodes", "gpus_free", "withdrawn", "largest")
        ]
    assert [(p["pod"], p["gpus"], p["reason"]) for p in placement["pending"]] == [
        (p["pod"], p["gpus"], p["reason"]) for p in view["pending"]
    ]
    claims = next(p for p in placement["pending"] if p["pod"] == "gpu-fleet/dra-too-many")
    assert claims["resource"] is None and claims["gpus"] == 8
    assert placement["notes"] == view["notes"] and placement["findings"][0]["kind"] == "placement.stranded_gpus"


def test_a_cluster_without_a_placement_view_has_none_and_a_bad_count_is_named():
    assert build_report([cluster("eu", placement=None)])["clusters"][0]["placement"] is None
    failed = {"failed": True, "msg": "boom"}
    assert build_report([cluster("eu", placement=failed)])["clusters"][0]["placement"] is None
    view = copy.deepcopy(results()["placement"])
    view["pools"][1]["fits"]["2"]["pods"] = "many"
    with pytest.raises(
        OptionError, match=r"clusters\[0\]\.placement\.pools\[1\]\.fits\.2\.pods must be a whole number"
    ):
        build_report([cluster("eu", placement=view)])
