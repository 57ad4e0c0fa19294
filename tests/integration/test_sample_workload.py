"""The sample_workload runbook on the local cluster: validated, scheduled by the real scheduler onto
the requested model, logs read through the API server from KWOK, idempotent, removable."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO_ROOT, LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

PLAYBOOK = str(REPO_ROOT / "playbooks" / "sample_workload.yml")


def run_playbook(cluster: LocalCluster, *extra_vars: dict, check: bool = False) -> subprocess.CompletedProcess:
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), PLAYBOOK]
    for variables in extra_vars:
        argv += ["-e", json.dumps(variables)]
    if check:
        argv.append("--check")
    env = dict(os.environ, K8S_AUTH_KUBECONFIG=str(cluster.kubeconfig), ANSIBLE_NOCOLOR="1")
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)


def recap(output: str) -> dict[str, int]:
    line = next(line for line in output.splitlines() if line.startswith("localhost"))
    return {key: int(value) for key, value in (part.split("=") for part in line.split(":", 1)[1].split())}


def test_sample_lands_on_requested_model_and_is_idempotent(cluster: LocalCluster, namespace: str):
    settings = {
        "sample_workload_namespace": namespace,
        "sample_workload_node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    }
    first = run_playbook(cluster, settings)
    assert first.returncode == 0, first.stdout[-3000:]
    assert recap(first.stdout)["changed"] == 1
    assert "Running on node gfd-h100 (NVIDIA-H100-80GB-HBM3)" in first.stdout
    assert "Accuracy at step 999: 0.9703" in first.stdout

    pod = cluster.get(f"/api/v1/namespaces/{namespace}/pods/tensorflow-mnist")
    assert pod["spec"]["nodeName"] == "gfd-h100"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    uid = pod["metadata"]["uid"]

    second = run_playbook(cluster, settings)
    assert second.returncode == 0, second.stdout[-3000:]
    assert recap(second.stdout)["changed"] == 0
    assert cluster.get(f"/api/v1/namespaces/{namespace}/pods/tensorflow-mnist")["metadata"]["uid"] == uid

    changed = run_playbook(cluster, settings, {"sample_workload_gpus": 2})
    assert changed.returncode != 0
    assert "set recreate=true" in changed.stdout
    assert cluster.get(f"/api/v1/namespaces/{namespace}/pods/tensorflow-mnist")["metadata"]["uid"] == uid

    removed = run_playbook(cluster, settings, {"sample_workload_state": "absent"})
    assert removed.returncode == 0, removed.stdout[-3000:]
    status = cluster.api.request("GET", f"/api/v1/namespaces/{namespace}/pods/tensorflow-mnist")[0]
    assert status == 404


def test_check_mode_creates_nothing(cluster: LocalCluster, namespace: str):
    result = run_playbook(cluster, {"sample_workload_namespace": namespace}, check=True)
    assert result.returncode == 0, result.stdout[-3000:]
    assert cluster.get(f"/api/v1/namespaces/{namespace}/pods")["items"] == []


def test_unschedulable_sample_times_out_with_scheduler_reason(cluster: LocalCluster, namespace: str):
    result = run_playbook(
        cluster,
        {
            "sample_workload_namespace": namespace,
            "sample_workload_gpus": 9,
            "sample_workload_node_selector": {"kubernetes.io/hostname": "gfd-h100"},
            "sample_workload_wait_timeout": 10,
        },
    )
    assert result.returncode != 0
    assert f"pod {namespace}/tensorflow-mnist was not scheduled within 10s" in result.stdout
    assert "Insufficient nvidia.com/gpu" in result.stdout


def test_bypassing_sample_is_refused_before_it_reaches_the_cluster(cluster: LocalCluster, namespace: str):
    result = run_playbook(
        cluster,
        {
            "sample_workload_namespace": namespace,
            "sample_workload_gpus": 0,
            "sample_workload_image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
        },
    )
    assert result.returncode != 0
    assert "Validate the sample workload" in result.stdout
    assert cluster.get(f"/api/v1/namespaces/{namespace}/pods")["items"] == []
