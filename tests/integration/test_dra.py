"""GPUs through Dynamic Resource Allocation on the local cluster: the fleet's DRA nodes publish
ResourceSlices in the shape of NVIDIA's driver, and the real kube-scheduler and
kube-controller-manager allocate the claims of its pods (tests/cluster/fleet.yaml, dra.py).

What the modules say is compared with what the API holds (slices less allocations), read here
with plain GETs, and with the fleet file. Each test leaves the cluster as it found it.
"""

from __future__ import annotations

import json
import math
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    LocalCluster,
    ansible_env,
    dra_resource_served,
    fleet_facts,
    run_ansible_module,
    wait_until,
    write_token_kubeconfig,
)

from tests.cluster import fleet as fleet_file
from tests.cluster import versions
from tests.cluster.counters import api_requests

pytestmark = pytest.mark.cluster

GPU = "nvidia.com/gpu"
RESOURCE = "/apis/resource.k8s.io/v1"
DRA_RESOURCES = ("deviceclasses", "resourceslices", "resourceclaims", "devicetaintrules")


def facts(cluster: LocalCluster, args: dict[str, Any] | None = None, kubeconfig: Path | None = None) -> dict:
    env = ansible_env(kubeconfig) if kubeconfig else None
    status, result, _done = run_ansible_module(kubeconfig or cluster.kubeconfig, "gpu_node_facts", args, env=env)
    assert status == "SUCCESS", f"{status}: {result.get('msg')}"
    return fleet_facts(result)


def by_node(result: dict) -> dict[str, dict]:
    return {n["name"]: n for n in result["nodes"]}


def dra_node_names(cluster: LocalCluster) -> list[str]:
    return [n["name"] for n in fleet_file.dra_nodes(cluster.fleet)]


# --- what the API holds ----------------------------------------------------------------------------


