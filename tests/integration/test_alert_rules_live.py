"""gpu_alert_rules on the local cluster's real kube-apiserver, which serves the Prometheus Operator's
PrometheusRule definition as published (tests/cluster/crds/definitions/prometheusrules.yaml) and validates
the object against its schema. The API server's request counters (`apiserver_request_total` on
prometheusrules) are the witness: check mode sends no write; the apply creates the PrometheusRule with the
collection's mark and the labels given; a rerun writes nothing; a PrometheusRule of someone else with the
module's name is refused and left untouched; state=absent removes only the module's. The namespace made
here is removed at the end."""

from __future__ import annotations

import re
import uuid
from collections import Counter

import pytest
from conftest import LocalCluster, run_ansible_module, wait_until

from ansible_collections.kubegpu.scheduling.plugins.module_utils.alert_rules import render
from tests.cluster import custom_resources

pytestmark = pytest.mark.cluster

MODULE = "gpu_alert_rules"
CRD_NAME = "prometheusrules.monitoring.coreos.com"
API = "/apis/monitoring.coreos.com/v1"
WRITE_VERBS = ("POST", "PUT", "PATCH", "APPLY", "DELETE")
MARK = {"app.kubernetes.io/managed-by": "kubegpu.scheduling"}
_REQUESTS = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def rule_writes(cluster: LocalCluster) -> Counter[tuple[str, str]]:
    """The writes on prometheusrules the API server answered, by (verb, code)."""
    status, text = cluster.api.request("GET", "/metrics")
    assert status == 200 and isinstance(text, str)
    counts: Counter[tuple[str, str]] = Counter()
    for match in _REQUESTS.finditer(text):
        labels = dict(_LABEL.findall(match["labels"]))
        if labels.get("resource") == "prometheusrules" and labels.get("verb") in WRITE_VERBS:
            counts[(labels["verb"], labels["code"])] += int(float(match["value"]))
    return counts


def since(before: Counter, after: Counter) -> dict:
    return {key: after[key] - before[key] for key in after if after[key] != before[key]}


def path(namespace: str, name: str) -> str:
    return f"{API}/namespaces/{namespace}/prometheusrules/{name}"


@pytest.fixture(scope="module")
def namespace(cluster: LocalCluster):
    """The PrometheusRule definition served (the cluster applies it when it starts; an older running cluster
    gets it here), and a namespace of this test's own, removed at the end."""
    [crd] = [c for c in custom_resources.definitions() if c["metadata"]["name"] == CRD_NAME]
    cluster.api.ensure(custom_resources.CRD_PATH, crd)
    wait_until(
        lambda: custom_resources.established(cluster.get(f"{custom_resources.CRD_PATH}/{CRD_NAME}")),
        timeout=60,
        what="the PrometheusRule definition established",
    )
    wait_until(lambda: cluster.api.request("GET", f"{API}/prometheusrules")[0] == 200, 60, what="prometheusrules")
    name = f"t-alerts-{uuid.uuid4().hex[:8]}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    status, reply = cluster.create("/api/v1/namespaces", body)
    assert status == 201, reply
    try:
        yield name
    finally:
        cluster.api.request("DELETE", f"/api/v1/namespaces/{name}")


def run(cluster: LocalCluster, args: dict, *flags: str) -> tuple[str, dict]:
    return run_ansible_module(cluster.kubeconfig, MODULE, args, *flags)[:2]


