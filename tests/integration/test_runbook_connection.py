"""Every runbook under playbooks/ reads and writes the cluster that `-e kubegpu_kubeconfig=… -e
kubegpu_context=…` names, as docs/runbooks.md says, and not the one of K8S_AUTH_KUBECONFIG.

A second instance of the local control plane (tests/cluster/instance.py, the small fleet of
tests/cluster/fleet-second.yaml: nodes second-a100 and second-l4, 6 GPUs) is started beside the shared
one. Each runbook gets a kubeconfig holding both clusters, the shared one as its current context, the
second as context `second`, through `-e`, while K8S_AUTH_KUBECONFIG names the shared cluster: a runbook
that ignored either variable would read the shared cluster (or fail on a context its kubeconfig lacks).
The shared cluster is left as it was; the second one is removed afterwards with whatever the runbooks
wrote to it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ANSIBLE_BIN, OWNERSHIP, REPO_ROOT, ClusterState, LocalCluster, ansible_env
from test_device_plugin_check import fake_gpu_host, printed_results

from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    DEFAULT_QUARANTINED_BY,
    QUARANTINE_TAINT,
    RECORD_ANNOTATION,
    Record,
    is_quarantine_taint,
    record_annotation,
)
from tests.cluster import cluster as local_cluster
from tests.cluster import fleet as fleet_file
from tests.cluster import instance, versions

pytestmark = pytest.mark.cluster

PLAYBOOKS = REPO_ROOT / "playbooks"
SECOND_NODES = {"second-a100", "second-l4"}
POLICY = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/kubegpu-gpu-bypass"
# A pod only the second cluster has, which the audit must name.
MARKER_POD = "second-only-bypass"


def merged_kubeconfig(path: Path, shared: Path, second: Path) -> Path:
    """One kubeconfig with both clusters: context `shared` (the current one) and context `second`."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for name, source in (("shared", shared), ("second", second)):
        config = yaml.safe_load(source.read_text())
        merged["clusters"].append({"name": name, "cluster": config["clusters"][0]["cluster"]})
        merged["users"].append({"name": name, "user": config["users"][0]["user"]})
        merged["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    merged["current-context"] = "shared"
    path.write_text(yaml.safe_dump(merged))
    path.chmod(0o600)
    return path


class Second:
    def __init__(self, started: instance.Instance, kubeconfig: Path):
        self.instance = started
        self.kubeconfig = kubeconfig
        self.api = local_cluster.Api(started.layout)
        self.cluster = LocalCluster(started.kubeconfig, fleet_file.load(started.fleet), self.api, started.layout)


@pytest.fixture(scope="module")
def second(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory):
    try:
        with instance.started() as started:
            folder = tmp_path_factory.mktemp("runbook-connection")
            kubeconfig = merged_kubeconfig(folder / "both.kubeconfig", cluster.kubeconfig, started.kubeconfig)
            yield Second(started, kubeconfig)
    except instance.InstanceError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def shared_unchanged(cluster: LocalCluster):
    """The shared cluster as the runbook found it: nodes, pods, objects and the admission policy."""
    before = ClusterState.read(cluster)
    policy_before = cluster.api.request("GET", POLICY)[0]
    yield
    assert before.changes(ClusterState.read(cluster)) == []
    assert cluster.api.request("GET", POLICY)[0] == policy_before


def run_runbook(
    cluster: LocalCluster, second: Second, playbook: str, *args: str, extra: dict[str, Any] | None = None, **env: str
) -> subprocess.CompletedProcess:
    connection = {"kubegpu_kubeconfig": str(second.kubeconfig), "kubegpu_context": "second", **(extra or {})}
    command = [str(ANSIBLE_BIN / "ansible-playbook"), str(PLAYBOOKS / playbook), "-e", json.dumps(connection), *args]
    done = subprocess.run(
        command, env=ansible_env(cluster.kubeconfig, **env), capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return done


def assert_names_no_shared_node(cluster: LocalCluster, output: str) -> None:
    shared_only = {n["metadata"]["name"] for n in cluster.get("/api/v1/nodes")["items"]} - SECOND_NODES
    named = sorted(name for name in shared_only if re.search(rf"\b{re.escape(name)}\b", output))
    assert named == [], f"the run names nodes of the shared cluster: {named}"


def second_fleet_summary(output: str) -> None:
    """The fleet summary the run printed is the second cluster's: 2 GPU nodes, 6 GPUs."""
    assert re.search(r"total\s+2\s+6\s", output), output[-3000:]


def test_preflight_reads_the_named_cluster(cluster, second, shared_unchanged):
    done = run_runbook(cluster, second, "preflight.yml")
    assert "6 GPUs on 2 GPU nodes are visible to the scheduler" in done.stdout, done.stdout[-3000:]


def test_fleet_facts_reads_the_named_cluster(cluster, second, shared_unchanged):
    done = run_runbook(cluster, second, "fleet_facts.yml")
    second_fleet_summary(done.stdout)
    assert "NVIDIA-L4" in done.stdout


def test_device_plugin_check_reads_the_named_cluster(cluster, second, shared_unchanged):
    done = run_runbook(cluster, second, "device_plugin_check.yml")
    assert "Nodes without findings (2): second-a100, second-l4" in done.stdout, done.stdout[-3000:]
    assert_names_no_shared_node(cluster, done.stdout)


def test_pod_audit_reads_the_named_cluster(cluster, second, shared_unchanged):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": MARKER_POD, "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
            ]
        },
    }
    status, body = second.api.request("POST", "/api/v1/namespaces/default/pods", pod)
    assert status == 201, body
    done = run_runbook(cluster, second, "pod_audit.yml", extra={"pod_audit_fail_on": "never"})
    assert f"default/{MARKER_POD}" in done.stdout, done.stdout[-3000:]
    # The shared cluster's fleet pods that misuse GPUs are not in the second cluster's audit.
    for spec in cluster.fleet["pods"]:
        assert f"{cluster.fleet['pod_namespace']}/{spec['name']}" not in done.stdout


