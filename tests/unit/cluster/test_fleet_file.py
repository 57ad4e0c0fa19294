"""The fleet file is checked before anything starts, and the cluster tool stops only its own processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster import cluster as local_cluster
from tests.cluster import fleet

REPO = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


def test_shipped_fleet_covers_every_node_kind():
    spec = fleet.load(local_cluster.HERE / "fleet.yaml")
    names = {n["name"] for n in spec["nodes"]}
    assert {"ack-a10-0", "ack-a10-1", "gfd-h100", "gfd-a100-noplugin", "gke-l4", "cpu"} <= names
    by_name = {n["name"]: n for n in spec["nodes"]}
    assert by_name["gfd-a100-noplugin"]["gpus"] is None
    assert by_name["gfd-t4-unhealthy"]["allocatable_gpus"] < by_name["gfd-t4-unhealthy"]["gpus"]
    node = fleet.node_object(by_name["gfd-t4-unhealthy"])
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "3"
    assert node["status"]["addresses"] == [{"type": "InternalIP", "address": "127.0.0.1"}]
    assert "nvidia.com/gpu" not in fleet.node_object(by_name["cpu"])["status"]["capacity"]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("nodes: [\n", "not valid YAML"),
        ("- a\n- b\n", "top level: expected a mapping"),
        ("device_plugin: {namespace: kube-system, name: p}\nnodes: []\n", "nodes: expected a non-empty list"),
        (
            "device_plugin: {namespace: kube-system, name: p}\nnodes: [{name: Bad_Name}]\n",
            "nodes[0].name: 'Bad_Name' is not a valid name",
        ),
        (
            "device_plugin: {namespace: kube-system, name: p}\nnodes: [{name: a, gpus: -1}]\n",
            "nodes[0].gpus: expected a whole number >= 0",
        ),
        (
            "device_plugin: {namespace: kube-system, name: p}\nnodes: [{name: a, gpus: 2, allocatable_gpus: 3}]\n",
            "nodes[0].allocatable_gpus: 3 is above gpus (2)",
        ),
        (
            "device_plugin: {namespace: kube-system, name: p}\nnodes: [{name: a, labels: {count: 8}}]\n",
            "nodes[0].labels.count: keys and values must be strings",
        ),
        (
            "device_plugin: {namespace: kube-system, name: p}\nnodes: [{name: a, gpu: 8}]\n",
            "nodes[0]: unknown keys ['gpu']",
        ),
        (
            "device_plugin: {namespace: kube-system, name: p}\nnodes: [{name: a}, {name: a}]\n",
            "node name 'a' is used twice",
        ),
        (
            "device_plugin: {namespace: kube-system, name: p}\nnodes: [{name: a}]\npods: {items: [{name: x, node: b}]}\n",
            "pods.items[0].node: 'b' is not a node of this fleet",
        ),
    ],
)
def test_malformed_fleet_names_file_and_problem(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(fleet.FleetError) as info:
        fleet.load(path)
    assert str(info.value).startswith(str(path))
    assert problem in str(info.value)


def test_cluster_up_reports_malformed_fleet_without_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBEGPU_CLUSTER_DIR", str(tmp_path / "state"))
    path = write(tmp_path, "nodes: 3\n")
    result = subprocess.run(
        [sys.executable, "-m", "tests.cluster", "up", "--fleet", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {path}: device_plugin: expected a mapping")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "state").exists()


def test_down_stops_only_processes_it_started(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBEGPU_CLUSTER_DIR", str(tmp_path))
    ours = subprocess.Popen(["sleep", "30"])
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        pids = {
            "etcd": {"pid": ours.pid, "binary": "/usr/bin/sleep"},
            # A recorded pid now held by another program must be left alone.
            "kube-apiserver": {"pid": stranger.pid, "binary": "/opt/bin/kube-apiserver"},
        }
        (tmp_path / "pids.json").write_text(json.dumps(pids))
        assert local_cluster.down() == ["etcd"]
        assert ours.wait(timeout=10) is not None
        assert stranger.poll() is None
        assert not (tmp_path / "pids.json").exists()
    finally:
        stranger.kill()
        ours.kill()


def in_new_pid_namespace(*argv: str) -> subprocess.CompletedProcess:
    """Run argv as some CI runners run their jobs: in a pid namespace of its own, whose /proc was
    not mounted anew and so numbers the processes of the outer namespace."""
    return subprocess.run(
        ["unshare", "--pid", "--fork", *argv], capture_output=True, text=True, timeout=120, check=False
    )


def test_down_tells_its_processes_apart_where_proc_numbers_another_pid_namespace():
    try:
        probe = in_new_pid_namespace(sys.executable, "-c", "import os; print(os.readlink('/proc/self'), os.getpid())")
    except FileNotFoundError:
        pytest.skip("unshare (util-linux) is not installed")
    if probe.returncode:
        pytest.skip(f"a new pid namespace is not permitted here: {probe.stderr.strip()}")
    proc_pid, own_pid = probe.stdout.split()
    assert proc_pid != own_pid, "the namespace's /proc should number the outer namespace's processes"

    test = f"{__file__}::test_down_stops_only_processes_it_started"
    result = in_new_pid_namespace(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test)
    assert result.returncode == 0, result.stdout + result.stderr