def api_dra(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    """Per node with GPU slices: its devices, those allocated claims hold, and by which claims."""
    nodes: dict[str, dict[str, Any]] = {}
    for item in cluster.get(f"{RESOURCE}/resourceslices")["items"]:
        spec = item["spec"]
        if spec["driver"] == "gpu.nvidia.com":
            entry = nodes.setdefault(spec["nodeName"], {"devices": {}, "held": {}})
            for device in spec.get("devices", []):
                entry["devices"][(spec["pool"]["name"], device["name"])] = device
    for claim in cluster.get(f"{RESOURCE}/resourceclaims")["items"]:
        ref = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
        for result in claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", []):
            for entry in nodes.values():
                key = (result["pool"], result["device"])
                if key in entry["devices"] and not result.get("adminAccess"):
                    entry["held"].setdefault(key, []).append(ref)
    return nodes


def fleet_pod(cluster: LocalCluster, name: str) -> dict:
    return cluster.get(f"/api/v1/namespaces/{cluster.fleet['pod_namespace']}/pods/{name}")


# --- capacity, allocated and free -------------------------------------------------------------------


@pytest.mark.every_release
def test_per_node_capacity_allocated_and_free_are_the_slices_less_the_allocations(cluster: LocalCluster):
    api = api_dra(cluster)
    result = facts(cluster, {"dra_devices": "all"})
    nodes = by_node(result)
    assert sorted(api) == sorted(dra_node_names(cluster))
    # By default, the devices of a node without a tainted device are counted, not listed.
    listed = by_node(facts(cluster))
    assert all(listed[name]["dra"]["devices"] == [] for name in api)
    assert {name: listed[name]["dra"]["device_count"] for name in api} == {n: len(h["devices"]) for n, h in api.items()}
    for name in api:
        assert {**listed[name], "dra": {**listed[name]["dra"], "devices": nodes[name]["dra"]["devices"]}} == nodes[name]
    for name, held in api.items():
        node = nodes[name]
        capacity, allocated = len(held["devices"]), len(held["held"])
        want = {"capacity": capacity, "allocatable": capacity, "allocated": allocated, "free": capacity - allocated}
        assert node["by_source"]["dra"] == want, name
        assert (node["capacity"], node["allocated"], node["free"]) == (capacity, allocated, capacity - allocated)
        assert node["gpu_sources"] == ["dra"] and node["problems"] == [], name
        # And the same as the fleet file says, without reading the cluster.
        spec = next(s for s in fleet_file.dra_nodes(cluster.fleet) if s["name"] == name)
        expected = fleet_file.expected_dra_node(spec, cluster.fleet)
        assert {k: node[k] for k in ("model", "capacity", "allocated", "free")} == {
            k: expected[k] for k in ("model", "capacity", "allocated", "free")
        }
        for device in node["dra"]["devices"]:
            published = held["devices"][(device["pool"], device["name"])]
            attributes = published["attributes"]
            assert device["uuid"] == attributes["uuid"]["string"]
            assert device["product_name"] == attributes["productName"]["string"]
            assert device["memory"] == published["capacity"]["memory"]["value"]
            assert device["mig_profile"] == attributes.get("profile", {}).get("string")
            assert device["claims"] == sorted(held["held"].get((device["pool"], device["name"]), []))


@pytest.mark.every_release
@pytest.mark.usefixtures("unlabeled_nodes")
def test_full_gpus_and_static_mig_devices(cluster: LocalCluster):
    nodes = by_node(facts(cluster, {"dra_devices": "all"}))
    mig = nodes["dra-a100-mig"]
    assert mig["model"] == "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb" and mig["mig_profile"] == "3g.40gb"
    assert {d["type"] for d in mig["dra"]["devices"]} == {"mig"}
    assert mig["gpu_pods"] == [f"{cluster.fleet['pod_namespace']}/dra-mig"]
    h100 = nodes["dra-h100"]
    assert h100["model"] == "NVIDIA-H100-80GB-HBM3" and h100["model_source"] == "ResourceSlice productName"
    assert {d["type"] for d in h100["dra"]["devices"]} == {"gpu"}


def test_a_pod_with_an_nvidia_gpu_limit_on_a_dra_node_counts_once(cluster: LocalCluster, namespace: str):
    pod = fleet_pod(cluster, "dra-extended")
    claim_name = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    before = by_node(facts(cluster, {"dra_devices": "all"}))["dra-h100"]
    ref = f"{cluster.fleet['pod_namespace']}/dra-extended"
    assert before["gpu_pods"].count(ref) == 1
    assert before["by_source"]["device_plugin"]["allocated"] == 0
    assert sum(d["allocated"] for d in before["dra"]["devices"]) == before["allocated"] == 3
    assert sum(f"{cluster.fleet['pod_namespace']}/{claim_name}" in d["claims"] for d in before["dra"]["devices"]) == 2

    # One more: the scheduler serves its limit from the node's last free GPU.
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "one-more", "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "dra-h100"},
            "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04", "resources": {"limits": {GPU: "1"}}}
            ],
        },
    }
    status, reply = cluster.create(f"/api/v1/namespaces/{namespace}/pods", body)
    assert status == 201, reply
    wait_until(
        lambda: cluster.get(f"/api/v1/namespaces/{namespace}/pods/one-more")["status"].get("phase") == "Running",
        what="the scheduler to serve nvidia.com/gpu from DRA",
    )
    result = facts(cluster)
    after = by_node(result)["dra-h100"]
    assert (after["allocated"], after["free"]) == (before["allocated"] + 1, before["free"] - 1)
    assert after["by_source"]["device_plugin"] == before["by_source"]["device_plugin"]
    assert f"{namespace}/one-more" in after["gpu_pods"]
    totals = result["totals"]
    assert totals["allocated"] == sum(s["allocated"] for s in totals["by_source"].values())