def test_node_labels_labels_the_named_cluster(cluster, second, shared_unchanged):
    done = run_runbook(cluster, second, "node_labels.yml")
    labels = {
        n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in second.cluster.get("/api/v1/nodes")["items"]
    }
    assert labels["second-a100"].get("accelerator") == "NVIDIA-A100-SXM4-80GB"
    assert labels["second-l4"].get("accelerator") == "NVIDIA-L4"
    assert_names_no_shared_node(cluster, done.stdout)


def test_sample_workload_runs_on_the_named_cluster(cluster, second, shared_unchanged):
    done = run_runbook(cluster, second, "sample_workload.yml")
    pods = second.cluster.get("/api/v1/namespaces/gpu-samples/pods")["items"]
    assert [p["spec"].get("nodeName") in SECOND_NODES for p in pods] == [True], pods
    assert_names_no_shared_node(cluster, done.stdout)


def test_node_release_releases_on_the_named_cluster(cluster, second, shared_unchanged):
    # Quarantined as the quarantine writes it: cordon, taint and the record saying the collection set both.
    record = record_annotation(Record(DEFAULT_QUARANTINED_BY, "runbook test", "2026-12-03T10:00:00Z", True))
    body = {"spec": {"unschedulable": True, "taints": [dict(QUARANTINE_TAINT)]}}
    second.cluster.patch("/api/v1/nodes/second-l4", {**body, "metadata": {"annotations": {RECORD_ANNOTATION: record}}})
    # One GPU: the sample workload's pod may hold one of the node's two.
    extra = {"node_release_nodes": ["second-l4"], "node_release_proof": {"gpus": 1}}
    done = run_runbook(cluster, second, "node_release.yml", extra=extra)
    node = second.cluster.get("/api/v1/nodes/second-l4")
    assert not node["spec"].get("unschedulable"), node["spec"]
    assert not any(is_quarantine_taint(t) for t in node["spec"].get("taints", []))
    assert RECORD_ANNOTATION not in node["metadata"].get("annotations", {})
    assert "released: second-l4" in done.stdout, done.stdout[-3000:]
    assert_names_no_shared_node(cluster, done.stdout)


