"""playbooks/driver_upgrade.yml on the local control plane, in both modes, with the API server's
request counters and the modules' own `writes` as the witnesses.

Host mode, on KWOK GPU nodes of this test (2 GPUs each, one pool of their own): `a`, `b`, `c-human`
(cordoned by someone else first), `d-dead` (its GPUs never come back after the install) and `blocked`
(a GPU pod under a PodDisruptionBudget that allows no disruption, which the API server would refuse
with 429). The host tasks (fixtures/driver_upgrade/host_tasks.yml, tests/cluster/driver_roll.py)
withdraw the node's GPUs, label the new version, fail two pods' admission with
UnexpectedAdmissionError (one a controller owns, one bare) and publish the GPUs again 2 s later.
The dry run writes nothing; the real run upgrades `a` (the canary), then `b` and `c-human`, and stops
at `d-dead`, which stays quarantined with its reason; the human's cordon stays; `blocked` is never
written; a rerun writes nothing.

GPU Operator mode, on nodes `canary` (its upgrade fails), `ob`, `oc` (cordoned by someone else) and
`stuck` (it never leaves validation-required), with tests/cluster/driver_roll.py's UpgradeController
walking the state labels: the canary's upgrade-failed stops the roll with the others held and
otherwise untouched; a second run rolls `ob` then `oc` to upgrade-done, proves and releases them,
leaves `oc`'s own cordon, and stops at `stuck`, naming its state, left quarantined.

Everything made here is deleted at the end (the nodes, the test namespace, the proof namespace when
the test made it).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ANSIBLE_BIN, GPU, REPO_ROOT, LocalCluster, ansible_env, wait_until

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.record import ROLL_ANNOTATION, read_roll
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    PROOF_NAMESPACE,
    SAMPLE_TOLERATIONS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import RECORD_ANNOTATION
from tests.cluster import driver_roll
from tests.cluster import fleet as fleet_file
from tests.cluster.counters import api_requests, object_writes_on, sent_since

pytestmark = [pytest.mark.cluster]

PLAYBOOK = REPO_ROOT / "playbooks" / "driver_upgrade.yml"
FIXTURES = Path(__file__).parent / "fixtures" / "driver_upgrade"
OLD, TARGET = "550.90.07", "570.133.20"
TEST_TAINT = {"key": "kubegpu.test/roll", "value": "true", "effect": "NoSchedule"}
CORDON_TAINT = "node.kubernetes.io/unschedulable"
PROOF = {"tolerations": [*SAMPLE_TOLERATIONS, {"key": TEST_TAINT["key"], "operator": "Exists"}]}
RECAP = re.compile(r"^localhost\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)
WRITES = re.compile(r'^\s*"writes": (\d+),?$', re.MULTILINE)


def api_writes(cluster: LocalCluster) -> Counter:
    """Write requests on nodes, pods and namespaces (no subresource) so far: (verb, resource, code)."""
    return api_requests(cluster, object_writes_on("nodes", "pods", "namespaces"))


def quiet_writes(cluster: LocalCluster, names: list[str]) -> Counter[tuple[str, str, str]]:
    """The counters once the test's nodes have settled and nothing was written for 2.5 s (the node
    lifecycle controller's taint patches on new or cordoned nodes come a moment after)."""
    wait_until(lambda: settled(cluster, names), timeout=60, what="the nodes settled")
    last = api_writes(cluster)

    def still() -> bool:
        nonlocal last
        time.sleep(2.5)
        now = api_writes(cluster)
        quiet, last = now == last, now
        return quiet

    wait_until(still, timeout=30, interval=0, what="no write for 2.5 s")
    return last


def node(cluster: LocalCluster, name: str) -> dict:
    return cluster.get(f"/api/v1/nodes/{name}")


def settled(cluster: LocalCluster, names: list[str]) -> bool:
    """The node lifecycle controller's cordon taint is there exactly where a node is cordoned, and no pod is
    being deleted: the counters then see only what the run sends."""
    for name in names:
        item = node(cluster, name)
        conditions = item.get("status", {}).get("conditions", [])
        if not any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            return False
        keys = [t["key"] for t in item["spec"].get("taints", []) if t["key"].startswith("node.kubernetes.io/")]
        if keys != ([CORDON_TAINT] if item["spec"].get("unschedulable") else []):
            return False
    return not any(p["metadata"].get("deletionTimestamp") for p in cluster.get("/api/v1/pods")["items"])


