"""gpu_device_quarantine on the local control plane (1.37.2), with the API server's request counters
as the witness: two pods on one GPU of the DRA node dra-h100 through a ResourceClaim they share, one of
them kept by a PodDisruptionBudget that allows no disruption, and a DeviceTaintRule of someone else
with the name the collection would give a third device.

A device no ResourceSlice publishes is refused with no write; check mode sends no write and plans
what the real run does; the real run creates the device's rule with effect None, reports what the
device taint eviction controller says of it, switches it to NoSchedule, evicts the free pod through
the Eviction API and names the budget that keeps the other; the foreign rule is left; a rerun writes
nothing; release deletes only the collection's rules. The rules, pods and budget are gone at its end.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from typing import Any

import pytest
from conftest import ANSIBLE_BIN, LocalCluster, ansible_env, run_ansible_module, wait_until

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine import device as plan
from tests.cluster import versions

pytestmark = pytest.mark.cluster

RESOURCE = "/apis/resource.k8s.io/v1"
NODE = "dra-h100"
MODULE = "gpu_device_quarantine"
_REQUESTS = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def writes(cluster: LocalCluster) -> Counter[tuple[str, str, str, str]]:
    """Writes on DeviceTaintRules and pods (not pod status, which KWOK keeps writing) the API server
    answered, by (verb, resource, subresource, code)."""
    status, text = cluster.api.request("GET", "/metrics")
    assert status == 200 and isinstance(text, str)
    counts: Counter[tuple[str, str, str, str]] = Counter()
    for match in _REQUESTS.finditer(text):
        labels = dict(_LABEL.findall(match["labels"]))
        subresource = labels.get("subresource", "")
        if (
            labels.get("verb") in ("POST", "PUT", "PATCH", "DELETE")
            and labels.get("resource") in ("devicetaintrules", "pods")
            and subresource != "status"
        ):
            counts[(labels["verb"], labels["resource"], subresource, labels["code"])] += int(float(match["value"]))
    return counts


def run_with_diff(cluster: LocalCluster, args: dict[str, Any], *flags: str) -> tuple[str, dict[str, Any]]:
    """The module through `ansible --diff` with the default output: (the diff it printed, the result)."""
    command = [str(ANSIBLE_BIN / "ansible"), "localhost", "-m", f"kubegpu.scheduling.{MODULE}", "--diff", *flags]
    done = subprocess.run(
        [*command, "-a", json.dumps(args)],
        check=False,
        env=ansible_env(cluster.kubeconfig),
        capture_output=True,
        text=True,
        timeout=300,
    )
    marker = re.search(r"^localhost \| [A-Z!]+ => ", done.stdout, re.MULTILINE)
    if not marker:
        pytest.fail(f"ansible printed no result (rc {done.returncode}): {done.stdout}\n{done.stderr}")
    return done.stdout[: marker.start()], json.loads(done.stdout[marker.end() :])


def writes_from_now(cluster: LocalCluster) -> Counter[tuple[str, str, str, str]]:
    """The write counters once they stand still for two seconds and no pod is being deleted: the
    deletions the tests before left in flight (KWOK's, the namespace and device taint controllers')
    would otherwise count in this test's window."""

    def still() -> Counter[tuple[str, str, str, str]] | None:
        if any(p["metadata"].get("deletionTimestamp") for p in cluster.get("/api/v1/pods")["items"]):
            return None
        first = writes(cluster)
        time.sleep(2)
        return first if writes(cluster) == first else None

    counts = wait_until(still, 90, what="no pod write for two seconds")
    assert isinstance(counts, Counter)
    return counts


def since(before: Counter, after: Counter) -> dict:
    return {key: after[key] - before[key] for key in after if after[key] != before[key]}


def rule_writes(delta: dict) -> dict:
    return {key: value for key, value in delta.items() if key[1] == "devicetaintrules"}


def module_writes(delta: dict) -> dict:
    """The writes the module can send: on DeviceTaintRules and pod evictions. A plain pod DELETE is
    never the module's (it has no force deletion): KWOK and the device taint eviction controller send
    them for pods the tests before left, at a time of their own."""
    return {key: value for key, value in delta.items() if key[:3] != ("DELETE", "pods", "")}


