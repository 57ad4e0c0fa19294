"""The real kube-scheduler as the oracle of gpu_placement_info.

The test builds a scratch fleet of KWOK nodes beside the cluster's own (device-plugin nodes with full
and partial allocations, a cordoned one, a tainted one, one short of CPU, another model, a DRA node
with one GPU held through a claim where DRA serves nvidia.com/gpu, none where it does not, as on 1.34),
asks gpu_placement_info where probe pods of 1, 2, 4 and 8 GPUs would
go (its what-if over the probes' manifests), then creates each probe and holds the prediction to
what the scheduler does: bound where the view says it fits, Pending where it says it fits nowhere,
with the FailedScheduling event's reasons, node by node summed, equal to the view's. Probes pinned
to one node each check every node and size; probes free to go to any scratch node check the choice.
A Deployment of one replica more than fit checks a partial fit: the replicas bound where the view says,
the one left Pending with the event the view's reason quotes for the rest.
Probes, holders, scratch nodes and their slice are removed after.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import GPU, LocalCluster, run_ansible_module, wait_until

from tests.cluster import dra as dra_objects
from tests.cluster import fleet as fleet_file
from tests.cluster import versions

# Where DeviceClasses cannot serve nvidia.com/gpu (DRAExtendedResource, off in 1.34), a pod that asks for it
# cannot use the DRA node's GPUs: no holder runs there and no probe fits it.
DRA_SERVES_GPU = versions.serves(versions.DRA_EXTENDED_RESOURCES)

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

SIZES = (1, 2, 4, 8)
PROBE_CPU = "1"
TAINT = {"key": "dedicated", "value": "other-team", "effect": "NoSchedule"}
RESOURCE_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
_REASON = re.compile(r"(\d+) (.+?)(?=, \d+ |$)")


def scheduler_reasons(message: str) -> Counter[str]:
    """`0/N nodes are available: 3 Insufficient cpu, 1 node(s) ... . preemption: ...` as reason -> nodes (1.34
    writes `. no new claims to deallocate, preemption: ...` after the sum: it ends at the first full stop)."""
    summary = re.split(r"\.(?: |$)", message.split(": ", 1)[1], maxsplit=1)[0]
    return Counter({reason: int(count) for count, reason in _REASON.findall(summary)})


def scratch_nodes(run: str) -> dict[str, dict[str, Any]]:
    """The scratch fleet, short name -> the spec tests.cluster.fleet.node_object takes."""
    mark = {"kubegpu.io/placement-test": run}
    h100, a10 = {**mark, "accelerator": f"PT-H100-{run}"}, {**mark, "accelerator": f"PT-A10-{run}"}

    def spec(name: str, gpus: int | None, labels: dict, **extra: Any) -> dict[str, Any]:
        base = {
            "short": name,
            "name": f"pt-{run}-{name}",
            "gpus": gpus,
            "allocatable_gpus": gpus,
            "labels": labels,
            "taints": [],
        }
        return {"cpu": "32", "memory": "256Gi", **base, **extra}

    specs = [
        spec("free8", 8, h100),
        spec("partial", 8, h100),  # a holder takes 6
        spec("cordoned", 8, h100, unschedulable=True),
        spec("tainted", 8, h100, taints=[TAINT]),
        spec("cpu-short", 4, h100, cpu="1"),  # a holder takes 500m
        spec("a10", 4, a10),
        spec("dra", None, {**mark, "accelerator": f"PT-DRA-{run}"}),  # 4 GPUs in its slice, a holder takes 1
    ]
    return {s["short"]: s for s in specs}


def node_body(spec: dict[str, Any]) -> dict[str, Any]:
    body = fleet_file.node_object(spec)
    if spec.get("unschedulable"):
        body["spec"]["unschedulable"] = True
    return body


def pod_body(name: str, namespace: str, gpus: int, selector: dict[str, str], **spec: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": {GPU: str(gpus)}} if gpus else {}
    resources.update(spec.pop("resources", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": selector,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04", "resources": resources}],
            **spec,
        },
    }


def probe_body(name: str, namespace: str, gpus: int, selector: dict[str, str], priority_class: str) -> dict[str, Any]:
    body = pod_body(name, namespace, gpus, selector, priorityClassName=priority_class)
    body["spec"]["containers"][0]["resources"]["requests"] = {"cpu": PROBE_CPU}
    return body


def deployment_body(name: str, namespace: str, replicas: int, pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod["spec"]},
        },
    }


def pod_state(cluster: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    return cluster.get(f"/api/v1/namespaces/{namespace}/pods/{name}")


def failed_scheduling(cluster: LocalCluster, namespace: str, name: str) -> str | None:
    selector = f"involvedObject.name%3D{name},reason%3DFailedScheduling"
    events = cluster.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector={selector}")["items"]
    return max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")["message"] if events else None


def settle(cluster: LocalCluster, namespace: str, name: str) -> tuple[str | None, str | None]:
    """(the node the probe was bound to, None) or (None, its FailedScheduling message)."""

    def outcome() -> tuple[str | None, str | None] | None:
        node = pod_state(cluster, namespace, name)["spec"].get("nodeName")
        if node:
            return node, None
        message = failed_scheduling(cluster, namespace, name)
        return (None, message) if message else None

    return wait_until(outcome, timeout=30, interval=0.2, what=f"the scheduler to decide on {name}")  # type: ignore[return-value]


def delete_pods(cluster: LocalCluster, namespace: str, names: list[str]) -> None:
    for name in names:
        cluster.delete(f"/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0")
    wait_until(
        lambda: (
            not {p["metadata"]["name"] for p in cluster.get(f"/api/v1/namespaces/{namespace}/pods")["items"]}
            & set(names)
        ),
        timeout=30,
        interval=0.2,
        what="the probes to go",
    )


def node_ready(cluster: LocalCluster, spec: dict[str, Any]) -> bool:
    node = cluster.get(f"/api/v1/nodes/{spec['name']}")
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))
    transient = [t for t in node["spec"].get("taints", []) if t["key"] != "node.kubernetes.io/unschedulable"]
    return ready and transient == spec["taints"]


@pytest.fixture
def scratch_fleet(cluster: LocalCluster, namespace: str) -> Iterator[dict[str, Any]]:
    run = uuid.uuid4().hex[:6]
    by_short = scratch_nodes(run)
    specs = list(by_short.values())
    names = {short: spec["name"] for short, spec in by_short.items()}
    priority_class = f"kubegpu-placement-probe-{run}"
    slice_name = None
    try:
        status, reply = cluster.create(
            PRIORITY_CLASSES,
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": priority_class},
                "value": -10,
                "preemptionPolicy": "Never",
                "description": "probe pods of the placement oracle test",
            },
        )
        assert status == 201, reply
        for spec in specs:
            status, reply = cluster.create("/api/v1/nodes", node_body(spec))
            assert status == 201, reply
        dra_node = cluster.get(f"/api/v1/nodes/{names['dra']}")
        dra = {"product": "NVIDIA H100 80GB HBM3", "gpus": 4, "memory": "81559Mi", "mig": None}
        body = dra_objects.resource_slice(names["dra"], dra, dra_node["metadata"]["uid"])
        slice_name = body["metadata"]["name"]
        status, reply = cluster.create(RESOURCE_SLICES, body)
        assert status == 201, reply
        for spec in specs:
            wait_until(lambda spec=spec: node_ready(cluster, spec), timeout=60, what=f"{spec['name']} Ready")
        holders = [
            pod_body("hold-6", namespace, 6, {}, nodeName=names["partial"]),
            pod_body(
                "hold-cpu", namespace, 0, {}, nodeName=names["cpu-short"], resources={"requests": {"cpu": "500m"}}
            ),
        ]
        if DRA_SERVES_GPU:
            holders.append(pod_body("hold-dra", namespace, 1, {"kubernetes.io/hostname": names["dra"]}))
        for body in holders:
            status, reply = cluster.create(f"/api/v1/namespaces/{namespace}/pods", body)
            assert status == 201, reply
        for body in holders:
            name = body["metadata"]["name"]
            wait_until(
                lambda name=name: pod_state(cluster, namespace, name)["status"].get("phase") == "Running",
                timeout=60,
                what=f"{name} running",
            )
        yield {
            "run": run,
            "names": names,
            "namespace": namespace,
            "priority_class": priority_class,
            "mark": {"kubegpu.io/placement-test": run},
        }
    finally:
        cluster.api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
        wait_until(
            lambda: not cluster.get(f"/api/v1/namespaces/{namespace}/pods")["items"],
            timeout=60,
            what="the holders and probes to go",
        )
        if slice_name:
            cluster.delete(f"{RESOURCE_SLICES}/{slice_name}")
        for spec in specs:
            cluster.delete(f"/api/v1/nodes/{spec['name']}")
        cluster.delete(f"{PRIORITY_CLASSES}/{priority_class}")
        wait_until(
            lambda: (
                not {s["name"] for s in specs} & {n["metadata"]["name"] for n in cluster.get("/api/v1/nodes")["items"]}
            ),
            timeout=60,
            what="the scratch nodes to go",
        )


def what_if(cluster: LocalCluster, probes: list[dict[str, Any]], **args: Any) -> dict[str, dict[str, Any]]:
    status, result, _done = run_ansible_module(
        cluster.kubeconfig, "gpu_placement_info", {"definition": probes, "pending": False, **args}
    )
    assert status == "SUCCESS", result.get("msg")
    return {entry["object"].rsplit("/", 1)[1]: entry for entry in result["placement"]["what_if"]}


def held_to_the_scheduler(cluster: LocalCluster, fleet: dict[str, Any], probe: dict[str, Any], view: dict) -> str:
    """Create the probe, compare what the scheduler did with the view, delete it; the outcome in words."""
    namespace, name = fleet["namespace"], probe["metadata"]["name"]
    status, reply = cluster.create(f"/api/v1/namespaces/{namespace}/pods", probe)
    assert status == 201, reply
    try:
        bound, message = settle(cluster, namespace, name)
    finally:
        delete_pods(cluster, namespace, [name])
    if bound:
        assert view["fits_on"], f"{name} was bound to {bound}, the view said it fits nowhere: {view['reason']}"
        assert bound in view["fits_on"], f"{name} was bound to {bound}, the view said {sorted(view['fits_on'])}"
        return f"{name}: bound to {bound}"
    assert not view["fits_on"], f"{name} stayed Pending ({message}); the view said it fits on {view['fits_on']}"
    assert message and scheduler_reasons(message) == Counter(view["reasons"]), (message, view["reasons"])
    return f"{name}: Pending, {view['reason']}"


def partly_held_to_the_scheduler(cluster: LocalCluster, fleet: dict[str, Any], deployment: dict, view: dict) -> None:
    """Create the Deployment, see the scheduler bind as many replicas as the view says fit, where it says, and
    keep the rest Pending with the FailedScheduling event whose sum is the view's; delete it."""
    namespace, name = fleet["namespace"], deployment["metadata"]["name"]
    replicas = deployment["spec"]["replicas"]
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    status, reply = cluster.create(deployments, deployment)
    assert status == 201, reply

    def decided() -> tuple[list[str], list[str | None]] | None:
        pods = cluster.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3D{name}")["items"]
        bound = [p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")]
        waiting = [
            failed_scheduling(cluster, namespace, p["metadata"]["name"]) for p in pods if not p["spec"].get("nodeName")
        ]
        return (bound, waiting) if len(pods) == replicas and all(waiting) else None

    try:
        bound, waiting = wait_until(decided, timeout=30, interval=0.2, what=f"the scheduler to decide on {name}")  # type: ignore[misc]
    finally:
        cluster.delete(f"{deployments}/{name}?propagationPolicy=Foreground")
        wait_until(
            lambda: cluster.api.request("GET", f"{deployments}/{name}")[0] == 404,
            timeout=30,
            interval=0.2,
            what=f"{name} and its pods to go",
        )
    assert Counter(bound) == Counter(view["fits_on"]), (bound, view["fits_on"], view["reason"])
    assert len(waiting) == replicas - view["pods_that_fit"], (waiting, view["reason"])
    for message in waiting:
        assert message and scheduler_reasons(message) == Counter(view["reasons"]), (message, view["reasons"])


# What the view must say of a probe of each size pinned to each scratch node (bound: how many fit).
EXPECTED = {
    "free8": {1: 8, 2: 4, 4: 2, 8: 1},
    "partial": {1: 2, 2: 1, 4: "placement.not_enough_gpus", 8: "placement.not_enough_gpus"},
    "cordoned": dict.fromkeys(SIZES, "placement.nodes_cordoned"),
    "tainted": dict.fromkeys(SIZES, "placement.taints_not_tolerated"),
    "cpu-short": {**dict.fromkeys((1, 2, 4), "placement.resources_short"), 8: "placement.not_enough_gpus"},
    "a10": {1: 4, 2: 2, 4: 1, 8: "placement.not_enough_gpus"},
    "dra": (
        {1: 3, 2: 1, 4: "placement.not_enough_gpus", 8: "placement.not_enough_gpus"}
        if DRA_SERVES_GPU
        else dict.fromkeys(SIZES, "placement.not_enough_gpus")
    ),
}


def test_probes_bind_where_the_view_says_they_fit_and_wait_where_it_says_they_fit_nowhere(
    cluster: LocalCluster, scratch_fleet: dict[str, Any]
):
    fleet, names = scratch_fleet, scratch_fleet["names"]
    pinned = [
        probe_body(
            f"pin-{short}-{size}", fleet["namespace"], size, {"kubernetes.io/hostname": node}, fleet["priority_class"]
        )
        for short, node in names.items()
        for size in SIZES
    ]
    anywhere = [
        probe_body(f"any-{size}", fleet["namespace"], size, fleet["mark"], fleet["priority_class"]) for size in SIZES
    ]
    b200 = probe_body("b200", fleet["namespace"], 1, {"accelerator": "NVIDIA-B200"}, fleet["priority_class"])
    # A Deployment of 4-GPU replicas free to go to any scratch node, one more than fit: the rest's reason.
    fit = sum(sizes[4] for sizes in EXPECTED.values() if isinstance(sizes[4], int))
    partly = deployment_body(
        "partly-4",
        fleet["namespace"],
        fit + 1,
        probe_body("partly-4", fleet["namespace"], 4, fleet["mark"], fleet["priority_class"]),
    )
    view = what_if(cluster, [*pinned, *anywhere, b200, partly])

    for short, node in names.items():
        for size in SIZES:
            entry, expected = view[f"pin-{short}-{size}"], EXPECTED[short][size]
            if isinstance(expected, int):
                assert entry["fits_on"] == {node: expected}, (short, size, entry["reason"])
            else:
                assert entry["findings"][0]["kind"] == expected, (short, size, entry["reason"])
    assert view["pin-tainted-1"]["reason"].endswith("{dedicated: other-team}")
    assert "Insufficient cpu" in view["pin-cpu-short-1"]["reason"]
    assert set(view["any-8"]["fits_on"]) == {names["free8"]}

    outcomes = [held_to_the_scheduler(cluster, fleet, p, view[p["metadata"]["name"]]) for p in [*pinned, *anywhere]]
    pending = sum(not isinstance(e, int) for sizes in EXPECTED.values() for e in sizes.values())
    assert sum("Pending" in o for o in outcomes) == pending, outcomes

    # Only some replicas fit: the reason says how many of how many, and why not the rest as the scheduler does.
    entry = view["partly-4"]
    assert (entry["fits"], entry["pods_that_fit"], entry["replicas"]) == (False, fit, fit + 1), entry["reason"]
    assert entry["findings"][0]["kind"] == "placement.fits_partly", entry["reason"]
    assert entry["reason"].startswith(f"{fit} of {fit + 1} pods of 4 {GPU} fit now, on "), entry["reason"]
    assert entry["reason"].endswith(f"the other 1 would stay Pending: {entry['message']}"), entry["reason"]
    assert entry["reasons"].get(f"Insufficient {GPU}", 0) >= 2, entry["reasons"]
    partly_held_to_the_scheduler(cluster, fleet, partly, entry)

    if DRA_SERVES_GPU:
        assert view["pin-dra-4"]["reason"].startswith("it asks for 4 nvidia.com/gpu; only 3 are free")
    # A pod Pending for a model no node has, as the pending view explains it, beside its event.
    namespace = fleet["namespace"]
    status, reply = cluster.create(f"/api/v1/namespaces/{namespace}/pods", b200)
    assert status == 201, reply
    try:
        bound, message = settle(cluster, namespace, "b200")
        assert bound is None and message
        status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_placement_info", {"sizes": [1]})
        assert status == "SUCCESS", result.get("msg")
    finally:
        delete_pods(cluster, namespace, ["b200"])
    # Where no DeviceClass serves nvidia.com/gpu (1.34), the view says once that the DRA nodes' GPUs are out of
    # its reach; where one does, it says nothing of it.
    unserved = [n for n in result["placement"]["notes"] if n.startswith(f"no DeviceClass serves {GPU} ")]
    assert bool(unserved) == (not DRA_SERVES_GPU), result["placement"]["notes"]
    (entry,) = [p for p in result["placement"]["pending"] if p["pod"] == f"{namespace}/b200"]
    assert Counter(entry["reasons"]) == scheduler_reasons(message) == Counter(view["b200"]["reasons"])
    assert entry["findings"][0]["kind"] == "placement.selector_matches_no_node"
    assert entry["reason"].startswith(
        "it selects accelerator=NVIDIA-B200, which no GPU node carries; the values that exist:"
    )
    for model in (f"PT-H100-{fleet['run']}", f"PT-A10-{fleet['run']}", f"PT-DRA-{fleet['run']}"):
        assert model in entry["reason"]


def test_the_command_line_what_if_reads_the_cluster_and_exits_1_when_a_manifest_does_not_fit(
    cluster: LocalCluster, tmp_path
):
    manifest = tmp_path / "jobs.yaml"
    manifest.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: b200, namespace: ml}\nspec:\n  template:\n    spec:\n"
        "      restartPolicy: Never\n      nodeSelector: {accelerator: NVIDIA-B200}\n"
        "      containers: [{name: main, image: cuda, resources: {limits: {nvidia.com/gpu: 1}}}]\n"
    )
    script = Path(__file__).resolve().parents[2] / "scripts" / "gpu-placement"
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--json",
            str(tmp_path / "r.json"),
            str(manifest),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Job ml/b200 x1, 1 GPU(s) each: it selects accelerator=NVIDIA-B200, which no GPU node carries" in done.stdout
    (entry,) = json.loads((tmp_path / "r.json").read_text())["what_if"]
    nodes = len(cluster.get("/api/v1/nodes")["items"])
    assert entry["fits"] is False and sum(entry["reasons"].values()) == nodes