@pytest.mark.every_release
def test_the_pod_no_node_can_allocate_is_a_problem(cluster: LocalCluster):
    [pending] = fleet_file.pending_pods(cluster.fleet)
    pod = fleet_pod(cluster, pending["name"])
    message = next(c["message"] for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "cannot allocate all claims" in message
    result = facts(cluster)
    problems = [p for p in result["problems"] if p["id"] == "fleet.gpu_claims_unallocatable"]
    reason = f"{cluster.fleet['pod_namespace']}/{pending['name']}: {message}"
    assert problems == [
        {
            "node": None,
            "id": "fleet.gpu_claims_unallocatable",
            "severity": problems[0]["severity"],
            "title": "GPU pod Pending: no node can allocate its claims",
            "message": reason,
            "remedy": problems[0]["remedy"],
            "where": {"pod": f"{cluster.fleet['pod_namespace']}/{pending['name']}"},
            "kind": "gpu_claims_unallocatable",
            "problem": "GPU pod Pending: no node can allocate its claims",
            "reason": reason,
        }
    ]


@pytest.mark.every_release
def test_models_and_totals_of_the_mixed_fleet_add_both_sources(cluster: LocalCluster):
    result = facts(cluster)
    nodes = by_node(result)
    h100 = result["models"]["NVIDIA-H100-80GB-HBM3"]
    members = [n for n in nodes.values() if n["model"] == "NVIDIA-H100-80GB-HBM3"]
    assert sorted(n["name"] for n in members) == ["dra-h100", "gfd-h100"]
    for source in ("device_plugin", "dra"):
        for counter in ("capacity", "allocatable", "allocated", "free"):
            assert h100["by_source"][source][counter] == sum(n["by_source"][source][counter] for n in members)
            assert result["totals"]["by_source"][source][counter] == sum(
                n["by_source"][source][counter] for n in nodes.values()
            )
    assert h100["capacity"] == nodes["gfd-h100"]["capacity"] + nodes["dra-h100"]["capacity"]
    assert result["totals"]["capacity"] == sum(n["capacity"] for n in nodes.values())
    # Where the release does not serve DRA-backed extended resources, the API server drops the
    # DeviceClass's extendedResourceName, and no class maps one.
    served = versions.serves(versions.DRA_EXTENDED_RESOURCES)
    assert result["dra"]["extended_resources"] == ({"gpu.nvidia.com": GPU} if served else {})


# --- requests, counted on the server -----------------------------------------------------------------


def server_lists(cluster: LocalCluster) -> dict[str, int]:
    """LIST requests of all namespaces the API server has answered, per DRA resource (its own metrics).
    Lists in one namespace, such as the namespace controller's, are not the module's."""

    def key(labels: dict[str, str]) -> str | None:
        listed = labels.get("verb") == "LIST" and labels.get("scope") == "cluster"
        return labels["resource"] if listed and labels.get("resource") in DRA_RESOURCES else None

    return {**dict.fromkeys(DRA_RESOURCES, 0), **api_requests(cluster, key)}


TAINT_RULE = "kubegpu-test-device-maintenance"


def test_a_device_taint_rule_counts_as_a_slice_taint(cluster: LocalCluster):
    """A DeviceTaintRule (resource.k8s.io/v1 on this control plane) on one free GPU of a DRA node:
    NoSchedule keeps it from new claims without evicting anyone, as the same taint in the slice would."""
    node = next(n["name"] for n in fleet_file.dra_nodes(cluster.fleet) if not n["dra"]["mig"])
    api = api_dra(cluster)[node]
    pool, device = sorted(key for key in api["devices"] if key not in api["held"])[0]
    before = by_node(facts(cluster))[node]
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": TAINT_RULE},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": pool, "device": device},
            "taint": {"key": "kubegpu.test/maintenance", "value": "firmware", "effect": "NoSchedule"},
        },
    }
    status, body = cluster.create(f"{RESOURCE}/devicetaintrules", rule)
    assert status == 201, body
    try:
        result = facts(cluster)
        after = by_node(result)[node]
        assert (after["capacity"], after["allocated"]) == (before["capacity"], before["allocated"])
        assert (after["allocatable"], after["free"]) == (before["allocatable"] - 1, before["free"] - 1)
        tainted = [p for p in after["problems"] if p["kind"] == "dra_devices_tainted"]
        assert [p["reason"] for p in tainted] == [f"{device} (kubegpu.test/maintenance=firmware:NoSchedule)"]
        assert not [n for n in result["notes"] if "devicetaintrules" in n]
    finally:
        cluster.delete(f"{RESOURCE}/devicetaintrules/{TAINT_RULE}")


