"""gpu_node_facts' health view judged by the DCGM exporter's metrics, read from a real Prometheus
(Debian's package, started by tests/cluster/prometheus.py) that scrapes simulated exporters of
KWOK GPU nodes made by this test, one scrape target per node as kube-prometheus-stack sets them.
The exporters' text takes the line shape of the exporter's published output
(tests/cluster/dcgm_exporter.py); a test flips a value as a GPU would, waits until Prometheus has
scraped it, and runs the module through `ansible` as a user does. The nodes are removed at the end.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from conftest import (
    ANSIBLE_BIN,
    DCGM_WINDOW,
    REPO_ROOT,
    LocalCluster,
    ansible_env,
    fleet_facts,
    run_ansible_module,
)

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet import prometheus_reads
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_promql import signal_expr
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_signals import METRIC_SIGNALS
from tests.cluster import dcgm_exporter
from tests.cluster import fleet as fleet_file
from tests.cluster.counters import api_requests, writes_on
from tests.cluster.dcgm_exporter import render_snapshot

pytestmark = pytest.mark.cluster

GPUS = 4
# Short, so that a test can give Prometheus more history than the window, as a Prometheus that has run
# for a while holds: a GPU with no series a window ago counts as having had XID 0 then.
WINDOW = DCGM_WINDOW
HISTORY_SECONDS = 10
XID = "DCGM_FI_DEV_XID_ERRORS"
# A new XID on a GPU, as the module reads it (per GPU: each XID is a series of its own).
NEW_XID = signal_expr(METRIC_SIGNALS[0], WINDOW)
CASES = ("ok", "xid79", "xid13", "old79", "remap", "rows", "short", "head")


def node_body(name: str, run: str) -> dict:
    labels = {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": str(GPUS), "type": "kwok", "dcgm-run": run}
    capacity = {"nvidia.com/gpu": str(GPUS), "cpu": "8", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {fleet_file.FAKE_NODE_ANNOTATION: "fake"}, "labels": labels},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


@pytest.fixture(scope="module")
def nodes(cluster: LocalCluster):
    """A KWOK node of 4 T4s per case, removed at the end."""
    run = uuid.uuid4().hex[:8]
    names = {case: f"dcgm-{run}-{case}" for case in CASES}
    for name in names.values():
        status, reply = cluster.create("/api/v1/nodes", node_body(name, run))
        assert status == 201, reply
    try:
        yield names
    finally:
        for name in names.values():
            cluster.delete(f"/api/v1/nodes/{name}")


def healthy(node: str, template=dcgm_exporter.RELEASE_SHAPE, **values: Any) -> str:
    return render_snapshot(node, GPUS, values or None, template)


def serve_healthy(harness, names: dict[str, str], unserved: tuple[str, ...] = (), history: bool = False) -> None:
    """Every node's exporter as a healthy node's, the month-old XID 79 there from the first scrape; the
    nodes of the cases `unserved` have no exporter and no scrape target. With history, returns once
    Prometheus holds more than the window of samples, so the old XID reads as old."""
    snapshots = {n: healthy(n) for case, n in names.items() if case not in unserved}
    snapshots[names["old79"]] = healthy(names["old79"], **{XID: {2: 79}})
    snapshots[names["head"]] = healthy(names["head"], dcgm_exporter.HEAD_SHAPE)
    harness.serve(snapshots)
    harness.prometheus.wait_scrapes(2)
    if history:
        time.sleep(HISTORY_SECONDS)


def prometheus_option(harness, **extra: Any) -> dict[str, Any]:
    return {"url": harness.url, "window": WINDOW, **extra}


def facts_of(cluster: LocalCluster, names: list[str] | None, prometheus: dict | None) -> tuple[dict, list[str]]:
    """The facts of the named nodes (all with None), and the warnings ansible printed."""
    args: dict[str, Any] = {} if names is None else {"names": names}
    if prometheus is not None:
        args["prometheus"] = prometheus
    status, result, done = run_ansible_module(cluster.kubeconfig, "gpu_node_facts", args)
    assert status == "SUCCESS", f"{status}: {result.get('msg')}"
    warnings = [line.split("[WARNING]: ", 1)[1] for line in done.stderr.splitlines() if "[WARNING]: " in line]
    return fleet_facts(result), warnings


def judged(facts: dict) -> dict[str, tuple[str, list[str]]]:
    return {n["name"]: (n["health"]["status"], [p["id"] for p in n["health"]["problems"]]) for n in facts["nodes"]}


def node_writes(cluster: LocalCluster) -> Counter:
    return api_requests(cluster, writes_on("nodes", "pods", status=True))


def test_each_signal_classes_its_node_and_an_old_xid_or_a_workload_xid_does_not(cluster, nodes, dcgm_prometheus):
    serve_healthy(dcgm_prometheus, nodes, history=True)
    names = list(nodes.values())
    before, warnings = facts_of(cluster, names, prometheus_option(dcgm_prometheus))
    assert warnings == []
    assert {name: status for name, (status, _ids) in judged(before).items()} == dict.fromkeys(names, "healthy")
    assert before["metrics"]["queries"] == 5 and before["metrics"]["requests"] == 5
    assert before["metrics"]["error"] is None and before["metrics"]["unknown"] == []
    exporter = dcgm_prometheus.exporter
    exporter.set_node(nodes["xid79"], healthy(nodes["xid79"], **{XID: {1: 79}}))
    exporter.set_node(nodes["xid13"], healthy(nodes["xid13"], **{XID: {0: 13}}))
    exporter.set_node(nodes["remap"], healthy(nodes["remap"], DCGM_FI_DEV_ROW_REMAP_FAILURE={3: 1}))
    exporter.set_node(
        nodes["short"], render_snapshot(nodes["short"], dcgm_exporter.node_gpus(nodes["short"], GPUS)[:3])
    )
    exporter.set_node(nodes["head"], healthy(nodes["head"], dcgm_exporter.HEAD_SHAPE, **{XID: {0: 48}}))
    dcgm_prometheus.prometheus.wait_until(NEW_XID, lambda found: len(found) == 3, timeout=30)
    dcgm_prometheus.prometheus.wait_scrapes(1)
    after, _warnings = facts_of(cluster, names, prometheus_option(dcgm_prometheus))
    seen = judged(after)
    assert seen[nodes["xid79"]] == ("failed", ["health.gpu_xid_error"])
    assert seen[nodes["head"]] == ("failed", ["health.gpu_xid_error"])
    assert seen[nodes["remap"]] == ("failed", ["health.gpu_row_remap_failed"])
    assert seen[nodes["short"]] == ("degraded", ["health.gpus_missing_from_metrics"])
    for case in ("ok", "xid13", "old79", "rows"):
        assert seen[nodes[case]] == ("healthy", []), case
    by_name = {n["name"]: n for n in after["nodes"]}
    [xid] = by_name[nodes["xid79"]]["health"]["problems"]
    assert "XID 79, GPU has fallen off the bus (DCGM_FI_DEV_XID_ERRORS at" in xid["message"]
    assert xid["message"].startswith("GPU 1 (")
    assert [w["xid"] for w in by_name[nodes["xid13"]]["health"]["metrics"]["workload_xids"]] == [13]
    assert after["health"]["failed"] == 3 and after["health"]["degraded"] == 1
    # The recording rules' series, read with prometheus.recorded, judge every node alike.
    recorded, warnings = facts_of(cluster, names, prometheus_option(dcgm_prometheus, recorded=True))
    assert warnings == [] and judged(recorded) == seen
    assert [
        w["xid"]
        for w in {n["name"]: n for n in recorded["nodes"]}[nodes["xid13"]]["health"]["metrics"]["workload_xids"]
    ] == [13]
    # Recorded for another window than the read's: no healthy node, and the warning names the rules.
    other, warnings = facts_of(cluster, names, prometheus_option(dcgm_prometheus, recorded=True, window="9s"))
    assert {status for status, _ids in judged(other).values()} == {"unknown"}
    assert any("record_window 9s" in w for w in warnings), warnings


def test_an_uncorrectable_counter_that_rises_degrades_and_what_is_not_collected_is_said(
    cluster, nodes, dcgm_prometheus
):
    rows_signal = next(s for s in METRIC_SIGNALS if s.metric == "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS")
    rows = rows_signal.metric
    serve_healthy(dcgm_prometheus, nodes)
    dcgm_prometheus.exporter.set_node(nodes["rows"], healthy(nodes["rows"], **{rows: 0}))
    dcgm_prometheus.prometheus.wait_until(f"{rows} == 0", lambda found: len(found) == GPUS, timeout=30)
    time.sleep(HISTORY_SECONDS)  # a counter is judged against its value a window ago, so it needs one
    dcgm_prometheus.exporter.set_node(nodes["rows"], healthy(nodes["rows"], **{rows: {2: 1}}))
    dcgm_prometheus.prometheus.wait_until(signal_expr(rows_signal, WINDOW), bool, timeout=30)
    facts, _warnings = facts_of(cluster, list(nodes.values()), prometheus_option(dcgm_prometheus))
    assert judged(facts)[nodes["rows"]] == ("degraded", ["health.gpu_ecc_uncorrectable"])
    # The exporters serve the default counters' XID and temperature, and now remapped rows: the others
    # are not collected, each named with the counters-CSV line that turns it on.
    assert facts["metrics"]["not_collected"] == [
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DEV_RETIRED_PENDING",
    ]
    ecc = next(p for p in facts["problems"] if "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL has" in p["message"])
    assert ecc["id"] == "fleet.gpu_metric_not_collected"
    assert "'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.'" in ecc["remedy"]


def test_a_node_whose_scrapes_fail_or_that_has_no_series_is_unknown(cluster, nodes, dcgm_prometheus):
    serve_healthy(dcgm_prometheus, nodes, unserved=("short",))
    dcgm_prometheus.exporter.fail_node(nodes["ok"], True)
    dcgm_prometheus.prometheus.wait_until('up{job="dcgm-exporter"} == 0', lambda found: len(found) == 1, timeout=30)
    facts, _warnings = facts_of(cluster, list(nodes.values()), prometheus_option(dcgm_prometheus))
    seen = judged(facts)
    assert seen[nodes["ok"]] == ("unknown", ["health.gpu_metrics_unknown"])
    assert seen[nodes["short"]] == ("unknown", ["health.gpu_metrics_unknown"])
    reason = {n["name"]: n["health"]["metrics"]["unknown"] for n in facts["nodes"]}
    assert "scrape target of the exporter for the node is down" in reason[nodes["ok"]]
    assert reason[nodes["short"]].startswith(f"no DCGM_FI_DEV_GPU_TEMP series name {nodes['short']} by any of")
    assert sorted(facts["metrics"]["unknown"]) == sorted([nodes["ok"], nodes["short"]])
    assert seen[nodes["xid13"]] == ("healthy", [])
    assert facts["health"]["unknown"] == 2


def test_prometheus_stopped_reads_unknown_never_healthy_and_the_api_facts_stay(cluster, nodes, dcgm_prometheus):
    serve_healthy(dcgm_prometheus, nodes)
    names = list(nodes.values())
    without, _warnings = facts_of(cluster, names, None)
    url = dcgm_prometheus.url
    dcgm_prometheus.prometheus.outage()
    facts, warnings = facts_of(cluster, names, {"url": url, "timeout": 5})
    assert {status for status, _ids in judged(facts).values()} == {"unknown"}
    assert facts["metrics"]["error"].startswith(f"Prometheus at {url} unreachable")
    assert [w for w in warnings if w.startswith("Prometheus at")] == [facts["metrics"]["error"]]
    assert facts["totals"] == without["totals"] and facts["models"] == without["models"]
    assert any(note.startswith("GPU health not judged by the DCGM exporter's metrics") for note in facts["notes"])


def test_the_quarantine_dry_run_takes_exactly_the_failed_nodes_and_writes_nothing(cluster, nodes, dcgm_prometheus):
    serve_healthy(dcgm_prometheus, nodes, history=True)
    exporter = dcgm_prometheus.exporter
    exporter.set_node(nodes["xid79"], healthy(nodes["xid79"], **{XID: {0: 79}}))
    exporter.set_node(nodes["remap"], healthy(nodes["remap"], DCGM_FI_DEV_ROW_REMAP_FAILURE={1: 1}))
    dcgm_prometheus.prometheus.wait_until(NEW_XID, bool, timeout=30)
    dcgm_prometheus.prometheus.wait_scrapes(1)
    everything, _warnings = facts_of(cluster, None, prometheus_option(dcgm_prometheus))
    failed = sorted(n["name"] for n in everything["nodes"] if n["health"]["status"] == "failed")
    assert {nodes["xid79"], nodes["remap"]} <= set(failed)
    assert not {nodes[c] for c in ("ok", "xid13", "old79", "short", "head", "rows")} & set(failed)
    before = node_writes(cluster)
    extra = {
        "node_quarantine_from_health": True,
        "node_quarantine_reason": "GPU health failed (test)",
        "node_quarantine_max_share": 1.0,
        "kubegpu_prometheus": prometheus_option(dcgm_prometheus),
    }
    command = [
        str(ANSIBLE_BIN / "ansible-playbook"),
        str(REPO_ROOT / "playbooks" / "node_quarantine.yml"),
        "--check",
        "--diff",
        "-e",
        json.dumps(extra),
    ]
    done = subprocess.run(
        command, check=False, env=ansible_env(cluster.kubeconfig), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f'"failed GPU nodes: {", ".join(failed)}"' in done.stdout
    assert f'"quarantined: {", ".join(failed)}"' in done.stdout
    assert node_writes(cluster) == before


def test_tls_basic_auth_and_a_client_certificate_are_used_as_given(cluster, nodes, dcgm_prometheus_tls):
    harness = dcgm_prometheus_tls
    harness.serve({nodes["ok"]: healthy(nodes["ok"])})
    harness.prometheus.wait_scrapes(1)
    secure = {
        "url": harness.url,
        "ca_cert": str(harness.ca),
        "client_cert": str(harness.client_cert),
        "client_key": str(harness.client_key),
        "username": harness.username,
        "password": harness.password,
    }
    facts, warnings = facts_of(cluster, [nodes["ok"]], secure)
    assert warnings == [] and facts["metrics"]["error"] is None
    assert judged(facts)[nodes["ok"]] == ("healthy", [])
    refused, _refused_warnings = facts_of(cluster, [nodes["ok"]], {**secure, "password": "wrong"})
    assert "HTTP 401" in refused["metrics"]["error"] and "check prometheus.bearer_token" in refused["metrics"]["error"]
    assert judged(refused)[nodes["ok"]] == ("unknown", ["health.gpu_metrics_unknown"])
    untrusted, _warnings = facts_of(cluster, [nodes["ok"]], {k: v for k, v in secure.items() if k != "ca_cert"})
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted["metrics"]["error"]


def test_a_malformed_url_fails_the_task_naming_the_option_before_any_read(cluster, nodes):
    status, result, done = run_ansible_module(
        cluster.kubeconfig, "gpu_node_facts", {"names": [nodes["ok"]], "prometheus": {"url": "prometheus:9090"}}
    )
    assert status == "FAILED!"
    assert result["msg"].startswith("prometheus.url must be an http:// or https:// URL")
    assert "Traceback" not in done.stdout + done.stderr
    assert result.get("api_requests", 0) == 0


def test_the_fleet_reports_read_carries_the_metrics_health(cluster, nodes, dcgm_prometheus):
    serve_healthy(dcgm_prometheus, nodes)
    dcgm_prometheus.exporter.set_node(nodes["xid79"], healthy(nodes["xid79"], **{XID: {3: 79}}))
    dcgm_prometheus.prometheus.wait_until(NEW_XID, bool, timeout=30)
    args = {"placement": False, "prometheus": prometheus_option(dcgm_prometheus)}
    status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_cluster_info", args)
    assert status == "SUCCESS", result.get("msg")
    health = {n["name"]: n["health"] for n in result["fleet"]["nodes"]}
    assert health[nodes["xid79"]]["status"] == "failed"
    assert [p["kind"] for p in health[nodes["xid79"]]["problems"]] == ["gpu_xid_error"]
    assert health[nodes["ok"]]["status"] == "healthy"


def test_a_query_prometheus_refuses_is_said_with_prometheus_own_words(dcgm_prometheus):
    source = prometheus_reads.prometheus_source({"url": dcgm_prometheus.url})
    with pytest.raises(prometheus_reads.QueryRefused) as refused:
        prometheus_reads.run_query(prometheus_reads.url_opener(source), source, "max by (node) (", 0.0)
    assert str(refused.value).startswith("HTTP 400 Bad Request: bad_data: ")