def test_admission_policy_writes_to_the_named_cluster(cluster, second, shared_unchanged):
    run_runbook(cluster, second, "admission_policy.yml")
    assert second.api.request("GET", POLICY)[0] == 200


def test_device_plugin_deploys_to_the_named_cluster_and_removes_from_it(cluster, second, shared_unchanged):
    namespace = "kubegpu-device-plugin-runbook"
    status, reply = second.api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    assert status == 201, reply
    daemonset = f"/apis/apps/v1/namespaces/{namespace}/daemonsets/nvidia-device-plugin-daemonset"
    # A label no node has: the fleet's own plugin serves the second cluster's nodes.
    extra = {"device_plugin_namespace": namespace, "device_plugin_node_selector": {"kubegpu.io/no-node": "here"}}
    try:
        done = run_runbook(cluster, second, "device_plugin.yml", extra=extra)
        assert "no node matches the plugin's placement" in done.stdout + done.stderr
        assert second.api.request("GET", daemonset)[0] == 200
        run_runbook(cluster, second, "device_plugin.yml", extra={**extra, "device_plugin_state": "absent"})
        status, gone = second.api.request("GET", daemonset)
        assert status == 404 or "deletionTimestamp" in gone["metadata"]
    finally:
        second.api.request("DELETE", f"/api/v1/namespaces/{namespace}")


def test_site_runs_on_the_named_cluster(cluster, second, shared_unchanged):
    done = run_runbook(cluster, second, "site.yml")
    second_fleet_summary(done.stdout)
    assert_names_no_shared_node(cluster, done.stdout)


def test_fleet_report_takes_the_variables_as_extra_vars_too(cluster, second, shared_unchanged, tmp_path: Path):
    inventory = tmp_path / "clusters.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"second": local}}}))
    report = tmp_path / "report"
    run_runbook(cluster, second, "fleet_report.yml", "-i", str(inventory), extra={"kubegpu_report_dir": str(report)})
    clusters = json.loads((report / "gpu-fleet-report.json").read_text())["clusters"]
    assert [c["totals"]["nodes"] for c in clusters] == [2]
    assert {n["name"] for n in clusters[0]["nodes"]} == SECOND_NODES