def quarantined(cluster: LocalCluster, name: str) -> bool:
    item = node(cluster, name)
    return RECORD_ANNOTATION in item["metadata"].get("annotations", {}) and any(
        t["key"] == "kubegpu.io/quarantine" for t in item["spec"].get("taints", [])
    )


def roll_record(cluster: LocalCluster, name: str) -> dict[str, Any]:
    return read_roll(node(cluster, name)["metadata"].get("annotations", {}).get(ROLL_ANNOTATION))


def run_playbook(cluster: LocalCluster, extra: dict[str, Any], *flags: str, passes: bool = True) -> tuple[int, str]:
    """ansible-playbook with the minimal output (every module result as JSON): (the modules' writes, the output)."""
    command = [str(ANSIBLE_BIN / "ansible-playbook"), str(PLAYBOOK), *flags, "-e", json.dumps(extra)]
    env = ansible_env(cluster.kubeconfig, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal")
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=240, cwd=REPO_ROOT)
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output[-4000:]
    assert (done.returncode == 0) is passes, output[-6000:]
    return sum(int(n) for n in WRITES.findall(done.stdout)), output


def kwok_node(name: str, selector_value: str, labels: dict[str, str]) -> dict:
    spec = {
        "name": name,
        "cpu": "16",
        "memory": "64Gi",
        "taints": [TEST_TAINT],
        "gpus": 2,
        "allocatable_gpus": 2,
        "labels": {
            "kubegpu.test/roll": selector_value,
            "nvidia.com/gpu.product": f"KWOK-ROLL-{selector_value}",
            "nvidia.com/cuda.driver-version.full": OLD,
            **labels,
        },
    }
    return fleet_file.node_object(spec)


