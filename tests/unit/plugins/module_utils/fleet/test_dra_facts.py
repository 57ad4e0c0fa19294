"""Fleet facts on clusters whose GPUs come through DRA, alone or beside the device plugin.

Slices, claims and classes are built in the shape NVIDIA's DRA driver publishes them
(tests/unit/fixtures/dra, with their sources), or read from those fixtures.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import (
    PROBLEM_CLAIMS_UNALLOCATABLE,
    PROBLEM_DRA_DEVICE_GONE,
    PROBLEM_DRA_DEVICE_TAINTED,
    PROBLEM_DRA_NO_SLICES,
    PROBLEM_DRA_PLUGIN_NOT_READY,
    PROBLEM_NO_CAPACITY,
    PROBLEM_NO_PLUGIN,
    PROBLEM_SERVED_TWICE,
    PROBLEM_TEXT,
    split_pods,
    summarise,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.projection import (
    ROLE_DRA_PLUGIN,
    ROLE_UNALLOCATABLE,
    project_pod,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.summary import summary_lines
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    DraObjects,
    project_claim,
    project_device_class,
    project_slice,
    project_taint_rule,
    rule_selects,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_fleet import dra_fleet, gpu_units
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_reads import read_dra
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import project_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dra"
GPU = "nvidia.com/gpu"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
GFD_H100 = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
DRA_PLUGIN_LABELS = {
    "app.kubernetes.io/name": "nvidia-dra-driver-gpu",
    "nvidia-dra-driver-gpu-component": "kubelet-plugin",
}


# --- builders, in the driver's shape (fixtures/dra/resourceslice-full-gpu.example.yaml) -------------


def full_gpu(minor: int, node: str, product: str = H100, taints=None) -> dict:
    device = {
        "name": f"gpu-{minor}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{node}-{minor}"},
            "productName": {"string": product},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"},
            "driverVersion": {"version": "580.95.5"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }
    if taints:
        device["taints"] = taints
    return device


def static_mig(minor: int, start: int, node: str, profile: str = "3g.40gb") -> dict:
    return {
        "name": f"gpu-{minor}-mig-{profile.replace('.', '')}-9-{start}",
        "attributes": {
            "type": {"string": "mig"},
            "uuid": {"string": f"MIG-{node}-{minor}-{start}"},
            "parentUUID": {"string": f"GPU-{node}-{minor}"},
            "profile": {"string": profile},
            "productName": {"string": A100},
        },
        "capacity": {"memory": {"value": "40192Mi"}},
    }


def resource_slice(node: str, devices: list[dict], generation: int = 1, count: int = 1) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"00000-gpu.nvidia.com-{node}-x7k2p"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
            "devices": devices,
        },
    }


def claim(name: str, node: str, devices: list[str], pods=(), namespace="ml", admin=False, classes=("gpu.nvidia.com",)):
    results = [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": d} for d in devices]
    if admin:
        for result in results:
            result["adminAccess"] = True
    status = {}
    if devices:
        status = {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in pods],
        }
    requests = [{"name": "gpu", "exactly": {"deviceClassName": c}} for c in classes]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": requests}},
        "status": status,
    }


def chart_classes() -> list[dict]:
    docs = yaml.safe_load((FIXTURES / "deviceclasses-nvidia-helm.yaml").read_text())["items"]
    return [d for d in docs if d["kind"] == "DeviceClass"]


def make_node(name: str, gpus: int | None = None, labels=None) -> dict:
    capacity = {"cpu": "64"}
    if gpus is not None:
        capacity[GPU] = str(gpus)
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def make_pod(name, node, namespace="ml", gpus=0, labels=None, ready=True, status=None, spec=None):
    container = {"name": "main", "image": "cuda"}
    if gpus:
        container["resources"] = {"limits": {GPU: str(gpus)}}
    pod_spec = {"containers": [container], **(spec or {})}
    if node:
        pod_spec["nodeName"] = node
    pod_status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    pod_status.update(status or {})
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": pod_spec,
        "status": pod_status,
    }


def dra_plugin(node: str, ready: bool = True) -> dict:
    return make_pod(
        f"nvidia-dra-driver-gpu-kubelet-plugin-{node}",
        node,
        namespace="nvidia-dra-driver-gpu",
        labels=DRA_PLUGIN_LABELS,
        ready=ready,
    )


def device_plugin(node: str) -> dict:
    return make_pod(
        f"nvidia-device-plugin-{node}", node, namespace="kube-system", labels={"name": "nvidia-device-plugin-ds"}
    )


def extended_resource_pod(name: str, node: str, gpus: int, claim_name: str) -> dict:
    """A pod with `nvidia.com/gpu` limits the scheduler served from a DRA claim (KEP-5004)."""
    status = {
        "extendedResourceClaimStatus": {
            "resourceClaimName": claim_name,
            "requestMappings": [{"containerName": "main", "resourceName": GPU, "requestName": "container-0-request-0"}],
        }
    }
    return make_pod(name, node, gpus=gpus, status=status)


def facts_of(nodes, pods, slices=(), claims=(), classes=(), options=DEFAULT_OPTIONS):
    dra = DraObjects(
        classes=[c for c in map(project_device_class, classes) if c],
        slices=[s for s in map(project_slice, slices) if s],
        claims=[c for c in map(project_claim, claims) if c],
    )
    projected, plugins = split_pods(project_pod(p, DEFAULT_OPTIONS) for p in pods)
    compact = [project_node(n, DEFAULT_OPTIONS) for n in nodes]
    return summarise([n for n in compact if n], projected, plugins, options, dra)


# gpu_node_facts' dra_devices=all: every DRA device listed.
EVERY_DEVICE = replace(DEFAULT_OPTIONS, all_dra_devices=True)


def by_name(facts):
    return {n["name"]: n for n in facts["nodes"]}


def kinds(node):
    return [p["kind"] for p in node["problems"]]


# --- capacity, allocated and free -------------------------------------------------------------------


def test_a_dra_node_counts_its_devices_less_its_allocations():
    slices = [resource_slice("dra-h100", [full_gpu(i, "dra-h100") for i in range(4)])]
    claims = [
        claim("trainer-extended-resources-x7k9m", "dra-h100", ["gpu-0", "gpu-1"], pods=["trainer"]),
        claim("notebook-gpu-8t4xw", "dra-h100", ["gpu-2"], pods=["notebook"]),
    ]
    pods = [dra_plugin("dra-h100"), extended_resource_pod("trainer", "dra-h100", 2, "trainer-extended-resources-x7k9m")]
    node = by_name(facts_of([make_node("dra-h100")], pods, slices, claims, chart_classes(), EVERY_DEVICE))["dra-h100"]
    assert (node["capacity"], node["allocatable"], node["allocated"], node["free"]) == (4, 4, 3, 1)
    assert node["by_source"] == {
        "device_plugin": {"capacity": 0, "allocatable": 0, "allocated": 0, "free": 0},
        "dra": {"capacity": 4, "allocatable": 4, "allocated": 3, "free": 1},
    }
    assert node["gpu_sources"] == ["dra"]
    assert node["gpu_pods"] == ["ml/notebook", "ml/trainer"]
    assert node["problems"] == []
    gpu0 = node["dra"]["devices"][0]
    assert gpu0 == {
        "name": "gpu-0",
        "driver": "gpu.nvidia.com",
        "pool": "dra-h100",
        "type": "gpu",
        "model": "NVIDIA-H100-80GB-HBM3",
        "product_name": H100,
        "uuid": "GPU-dra-h100-0",
        "parent_uuid": None,
        "memory": "80Gi",
        "mig_profile": None,
        "allocated": True,
        "claims": ["ml/trainer-extended-resources-x7k9m"],
        "taints": [],
        "health": "healthy",
    }


def test_a_pod_served_through_dra_for_nvidia_gpu_counts_once_and_never_against_the_device_plugin():
    # The node also has a device plugin with two GPUs; the pod's limit was served by DRA.
    slices = [resource_slice("mixed", [full_gpu(0, "mixed"), full_gpu(1, "mixed")])]
    claims = [claim("t-extended-resources-a", "mixed", ["gpu-0", "gpu-1"], pods=["t"])]
    pods = [
        device_plugin("mixed"),
        dra_plugin("mixed"),
        extended_resource_pod("t", "mixed", 2, "t-extended-resources-a"),
    ]
    node = by_name(facts_of([make_node("mixed", 2, GFD_H100)], pods, slices, claims))["mixed"]
    assert node["by_source"]["device_plugin"]["allocated"] == 0
    assert node["by_source"]["dra"]["allocated"] == 2
    assert (node["capacity"], node["allocated"], node["free"]) == (4, 2, 2)
    assert node["resources"][GPU]["allocated"] == 0
    assert node["gpu_pods"] == ["ml/t"]


def test_static_mig_devices_count_one_each():
    devices = [static_mig(g, start, "dra-a100") for g in (0, 1) for start in (0, 4)]
    claims = [claim("mig-job-gpu-1", "dra-a100", [devices[0]["name"]], pods=["mig-job"], classes=("mig.nvidia.com",))]
    node = by_name(
        facts_of(
            [make_node("dra-a100")],
            [dra_plugin("dra-a100")],
            [resource_slice("dra-a100", devices)],
            claims,
            (),
            EVERY_DEVICE,
        )
    )["dra-a100"]
    assert (node["capacity"], node["allocated"], node["free"]) == (4, 1, 3)
    assert node["model"] == "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"
    assert node["model_source"] == "ResourceSlice productName"
    assert node["mig_profile"] == "3g.40gb"
    assert {d["mig_profile"] for d in node["dra"]["devices"]} == {"3g.40gb"}


def test_devices_sharing_a_counter_set_are_one_gpu_allocated_when_any_part_is():
    docs = yaml.safe_load((FIXTURES / "resourceslice-dynamic-mig.example.yaml").read_text())["items"]
    held = claim("part", "gpu-node-3", ["gpu-0-mig-1g5gb-19-0"], pods=["small"])
    node = by_name(facts_of([make_node("gpu-node-3")], [dra_plugin("gpu-node-3")], docs, [held], (), EVERY_DEVICE))[
        "gpu-node-3"
    ]
    assert len(node["dra"]["devices"]) == 3
    assert (node["capacity"], node["allocated"], node["free"]) == (1, 1, 0)


def test_the_mig_devices_of_a_gpu_also_published_whole_are_alternatives():
    devices = [full_gpu(0, "old"), {**static_mig(0, 0, "old"), "name": "gpu-0-mig-0"}]
    devices[1]["attributes"]["parentUUID"] = {"string": "GPU-old-0"}
    assert len(gpu_units(project_slice(resource_slice("old", devices))["devices"])) == 1


def test_admin_access_does_not_use_a_device_and_taints_take_devices_away():
    taint = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    devices = [full_gpu(0, "n"), full_gpu(1, "n", taints=taint), full_gpu(2, "n")]
    claims = [claim("monitor", "n", ["gpu-0"], namespace="gpu-operator", admin=True)]
    node = by_name(facts_of([make_node("n")], [dra_plugin("n")], [resource_slice("n", devices)], claims))["n"]
    assert (node["capacity"], node["allocatable"], node["unhealthy"], node["allocated"], node["free"]) == (
        3,
        2,
        1,
        0,
        2,
    )
    assert kinds(node) == [PROBLEM_DRA_DEVICE_TAINTED]
    assert node["problems"][0]["reason"] == "gpu-1 (gpu.nvidia.com/xid=79:NoSchedule)"
    assert node["problems"][0]["remedy"]


def test_only_the_newest_generation_counts_and_an_incomplete_pool_is_a_note():
    slices = [
        resource_slice("n", [full_gpu(i, "n") for i in range(8)], generation=1),
        resource_slice("n", [full_gpu(i, "n") for i in range(4)], generation=2, count=2),
    ]
    facts = facts_of([make_node("n")], [dra_plugin("n")], slices)
    assert by_name(facts)["n"]["capacity"] == 4
    assert facts["notes"] == [
        "pool n of driver gpu.nvidia.com: 1 of 2 ResourceSlices of generation 2 published, so its devices may be "
        "counted short until the driver finishes"
    ]
    assert "note: pool n of driver" in summary_lines(facts)[-1]


# --- the mixed cluster --------------------------------------------------------------------------------


def test_totals_per_model_add_both_sources():
    nodes = [make_node("gfd-h100", 8, GFD_H100), make_node("dra-h100"), make_node("cpu")]
    slices = [resource_slice("dra-h100", [full_gpu(i, "dra-h100") for i in range(4)])]
    claims = [claim("c", "dra-h100", ["gpu-3"], pods=["p"])]
    pods = [device_plugin("gfd-h100"), dra_plugin("dra-h100"), make_pod("q", "gfd-h100", gpus=2)]
    facts = facts_of(nodes, pods, slices, claims, chart_classes())
    assert [n["name"] for n in facts["nodes"]] == ["dra-h100", "gfd-h100"]
    h100 = facts["models"]["NVIDIA-H100-80GB-HBM3"]
    assert (h100["nodes"], h100["capacity"], h100["allocated"], h100["free"]) == (2, 12, 3, 9)
    assert h100["by_source"] == {
        "device_plugin": {"capacity": 8, "allocatable": 8, "allocated": 2, "free": 6},
        "dra": {"capacity": 4, "allocatable": 4, "allocated": 1, "free": 3},
    }
    assert facts["totals"]["capacity"] == 12 and facts["totals"]["by_source"]["dra"]["capacity"] == 4
    assert facts["problems"] == []
    assert facts["dra"]["extended_resources"] == {
        "gpu.nvidia.com": GPU,
        "mig-1g-12gb.gpu.nvidia.com": "nvidia.com/mig-1g.12gb",
    }
    assert "of which through DRA: 4 GPUs, 4 allocatable, 1 allocated, 3 free" in summary_lines(facts)


def test_a_model_label_wins_over_the_slices():
    slices = [resource_slice("n", [full_gpu(0, "n", product="NVIDIA A10")])]
    node = by_name(facts_of([make_node("n", labels=GFD_H100)], [dra_plugin("n")], slices))["n"]
    assert (node["model"], node["model_source"]) == ("NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.product")


# --- problems ------------------------------------------------------------------------------------


def test_a_healthy_dra_node_has_no_device_plugin_problem():
    labels = {"nvidia.com/gpu.present": "true"}
    slices = [resource_slice("n", [full_gpu(0, "n")])]
    node = by_name(facts_of([make_node("n", labels=labels)], [dra_plugin("n")], slices))["n"]
    assert PROBLEM_NO_PLUGIN not in kinds(node) and PROBLEM_NO_CAPACITY not in kinds(node)
    assert node["problems"] == []
    assert node["dra"]["kubelet_plugin_ready"] is True and node["dra"]["is_dra_node"] is True


def test_kubelet_plugin_not_ready_missing_or_publishing_nothing():
    nodes = [make_node(n) for n in ("down", "silent", "orphan")]
    pods = [dra_plugin("down", ready=False), dra_plugin("silent")]
    slices = [resource_slice("down", [full_gpu(0, "down")]), resource_slice("orphan", [full_gpu(0, "orphan")])]
    facts = by_name(facts_of(nodes, pods, slices))
    assert kinds(facts["down"]) == [PROBLEM_DRA_PLUGIN_NOT_READY]
    assert facts["down"]["problems"][0]["reason"] == (
        "not Ready: nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-down"
    )
    assert kinds(facts["silent"]) == [PROBLEM_DRA_NO_SLICES]
    assert kinds(facts["orphan"]) == [PROBLEM_DRA_PLUGIN_NOT_READY]
    assert "no pod matching the DRA kubelet-plugin selectors" in facts["orphan"]["problems"][0]["reason"]


def test_one_resource_served_by_the_device_plugin_and_dra_on_one_node():
    slices = [resource_slice("both", [full_gpu(0, "both")])]
    node = by_name(
        facts_of(
            [make_node("both", 1, GFD_H100)], [device_plugin("both"), dra_plugin("both")], slices, (), chart_classes()
        )
    )["both"]
    assert kinds(node) == [PROBLEM_SERVED_TWICE]
    assert node["problems"][0]["reason"].startswith("nvidia.com/gpu is in the node's allocatable (device plugin)")
    assert node["gpu_sources"] == ["device_plugin", "dra"]


def test_a_claim_on_a_device_no_slice_publishes():
    slices = [resource_slice("n", [full_gpu(0, "n")])]
    claims = [claim("stale", "n", ["gpu-7"], pods=["p"]), claim("lost", "gone-node", ["gpu-0"])]
    facts = facts_of([make_node("n")], [dra_plugin("n")], slices, claims)
    node = by_name(facts)["n"]
    assert kinds(node) == [PROBLEM_DRA_DEVICE_GONE]
    assert node["problems"][0]["reason"] == "ml/stale holds gpu.nvidia.com/n/gpu-7"
    assert {(p["node"], p["kind"]) for p in facts["problems"]} == {
        ("n", PROBLEM_DRA_DEVICE_GONE),
        ("gone-node", PROBLEM_DRA_DEVICE_GONE),
    }


def pending_pod(name, claims=(), gpus=0, message="0/10 nodes are available: 10 cannot allocate all claims."):
    status = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": c} for c in claims],
    }
    spec = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "eight-gpus"}]} if claims else {}
    return make_pod(name, None, gpus=gpus, status=status, spec=spec)


def test_a_gpu_pod_no_node_can_allocate_is_a_cluster_problem():
    pods = [
        pending_pod("big", claims=["big-gpu-abcde"]),
        pending_pod("nic", claims=["nic-net-abcde"]),
        pending_pod("elsewhere", message="0/10 nodes are available: 10 Insufficient cpu."),
    ]
    claims = [claim("big-gpu-abcde", "", []), claim("nic-net-abcde", "", [], classes=("dranet",))]
    projected = [project_pod(p) for p in pods]
    assert [p and p["role"] for p in projected] == [ROLE_UNALLOCATABLE, ROLE_UNALLOCATABLE, None]
    facts = facts_of(
        [make_node("n")], [dra_plugin("n"), *pods], [resource_slice("n", [full_gpu(0, "n")])], claims, chart_classes()
    )
    [problem] = facts["problems"]
    assert (problem["node"], problem["kind"], problem["problem"]) == (
        None,
        PROBLEM_CLAIMS_UNALLOCATABLE,
        PROBLEM_TEXT[PROBLEM_CLAIMS_UNALLOCATABLE],
    )
    assert problem["reason"] == "ml/big: 0/10 nodes are available: 10 cannot allocate all claims."
    assert any(line.startswith("  cluster: GPU pod Pending") for line in summary_lines(facts))


def test_a_pending_pod_with_gpu_limits_counts_without_claims():
    facts = facts_of([make_node("n")], [pending_pod("limit", gpus=2)])
    assert [p["kind"] for p in facts["problems"]] == [PROBLEM_CLAIMS_UNALLOCATABLE]


def test_kubelet_plugin_pods_are_recognised_by_the_chart_labels():
    for labels in (DRA_PLUGIN_LABELS, {"dra-driver-nvidia-gpu-component": "kubelet-plugin"}):
        pod = make_pod("p", "n", namespace="anywhere", labels=labels)
        assert project_pod(pod)["role"] == ROLE_DRA_PLUGIN


# --- a cluster without resource.k8s.io, or a reader who may not list it --------------------------------


class ListingClient:
    """list_items only, failing with the given status on the given resource."""

    def __init__(self, fail_on: str | None = None, status: int = 404, items: dict | None = None):
        self.fail_on, self.status, self.items = fail_on, status, items or {}
        self.paths: list[str] = []

    def list_items(self, path, **_query):
        self.paths.append(path)
        resource = path.rsplit("/", 1)[-1]
        if resource == self.fail_on:
            raise ClusterError(f"GET {path}: {self.status}", self.status)
        return iter(self.items.get(resource, []))


def test_a_cluster_without_the_dra_api_gives_todays_facts_and_a_note():
    client = ListingClient(fail_on="deviceclasses", status=404)
    dra = read_dra(client, 500)
    assert client.paths == ["/apis/resource.k8s.io/v1/deviceclasses"]
    assert not dra.available and "does not serve resource.k8s.io/v1" in dra.unavailable
    nodes = [
        project_node(make_node("gfd", 2, GFD_H100)),
        project_node(make_node("n", labels={"nvidia.com/gpu.present": "true"})),
    ]
    pods, plugins = split_pods(project_pod(p) for p in (device_plugin("gfd"), dra_plugin("n")))
    facts = summarise(nodes, pods, plugins, DEFAULT_OPTIONS, dra)
    assert facts["notes"] == [dra.unavailable]
    assert facts["dra"]["readable"] is False
    # Without slices a kubelet-plugin node is not said to publish none.
    assert by_name(facts)["n"]["problems"] == []
    assert by_name(facts)["gfd"]["capacity"] == 2


def test_a_forbidden_list_is_a_note_and_any_other_failure_stops_the_run():
    dra = read_dra(ListingClient(fail_on="resourceclaims", status=403), 500)
    assert dra.classes == [] and dra.slices == [] and 'not allowed to list "resourceclaims"' in dra.unavailable
    try:
        read_dra(ListingClient(fail_on="resourceslices", status=500), 500)
    except ClusterError as exc:
        assert exc.status == 500
    else:
        raise AssertionError("a 500 must not pass as a missing API")


def test_four_lists_one_each():
    items = {
        "deviceclasses": chart_classes(),
        "resourceslices": [resource_slice("n", [full_gpu(0, "n")])],
        "resourceclaims": [claim("c", "n", ["gpu-0"])],
        "devicetaintrules": taint_rules(),
    }
    client = ListingClient(items=items)
    dra = read_dra(client, 500)
    assert client.paths == [
        "/apis/resource.k8s.io/v1/deviceclasses",
        "/apis/resource.k8s.io/v1/resourceslices",
        "/apis/resource.k8s.io/v1/resourceclaims",
        "/apis/resource.k8s.io/v1/devicetaintrules",
    ]
    # The rule without a selector matches no device and is left out.
    assert (len(dra.classes), len(dra.slices), len(dra.claims), len(dra.taint_rules)) == (4, 1, 1, 3)


def test_dra_fleet_of_nothing_is_empty():
    fleet = dra_fleet(DraObjects())
    assert (fleet.readable, dict(fleet.devices), list(fleet.notes)) == (True, {}, [])


# --- DeviceTaintRules (fixtures/dra/devicetaintrules.example.yaml, with its source) -------------------


def taint_rules() -> list[dict]:
    return yaml.safe_load((FIXTURES / "devicetaintrules.example.yaml").read_text())["items"]


def facts_with_rules(rules, slices, nodes, pods=(), claims=(), unavailable=None):
    dra = DraObjects(
        slices=[s for s in map(project_slice, slices) if s],
        claims=[c for c in map(project_claim, claims) if c],
        taint_rules=[r for r in map(project_taint_rule, rules) if r],
        taint_rules_unavailable=unavailable,
    )
    projected, plugins = split_pods(project_pod(p, DEFAULT_OPTIONS) for p in pods)
    compact = [project_node(n, DEFAULT_OPTIONS) for n in nodes]
    return summarise([n for n in compact if n], projected, plugins, DEFAULT_OPTIONS, dra)


def test_a_rule_tainting_a_device_counts_the_same_as_a_slice_taint():
    devices = [full_gpu(i, "dra-h100") for i in range(4)]
    by_rule = facts_with_rules(
        taint_rules(), [resource_slice("dra-h100", devices)], [make_node("dra-h100")], [dra_plugin("dra-h100")]
    )
    slice_taint = [{"key": "example.com/maintenance", "value": "hbm-errors", "effect": "NoExecute"}]
    in_slice = facts_of(
        [make_node("dra-h100")],
        [dra_plugin("dra-h100")],
        [resource_slice("dra-h100", [*devices[:3], full_gpu(3, "dra-h100", taints=slice_taint)])],
    )
    node, same = by_name(by_rule)["dra-h100"], by_name(in_slice)["dra-h100"]
    counts = ("capacity", "allocatable", "unhealthy", "allocated", "free")
    assert [node[k] for k in counts] == [same[k] for k in counts] == [4, 3, 1, 0, 3]
    assert kinds(node) == kinds(same) == [PROBLEM_DRA_DEVICE_TAINTED]
    # The NoExecute rule on gpu-3 counts; the effect-None rule on gpu-0 is shown but keeps no pod away.
    assert node["problems"][0]["reason"] == "gpu-3 (example.com/maintenance=hbm-errors:NoExecute)"
    gpu0 = next(d for d in node["dra"]["devices"] if d["name"] == "gpu-0")
    assert gpu0["taints"] == [{"key": "example.com/maintenance", "value": None, "effect": "None"}]
    assert by_rule["notes"] == []


def test_a_rule_for_a_whole_pool_taints_only_that_pool():
    slices = [
        resource_slice("dra-a100", [full_gpu(i, "dra-a100", product=A100) for i in range(2)]),
        resource_slice("other", [full_gpu(i, "other") for i in range(2)]),
    ]
    nodes = [make_node("dra-a100"), make_node("other")]
    facts = facts_with_rules(taint_rules(), slices, nodes, [dra_plugin("dra-a100"), dra_plugin("other")])
    assert (by_name(facts)["dra-a100"]["allocatable"], by_name(facts)["dra-a100"]["free"]) == (0, 0)
    assert (by_name(facts)["other"]["allocatable"], kinds(by_name(facts)["other"])) == (2, [])


def test_rule_selectors_as_the_api_defines_them():
    device = project_slice(resource_slice("n", [full_gpu(1, "n")]))["devices"][0]
    every = project_taint_rule(
        {"metadata": {"name": "all"}, "spec": {"deviceSelector": {}, "taint": {"key": "k", "effect": "NoSchedule"}}}
    )
    other_driver = project_taint_rule(
        {"metadata": {"name": "x"}, "spec": {"deviceSelector": {"driver": "x.example.com"}, "taint": {"key": "k"}}}
    )
    assert rule_selects(every, device) and not rule_selects(other_driver, device)
    assert project_taint_rule({"metadata": {"name": "no-taint"}, "spec": {"deviceSelector": {}}}) is None


def test_device_taint_rules_not_served_or_forbidden_are_a_note_and_the_rest_still_counts():
    items = {
        "resourceslices": [resource_slice("n", [full_gpu(0, "n")])],
        "resourceclaims": [claim("c", "n", ["gpu-0"])],
    }
    for status, text in ((404, "does not serve devicetaintrules"), (403, 'not allowed to list "devicetaintrules"')):
        dra = read_dra(ListingClient(fail_on="devicetaintrules", status=status, items=items), 500)
        assert dra.available and (len(dra.slices), len(dra.claims), dra.taint_rules) == (1, 1, [])
        assert text in dra.taint_rules_unavailable
        facts = summarise([project_node(make_node("n"))], [], [], DEFAULT_OPTIONS, dra)
        assert facts["notes"] == [dra.taint_rules_unavailable]
        assert (by_name(facts)["n"]["capacity"], by_name(facts)["n"]["allocated"], facts["dra"]["readable"]) == (
            1,
            1,
            True,
        )
    try:
        read_dra(ListingClient(fail_on="devicetaintrules", status=500, items=items), 500)
    except ClusterError as exc:
        assert exc.status == 500
    else:
        raise AssertionError("a 500 must not pass as a missing API")


def test_by_default_only_the_devices_with_a_taint_are_listed_and_all_are_counted():
    slice_taint = [{"key": "example.com/maintenance", "value": "hbm-errors", "effect": "NoExecute"}]
    devices = [full_gpu(0, "dra-h100"), full_gpu(1, "dra-h100", taints=slice_taint), full_gpu(2, "dra-h100")]
    held = claim("trainer", "dra-h100", ["gpu-0"], pods=["trainer"])
    nodes, pods = [make_node("dra-h100")], [dra_plugin("dra-h100")]
    node = by_name(facts_of(nodes, pods, [resource_slice("dra-h100", devices)], [held]))["dra-h100"]
    assert node["dra"]["device_count"] == 3
    assert [d["name"] for d in node["dra"]["devices"]] == ["gpu-1"]
    assert (node["capacity"], node["allocatable"], node["allocated"], node["free"]) == (3, 2, 1, 1)
    assert node["dra"]["pods"] == ["ml/trainer"] and kinds(node) == [PROBLEM_DRA_DEVICE_TAINTED]
    every = by_name(facts_of(nodes, pods, [resource_slice("dra-h100", devices)], [held], (), EVERY_DEVICE))["dra-h100"]
    assert [d["name"] for d in every["dra"]["devices"]] == ["gpu-0", "gpu-1", "gpu-2"]
    assert {**every, "dra": {**every["dra"], "devices": node["dra"]["devices"]}} == node


# --- the health view of DRA nodes ------------------------------------------------------------------


def test_health_of_dra_devices_tainted_by_rules_and_slices():
    slices = [
        resource_slice("dra-h100", [full_gpu(i, "dra-h100") for i in range(4)]),
        resource_slice("dra-a100", [full_gpu(i, "dra-a100", product=A100) for i in range(2)]),
        resource_slice("dra-ok", [full_gpu(i, "dra-ok") for i in range(2)]),
    ]
    nodes = [make_node(name) for name in ("dra-h100", "dra-a100", "dra-ok")]
    facts = facts_with_rules(taint_rules(), slices, nodes, [dra_plugin(n) for n in ("dra-h100", "dra-a100", "dra-ok")])
    h100, a100, ok = (by_name(facts)[name] for name in ("dra-h100", "dra-a100", "dra-ok"))
    # One of four GPUs tainted NoExecute (and one only reported, effect None): degraded, each device judged.
    assert h100["health"]["status"] == "degraded"
    assert [p["kind"] for p in h100["health"]["problems"]] == ["gpu_devices_tainted"]
    assert h100["health"]["problems"][0]["reason"].startswith("2 device(s): gpu-0 (example.com/maintenance:None)")
    assert {d["name"]: d["health"] for d in h100["dra"]["devices"]} == {"gpu-0": "degraded", "gpu-3": "failed"}
    # The rule for the whole pool leaves no GPU of the node allocatable: failed.
    assert a100["health"]["status"] == "failed"
    assert a100["health"]["problems"][0]["status"] == "failed"
    assert ok["health"] == {"status": "healthy", "problems": []}
    assert facts["health"] == {"healthy": 1, "unknown": 0, "degraded": 1, "failed": 1}


def test_a_dra_kubelet_plugin_not_ready_fails_the_node():
    facts = facts_of(
        [make_node("dra-h100")],
        [dra_plugin("dra-h100", ready=False)],
        [resource_slice("dra-h100", [full_gpu(0, "dra-h100")])],
    )
    health = by_name(facts)["dra-h100"]["health"]
    assert health["status"] == "failed"
    assert [(p["kind"], p["status"]) for p in health["problems"]] == [("gpu_plugin_not_ready", "failed")]
    assert "DRA kubelet plugin, not Ready: nvidia-dra-driver-gpu/" in health["problems"][0]["reason"]
