"""The benchmark's scaled fleet with DRA nodes (bench/fleet_scale.py) and the floors' page reading
(bench/facts_floors.py), without a cluster."""

from __future__ import annotations

import json

from bench import facts_floors, fleet_scale
from tests.cluster import dra


def test_dra_nodes_are_interleaved_and_every_prefix_is_the_same_fleet():
    layout = fleet_scale.fleet_layout(1000, 50)
    assert sum(slot.dra for slot in layout) == 500
    assert [slot.dra for slot in layout[:4]] == [False, True, False, True]
    assert fleet_scale.fleet_layout(40, 50) == layout[:40]
    # Without DRA nodes the fleet is the device-plugin fleet it always was.
    assert [slot.name for slot in fleet_scale.fleet_layout(3)] == [fleet_scale.node_name(i) for i in range(3)]
    assert sum(slot.dra for slot in fleet_scale.fleet_layout(100, 25)) == 25


def test_a_dra_node_is_what_the_driver_selects_and_tolerates():
    driver = fleet_scale.dra_driver()
    node = fleet_scale.dra_node_object(1, driver)
    labels = node["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in driver["node_selector"].items())
    assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
    assert "nvidia.com/gpu" not in node["status"]["capacity"]
    tolerated = {(t["key"], t["value"], t["effect"]) for t in driver["tolerations"]}
    assert {(t["key"], t["value"], t["effect"]) for t in node["spec"]["taints"]} <= tolerated
    model = fleet_scale.dra_model_of(1)
    assert model.units == len(dra.node_devices(node["metadata"]["name"], model.dra)) == 56


def test_gpu_pods_on_dra_nodes_go_through_the_scheduler_by_claim_or_by_limit():
    pods = list(fleet_scale.wanted_pods(4, 80, 50))
    on_h100 = [p for p in pods if p["metadata"]["name"].startswith("w-00001-")]
    gpu = [p for p in on_h100 if p["metadata"]["labels"]["workload"] == "gpu"]
    assert len(gpu) == 8 and all("nodeName" not in p["spec"] for p in gpu)
    assert all(p["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "dra-h100-00000"} for p in gpu)
    by_claim = [p for p in gpu if p["spec"].get("resourceClaims")]
    by_limit = [p for p in gpu if "nvidia.com/gpu" in p["spec"]["containers"][0]["resources"]["limits"]]
    assert (len(by_claim), len(by_limit)) == (4, 4)
    assert by_claim[0]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "bench-gpu"
    cpu = [p for p in on_h100 if p["metadata"]["labels"]["workload"] == "cpu"]
    assert all(p["spec"]["nodeName"] == "dra-h100-00000" for p in cpu)
    summary = fleet_scale.fleet_summary(4, 80, 50)
    assert (summary["dra_nodes"], summary["dra_gpu_pods"], summary["dra_devices"]) == (2, 8 + 12, 8 + 56)


def compact(value: dict) -> bytes:
    """JSON as the API server writes it: no spaces, the list's metadata before its items."""
    return json.dumps(value, separators=(",", ":")).encode()


def test_the_transfer_floor_finds_the_continue_token_without_decoding():
    metadata = {"resourceVersion": "42", "continue": "eyJ2IjoibWV0YSJ9"}
    page = compact({"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": [{"metadata": {}}]})
    assert facts_floors.continue_in_head(page) == facts_floors.continue_decoded(page) == "eyJ2IjoibWV0YSJ9"
    last = compact({"kind": "PodList", "metadata": {"resourceVersion": "42"}, "items": []})
    assert facts_floors.continue_in_head(last) is facts_floors.continue_decoded(last) is None
    assert [path for path, _selector in facts_floors.fleet_lists()][-1] == "/apis/resource.k8s.io/v1/devicetaintrules"
