"""gpu_node_label against the local cluster: the real API server applies the merge patches.

Every test starts with no `accelerator` label and no ownership annotation on any node, and ends
with each node's label and annotation as it found them (`make site` labels the GPU nodes), so the
cluster other tests share is left as it was found.
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest
from conftest import ANSIBLE_BIN, MODEL_LABEL_KEYS, LocalCluster, ansible_env

from tests.cluster import fleet as fleet_file

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

KEY = "accelerator"
OWNERSHIP = "kubegpu.io/managed-labels"
# The label the module writes is no source of the model.
SOURCE_KEYS = tuple(k for k in MODEL_LABEL_KEYS if k != KEY)


def nodes(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n["metadata"] for n in cluster.get("/api/v1/nodes")["items"]}


def expected_values(cluster: LocalCluster) -> dict[str, str]:
    """The model each fleet node's labels name first, or its DRA devices name: the value the label must get."""
    expected = {}
    for spec in cluster.fleet["nodes"]:
        named = [spec["labels"][k] for k in SOURCE_KEYS if spec["labels"].get(k)]
        if spec["dra"]:
            named.append(fleet_file.expected_dra_node(spec, cluster.fleet)["model"])
        if named:
            expected[spec["name"]] = named[0]
    return expected


def run_module(cluster: LocalCluster, args: dict[str, Any], *flags: str) -> dict[str, Any]:
    """Run the module through `ansible` as a user would, and return its result."""
    env = ansible_env(cluster.kubeconfig)
    command = [str(ANSIBLE_BIN / "ansible"), "localhost", "-m", "kubegpu.scheduling.gpu_node_label", *flags]
    if args:
        command += ["-a", json.dumps(args)]
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=120)
    # The result closes the output: `localhost | CHANGED => {...}`. Ansible's diff callback takes
    # `diff` out of the result and prints it before.
    marker = re.search(r"^localhost \| [A-Z!]+ => ", done.stdout, re.MULTILINE)
    if not marker:
        pytest.fail(f"ansible printed no result (rc {done.returncode}): {done.stdout}\n{done.stderr}")
    result = json.loads(done.stdout[marker.end() :])
    result["printed_diff"] = done.stdout[: marker.start()]
    result["stderr"] = done.stderr
    return result