def test_check_mode_then_apply_then_a_rerun_that_writes_nothing(cluster: LocalCluster, namespace: str):
    args = {"namespace": namespace, "labels": {"release": "kube-prometheus-stack"}}
    key = f"PrometheusRule {namespace}/kubegpu-gpu-alerts"
    before = rule_writes(cluster)
    status, result = run(cluster, args, "--check", "--diff")
    assert status == "CHANGED" and result["changes"] == [key] and result["writes"] == 0, result
    assert cluster.api.request("GET", path(namespace, "kubegpu-gpu-alerts"))[0] == 404
    assert since(before, rule_writes(cluster)) == {}

    status, result = run(cluster, args)
    assert status == "CHANGED" and result["changes"] == [key] and result["writes"] == 1, result
    assert since(before, rule_writes(cluster)) == {("APPLY", "201"): 1}
    live = cluster.get(path(namespace, "kubegpu-gpu-alerts"))
    assert live["metadata"]["labels"] == {"release": "kube-prometheus-stack", **MARK}
    # The API server kept every field of the rendering: nothing was pruned by the schema.
    assert live["spec"] == render.rules_file(render.AlertSettings())
    assert result["alerts"] == render.alert_names(live["spec"]["groups"])
    version = live["metadata"]["resourceVersion"]

    after_apply = rule_writes(cluster)
    status, result = run(cluster, args)
    assert status == "SUCCESS" and result["changes"] == [] and result["writes"] == 0, result
    assert since(after_apply, rule_writes(cluster)) == {}
    assert cluster.get(path(namespace, "kubegpu-gpu-alerts"))["metadata"]["resourceVersion"] == version

    # A changed option changes the object, with its diff.
    status, result = run(cluster, {**args, "ticket_for": "20m"}, "--diff")
    assert status == "CHANGED" and result["writes"] == 1, result
    assert {
        g["name"]: {r["for"] for r in g["rules"]}
        for g in cluster.get(path(namespace, "kubegpu-gpu-alerts"))["spec"]["groups"]
    }["kubegpu-gpu-ticket"] == {"20m"}


def test_the_schema_of_the_definition_is_enforced(cluster: LocalCluster, namespace: str):
    obj = render.prometheus_rule(render.AlertSettings(), "bad-duration", namespace, {})
    obj["spec"]["groups"][0]["rules"][0]["for"] = "2 minutes"
    status, reply = cluster.api.request("POST", f"{API}/namespaces/{namespace}/prometheusrules?dryRun=All", obj)
    assert status == 422 and "for" in reply.get("message", ""), reply


def test_someone_elses_rule_is_refused_untouched_and_removal_takes_only_ours(cluster: LocalCluster, namespace: str):
    theirs = render.prometheus_rule(render.AlertSettings(), "team-gpu-alerts", namespace, {"team": "ml"})
    status, reply = cluster.create(f"{API}/namespaces/{namespace}/prometheusrules", theirs)
    assert status == 201, reply
    version = reply["metadata"]["resourceVersion"]

    before = rule_writes(cluster)
    status, result = run(cluster, {"namespace": namespace, "name": "team-gpu-alerts"})
    assert status == "FAILED!", result
    assert result["not_ours"] == [f"PrometheusRule {namespace}/team-gpu-alerts"] and result["writes"] == 0
    assert "without the label app.kubernetes.io/managed-by=kubegpu.scheduling" in result["msg"]
    assert "nothing was written" in result["msg"]
    assert since(before, rule_writes(cluster)) == {}

    status, result = run(cluster, {"namespace": namespace, "name": "team-gpu-alerts", "state": "absent"})
    assert status == "SUCCESS" and result["left_alone"] == [f"PrometheusRule {namespace}/team-gpu-alerts"], result
    assert cluster.get(path(namespace, "team-gpu-alerts"))["metadata"]["resourceVersion"] == version

    ours = path(namespace, "kubegpu-gpu-alerts")
    run(cluster, {"namespace": namespace})
    before = rule_writes(cluster)
    status, result = run(cluster, {"namespace": namespace, "state": "absent"}, "--check")
    assert status == "CHANGED" and result["writes"] == 0 and cluster.api.request("GET", ours)[0] == 200
    status, result = run(cluster, {"namespace": namespace, "state": "absent"})
    assert status == "CHANGED" and result["changes"] == [f"PrometheusRule {namespace}/kubegpu-gpu-alerts"], result
    assert cluster.api.request("GET", ours)[0] == 404
    assert cluster.get(path(namespace, "team-gpu-alerts"))["metadata"]["resourceVersion"] == version
    assert since(before, rule_writes(cluster)) == {("DELETE", "200"): 1}
    status, result = run(cluster, {"namespace": namespace, "state": "absent"})
    assert status == "SUCCESS" and result["changes"] == [], result