@pytest.mark.every_release
def test_one_paginated_list_per_dra_resource_counted_on_the_server(cluster: LocalCluster):
    served = [r for r in DRA_RESOURCES if dra_resource_served(r)]
    items = {r: len(cluster.get(f"{RESOURCE}/{r}")["items"]) for r in served}
    page = 2
    before = server_lists(cluster)
    result = facts(cluster, {"page_size": page})
    after = server_lists(cluster)
    pages = {r: max(1, math.ceil(n / page)) for r, n in items.items()}
    assert {r: after[r] - before[r] for r in served} == pages
    nodes = len(cluster.get("/api/v1/nodes")["items"])
    pods = len(cluster.get("/api/v1/pods?fieldSelector=status.phase%21%3DSucceeded,status.phase%21%3DFailed")["items"])
    # A resource the release does not serve is one request, answered 404.
    refused = len(DRA_RESOURCES) - len(served)
    assert result["api_requests"] == sum(pages.values()) + refused + math.ceil(nodes / page) + math.ceil(pods / page)


@pytest.mark.every_release
def test_device_taint_rules_count_where_served_and_are_named_in_a_note_where_not(cluster: LocalCluster):
    result = facts(cluster)
    notes = [n for n in result["notes"] if "devicetaintrules" in n]
    status = cluster.api.request("GET", f"{RESOURCE}/devicetaintrules")[0]
    if versions.serves(versions.DEVICE_TAINT_RULES):
        assert (status, notes) == (200, [])
    else:
        assert status == 404
        assert notes == [
            "this cluster does not serve devicetaintrules in resource.k8s.io/v1: devices count as tainted only by "
            "the taints their ResourceSlices carry"
        ]
    # The rest of the DRA facts still count: every DRA node's devices, none of them made tainted.
    nodes = by_node(result)
    for spec in fleet_file.dra_nodes(cluster.fleet):
        node = nodes[spec["name"]]
        assert node["capacity"] == fleet_file.expected_dra_node(spec, cluster.fleet)["capacity"]
        assert "dra_devices_tainted" not in {p["kind"] for p in node["problems"]}


# --- the device-plugin check and the labels -------------------------------------------------------------


@pytest.mark.every_release
def test_no_device_plugin_missing_on_a_healthy_dra_node(cluster: LocalCluster):
    status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_device_plugin_validate", {"fail_on": "never"})
    assert status == "SUCCESS", result.get("msg")
    dra_nodes = dra_node_names(cluster)
    assert [f for f in result["findings"] if f["node"] in dra_nodes] == []
    summaries = {n["name"]: n for n in result["nodes"]}
    for name in dra_nodes:
        assert summaries[name]["gpu_sources"] == ["dra"]
        assert summaries[name]["dra"]["kubelet_plugin_ready"] is True and summaries[name]["dra"]["slices"] == 1
    [driver] = result["dra_daemonsets"]
    assert (driver["namespace"], driver["name"]) == (
        cluster.fleet["dra_driver"]["namespace"],
        cluster.fleet["dra_driver"]["name"],
    )
    assert driver["healthy"] is True and driver["desired"] == len(dra_nodes)
    # The DRA driver is not a device-plugin deployment (the fleet's ACK static pods and the DaemonSet are).
    several = [f["problem"] for f in result["findings"] if f["kind"] == "several_device_plugin_deployments"]
    assert several and all(driver["name"] not in problem and "DRA" not in problem for problem in several)


