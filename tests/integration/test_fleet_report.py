"""playbooks/fleet_report.yml over two local clusters at once: the shared one, and a second instance
of the local control plane on its own ports and state directory with the small fleet of
tests/cluster/fleet-second.yaml, at the newest Kubernetes release whatever the shared one runs (so under
`make test-k8s-1.34` the report spans 1.34 and 1.37). One run reports both with the numbers the API gives, and where GPU
work fits with the numbers gpu_placement_info gives for the same cluster; with the second stopped, the run
fails naming it and still writes the first's report. The HTML page is then rendered by headless
chromium; its screenshot is kept in tests/output/fleet-report/ (git-ignored)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import (
    ANSIBLE_BIN,
    GPU,
    REPO_ROOT,
    LocalCluster,
    ansible_env,
    local_cluster,
    pod_gpus,
    run_ansible_module,
    wait_until,
)

from tests.browser import rendered_dom, screenshot
from tests.cluster import fleet as fleet_file
from tests.cluster import instance, versions
from tests.html_tables import assert_tables_hold_the_report, html_tables

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

ARTEFACTS = REPO_ROOT / "tests" / "output" / "fleet-report"
COUNTS = ("capacity", "allocatable", "allocated", "free")


@dataclass
class SecondCluster:
    instance: instance.Instance
    cluster: LocalCluster

    def command(self, *args: str) -> subprocess.CompletedProcess:
        return self.instance.command(*args)


@pytest.fixture(scope="module")
def second_cluster(cluster: LocalCluster):
    """A second local cluster (tests/cluster/instance.py), stopped and its state removed whatever happens."""
    try:
        with instance.started() as second:
            api = local_cluster.Api(second.layout)
            yield SecondCluster(
                second, LocalCluster(second.kubeconfig, fleet_file.load(second.fleet), api, second.layout)
            )
    except instance.InstanceError as exc:
        pytest.fail(str(exc))


def run_fleet_report(tmp_path: Path, clusters: dict[str, Path], report_dir: Path) -> subprocess.CompletedProcess:
    inventory = {
        "all": {
            "hosts": {name: {"kubegpu_kubeconfig": str(kubeconfig)} for name, kubeconfig in clusters.items()},
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        }
    }
    (tmp_path / "clusters.yml").write_text(yaml.safe_dump(inventory))
    env = ansible_env(next(iter(clusters.values())))
    env.pop("K8S_AUTH_KUBECONFIG")
    command = [
        str(ANSIBLE_BIN / "ansible-playbook"),
        "-i",
        str(tmp_path / "clusters.yml"),
        "--forks",
        "2",
        str(REPO_ROOT / "playbooks" / "fleet_report.yml"),
        "-e",
        f"kubegpu_report_dir={report_dir}",
    ]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=400, check=False)


def api_gpus(cluster: LocalCluster) -> dict[str, dict[str, int]]:
    """Per node with device-plugin GPUs: capacity, allocatable and allocated as the API has them."""
    allocated: dict[str, int] = {}
    for pod in cluster.get("/api/v1/pods")["items"]:
        node = pod["spec"].get("nodeName")
        if node and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            allocated[node] = allocated.get(node, 0) + pod_gpus(pod["spec"])
    gpus = {}
    for node in cluster.get("/api/v1/nodes")["items"]:
        status, name = node.get("status", {}), node["metadata"]["name"]
        capacity = int(status.get("capacity", {}).get(GPU, 0))
        if capacity:
            allocatable = int(status.get("allocatable", {}).get(GPU, 0))
            gpus[name] = {"capacity": capacity, "allocatable": allocatable, "allocated": allocated.get(name, 0)}
    return gpus


def assert_numbers_are_the_apis(entry: dict, cluster: LocalCluster) -> None:
    nodes = {node["name"]: node for node in entry["nodes"]}
    for name, gpus in api_gpus(cluster).items():
        if "dra" in nodes[name]["gpu_sources"]:
            continue  # DRA adds its devices; the DRA tests check those
        assert {key: nodes[name][key] for key in gpus} == gpus, name
        assert nodes[name]["free"] == max(0, gpus["allocatable"] - gpus["allocated"]), name


def assert_notes_name_what_is_not_served(entry: dict, release: str) -> None:
    """A cluster without DeviceTaintRules says so in its notes; one that serves them says nothing of it."""
    said = [note for note in entry["notes"] if "does not serve devicetaintrules" in note]
    assert bool(said) == (not versions.serves(versions.DEVICE_TAINT_RULES, release)), (release, entry["notes"])


def pending_on_a_model_no_node_has(cluster: LocalCluster) -> str:
    """A 1-GPU pod that selects `accelerator: NVIDIA-B200` (the ACK guide's label; the second fleet's nodes name
    their model in nvidia.com/gpu.product only), once the scheduler has said why it waits: its message."""
    namespace = cluster.fleet["pod_namespace"]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "wants-b200", "namespace": namespace},
        "spec": {
            "nodeSelector": {"accelerator": "NVIDIA-B200"},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04", "resources": {"limits": {GPU: "1"}}}
            ],
        },
    }
    status, reply = cluster.create(f"/api/v1/namespaces/{namespace}/pods", body)
    assert status == 201, reply

    def said() -> str | None:
        pod = cluster.get(f"/api/v1/namespaces/{namespace}/pods/wants-b200")
        conditions = [c for c in pod.get("status", {}).get("conditions", []) if c.get("type") == "PodScheduled"]
        return next((c.get("message") for c in conditions if c.get("status") == "False" and c.get("message")), None)

    return str(wait_until(said, timeout=30, interval=0.2, what="the scheduler to say why wants-b200 waits"))


def assert_placement_is_gpu_placements(entry: dict, cluster: LocalCluster) -> None:
    """The report's placement view of a cluster is what gpu_placement_info returns for it."""
    status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_placement_info")
    assert status == "SUCCESS", result.get("msg")
    view, placement = result["placement"], entry["placement"]
    assert placement["sizes"] == view["sizes"] == [1, 2, 4, 8]
    assert placement["pools"] == view["pools"] and placement["fleet"] == view["fleet"], entry["name"]
    assert [(p["pod"], p["gpus"], p["reason"], p["message"]) for p in placement["pending"]] == [
        (p["pod"], p["gpus"], p["reason"], p["message"]) for p in view["pending"]
    ], entry["name"]
    assert [(f["kind"], f["message"]) for f in placement["findings"]] == [
        (f["kind"], f["message"]) for f in view["findings"]
    ]