def other_metadata(metadata: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    labels = {k: v for k, v in metadata.get("labels", {}).items() if k != KEY}
    annotations = {k: v for k, v in metadata.get("annotations", {}).items() if k != OWNERSHIP}
    return labels, annotations


def test_every_gpu_node_gets_its_model_and_nothing_else_changes(unlabeled_nodes: LocalCluster):
    cluster = unlabeled_nodes
    before = nodes(cluster)
    expected = expected_values(cluster)
    assert expected.get("gfd-h100") == "NVIDIA-H100-80GB-HBM3"
    assert expected.get("ack-v100") == "Tesla-V100-SXM2-16GB"

    result = run_module(cluster, {}, "--diff")

    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    assert sorted(result["labeled"]) == sorted(expected)
    assert result["writes"] == len(expected)
    after = nodes(cluster)
    for name, metadata in after.items():
        assert metadata.get("labels", {}).get(KEY) == expected.get(name), name
        assert other_metadata(metadata) == other_metadata(before[name]), f"{name}: another label or annotation changed"
        if name in expected:
            assert json.loads(metadata["annotations"][OWNERSHIP]) == {KEY: expected[name]}
    assert "+++ after: node/gke-l4\n@@ -0,0 +1 @@\n+accelerator=nvidia-l4\n" in result["printed_diff"]
    assert result["printed_diff"].count("+++ after: node/") == len(expected)


def test_a_second_run_changes_nothing_and_sends_no_write(unlabeled_nodes: LocalCluster):
    cluster = unlabeled_nodes
    first = run_module(cluster, {})
    assert first["changed"] is True and first["writes"] > 0
    labeled = nodes(cluster)

    second = run_module(cluster, {})

    assert second["changed"] is False
    assert second["writes"] == 0
    assert second["labeled"] == [] and second["unlabeled"] == []
    assert sorted(second["unchanged"]) == sorted(labeled)
    for name, metadata in nodes(cluster).items():
        assert metadata.get("labels", {}) == labeled[name].get("labels", {})


def test_check_mode_reports_and_changes_nothing(unlabeled_nodes: LocalCluster):
    cluster = unlabeled_nodes
    before = nodes(cluster)

    result = run_module(cluster, {}, "--check", "--diff")

    assert result["changed"] is True
    assert sorted(result["labeled"]) == sorted(expected_values(cluster))
    assert result["writes"] == 0
    assert "+accelerator=NVIDIA-H100-80GB-HBM3\n" in result["printed_diff"]
    for name, metadata in nodes(cluster).items():
        assert KEY not in metadata.get("labels", {}), name
        assert OWNERSHIP not in metadata.get("annotations", {}), name
        assert metadata.get("labels", {}) == before[name].get("labels", {})


def test_a_foreign_value_is_left_alone_unless_forced(unlabeled_nodes: LocalCluster):
    cluster = unlabeled_nodes
    cluster.patch("/api/v1/nodes/ack-v100", {"metadata": {"labels": {KEY: "nvidia-tesla-v100"}}})

    result = run_module(cluster, {})

    assert [c["node"] for c in result["conflicts"]] == ["ack-v100"]
    assert result["conflicts"][0]["desired"] == "Tesla-V100-SXM2-16GB"
    assert "ack-v100" in result["stderr"]
    node = nodes(cluster)["ack-v100"]
    assert node["labels"][KEY] == "nvidia-tesla-v100"
    assert OWNERSHIP not in node.get("annotations", {})
    assert nodes(cluster)["gfd-h100"]["labels"][KEY] == "NVIDIA-H100-80GB-HBM3"

    forced = run_module(cluster, {"names": ["ack-v100"], "force": True})

    assert forced["labeled"] == ["ack-v100"] and forced["writes"] == 1
    assert nodes(cluster)["ack-v100"]["labels"][KEY] == "Tesla-V100-SXM2-16GB"


def test_value_overrides_and_removal_from_nodes_without_gpus(unlabeled_nodes: LocalCluster):
    cluster = unlabeled_nodes
    # As if an earlier run had labeled the node while it still had GPUs.
    cluster.patch(
        "/api/v1/nodes/cpu",
        {"metadata": {"labels": {KEY: "Tesla-T4"}, "annotations": {OWNERSHIP: json.dumps({KEY: "Tesla-T4"})}}},
    )
    args = {
        "names": ["cpu", "ack-v100", "missing-node"],
        "value_overrides": {"Tesla-V100-SXM2-16GB": "nvidia-tesla-v100"},
        "remove_from_non_gpu": True,
    }

    result = run_module(cluster, args)

    assert result["labeled"] == ["ack-v100"] and result["unlabeled"] == ["cpu"]
    assert result["skipped_nodes"] == [{"node": "missing-node", "reason": "no such node"}]
    current = nodes(cluster)
    assert current["ack-v100"]["labels"][KEY] == "nvidia-tesla-v100"
    assert KEY not in current["cpu"].get("labels", {})
    assert OWNERSHIP not in current["cpu"].get("annotations", {})
    assert KEY not in current["gfd-h100"].get("labels", {}), "a node outside names was labeled"


def test_a_label_selector_limits_the_nodes(unlabeled_nodes: LocalCluster):
    cluster = unlabeled_nodes
    result = run_module(cluster, {"label_selectors": ["ack.node.gpu.schedule=default"], "parallelism": 2})

    ack = sorted(s["name"] for s in cluster.fleet["nodes"] if s["labels"].get("ack.node.gpu.schedule") == "default")
    assert ack and sorted(result["labeled"]) == ack
    labeled = sorted(name for name, m in nodes(cluster).items() if KEY in m.get("labels", {}))
    assert labeled == ack