@pytest.fixture(scope="module")
def roll(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The nodes of both scenarios, the test namespace with the admission pods' owner, the blocked pod and its
    budget; all deleted afterwards."""
    prefix = f"roll-{uuid.uuid4().hex[:5]}"
    namespace = prefix
    host = {role: f"{prefix}-{role}" for role in ("a", "b", "blocked", "c-human", "d-dead")}
    operator = {role: f"{prefix}-{role}" for role in ("canary", "ob", "oc", "stuck")}
    extra_labels = {
        "d-dead": {driver_roll.STAY_AWAY: "true"},
        "canary": {driver_roll.BEHAVIOUR: "fail"},
        "stuck": {driver_roll.BEHAVIOUR: "stuck"},
    }
    proof_namespace_existed = cluster.api.request("GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}")[0] == 200
    made: list[str] = []
    try:
        for group, names in (("h", host), ("o", operator)):
            for role, name in names.items():
                status, reply = cluster.create(
                    "/api/v1/nodes", kwok_node(name, f"{prefix}-{group}", extra_labels.get(role, {}))
                )
                assert status == 201, reply
                made.append(name)
        for name in (host["c-human"], operator["oc"]):
            cluster.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}})
        assert cluster.create("/api/v1/namespaces", {"metadata": {"name": namespace}})[0] == 201
        owner = {"metadata": {"name": driver_roll.OWNER, "namespace": namespace}}
        assert cluster.create(f"/api/v1/namespaces/{namespace}/configmaps", owner)[0] == 201
        kept = {
            "metadata": {"name": "kept", "namespace": namespace, "labels": {"app": "kept"}},
            "spec": {
                "nodeName": host["blocked"],
                "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {GPU: "1"}}}],
            },
        }
        assert cluster.create(f"/api/v1/namespaces/{namespace}/pods", kept)[0] == 201
        budget = {"metadata": {"name": "kept", "namespace": namespace}}
        budget["spec"] = {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "kept"}}}
        assert cluster.create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", budget)[0] == 201
        wait_until(lambda: settled(cluster, made), timeout=60, what="the test's nodes settled")
        yield {
            "prefix": prefix,
            "namespace": namespace,
            "host": host,
            "operator": operator,
            "version_file": tmp_path_factory.mktemp("roll") / "version",
        }
    finally:
        # The pods bound to the test's nodes go at once (no kubelet would ever confirm their end).
        status, listed = cluster.api.request("GET", f"/api/v1/namespaces/{namespace}/pods")
        for pod in listed["items"] if status == 200 and isinstance(listed, dict) else []:
            cluster.delete(f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}?gracePeriodSeconds=0")
        for name in made:
            cluster.delete(f"/api/v1/nodes/{name}")
        cluster.delete(f"/api/v1/namespaces/{namespace}")
        if not proof_namespace_existed:
            cluster.delete(f"/api/v1/namespaces/{PROOF_NAMESPACE}")
        wait_until(
            lambda: cluster.api.request("GET", f"/api/v1/namespaces/{namespace}")[0] == 404,
            timeout=120,
            what=f"namespace {namespace} to go",
        )


def host_extra(roll: dict[str, Any]) -> dict[str, Any]:
    return {
        "driver_upgrade_target_version": TARGET,
        "driver_upgrade_label_selectors": [f"kubegpu.test/roll={roll['prefix']}-h"],
        "driver_upgrade_max_unavailable": 2,
        "driver_upgrade_max_share": 0.6,
        "driver_upgrade_host_tasks": str(FIXTURES / "host_tasks.yml"),
        # The canary's host tasks are delegated to its inventory host (the controller itself here).
        "driver_upgrade_inventory_hosts": {roll["host"]["a"]: "localhost"},
        "driver_upgrade_gpu_timeout": 8,
        "driver_upgrade_eviction_timeout": 5,
        "driver_upgrade_proof": PROOF,
        "driver_upgrade_proof_timeout": 60,
        "roll_test_namespace": roll["namespace"],
        "roll_test_repo": str(REPO_ROOT),
    }


def pods_of(cluster: LocalCluster, namespace: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in cluster.get(f"/api/v1/namespaces/{namespace}/pods")["items"])


def test_host_mode_dry_run_rolls_stops_at_a_dead_node_and_reruns_unchanged(cluster: LocalCluster, roll: dict):
    nodes = roll["host"]
    names = list(nodes.values())
    blocked_before = node(cluster, nodes["blocked"])["metadata"]
    before = quiet_writes(cluster, names)
    writes, printed = run_playbook(cluster, host_extra(roll), "--check")
    assert sent_since(before, api_writes(cluster)) == {} and writes == 0, printed
    batches = f"{nodes['a']} | {nodes['b']}, {nodes['c-human']} | {nodes['d-dead']}"
    assert f"the canary first: {batches}" in printed, printed
    assert f"{nodes['blocked']}: blocked: {roll['namespace']}/kept: budget-allows-no-disruption" in printed

    namespace_made = cluster.api.request("GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}")[0] == 404
    writes, printed = run_playbook(cluster, host_extra(roll), passes=False)
    # Per node quarantined a patch (4); per node upgraded the owned failed pod deleted (4); the dead node's
    # failure recorded by the wait and by the rescue (2); per node released a proof pod made, deleted, a patch (9).
    assert writes == 4 + 4 + 2 + 9 + int(namespace_made), printed
    assert "the roll stops" in printed and nodes["d-dead"] in printed
    for role in ("a", "b", "c-human"):
        item = node(cluster, nodes[role])
        assert item["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"] == TARGET
        assert not quarantined(cluster, nodes[role]), role
    assert node(cluster, nodes["a"])["spec"].get("unschedulable") is None
    assert node(cluster, nodes["c-human"])["spec"]["unschedulable"] is True, "the human's cordon was lifted"
    assert quarantined(cluster, nodes["d-dead"]) and node(cluster, nodes["d-dead"])["spec"]["unschedulable"] is True
    record = roll_record(cluster, nodes["d-dead"])
    assert record["target"] == TARGET and "not the 2 it had" in record["failed"], record
    assert node(cluster, nodes["blocked"])["metadata"] == blocked_before, "the blocked node was written"
    # The owned pods that failed admission were deleted, the bare ones stay for their owner.
    wait_until(lambda: not any(p.startswith("owned-") for p in pods_of(cluster, roll["namespace"])), timeout=30)
    bare = [p for p in pods_of(cluster, roll["namespace"]) if p.startswith("bare-")]
    assert sorted(bare) == sorted(f"bare-{nodes[r]}" for r in ("a", "b", "c-human", "d-dead"))

    before = quiet_writes(cluster, names)
    writes, printed = run_playbook(cluster, host_extra(roll))
    assert sent_since(before, api_writes(cluster)) == {} and writes == 0, printed
    assert "the canary first: none" in printed and "upgrade to 570.133.20 failed before" in printed


def operator_extra(roll: dict[str, Any]) -> dict[str, Any]:
    ops = roll["operator"]
    return {
        "driver_upgrade_mode": "operator",
        "driver_upgrade_target_version": TARGET,
        "driver_upgrade_nodes": [ops["canary"], ops["ob"], ops["oc"], ops["stuck"]],
        "driver_upgrade_max_unavailable": 1,
        "driver_upgrade_max_share": 1.0,
        "driver_upgrade_version_tasks": str(FIXTURES / "version_tasks.yml"),
        "driver_upgrade_operator_timeout": 6,
        "driver_upgrade_proof": PROOF,
        "driver_upgrade_proof_timeout": 60,
        "roll_test_version_file": str(roll["version_file"]),
    }


def test_operator_mode_a_failed_canary_stops_the_roll_then_the_rest_rolls(cluster: LocalCluster, roll: dict):
    ops = roll["operator"]
    controller = driver_roll.UpgradeController(
        cluster.api, f"kubegpu.test/roll={roll['prefix']}-o", TARGET, roll["version_file"]
    )
    controller.start()
    try:
        writes, printed = run_playbook(cluster, operator_extra(roll), passes=False)
        # The hold (4), the canary quarantined (1) and let go (1), its failure recorded by the wait and the rescue (2).
        assert writes == 4 + 1 + 1 + 2, printed
        assert f"{ops['canary']}: the GPU Operator says upgrade-failed" in printed
        canary = node(cluster, ops["canary"])
        assert canary["metadata"]["labels"][driver_roll.STATE] == "upgrade-failed" and quarantined(
            cluster, ops["canary"]
        )
        assert "upgrade-failed" in roll_record(cluster, ops["canary"])["failed"]
        for role in ("ob", "oc", "stuck"):
            labels = node(cluster, ops[role])["metadata"]["labels"]
            assert labels[driver_roll.SKIP] == "true" and driver_roll.STATE not in labels, role
            assert roll_record(cluster, ops[role])["held"] and not quarantined(cluster, ops[role])
        assert node(cluster, ops["ob"])["spec"].get("unschedulable") is None, "a node after the canary was cordoned"

        namespace_made = cluster.api.request("GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}")[0] == 404
        writes, printed = run_playbook(cluster, operator_extra(roll), passes=False)
        # The canary is skipped (failed before); per node rolled: quarantined, let go, proof pod made and deleted,
        # released; the stuck node quarantined, let go, its failure recorded by the wait and the rescue.
        assert f"{ops['canary']}: its upgrade to {TARGET} failed before" in printed, printed
        assert writes == 2 * (1 + 1 + 3) + int(namespace_made) + 4, printed
        assert f"{ops['stuck']}: still in state validation-required after 6s" in printed
        assert (
            quarantined(cluster, ops["stuck"]) and "validation-required" in roll_record(cluster, ops["stuck"])["failed"]
        )
        for role in ("ob", "oc"):
            item = node(cluster, ops[role])
            labels = item["metadata"]["labels"]
            assert labels[driver_roll.STATE] == "upgrade-done" and labels[driver_roll.VERSION] == TARGET
            assert driver_roll.SKIP not in labels and ROLL_ANNOTATION not in item["metadata"].get("annotations", {})
            assert not quarantined(cluster, ops[role])
            assert driver_roll.INITIAL not in item["metadata"].get("annotations", {})
        assert node(cluster, ops["ob"])["spec"].get("unschedulable") is None
        assert node(cluster, ops["oc"])["spec"]["unschedulable"] is True, "the node's own cordon was lifted"
        assert controller.errors == []
    finally:
        controller.stop()