def dra_plugin_pod(cluster: LocalCluster, node: str) -> dict:
    driver = cluster.fleet["dra_driver"]
    pods = cluster.get(f"/api/v1/namespaces/{driver['namespace']}/pods?fieldSelector=spec.nodeName%3D{node}")
    [pod] = pods["items"]
    return pod


def pod_ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


@pytest.fixture
def dra_plugin_not_ready(cluster: LocalCluster) -> Iterator[str]:
    """The DRA kubelet-plugin pod on one node made not Ready (KWOK stage), and Ready again after."""
    node = "dra-a100-mig"
    pod = dra_plugin_pod(cluster, node)
    path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"
    cluster.patch(path, {"metadata": {"annotations": {fleet_file.NOT_READY_ANNOTATION: "true"}}})
    try:
        wait_until(lambda: not pod_ready(dra_plugin_pod(cluster, node)), what="the kubelet plugin to be not Ready")
        yield node
    finally:
        cluster.patch(path, {"metadata": {"annotations": {fleet_file.NOT_READY_ANNOTATION: None}}})
        wait_until(lambda: pod_ready(dra_plugin_pod(cluster, node)), what="the kubelet plugin to be Ready again")


@pytest.mark.every_release
def test_a_kubelet_plugin_not_ready_shows_on_that_node_only(cluster: LocalCluster, dra_plugin_not_ready: str):
    node = dra_plugin_not_ready
    result = facts(cluster)
    assert [(p["node"], p["kind"]) for p in result["problems"] if p["node"] in dra_node_names(cluster)] == [
        (node, "dra_plugin_not_ready")
    ]
    _status, check, _done = run_ansible_module(cluster.kubeconfig, "gpu_device_plugin_validate", {"fail_on": "never"})
    dra_findings = {(f["node"], f["kind"]) for f in check["findings"] if f["node"] in dra_node_names(cluster)}
    assert dra_findings == {(node, "dra_kubelet_plugin_not_ready")}


@pytest.mark.every_release
def test_the_dra_nodes_are_labeled_with_their_model(cluster: LocalCluster):
    names = dra_node_names(cluster)
    before = {n: cluster.get(f"/api/v1/nodes/{n}")["metadata"] for n in names}
    status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_node_label", {"names": names})
    try:
        assert status in ("CHANGED", "SUCCESS"), result.get("msg")
        labels = {n: cluster.get(f"/api/v1/nodes/{n}")["metadata"]["labels"].get("accelerator") for n in names}
        assert labels == {"dra-a100-mig": "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "dra-h100": "NVIDIA-H100-80GB-HBM3"}
    finally:
        for name, metadata in before.items():
            label = metadata.get("labels", {}).get("accelerator")
            record = metadata.get("annotations", {}).get("kubegpu.io/managed-labels")
            cluster.patch(
                f"/api/v1/nodes/{name}",
                {"metadata": {"labels": {"accelerator": label}, "annotations": {"kubegpu.io/managed-labels": record}}},
            )


# --- without resource.k8s.io -------------------------------------------------------------------------------


def device_plugin_view(result: dict) -> dict[str, Any]:
    """What the facts say of the device plugin: per node its figures and problems."""
    return {
        n["name"]: (n["by_source"]["device_plugin"], sorted(p["kind"] for p in n["problems"]))
        for n in result["nodes"]
        if n["gpu_sources"] != ["dra"]
    }


@pytest.fixture
def reader_without_dra(cluster: LocalCluster, namespace: str, tmp_path: Path) -> Iterator[Path]:
    """A ServiceAccount that may list nodes and pods, and nothing of resource.k8s.io."""
    role = f"kubegpu-test-no-dra-{namespace}"
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}}
    assert cluster.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", account)[0] == 201
    rules = [{"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list"]}]
    assert cluster.create(f"{rbac}/clusterroles", {"metadata": {"name": role}, "rules": rules})[0] == 201
    binding = {
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
    }
    assert cluster.create(f"{rbac}/clusterrolebindings", binding)[0] == 201
    try:
        status, token = cluster.api.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/reader/token", {"spec": {"expirationSeconds": 600}}
        )
        assert status == 201, token
        assert isinstance(token, dict)
        yield write_token_kubeconfig(tmp_path / "reader.kubeconfig", cluster, token["status"]["token"])
    finally:
        cluster.delete(f"{rbac}/clusterrolebindings/{role}")
        cluster.delete(f"{rbac}/clusterroles/{role}")