def gpu_pod(namespace: str, name: str) -> dict:
    """A pod on the one GPU the claim `shared` holds (the fleet's pods hold the node's others)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}],
            "containers": [
                {
                    "name": "main",
                    "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def shared_claim(namespace: str) -> dict:
    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": namespace},
        "spec": {"devices": {"requests": [request]}},
    }


def device_of(cluster: LocalCluster, namespace: str, pods: tuple[str, ...]) -> plan.DeviceRef:
    for pod in pods:
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}"
        wait_until(lambda path=path: cluster.get(path)["status"].get("phase") == "Running", 60, what=f"{pod} Running")
    claim = cluster.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims/shared")
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == sorted(pods)
    result = claim["status"]["allocation"]["devices"]["results"][0]
    return plan.DeviceRef(result["driver"], result["pool"], result["device"])


def entry(ref: plan.DeviceRef) -> dict:
    return {"driver": ref.driver, "pool": ref.pool, "device": ref.device}


def test_device_quarantine_reports_with_none_then_noschedule_evicts_through_the_api_and_releases_its_own(
    cluster: LocalCluster, namespace: str
):
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep", "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "kept"}}},
    }
    assert cluster.create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", budget)[0] == 201
    status, reply = cluster.create(f"{RESOURCE}/namespaces/{namespace}/resourceclaims", shared_claim(namespace))
    assert status == 201, reply
    for name in ("free", "kept"):
        status, reply = cluster.create(f"/api/v1/namespaces/{namespace}/pods", gpu_pod(namespace, name))
        assert status == 201, reply
    bad = device_of(cluster, namespace, ("free", "kept"))
    budget_path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/keep"
    wait_until(lambda: cluster.get(budget_path).get("status", {}).get("currentHealthy") == 1, 60, what="budget")
    slices = [s for s in cluster.get(f"{RESOURCE}/resourceslices")["items"] if s["spec"].get("nodeName") == NODE]
    names = sorted(d["name"] for s in slices for d in s["spec"]["devices"])
    spare = plan.DeviceRef(bad.driver, bad.pool, next(n for n in names if n != bad.device))

    # Someone else's rule with the name the collection would give the spare device.
    foreign = plan.rule_body(spare, "example.com/other", plan.EFFECT_NONE, {"who": "x", "why": "y", "when": "z"})
    foreign["metadata"]["labels"] = {"team": "other"}
    foreign_path = f"{RESOURCE}/devicetaintrules/{foreign['metadata']['name']}"
    ours = f"{RESOURCE}/devicetaintrules/{plan.rule_name(bad)}"
    assert cluster.create(f"{RESOURCE}/devicetaintrules", foreign)[0] == 201
    args = {
        "devices": [entry(bad), entry(spare)],
        "reason": "simulated XID 79",
        "quarantined_by": "kubegpu-test",
        "evict": True,
        "eviction_timeout": 4,
        "simulation_timeout": 60,
    }
    try:
        # A device no slice publishes: refused, nothing written, even with the others valid.
        before = writes_from_now(cluster)
        bogus = dict(args, devices=[entry(bad), {"driver": bad.driver, "pool": bad.pool, "device": "gpu-99"}])
        status, refused, _done = run_ansible_module(cluster.kubeconfig, MODULE, bogus)
        assert status == "FAILED!" and "gpu-99: no ResourceSlice publishes" in refused["msg"], refused
        assert [f["kind"] for f in refused["findings"]] == ["quarantine.device_not_published"]

        printed, checked = run_with_diff(cluster, args, "--check")
        assert module_writes(since(before, writes(cluster))) == {}
        assert checked["changed"] is True and checked["writes"] == 0, checked
        assert checked["created"] == [plan.rule_name(bad)]
        assert checked["foreign"] == [foreign["metadata"]["name"]]
        assert sorted(checked["to_evict"]) == [f"{namespace}/free", f"{namespace}/kept"]
        users = {u["pod"]: u for d in checked["devices"] for u in d["users"]}
        assert users[f"{namespace}/kept"]["blocked_by"] == ["keep"]
        assert users[f"{namespace}/free"]["through"] == "claim" and users[f"{namespace}/free"]["blocked_by"] == []
        rule_header = f"devicetaintrule/{plan.rule_name(bad)}"
        assert rule_header in printed and "+taint: kubegpu.io/device-quarantine=failed:NoSchedule" in printed, printed
        assert "NoExecute" not in printed and foreign["metadata"]["name"] not in printed
        assert cluster.api.request("GET", ours)[0] == 404

        before = writes_from_now(cluster)
        status, applied, _done = run_ansible_module(cluster.kubeconfig, MODULE, args)
        delta = since(before, writes(cluster))
        assert status == "CHANGED", applied
        by_device = {d["device"]: d for d in applied["devices"]}
        assert by_device[bad.text()]["simulation"] == {"published": 1, "allocated": 1, "pods": 2, "namespaces": 1}
        rule = cluster.get(ours)
        assert rule["spec"]["taint"]["effect"] == "NoSchedule" and plan.owned_rule(rule)
        kinds = [f["kind"] for f in applied["findings"]]
        assert kinds.count("quarantine.device_taint_simulation") == 1
        assert "quarantine.device_rule_not_ours" in kinds and "quarantine.eviction_blocked_by_budget" in kinds
        assert applied["evicted"] == [f"{namespace}/free"]
        assert [(b["pod"], b["budgets"]) for b in applied["blocked"]] == [(f"{namespace}/kept", ["keep"])]
        assert rule_writes(delta) == {
            ("POST", "devicetaintrules", "", "201"): 1,
            ("PATCH", "devicetaintrules", "", "200"): 1,
        }, delta
        assert delta.get(("POST", "pods", "eviction", "201")) == 1, delta
        assert delta.get(("POST", "pods", "eviction", "429"), 0) >= 1, delta
        kept_pod = cluster.get(f"/api/v1/namespaces/{namespace}/pods/kept")
        assert kept_pod["metadata"].get("deletionTimestamp") is None
        assert cluster.get(foreign_path)["spec"]["taint"]["key"] == "example.com/other"
        print(f"device quarantine run: {applied['writes']} writes, {delta}")

        before = writes_from_now(cluster)
        status, again, _done = run_ansible_module(cluster.kubeconfig, MODULE, dict(args, evict=False))
        assert status == "SUCCESS", again
        assert again["writes"] == 0 and again["unchanged"] == [plan.rule_name(bad)]
        assert module_writes(since(before, writes(cluster))) == {}

        before = writes_from_now(cluster)
        release = {"devices": args["devices"], "state": "absent"}
        printed, released = run_with_diff(cluster, release)
        assert released["changed"] is True and "-taint: kubegpu.io/device-quarantine=failed:NoSchedule" in printed
        assert released["deleted"] == [plan.rule_name(bad)] and released["foreign"] == [foreign["metadata"]["name"]]
        assert rule_writes(since(before, writes(cluster))) == {("DELETE", "devicetaintrules", "", "200"): 1}
        assert cluster.api.request("GET", ours)[0] == 404
        assert cluster.api.request("GET", foreign_path)[0] == 200
    finally:
        for path in (ours, foreign_path):
            assert cluster.delete(path) in (200, 202, 404)


@pytest.mark.every_release
def test_a_device_is_planned_where_device_taint_rules_are_served_and_refused_naming_them_where_not(cluster):
    """On 1.37 check mode plans the device's rule; on 1.34 (no DeviceTaintRules) even the real run is
    refused before any write, with a message that names the API and the node-level alternative."""
    slices = [s for s in cluster.get(f"{RESOURCE}/resourceslices")["items"] if s["spec"].get("nodeName") == NODE]
    first = slices[0]["spec"]
    ref = plan.DeviceRef(first["driver"], first["pool"]["name"], first["devices"][0]["name"])
    args = {"devices": [entry(ref)], "reason": "simulated XID 79", "quarantined_by": "kubegpu-test"}
    before = writes_from_now(cluster)
    if versions.serves(versions.DEVICE_TAINT_RULES):
        status, result, _done = run_ansible_module(cluster.kubeconfig, MODULE, args, "--check")
        assert status == "CHANGED" and result["created"] == [plan.rule_name(ref)], result
        assert result["writes"] == 0
    else:
        status, result, _done = run_ansible_module(cluster.kubeconfig, MODULE, args)
        assert status == "FAILED!", result
        assert result["msg"].startswith("this cluster does not serve devicetaintrules in resource.k8s.io/v1"), result
        assert "quarantine its node with gpu_node_quarantine" in result["msg"]
        assert "Traceback" not in result.get("module_stderr", "") + result.get("exception", "")
    assert module_writes(since(before, writes(cluster))) == {}
