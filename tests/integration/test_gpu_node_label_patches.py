"""gpu_node_label's writes as the API server counts them: one PATCH per node it changes while the
nodes' status keeps changing (heartbeats), and a label someone else writes between the read and the
write is read again and left alone.

The counts come from kube-apiserver's `/metrics` (`apiserver_request_total`, verb PATCH, resource
nodes, no subresource: heartbeats go to `nodes/status`), read before and after. Every test starts
from nodes without the accelerator label and its ownership record, and puts back what it found
(`unlabeled_nodes`).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
from conftest import ACCELERATOR, OWNERSHIP, LocalCluster, run_ansible_module, wait_until

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.apply import ApplyStatus, apply_plans
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.plan import (
    Outcome,
    build_options,
    plan_node,
    plan_nodes,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.reads import (
    patch_node,
    read_nodes,
    reread_node,
)

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

_REQUESTS = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def node_patches(cluster: LocalCluster) -> Counter[str]:
    """PATCH requests on nodes (not their status) the API server has answered, by status code."""
    status, text = cluster.api.request("GET", "/metrics")
    assert status == 200 and isinstance(text, str), f"GET /metrics: {status}"
    counts: Counter[str] = Counter()
    for match in _REQUESTS.finditer(text):
        labels = dict(_LABEL.findall(match["labels"]))
        if labels.get("verb") == "PATCH" and labels.get("resource") == "nodes" and not labels.get("subresource"):
            counts[labels["code"]] += int(float(match["value"]))
    return counts


def sent_since(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    return {code: after[code] - before[code] for code in after if after[code] != before[code]}


def heartbeat(cluster: LocalCluster, name: str) -> None:
    """What a kubelet's status update does: a new heartbeat time on the Ready condition (a new resourceVersion)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {"status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": now}]}}
    status, reply = cluster.api.request(
        "PATCH", f"/api/v1/nodes/{name}/status", body, content_type="application/strategic-merge-patch+json"
    )
    assert status == 200, f"heartbeat of {name}: {status} {reply}"


@contextmanager
def heartbeating(cluster: LocalCluster, names: list[str]) -> Iterator[list[int]]:
    """Every node's status updated over and over while the block runs; yields the count of updates."""
    beats = [0]
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            for name in names:
                heartbeat(cluster, name)
                beats[0] += 1

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield beats
    finally:
        stop.set()
        thread.join(timeout=30)


def resource_versions(cluster: LocalCluster) -> dict[str, str]:
    return {n["metadata"]["name"]: n["metadata"]["resourceVersion"] for n in cluster.get("/api/v1/nodes")["items"]}


def apply_noting_rereads(client, plans, options, is_gpu):
    """The module's apply step against the cluster, with the names of the nodes it read again."""
    rereads: list[str] = []

    def reread(name: str):
        rereads.append(name)
        return reread_node(client, name)

    results = apply_plans(
        plans,
        send=lambda name, patch: patch_node(client, name, patch),
        reread=reread,
        replan=lambda node: plan_node(node, options, is_gpu),
        errors=(ClusterError,),
    )
    return results, rereads


def test_a_cold_run_sends_one_patch_per_node_it_changes_while_nodes_heartbeat(unlabeled_nodes: LocalCluster):
    cluster = unlabeled_nodes
    names = sorted(resource_versions(cluster))

    with heartbeating(cluster, names) as beats:
        wait_until(lambda: beats[0] >= len(names), timeout=30, what="a first round of heartbeats")
        during = beats[0]
        before = node_patches(cluster)
        status, result, done = run_ansible_module(cluster.kubeconfig, "gpu_node_label", {})
        after = node_patches(cluster)
        during = beats[0] - during

    assert status == "CHANGED", done.stdout + done.stderr
    changed = len(result["labeled"])
    assert changed >= 2 and result["counts"]["failed"] == 0
    assert during > len(names), "the nodes were heartbeating while the module ran"
    assert sent_since(before, after) == {"200": changed}, "one accepted PATCH per node changed, nothing refused"
    assert result["writes"] == changed
    labeled = {name for name, (label, _record) in cluster.node_labeling().items() if label}
    assert labeled == set(result["labeled"])


def test_nodes_whose_status_changed_since_the_read_are_patched_once(unlabeled_nodes: LocalCluster):
    # Deterministic: every node's status changes between the read and the write.
    cluster = unlabeled_nodes
    client = client_from_params({"kubeconfig": str(cluster.kubeconfig)})
    options, is_gpu = build_options(), gpu_resource_matcher()
    nodes, _missing = read_nodes(client, None, None)
    plans = plan_nodes(nodes, options, is_gpu)
    read_versions = resource_versions(cluster)
    time.sleep(1.1)  # heartbeat times have second resolution: each must differ from any before
    for node in nodes:
        heartbeat(cluster, node.name)
    beaten = resource_versions(cluster)
    assert all(beaten[name] != version for name, version in read_versions.items())
    before = node_patches(cluster)
    results, rereads = apply_noting_rereads(client, plans, options, is_gpu)
    after = node_patches(cluster)

    changed = [r.plan.name for r in results if r.plan.outcome is Outcome.LABEL]
    assert len(changed) >= 2 and all(r.status is ApplyStatus.DONE for r in results)
    assert sent_since(before, after) == {"200": len(changed)}
    assert rereads == []
    assert client.write_count == len(changed)


def test_a_label_written_between_read_and_write_is_read_again_and_left_alone(unlabeled_nodes: LocalCluster):
    cluster = unlabeled_nodes
    client = client_from_params({"kubeconfig": str(cluster.kubeconfig)})
    options, is_gpu = build_options(), gpu_resource_matcher()
    nodes, missing = read_nodes(client, None, ["gfd-h100", "ack-v100"])
    assert missing == []
    plans = plan_nodes(nodes, options, is_gpu)
    assert [(p.name, p.outcome) for p in plans] == [("ack-v100", Outcome.LABEL), ("gfd-h100", Outcome.LABEL)]
    # Another client labels one node, and both heartbeat, after the read.
    cluster.patch("/api/v1/nodes/ack-v100", {"metadata": {"labels": {ACCELERATOR: "nvidia-tesla-v100"}}})
    for plan in plans:
        heartbeat(cluster, plan.name)
    before = node_patches(cluster)
    results, rereads = apply_noting_rereads(client, plans, options, is_gpu)
    after = node_patches(cluster)

    outcomes = {r.plan.name: (r.status, r.plan.outcome) for r in results}
    assert outcomes == {
        "ack-v100": (ApplyStatus.DONE, Outcome.CONFLICT),
        "gfd-h100": (ApplyStatus.DONE, Outcome.LABEL),
    }
    assert rereads == ["ack-v100"]
    # The refused patch is a 422 (its `test` of the label failed), and it is not sent again.
    assert sent_since(before, after) == {"200": 1, "422": 1}
    labeling = cluster.node_labeling()
    assert labeling["ack-v100"] == ("nvidia-tesla-v100", None), "the other client's label was overwritten"
    assert labeling["gfd-h100"][0] == "NVIDIA-H100-80GB-HBM3"
    assert OWNERSHIP in cluster.get("/api/v1/nodes/gfd-h100")["metadata"]["annotations"]