@pytest.mark.every_release
def test_a_reader_not_allowed_to_list_dra_gets_todays_facts_and_a_note(cluster: LocalCluster, reader_without_dra):
    full = facts(cluster)
    limited = wait_until(
        lambda: (r := facts(cluster, kubeconfig=reader_without_dra)) and r["nodes"] and r,
        what="the reader's binding",
    )
    assert limited["notes"] == [
        'not allowed to list "deviceclasses" (apiGroup "resource.k8s.io"): GPUs from DRA drivers are not counted; '
        "the facts come from the device plugin alone; grant list on deviceclasses, resourceslices and resourceclaims "
        "(the kubegpu-reader role in rbac/ does)"
    ]
    assert limited["dra"]["readable"] is False
    assert limited["api_requests"] == 3
    assert device_plugin_view(limited) == device_plugin_view(full)
    assert limited["totals"]["by_source"]["device_plugin"] == full["totals"]["by_source"]["device_plugin"]
    # The DRA nodes are still known by their kubelet plugin, with no problem made up for them.
    for name in dra_node_names(cluster):
        node = by_node(limited)[name]
        assert (node["capacity"], node["problems"]) == (0, [])


class _NoDraProxy(BaseHTTPRequestHandler):
    """Forwards reads to the local API server, as a cluster without resource.k8s.io/v1 answers."""

    cluster: LocalCluster
    seen: list[str]

    def do_GET(self) -> None:  # noqa: N802 - the handler's name is fixed by http.server
        self.seen.append(self.path)
        if self.path.startswith("/apis/resource.k8s.io/"):
            status, body = (
                404,
                json.dumps(
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": "NotFound",
                        "code": 404,
                        "message": "the server could not find the requested resource",
                    }
                ).encode(),
            )
        else:
            request = urllib.request.Request(
                self.cluster.layout.server + self.path, headers={"Accept": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, context=self.cluster.api.context, timeout=10) as response:
                    status, body = response.status, response.read()
            except urllib.error.HTTPError as exc:
                status, body = exc.code, exc.read()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def cluster_without_dra(cluster: LocalCluster, tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    seen: list[str] = []
    handler = type("Handler", (_NoDraProxy,), {"cluster": cluster, "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "no-dra", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "proxy", "user": {"token": "the-proxy-authenticates-itself"}}],
        "contexts": [{"name": "no-dra", "context": {"cluster": "no-dra", "user": "proxy"}}],
        "current-context": "no-dra",
    }
    path = tmp_path / "no-dra.kubeconfig"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    try:
        yield path, seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.every_release
def test_a_cluster_without_resource_k8s_io_gets_todays_facts_and_a_note(cluster: LocalCluster, cluster_without_dra):
    kubeconfig, seen = cluster_without_dra
    full = facts(cluster)
    without = facts(cluster, kubeconfig=kubeconfig)
    assert without["notes"] == [
        "this cluster does not serve resource.k8s.io/v1 (deviceclasses: 404): GPUs from DRA drivers are not "
        "counted; the facts come from the device plugin alone"
    ]
    assert [p.split("?")[0] for p in seen] == ["/api/v1/nodes", "/api/v1/pods", f"{RESOURCE}/deviceclasses"]
    assert device_plugin_view(without) == device_plugin_view(full)
    assert without["totals"]["by_source"]["dra"]["capacity"] == 0
