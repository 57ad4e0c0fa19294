"""The roll's steps against a fake client: what each sends, nothing in check mode, the failures named."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.record import ROLL_ANNOTATION, read_roll
from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.run import run_roll
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

SKIP = "nvidia.com/gpu-driver-upgrade.skip"
STATE = "nvidia.com/gpu-driver-upgrade-state"


class FakeClient:
    """Nodes and pods in memory; JSON patches of labels and annotations applied; every write logged."""

    def __init__(self, nodes: list[dict], pods: list[dict] = ()):
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.pods = list(pods)
        self.sent: list[tuple[str, str]] = []
        self.request_count = self.write_count = 0

    def list_items(self, path: str, **query: Any):
        if path.endswith("/nodes"):
            return [copy.deepcopy(n) for n in self.nodes.values()]
        if path.endswith("/pods"):
            return (
                [p for p in self.pods if p["status"]["phase"] == "Failed"] if query.get("field_selector") else self.pods
            )
        return []

    def find(self, path: str):
        return copy.deepcopy(self.nodes.get(path.rsplit("/", 1)[-1]))

    def patch_json(self, path: str, ops: list[dict]):
        name = path.rsplit("/", 1)[-1]
        self.sent.append(("patch", name))
        meta = self.nodes[name]["metadata"]
        for op in ops:
            parts = [p.replace("~1", "/") for p in op["path"].split("/")[2:]]
            if op["op"] == "add" and len(parts) == 1:
                meta[parts[0]] = dict(op["value"])
            elif op["op"] == "add":
                meta.setdefault(parts[0], {})[parts[1]] = op["value"]
            elif op["op"] == "remove":
                meta[parts[0]].pop(parts[1])
        return self.nodes[name]

    def delete(self, path: str, **_: Any):
        self.sent.append(("delete", path.split("/pods/")[1]))


def node(name: str, labels: dict | None = None, annotations: dict | None = None, gpus: str = "8") -> dict:
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            "annotations": annotations or {"a": "b"},
        },
        "spec": {},
        "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": gpus}},
    }


def params(**overrides: Any) -> dict:
    base = {
        "action": "plan",
        "mode": "host",
        "target_version": "570",
        "names": None,
        "label_selectors": [],
        "max_unavailable": 1,
        "canary": 1,
        "max_share": 1.0,
        "pool_by": ["model"],
        "max_fail_percentage": 0,
        "expected_gpus": None,
        "reason": None,
        "wait": True,
        "wait_timeout": 0,
        "parallelism": 4,
        "model_label_keys": None,
    }
    return {**base, **overrides}


def test_hold_in_check_mode_sends_nothing_and_for_real_sends_a_patch_per_node():
    client = FakeClient([node("n1"), node("n2", labels={SKIP: "true"})])
    done = run_roll(params(action="hold", mode="operator", names=["n1", "n2"]), client, True)
    assert client.sent == [] and done.result["held"] == ["n1"] and done.changed
    done = run_roll(params(action="hold", mode="operator", names=["n1", "n2"]), client, False)
    assert client.sent == [("patch", "n1")] and done.result["unchanged"] == ["n2"]
    assert read_roll(client.nodes["n1"]["metadata"]["annotations"][ROLL_ANNOTATION])["held"]
    assert done.diff and done.diff[0]["after"].startswith("annotations.kubegpu.io/driver-upgrade")


def test_start_takes_off_only_the_rolls_own_skip_label():
    client = FakeClient([node("n1"), node("n2", labels={SKIP: "true"})])
    run_roll(params(action="hold", mode="operator", names=["n1"]), client, False)
    done = run_roll(params(action="start", mode="operator", names=["n1", "n2"]), client, False)
    assert done.result["started"] == ["n1"] and SKIP not in client.nodes["n1"]["metadata"]["labels"]
    assert client.nodes["n2"]["metadata"]["labels"][SKIP] == "true"


def test_wait_fails_on_upgrade_failed_and_records_it():
    client = FakeClient([node("n1", labels={STATE: "upgrade-failed"}), node("n2", labels={STATE: "upgrade-done"})])
    done = run_roll(params(action="wait", mode="operator", names=["n1", "n2"]), client, False)
    assert done.failure == "n1: the GPU Operator says upgrade-failed"
    assert done.result["done"] == ["n2"] and done.result["recorded"] == ["n1"]


def test_wait_names_the_state_a_node_is_stuck_in():
    client = FakeClient([node("n1", labels={STATE: "validation-required"})])
    done = run_roll(params(action="wait", mode="operator", names=["n1"]), client, False)
    assert done.failure == "n1: still in state validation-required after 0s"


def failed_pod(name: str, owned: bool) -> dict:
    owners = [{"kind": "ReplicaSet", "name": "rs", "controller": True}] if owned else []
    return {
        "metadata": {"namespace": "ml", "name": name, "ownerReferences": owners},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Failed", "reason": "UnexpectedAdmissionError"},
    }


def test_settle_deletes_owned_pods_lists_bare_ones_and_fails_a_node_without_its_gpus():
    client = FakeClient([node("n1"), node("n2", gpus="0")], [failed_pod("owned", True), failed_pod("bare", False)])
    done = run_roll(params(action="settle", names=["n1", "n2"], expected_gpus={"n1": 8, "n2": 8}), client, False)
    assert ("delete", "owned") in client.sent and ("delete", "bare") not in client.sent
    assert done.result["back"] == ["n1"] and done.result["bare_pods"] == [{"pod": "ml/bare", "node": "n1"}]
    assert done.failure.startswith("n2: the node publishes 0 GPUs, not the 8 it had")
    assert read_roll(client.nodes["n2"]["metadata"]["annotations"][ROLL_ANNOTATION])["failed"]


def test_settle_in_check_mode_sends_nothing():
    client = FakeClient([node("n1", gpus="0")], [failed_pod("owned", True)])
    done = run_roll(params(action="settle", names=["n1"], expected_gpus={"n1": 8}), client, True)
    assert client.sent == [] and done.result["deleted_pods"][0]["pod"] == "ml/owned"


def test_a_step_needs_names_and_the_plan_a_selection():
    with pytest.raises(OptionError, match="names"):
        run_roll(params(action="start"), FakeClient([]), False)
    with pytest.raises(OptionError, match="label_selectors"):
        run_roll(params(), FakeClient([]), False)


def daemonset_pod() -> dict:
    container = {
        "name": "exporter",
        "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0",
        "securityContext": {"privileged": True},
    }
    return {
        "metadata": {
            "namespace": "gpu",
            "name": "exporter-x",
            "ownerReferences": [{"kind": "DaemonSet", "name": "exporter", "controller": True}],
        },
        "spec": {"nodeName": "n1", "containers": [container]},
        "status": {"phase": "Running"},
    }


def test_daemonset_pods_do_not_block_a_host_roll_but_block_an_operator_roll():
    client = FakeClient([node("n1")], [daemonset_pod()])
    host = run_roll(params(names=["n1"]), client, False)
    assert host.result["batches"] == [["n1"]] and list(host.result["daemonset_pods"]) == ["n1"]
    operator = run_roll(params(names=["n1"], mode="operator"), client, False)
    assert operator.result["batches"] == [] and operator.result["skipped"][0]["reason"].startswith(
        "blocked: gpu/exporter-x"
    )
