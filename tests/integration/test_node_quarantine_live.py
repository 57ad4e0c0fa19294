"""gpu_node_quarantine on the local control plane, with the API server's request counters as the
witness: four KWOK GPU nodes of a model of their own (so the breaker's pool is theirs alone), one of
them cordoned by someone else; on them a GPU pod, a pod without GPUs, a DaemonSet pod that holds a GPU
and a GPU pod a PodDisruptionBudget protects.

Check mode sends no write and plans what the real run then does; the real run sends one patch per
node it changes and one eviction that succeeds per GPU pod it may evict, evicts only that pod, names
the budget that keeps the other, holds back the node the breaker's share does not allow and leaves
the other's cordon recorded as not ours; a rerun patches nothing and evicts nothing. The nodes, the
pods and the budget are the test's own and gone at its end.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections import Counter
from typing import Any

import pytest
from conftest import ANSIBLE_BIN, LocalCluster, ansible_env, run_ansible_module, wait_until

from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    QUARANTINE_TAINT_KEY,
    RECORD_ANNOTATION,
    read_record,
)
from tests.cluster.counters import api_requests, sent_since, writes_on

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

GPU = "nvidia.com/gpu"
MODEL = "NVIDIA-QTEST-80GB"


def writes(cluster: LocalCluster) -> Counter:
    """Write requests on nodes and pods (not their status, which KWOK keeps writing) the API server has
    answered, by (verb, resource, subresource, code)."""
    return api_requests(cluster, writes_on("nodes", "pods"))


def run_with_diff(cluster: LocalCluster, args: dict[str, Any], *flags: str) -> tuple[str, dict[str, Any]]:
    """The module through `ansible --diff` with the default output: (the diff it printed, the result, with
    what ansible printed on stderr, its warnings, as `stderr`)."""
    command = [str(ANSIBLE_BIN / "ansible"), "localhost", "-m", "kubegpu.scheduling.gpu_node_quarantine", "--diff"]
    command += [*flags, "-a", json.dumps(args)]
    done = subprocess.run(
        command, check=False, env=ansible_env(cluster.kubeconfig), capture_output=True, text=True, timeout=180
    )
    marker = re.search(r"^localhost \| [A-Z!]+ => ", done.stdout, re.MULTILINE)
    if not marker:
        pytest.fail(f"ansible printed no result (rc {done.returncode}): {done.stdout}\n{done.stderr}")
    result = json.loads(done.stdout[marker.end() :])
    result["stderr"] = done.stderr
    return done.stdout[: marker.start()], result


def gpu_node(name: str, run: str, unschedulable: bool = False, extra_labels: dict | None = None) -> dict:
    resources = {GPU: "8", "cpu": "64", "memory": "512Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            # The TTL controller's annotation set already, so that it never patches the node.
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": MODEL,
                "kubegpu-test/quarantine-run": run,
                **(extra_labels or {}),
            },
        },
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"capacity": resources, "allocatable": resources},
    }


def pod(name: str, namespace: str, node: str, gpus: int = 0, labels: dict | None = None) -> dict:
    limits = {GPU: str(gpus)} if gpus else {"cpu": "100m"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": name}},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}],
        },
    }


def daemonset(namespace: str, run: str) -> dict:
    labels = {"app": "gpu-monitor"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "gpu-monitor", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"kubegpu-test/quarantine-ds": run},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {"name": "main", "image": "busybox", "resources": {"limits": {GPU: "1"}}},
                    ],
                },
            },
        },
    }


UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def node_settled(cluster: LocalCluster, name: str) -> bool:
    """Ready, and tainted by the node lifecycle controller as it will stay: the unschedulable taint on
    a cordoned node, nothing on the others (so no taint changes between the module's read and write)."""
    node = cluster.get(f"/api/v1/nodes/{name}")
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", []))
    keys = [t["key"] for t in node["spec"].get("taints", [])]
    return ready and keys == ([UNSCHEDULABLE_TAINT] if node["spec"].get("unschedulable") else [])


def taint_keys(cluster: LocalCluster, name: str) -> set[str]:
    return {t["key"] for t in cluster.get(f"/api/v1/nodes/{name}")["spec"].get("taints", [])}


def pod_running(cluster: LocalCluster, path: str) -> bool:
    status, body = cluster.api.request("GET", path)
    return status == 200 and isinstance(body, dict) and body.get("status", {}).get("phase") == "Running"


def pod_gone(cluster: LocalCluster, path: str) -> bool:
    return cluster.api.request("GET", path)[0] == 404


def comparable(result: dict) -> dict:
    """What check mode and the real run must agree on: the plan, without the record's time."""
    nodes = []
    for entry in result["nodes"]:
        entry = dict(entry)
        if entry["record"] is not None:
            entry["record"] = {k: v for k, v in entry["record"].items() if k != "at"}
        nodes.append(entry)
    keys = ("quarantined", "unchanged", "held_back", "missing", "to_evict", "pools")
    return {"nodes": nodes, **{key: result[key] for key in keys}}


def test_quarantine_plans_in_check_mode_what_it_then_does_evicting_only_gpu_pods_past_no_budget(
    cluster: LocalCluster, namespace: str
):
    run = uuid.uuid4().hex[:8]
    healthy, cordoned, held, spare = (f"q-{run}-{role}" for role in ("healthy", "cordoned", "held", "spare"))
    names = [healthy, cordoned, held, spare]
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    try:
        for name in names:
            extra = {"kubegpu-test/quarantine-ds": run} if name == healthy else None
            status, body = cluster.create("/api/v1/nodes", gpu_node(name, run, name == cordoned, extra))
            assert status == 201, body
        for name in names:
            wait_until(lambda n=name: node_settled(cluster, n), 60, what=f"{name} Ready, its taints settled")
        for item in (
            pod("train", namespace, healthy, gpus=2),
            pod("web", namespace, healthy),
            pod("serve", namespace, cordoned, gpus=4),
            pod("other-node", namespace, held, gpus=1),
        ):
            status, body = cluster.create(pods_path, item)
            assert status == 201, body
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "keep-serve", "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "serve"}}},
        }
        status, body = cluster.create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", budget)
        assert status == 201, body
        status, body = cluster.create(f"/apis/apps/v1/namespaces/{namespace}/daemonsets", daemonset(namespace, run))
        assert status == 201, body
        for name in ("train", "web", "serve", "other-node"):
            wait_until(lambda n=name: pod_running(cluster, f"{pods_path}/{n}"), 60, what=f"pod {name} Running")

        def monitor_pod() -> str | None:
            items = cluster.get(f"{pods_path}?labelSelector=app%3Dgpu-monitor")["items"]
            running = [p for p in items if p.get("status", {}).get("phase") == "Running"]
            return running[0]["metadata"]["name"] if running else None

        monitor = wait_until(monitor_pod, 60, what="the DaemonSet's pod Running")
        budget_path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/keep-serve"
        wait_until(
            lambda: cluster.get(budget_path).get("status", {}).get("currentHealthy") == 1, 60, what="budget current"
        )
        assert cluster.get(budget_path)["status"]["disruptionsAllowed"] == 0
        before_nodes = {n: cluster.get(f"/api/v1/nodes/{n}") for n in names}

        args = {
            "names": [healthy, cordoned, held, f"q-{run}-absent"],
            "reason": "XID 79 (live test)",
            "quarantined_by": "oncall-test",
            "evict": True,
            "eviction_timeout": 4,
            "max_share": 0.5,
        }
        # --- check mode: the whole plan, no write ---------------------------------------------------
        start = writes(cluster)
        printed, checked = run_with_diff(cluster, args, "--check")
        assert checked["changed"] is True and not checked.get("failed"), checked.get("msg")
        assert sent_since(start, writes(cluster)) == {}
        assert checked["writes"] == 0
        assert checked["quarantined"] == [healthy, cordoned]
        assert [h["node"] for h in checked["held_back"]] == [held]
        assert "at most 16; 16 already" in checked["held_back"][0]["reason"]
        assert checked["missing"] == [f"q-{run}-absent"]
        assert checked["to_evict"] == [f"{namespace}/train", f"{namespace}/serve"]
        plan = {entry["node"]: entry for entry in checked["nodes"]}
        assert plan[healthy]["cordon"] and plan[healthy]["taint"] and plan[healthy]["record"]["cordoned"] is True
        assert not plan[cordoned]["cordon"] and plan[cordoned]["record"]["cordoned"] is False
        assert [p["pod"] for p in plan[healthy]["left"]] == [f"{namespace}/{monitor}"]
        serve = plan[cordoned]["evict"][0]
        assert serve["blocked_by"] == ["keep-serve"]
        assert serve["budgets"] == [{"name": "keep-serve", "disruptions_allowed": 0, "allows": False}]
        assert checked["pools"] == {f"model={MODEL}": {"out_of_service": 16, "limit": 16}}
        assert printed.count("+++ after: node/") == 2, printed
        assert f"+++ after: node/{healthy}" in printed and f"+++ after: node/{cordoned}" in printed
        assert "+spec.taints: kubegpu.io/quarantine:NoSchedule" in printed and "+spec.unschedulable: true" in printed
        assert {n: cluster.get(f"/api/v1/nodes/{n}")["spec"] for n in names} == {
            n: before_nodes[n]["spec"] for n in names
        }

        # --- the real run -------------------------------------------------------------------------
        start = writes(cluster)
        printed_run, applied = run_with_diff(cluster, args)
        assert applied["changed"] is True and not applied.get("failed"), applied.get("msg")
        assert printed_run.count("+++ after: node/") == 2, printed_run
        # The node lifecycle controller answers the cordon with its own taint, one PATCH of its own.
        wait_until(lambda: taint_keys(cluster, healthy) >= {UNSCHEDULABLE_TAINT}, 60, what="the controller's taint")
        sent = sent_since(start, writes(cluster))
        assert comparable(applied) == comparable(checked)
        ours = 2  # the healthy node and the one cordoned before: one patch each
        assert sent.get(("PATCH", "nodes", "", "200")) == ours + 1, sent
        assert sum(v for k, v in sent.items() if k[:2] == ("PATCH", "nodes")) == ours + 1, sent
        assert sent.get(("POST", "pods", "eviction", "201")) == 1, sent
        assert sent.get(("POST", "pods", "eviction", "429"), 0) >= 1, sent
        # Nothing deleted past a budget, nothing else written to a pod: KWOK finishes the eviction.
        assert not [k for k in sent if k[1] == "pods" and k[2] != "eviction" and k[0] != "DELETE"], sent
        assert not [k for k in sent if k[0] == "POST" and k[2] == "eviction" and k[3] not in ("201", "429")], sent
        assert applied["writes"] == sum(v for k, v in sent.items() if k[:2] != ("DELETE", "pods")) - 1
        assert applied["evicted"] == [f"{namespace}/train"]
        assert [(b["pod"], b["budgets"]) for b in applied["blocked"]] == [(f"{namespace}/serve", ["keep-serve"])]
        # The API server's 429 to an eviction is the budget's refusal, said so with the budget it names.
        refusal = applied["blocked"][0]["error"]
        assert refusal.startswith('refused by PodDisruptionBudget "keep-serve" (429'), refusal
        assert "throttled" not in refusal
        assert f"{namespace}/serve (PodDisruptionBudget keep-serve)" in " ".join(applied["stderr"].split())
        blocked = [f for f in applied["findings"] if f["kind"] == "quarantine.eviction_blocked_by_budget"]
        assert [f["subject"] for f in blocked] == [f"{namespace}/serve"]
        assert f"PodDisruptionBudget {namespace}/keep-serve" in blocked[0]["problem"]

        wait_until(lambda: pod_gone(cluster, f"{pods_path}/train"), 60, what="train evicted")
        for name in ("web", "serve", "other-node", monitor):
            assert pod_running(cluster, f"{pods_path}/{name}"), name
        for name, cordoned_by_us in ((healthy, True), (cordoned, False)):
            node = cluster.get(f"/api/v1/nodes/{name}")
            assert node["spec"]["unschedulable"] is True
            keys = [t["key"] for t in node["spec"]["taints"]]
            assert QUARANTINE_TAINT_KEY in keys and set(keys) <= {QUARANTINE_TAINT_KEY, UNSCHEDULABLE_TAINT}
            record = read_record(node["metadata"]["annotations"][RECORD_ANNOTATION])
            assert (record.by, record.reason, record.cordoned, record.tainted) == (
                "oncall-test",
                "XID 79 (live test)",
                cordoned_by_us,
                True,
            )
        for name in (held, spare):
            assert cluster.get(f"/api/v1/nodes/{name}")["spec"] == before_nodes[name]["spec"]

        # --- reruns -------------------------------------------------------------------------------
        start = writes(cluster)
        status, again, done = run_ansible_module(cluster.kubeconfig, "gpu_node_quarantine", dict(args, evict=False))
        assert status == "SUCCESS", done.stdout
        assert sent_since(start, writes(cluster)) == {} and again["writes"] == 0
        assert again["unchanged"] == [healthy, cordoned] and again["quarantined"] == []
        # With evict, only the pod its budget still keeps is tried again (refused): no patch, no eviction.
        start = writes(cluster)
        status, again, done = run_ansible_module(
            cluster.kubeconfig, "gpu_node_quarantine", dict(args, eviction_timeout=0)
        )
        assert status == "SUCCESS", done.stdout
        assert sent_since(start, writes(cluster)) == {("POST", "pods", "eviction", "429"): 1}
        assert again["to_evict"] == [f"{namespace}/serve"] and again["evicted"] == []
    finally:
        # Each removal waited for, so that no controller still deletes or patches this test's objects
        # while a later test counts the API server's writes.
        daemonset_path = f"/apis/apps/v1/namespaces/{namespace}/daemonsets/gpu-monitor"
        cluster.api.request("DELETE", daemonset_path + "?propagationPolicy=Foreground")
        wait_until(lambda: cluster.api.request("GET", daemonset_path)[0] == 404, 60, what="the DaemonSet to go")
        cluster.api.request("DELETE", pods_path)
        wait_until(lambda: not cluster.get(pods_path)["items"], 60, what="the test's pods to go")
        for name in names:
            cluster.delete(f"/api/v1/nodes/{name}")
        wait_until(
            lambda: all(cluster.api.request("GET", f"/api/v1/nodes/{name}")[0] == 404 for name in names),
            60,
            what="the test's nodes to go",
        )