def test_one_run_reports_both_clusters_and_a_stopped_one_with_its_error(cluster, second_cluster, tmp_path):
    clusters = {"shared": cluster.kubeconfig, "second": second_cluster.cluster.kubeconfig}
    report_dir = tmp_path / "report"
    scheduler_said = pending_on_a_model_no_node_has(second_cluster.cluster)

    done = run_fleet_report(tmp_path, clusters, report_dir)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # Per-host task output names the cluster.
    assert "ok: [shared]" in done.stdout and "ok: [second]" in done.stdout
    report = json.loads((report_dir / "gpu-fleet-report.json").read_text())
    by_name = {entry["name"]: entry for entry in report["clusters"]}
    assert sorted(by_name) == ["second", "shared"]
    shared, second = by_name["shared"], by_name["second"]
    assert report["failed_clusters"] == [] and shared["status"] == second["status"] == "ok"
    assert all(entry["elapsed_seconds"] > 0 for entry in report["clusters"])
    assert_numbers_are_the_apis(shared, cluster)
    assert_numbers_are_the_apis(second, second_cluster.cluster)
    assert second["totals"] == {"nodes": 2, "capacity": 6, "allocatable": 6, "allocated": 1, "free": 5, "unhealthy": 0}
    assert {m["model"] for m in second["models"]} == {"NVIDIA-A100-SXM4-80GB", "NVIDIA-L4"}
    assert report["totals"]["capacity"] == shared["totals"]["capacity"] + 6
    assert "gfd-a100-noplugin" in (report_dir / "gpu-fleet-report.md").read_text()
    assert_notes_name_what_is_not_served(shared, versions.kubernetes())
    assert_notes_name_what_is_not_served(second, second_cluster.instance.release)

    # Where GPU work fits: the numbers gpu_placement_info gives for each cluster, which on the second fleet are
    # the A100 node's 3 free GPUs (4, one held by the trainer) and the L4 node's 2.
    assert_placement_is_gpu_placements(shared, cluster)
    assert_placement_is_gpu_placements(second, second_cluster.cluster)
    pools = {pool["pool"]: pool for pool in second["placement"]["pools"]}
    assert {name: (p["gpus_free"], p["largest"]) for name, p in pools.items()} == {
        "NVIDIA-A100-SXM4-80GB": (3, 3),
        "NVIDIA-L4": (2, 2),
    }
    assert pools["NVIDIA-A100-SXM4-80GB"]["fits"]["2"] == {"pods": 1, "nodes": {"second-a100": 1}}
    assert pools["NVIDIA-A100-SXM4-80GB"]["stranded"]["2"] == {"gpus": 1, "by_reason": {"fragmented": 1}}
    assert second["placement"]["fleet"]["fits"]["4"]["pods"] == 0
    # The pod that selects a model no node has is reported with the models there are, as the scheduler left it.
    (waiting,) = second["placement"]["pending"]
    assert waiting["pod"] == "gpu-fleet/wants-b200" and waiting["scheduler_said"] == scheduler_said
    assert waiting["reason"] == (
        "it selects accelerator=NVIDIA-B200, which no GPU node carries; the values that exist: accelerator: no GPU "
        "node has it (the GPU models there are: NVIDIA-A100-SXM4-80GB, NVIDIA-L4)"
    )
    assert "didn't match Pod's node affinity/selector" in scheduler_said
    assert (
        "the GPU models there are: NVIDIA-A100-SXM4-80GB, NVIDIA-L4" in (report_dir / "gpu-fleet-report.md").read_text()
    )

    # The page as a browser renders it holds the JSON's numbers; its screenshot is kept.
    assert_tables_hold_the_report(html_tables(rendered_dom(report_dir / "gpu-fleet-report.html")), report)
    # The second fleet's nodes carry their zone and instance type labels; the simulated nodes' address.
    assert [(n["address"], n["zone"], n["instance_type"]) for n in second["nodes"]] == [
        ("127.0.0.1", "eu-west-1a", "p4de.24xlarge"),
        ("127.0.0.1", "eu-west-1b", "g6.12xlarge"),
    ]
    screenshot(report_dir / "gpu-fleet-report.html", ARTEFACTS / "two-clusters.png")

    stopped = second_cluster.command("down")
    assert stopped.returncode == 0, stopped.stderr
    done = run_fleet_report(tmp_path, clusters, report_dir)
    assert done.returncode != 0
    assert "clusters that could not be read: second" in done.stdout
    report = json.loads((report_dir / "gpu-fleet-report.json").read_text())
    by_name = {entry["name"]: entry for entry in report["clusters"]}
    shared, second = by_name["shared"], by_name["second"]
    assert report["failed_clusters"] == ["second"]
    assert second["status"] == "failed" and second["error"]["task"] == "Gather the GPU fleet facts"
    assert "connection refused" in second["error"]["message"]
    assert shared["status"] == "ok"
    assert_numbers_are_the_apis(shared, cluster)
