"""gpu_node_release on the local control plane, with the API server's counters as the witness.

Each test makes its own KWOK GPU nodes and quarantines them as the quarantine writes it (cordon,
the taint kubegpu.io/quarantine:NoSchedule, the record built with ownership.py), by a direct patch:
`ours` (cordoned and tainted by the collection), `human` (cordoned by someone else, then tainted by
the collection), `bad` (the collection's, its proof pod fails: KWOK's stage pod-proof-fail), `free`
(never quarantined) and `theirs` (cordoned and tainted with the collection's key by someone else,
no record). The proof pods run to completion through the stage pod-proof-complete.

The counters (`apiserver_request_total`) are the write requests on nodes, pods and namespaces
without a subresource (KWOK's status updates go to `*/status`). When a node is cordoned or
uncordoned, kube-controller-manager's node lifecycle controller adds or removes its own taint
node.kubernetes.io/unschedulable with a PATCH of the node; the tests wait for it and count it.
Every node, pod and the proof namespace made here are deleted again.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from conftest import GPU, LocalCluster, run_ansible_module, wait_until

from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    PROOF_APP,
    PROOF_NAMESPACE,
    SAMPLE_TOLERATIONS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    DEFAULT_QUARANTINED_BY,
    QUARANTINE_TAINT,
    RECORD_ANNOTATION,
    Record,
    record_annotation,
)
from tests.cluster import fleet as fleet_file
from tests.cluster.counters import api_requests, object_writes_on, sent_since

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

# Keeps every other pod off the nodes made here; the proof pods tolerate it (proof.tolerations).
TEST_TAINT = {"key": "kubegpu.test/release", "value": "true", "effect": "NoSchedule"}
CORDON_TAINT = "node.kubernetes.io/unschedulable"
PROOF = {"tolerations": [*SAMPLE_TOLERATIONS, {"key": TEST_TAINT["key"], "operator": "Exists"}]}
FAILING_PROOF = {**PROOF, "annotations": {"kubegpu.test/proof-fails": "true"}}
GPUS = "2"


def writes(cluster: LocalCluster) -> Counter:
    """Write requests on nodes, pods and namespaces (no subresource) answered so far: (verb, resource, code)."""
    return api_requests(cluster, object_writes_on("nodes", "pods", "namespaces"))


def gpu_node(name: str) -> dict:
    spec = {"name": name, "cpu": "16", "memory": "64Gi", "labels": {}, "taints": [TEST_TAINT]}
    return fleet_file.node_object({**spec, "gpus": int(GPUS), "allocatable_gpus": int(GPUS)})


def node_of(cluster: LocalCluster, name: str) -> dict:
    return cluster.get(f"/api/v1/nodes/{name}")


def marks(cluster: LocalCluster, name: str) -> tuple[bool, list[str], str | None]:
    """A node's cordon, its taints other than the controller's, and its quarantine record."""
    node = node_of(cluster, name)
    taints = [f"{t['key']}:{t['effect']}" for t in node["spec"].get("taints", []) if t["key"] != CORDON_TAINT]
    record = node["metadata"].get("annotations", {}).get(RECORD_ANNOTATION)
    return node["spec"].get("unschedulable", False), taints, record


def written_parts(cluster: LocalCluster, name: str) -> tuple[dict, dict, dict]:
    """What a write of a release could change: the spec, labels and annotations."""
    node = node_of(cluster, name)
    return node["spec"], node["metadata"].get("labels", {}), node["metadata"].get("annotations", {})


# Set on every node by kube-controller-manager's TTL controller (pkg/controller/ttl).
TTL_ANNOTATION = "node.alpha.kubernetes.io/ttl"


def settled(cluster: LocalCluster, name: str) -> bool:
    """Ready, annotated by the TTL controller (its one patch of a new node, which the counters would otherwise
    take for the module's when it comes late), and the controller's cordon taint present exactly when the node is
    cordoned."""
    node = node_of(cluster, name)
    if TTL_ANNOTATION not in node["metadata"].get("annotations", {}):
        return False
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", []))
    keys = [t["key"] for t in node["spec"].get("taints", [])]
    controller = [k for k in keys if k.startswith("node.kubernetes.io/")]
    cordoned = node["spec"].get("unschedulable", False)
    return ready and controller == ([CORDON_TAINT] if cordoned else [])


def cordon(cluster: LocalCluster, name: str) -> None:
    cluster.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}})


def quarantine(cluster: LocalCluster, name: str, *, record: bool = True) -> None:
    """What the quarantine writes: cordon (recorded only when it was not cordoned), its taint, its record."""
    node = node_of(cluster, name)
    was_cordoned = node["spec"].get("unschedulable", False)
    taints = [t for t in node["spec"].get("taints", []) if t["key"] != CORDON_TAINT] + [dict(QUARANTINE_TAINT)]
    body: dict = {"spec": {"unschedulable": True, "taints": taints}}
    if record:
        # <, > and & and a non-ASCII letter: the release's guard tests this text against the API server's own encoding.
        reason = "simulated XID 79: temp > 90 \u00b0C & <ECC>"
        entry = Record(DEFAULT_QUARANTINED_BY, reason, "2026-12-03T10:00:00Z", not was_cordoned, True)
        body["metadata"] = {"annotations": {RECORD_ANNOTATION: record_annotation(entry)}}
    cluster.patch(f"/api/v1/nodes/{name}", body)


def no_pod_terminating(cluster: LocalCluster) -> bool:
    """No pod of the cluster is being deleted: the counters then see only this test's pod deletions,
    not KWOK finishing those of the tests before (evicted or deleted pods it removes)."""
    pods = cluster.get("/api/v1/pods")["items"]
    return not any(p["metadata"].get("deletionTimestamp") for p in pods)


def writes_from_now(cluster: LocalCluster) -> Counter[tuple[str, str, str]]:
    """The write counters once the cluster's pod deletions have settled."""
    wait_until(lambda: no_pod_terminating(cluster), timeout=60, what="no pod being deleted")
    return writes(cluster)


def proof_pods(cluster: LocalCluster) -> list[str]:
    status, body = cluster.api.request(
        "GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}/pods?labelSelector=app.kubernetes.io%2Fname%3D{PROOF_APP}"
    )
    return [p["metadata"]["name"] for p in body["items"]] if status == 200 and isinstance(body, dict) else []


@pytest.fixture(scope="module")
def proof_namespace(cluster: LocalCluster) -> Iterator[None]:
    """The proof namespace the module creates, deleted once every test of the file ran."""
    yield
    cluster.delete(f"/api/v1/namespaces/{PROOF_NAMESPACE}")
    wait_until(
        lambda: cluster.api.request("GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}")[0] == 404,
        timeout=120,
        what=f"namespace {PROOF_NAMESPACE} to go",
    )


@pytest.fixture
def nodes(cluster: LocalCluster, proof_namespace: None) -> Iterator[dict[str, str]]:
    """The nodes of the docstring, quarantined (or not) as it says, settled; deleted afterwards."""
    prefix = f"rel-{uuid.uuid4().hex[:6]}"
    names = {role: f"{prefix}-{role}" for role in ("ours", "human", "bad", "free", "theirs")}
    for name in names.values():
        status, reply = cluster.create("/api/v1/nodes", gpu_node(name))
        assert status == 201, reply
    try:
        cordon(cluster, names["human"])
        cordon(cluster, names["theirs"])
        for role in ("ours", "human", "bad"):
            quarantine(cluster, names[role])
        quarantine(cluster, names["theirs"], record=False)
        for name in names.values():
            wait_until(lambda name=name: settled(cluster, name), timeout=60, what=f"{name} Ready and settled")
        yield names
    finally:
        for name in names.values():
            cluster.delete(f"/api/v1/nodes/{name}")
        wait_until(lambda: not proof_pods(cluster), timeout=60, what="proof pods to go")


def release(cluster: LocalCluster, nodes: list[str], proof: dict, *flags: str) -> tuple[str, dict]:
    args = {"names": nodes, "proof": proof, "proof_timeout": 60}
    status, result, done = run_ansible_module(cluster.kubeconfig, "gpu_node_release", args, *flags)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return status, result


def test_check_mode_shows_the_plan_and_writes_nothing(cluster: LocalCluster, nodes: dict[str, str]):
    asked = [nodes[r] for r in ("ours", "human", "free", "theirs")] + ["rel-no-such-node"]
    before_marks = {name: marks(cluster, name) for name in nodes.values()}
    before = writes_from_now(cluster)
    status, result = release(cluster, asked, PROOF, "--check", "--diff")
    after = writes(cluster)

    assert status == "CHANGED", result
    assert sent_since(before, after) == {}, "check mode sent a write"
    assert result["writes"] == 0
    assert result["released"] == [nodes["ours"], nodes["human"]]
    assert result["not_quarantined"] == [nodes["free"]]
    assert [n["node"] for n in result["not_ours"]] == [nodes["theirs"]]
    assert result["missing"] == ["rel-no-such-node"]
    plan = {p["node"]: p for p in result["plan"]}
    assert plan[nodes["ours"]]["removes"] == [
        "taint kubegpu.io/quarantine:NoSchedule",
        "cordon",
        f"annotation {RECORD_ANNOTATION}",
    ]
    assert "cordon" not in plan[nodes["human"]]["removes"] and plan[nodes["human"]]["keeps"]
    pod = plan[nodes["ours"]]["proof_pod"]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {GPU: GPUS}
    assert plan[nodes["free"]]["proof_pod"] is None and plan[nodes["theirs"]]["patch"] is None
    assert {name: marks(cluster, name) for name in nodes.values()} == before_marks
    assert proof_pods(cluster) == []


def test_a_node_is_released_after_its_proof_and_a_humans_cordon_survives(cluster: LocalCluster, nodes: dict[str, str]):
    untouched = {r: written_parts(cluster, nodes[r]) for r in ("free", "theirs")}
    asked = [nodes[r] for r in ("ours", "human", "free", "theirs")]
    before = writes_from_now(cluster)
    status, result = release(cluster, asked, PROOF)
    # The node lifecycle controller takes its cordon taint off the uncordoned node.
    wait_until(lambda: settled(cluster, nodes["ours"]), timeout=60, what="the controller's taint off the released node")
    after = writes(cluster)

    assert status == "CHANGED", result
    assert result["released"] == [nodes["ours"], nodes["human"]] and result["held"] == []
    assert marks(cluster, nodes["ours"]) == (False, [f"{TEST_TAINT['key']}:NoSchedule"], None)
    assert marks(cluster, nodes["human"]) == (True, [f"{TEST_TAINT['key']}:NoSchedule"], None), "the human's cordon"
    for role, parts in untouched.items():
        assert written_parts(cluster, nodes[role]) == parts, f"{role} was written"
    sent = sent_since(before, after)
    created_namespace = sent.pop(("POST", "namespaces", "201"), 0)
    # One patch per node released, and the controller's on the uncordoned one; one proof pod each.
    assert sent.pop(("PATCH", "nodes", "200")) == 3, sent
    assert sent.pop(("POST", "pods", "201")) == 2, sent
    # The module deletes each finished proof pod (its DELETEs are in result["writes"] below). KWOK's
    # pod-delete stage sends DELETEs of its own for the same pods, 200 or 404 by when it sees them
    # (more of them on a busy machine), so the counter holds the module's as a floor.
    assert sent.pop(("DELETE", "pods", "200")) >= 2, sent
    sent.pop(("DELETE", "pods", "404"), None)
    assert sent == {}, sent
    # The module's own writes: the namespace (first run), per node proven a pod created, deleted, a patch.
    assert result["writes"] == created_namespace + 2 + 2 + 2
    assert proof_pods(cluster) == []


def test_a_node_whose_proof_fails_stays_quarantined(cluster: LocalCluster, nodes: dict[str, str]):
    quarantined = marks(cluster, nodes["bad"])
    before = writes_from_now(cluster)
    status, result = release(cluster, [nodes["bad"]], FAILING_PROOF)
    after = writes(cluster)

    assert status == "FAILED!", result
    assert "stay quarantined" in result["msg"] and result["released"] == []
    (held,) = result["held"]
    assert (held["node"], held["phase"], held["exit_code"], held["exit_reason"]) == (nodes["bad"], "Failed", 1, "Error")
    assert "Xid 31" in held["reason"]
    assert held["logs"] and held["logs"][-1].endswith("Accuracy at step 999: 0.9703")
    assert marks(cluster, nodes["bad"]) == quarantined
    sent = sent_since(before, after)
    assert ("PATCH", "nodes", "200") not in sent and sent.get(("POST", "pods", "201")) == 1, sent
    assert proof_pods(cluster) == []


def test_a_proof_the_scheduler_never_places_is_said_never_scheduled(cluster: LocalCluster, nodes: dict[str, str]):
    """A pod bound to the node by name holds one of its GPUs, so the proof, which asks for all of them,
    cannot be placed: the real scheduler keeps it Pending with its reason, and the node stays quarantined."""
    blocker = f"{PROOF_NAMESPACE}/hold-{nodes['ours']}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": blocker.split("/")[1], "namespace": PROOF_NAMESPACE},
        "spec": {
            "nodeName": nodes["ours"],
            "containers": [{"name": "hold", "image": "busybox", "resources": {"limits": {GPU: "1"}}}],
        },
    }
    status, reply = cluster.create(f"/api/v1/namespaces/{PROOF_NAMESPACE}/pods", pod)
    assert status == 201, reply
    try:
        quarantined = marks(cluster, nodes["ours"])
        args = {"names": [nodes["ours"]], "proof": PROOF, "proof_timeout": 10}
        status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_node_release", args)
        assert status == "FAILED!", result
        (held,) = result["held"]
        assert held["phase"] == "Pending"
        assert f"never scheduled onto {nodes['ours']} in 10s" in held["reason"], held["reason"]
        assert f"Insufficient {GPU}" in held["reason"] and "still Pending on" not in held["reason"]
        assert marks(cluster, nodes["ours"]) == quarantined
    finally:
        cluster.delete(f"/api/v1/namespaces/{PROOF_NAMESPACE}/pods/{blocker.split('/')[1]}?gracePeriodSeconds=0")


def test_a_rerun_on_released_nodes_writes_nothing(cluster: LocalCluster, nodes: dict[str, str]):
    asked = [nodes[r] for r in ("ours", "human", "free")]
    status, result = release(cluster, asked, PROOF)
    assert status == "CHANGED", result
    wait_until(lambda: settled(cluster, nodes["ours"]), timeout=60, what="the released node settled")
    before = writes_from_now(cluster)
    status, result = release(cluster, asked, PROOF, "--diff")
    after = writes(cluster)

    assert status == "SUCCESS", result
    assert result["changed"] is False and result["writes"] == 0
    assert result["not_quarantined"] == asked
    assert sent_since(before, after) == {}