def test_device_plugin_check_over_two_clusters_checks_the_hosts_of_the_one_named(cluster, second, tmp_path: Path):
    """With the gpu_nodes inventory over both clusters, one run checks one cluster: the one the connection
    names, with the driver checked on that cluster's hosts (the group kubegpu_cluster_<name>)."""
    bin_dir, config = fake_gpu_host(tmp_path, 4, "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n")
    source = tmp_path / "both.kubegpu.yml"
    local = {"ansible_connection": "'local'", "ansible_python_interpreter": repr(sys.executable)}
    clusters = [
        {"name": "shared", "kubeconfig": str(second.kubeconfig), "context": "shared"},
        {"name": "second", "kubeconfig": str(second.kubeconfig), "context": "second"},
    ]
    source.write_text(
        yaml.safe_dump({"plugin": "kubegpu.scheduling.gpu_nodes", "clusters": clusters, "compose": local})
    )
    extra = {
        "device_plugin_check_report_only": True,
        "device_plugin_check_toolkit_config_paths": [str(config)],
        "device_plugin_check_inventory_host_group": "kubegpu_cluster_second",
    }
    done = run_runbook(
        cluster,
        second,
        "device_plugin_check.yml",
        "-i",
        str(source),
        extra=extra,
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    check = [r for r in printed_results(done.stdout) if "findings" in r and "report" in r][-1]
    hosts = {n["name"]: n["host"] for n in check["nodes"]}
    assert set(hosts) == SECOND_NODES
    assert all(host is not None and host["driver_working"] for host in hosts.values()), hosts
    assert "host_not_a_node" not in {f.get("kind") for f in check["findings"]}, check["findings"]


def readme_block(marker: str) -> str:
    """The shell block of docs/clean-up.md that follows the comment `<!-- marker: ... -->`."""
    text = (REPO_ROOT / "docs" / "clean-up.md").read_text()
    after = text[text.index(f"<!-- {marker}:") :]
    return after[after.index("```sh\n") + len("```sh\n") : after.index("\n```", after.index("```sh\n"))]


def test_the_readme_clean_up_takes_back_what_the_runbooks_wrote_and_only_that(cluster, second, shared_unchanged):
    run_runbook(cluster, second, "site.yml")
    run_runbook(cluster, second, "admission_policy.yml")
    # A label someone else changed since the collection set it stays as they left it.
    second.cluster.patch("/api/v1/nodes/second-l4", {"metadata": {"labels": {"accelerator": "set-by-hand"}}})
    block = "\n".join(
        line for line in readme_block("clean-up-real-cluster").splitlines() if "export KUBECONFIG" not in line
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("K8S_AUTH_")}
    env.update(
        KUBECONFIG=str(second.instance.kubeconfig),
        PATH=os.pathsep.join((str(versions.bin_dir()), str(ANSIBLE_BIN), env.get("PATH", ""))),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
    )
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

    assert second.api.request("GET", POLICY)[0] == 404
    status, namespace = second.api.request("GET", "/api/v1/namespaces/gpu-samples")
    assert status == 404 or "deletionTimestamp" in namespace["metadata"]
    nodes = {n["metadata"]["name"]: n["metadata"] for n in second.cluster.get("/api/v1/nodes")["items"]}
    assert "accelerator" not in nodes["second-a100"].get("labels", {})
    assert nodes["second-l4"]["labels"]["accelerator"] == "set-by-hand"
    assert all(OWNERSHIP not in meta.get("annotations", {}) for meta in nodes.values())


def test_make_site_in_check_mode_against_kubeconfig_says_where_and_writes_nothing(cluster, second, shared_unchanged):
    before = ClusterState.read(second.cluster)
    env = {k: v for k, v in os.environ.items() if not k.startswith("K8S_AUTH_")}
    env["KUBECONFIG"] = str(second.instance.kubeconfig)
    done = subprocess.run(
        ["make", "--no-print-directory", "site", "ARGS=--check --diff"],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"against {second.instance.layout.server} (context kubegpu-local" in done.stderr
    assert "In check mode it writes nothing" in done.stderr
    second_fleet_summary(done.stdout)
    assert before.changes(ClusterState.read(second.cluster)) == []


def test_node_quarantine_quarantines_the_named_clusters_node(cluster, second, shared_unchanged):
    node_path = "/api/v1/nodes/second-l4"
    before = second.cluster.get(node_path)
    # The node is its model's only one: a share below 1 holds it back.
    extra = {
        "node_quarantine_nodes": ["second-l4"],
        "node_quarantine_reason": "runbook connection test",
        "node_quarantine_max_share": 1.0,
    }
    try:
        done = run_runbook(cluster, second, "node_quarantine.yml", extra=extra)
        node = second.cluster.get(node_path)
        assert node["spec"].get("unschedulable") is True
        assert "kubegpu.io/quarantine" in [t["key"] for t in node["spec"].get("taints", [])]
        assert "kubegpu.io/quarantine-record" in node["metadata"].get("annotations", {})
        assert "quarantined: second-l4" in done.stdout, done.stdout[-3000:]
        assert_names_no_shared_node(cluster, done.stdout)
    finally:
        # Back as it was, for the tests after this one on the second cluster.
        undo = {
            "metadata": {"annotations": {"kubegpu.io/quarantine-record": None}},
            "spec": {"unschedulable": before["spec"].get("unschedulable"), "taints": before["spec"].get("taints")},
        }
        second.cluster.patch(node_path, undo)
