# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scale the benchmark cluster's simulated fleet to N GPU nodes and M pods bound to them.

Nodes are KWOK nodes (annotation kwok.x-k8s.io/node=fake, InternalIP 127.0.0.1, as
tests/cluster/fleet.py builds them) of six models as the providers label them: GPU Feature
Discovery (H100, A100 with MIG 1g.10gb, time-sliced T4), GKE (L4), ACK (A10) and EKS (A10G).
Every node carries nvidia.com/gpu.deploy.device-plugin=true, so the device-plugin DaemonSet of
the base fleet (bench/fleet.yaml) puts one plugin pod on each. Pods are spread evenly, bound
with spec.nodeName, over 20 namespaces; on each node up to MAX_GPU_PODS_PER_NODE of them (and
never more than the node has GPU units) request one GPU each, the rest CPU only, so that about
half of the pods request GPUs.

With --dra-percent P, P of every 100 nodes (interleaved) are DRA GPU nodes instead: KWOK nodes
with no nvidia.com/gpu in their status whose GPUs are one ResourceSlice each, built by
tests/cluster/dra.py as NVIDIA's DRA driver publishes them (eight H100s, eight L4s, or eight
A100s in static MIG mode as 56 1g.10gb devices), labeled and tainted for the driver's
kubelet-plugin DaemonSet as tests/cluster/fleet.yaml's `dra_driver` says; the driver's
DeviceClasses and DaemonSet are created with them. Their GPU pods go through the real
kube-scheduler (pinned to their node by nodeSelector), which allocates their claims: on full-GPU
nodes alternately a claim from a ResourceClaimTemplate (gpu.nvidia.com, one device) and a plain
nvidia.com/gpu limit served through the DeviceClass (DRA extended resources), on MIG nodes a
claim on mig.nvidia.com. Their CPU pods are bound by spec.nodeName as on the other nodes.
Device-plugin nodes and DRA nodes are numbered apart, so the device-plugin part of the fleet is
the same as a fleet of that many device-plugin nodes.

Objects are created through the API concurrently (a bounded thread pool); existing ones are
kept (409), so scaling up from a smaller fleet adds only what is missing. Node i and its pods
are the same at every scale. The command waits until KWOK reports every node Ready and every
pod Running.

    python -m bench.fleet_scale --kubeconfig PATH --nodes 1000 --pods 20000 [--dra-percent 50] [--workers 24]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient, transport
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import (
    build_configuration,
    resolve_auth_params,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from tests.cluster import dra, fleet

GPU = fleet.GPU
NAMESPACES = tuple(f"team-{i:02d}" for i in range(20))
MAX_GPU_PODS_PER_NODE = 12
DEPLOY_LABEL = {"nvidia.com/gpu.deploy.device-plugin": "true"}


@dataclass(frozen=True)
class Model:
    """One kind of GPU node: its provider's labels, its GPU units and the value labeling gives it."""

    short: str
    share: int  # nodes out of 20
    units: int  # nvidia.com/gpu capacity (MIG slices and time slices count as units)
    labels: dict[str, str]
    source_key: str  # the label that names the model


def _gfd(product: str, count: int, memory: str, family: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.memory": memory,
        "nvidia.com/gpu.family": family,
        "nvidia.com/cuda.driver-version.full": "550.54.15",
        "nvidia.com/cuda.driver-version.major": "550",
        "nvidia.com/cuda.runtime-version.full": "12.4",
        **(extra or {}),
    }


MODELS: tuple[Model, ...] = (
    Model("h100", 4, 8, _gfd("NVIDIA-H100-80GB-HBM3", 8, "81559", "hopper"), "nvidia.com/gpu.product"),
    Model(
        "a100mig",
        5,
        56,
        _gfd(
            "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
            56,
            "9728",
            "ampere",
            {"nvidia.com/mig.strategy": "single", "nvidia.com/mig.config": "all-1g.10gb"},
        ),
        "nvidia.com/gpu.product",
    ),
    Model(
        "t4shared",
        4,
        16,
        _gfd("Tesla-T4-SHARED", 16, "15360", "turing", {"nvidia.com/gpu.replicas": "4"}),
        "nvidia.com/gpu.product",
    ),
    Model(
        "l4",
        3,
        8,
        {
            "cloud.google.com/gke-accelerator": "nvidia-l4",
            "cloud.google.com/gke-accelerator-count": "8",
            "cloud.google.com/gke-gpu-driver-version": "default",
        },
        "cloud.google.com/gke-accelerator",
    ),
    Model(
        "a10",
        2,
        8,
        {
            "aliyun.accelerator/nvidia_name": "NVIDIA-A10",
            "aliyun.accelerator/nvidia_count": "8",
            "aliyun.accelerator/nvidia_mem": "23028MiB",
            "ack.node.gpu.schedule": "default",
        },
        "aliyun.accelerator/nvidia_name",
    ),
    Model(
        "a10g",
        2,
        8,
        {
            "eks.amazonaws.com/instance-gpu-name": "a10g",
            "eks.amazonaws.com/instance-gpu-count": "8",
            "node.kubernetes.io/instance-type": "g5.48xlarge",
        },
        "eks.amazonaws.com/instance-gpu-name",
    ),
)
_SLOTS = tuple(model for model in MODELS for _slot in range(model.share))
assert len(_SLOTS) == 20


@dataclass(frozen=True)
class DraModel:
    """One kind of DRA GPU node: the `dra` entry tests/cluster/fleet.yaml would give it."""

    short: str
    dra: dict[str, Any]  # product, gpus, memory, mig (as tests/cluster/dra.py reads it)
    device_class: str
    extended_resource: bool  # whether the DeviceClass also serves plain nvidia.com/gpu limits

    @property
    def units(self) -> int:
        return dra.device_count(self.dra)


DRA_MODELS: tuple[DraModel, ...] = (
    DraModel(
        "h100", {"product": "NVIDIA H100 80GB HBM3", "gpus": 8, "memory": "80Gi", "mig": None}, "gpu.nvidia.com", True
    ),
    DraModel(
        "a100mig",
        {"product": "NVIDIA A100-SXM4-80GB", "gpus": 8, "memory": "80Gi", "mig": {"profile": "1g.10gb", "per_gpu": 7}},
        "mig.nvidia.com",
        False,
    ),
    DraModel("l4", {"product": "NVIDIA L4", "gpus": 8, "memory": "23034Mi", "mig": None}, "gpu.nvidia.com", True),
)
CLAIM_TEMPLATES = {"gpu.nvidia.com": "bench-gpu", "mig.nvidia.com": "bench-mig"}
PCI_LABEL = {"feature.node.kubernetes.io/pci-10de.present": "true"}  # NFD's, which the DRA mode keeps


def dra_driver() -> dict[str, Any]:
    """The DRA driver's namespace, DaemonSet name, node selector and tolerations, as the test fleet has them."""
    driver = fleet.load(Path(fleet.__file__).resolve().parent / "fleet.yaml")["dra_driver"]
    assert driver, "tests/cluster/fleet.yaml has no dra_driver"
    return dict(driver)


@dataclass(frozen=True)
class Slot:
    """A node's place: `index` in the whole fleet (its pods follow it), `ordinal` among nodes of its kind."""

    index: int
    ordinal: int
    dra: bool

    @property
    def units(self) -> int:
        return dra_model_of(self.ordinal).units if self.dra else model_of(self.ordinal).units

    @property
    def name(self) -> str:
        return dra_node_name(self.ordinal) if self.dra else node_name(self.ordinal)


def is_dra(index: int, dra_percent: int) -> bool:
    """Interleaved: `dra_percent` of every 100 nodes, the same at every prefix of the fleet."""
    return (index + 1) * dra_percent // 100 > index * dra_percent // 100


def fleet_layout(nodes: int, dra_percent: int = 0) -> list[Slot]:
    counts = [0, 0]
    slots = []
    for index in range(nodes):
        kind = is_dra(index, dra_percent)
        slots.append(Slot(index, counts[kind], kind))
        counts[kind] += 1
    return slots


def model_of(index: int) -> Model:
    # Interleaved so that every prefix of the fleet (100, 300, 1,000 nodes) has the same mix.
    return _SLOTS[(index * 7) % 20]


def dra_model_of(ordinal: int) -> DraModel:
    return DRA_MODELS[ordinal % len(DRA_MODELS)]


def node_name(index: int) -> str:
    return f"gpu-{model_of(index).short}-{index:05d}"


def dra_node_name(ordinal: int) -> str:
    return f"dra-{dra_model_of(ordinal).short}-{ordinal:05d}"


def node_object(index: int) -> dict[str, Any]:
    """A KWOK-managed GPU node, built as the test fleet's nodes are."""
    model = model_of(index)
    spec = {
        "name": node_name(index),
        "cpu": "96",
        "memory": "1024Gi",
        "gpus": model.units,
        "allocatable_gpus": model.units,
        "labels": {
            "topology.kubernetes.io/zone": f"zone-{index % 3}",
            "node-pool": f"pool-{model.short}",
            **model.labels,
            **DEPLOY_LABEL,
        },
        "taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}],
    }
    return fleet.node_object(spec)


def dra_node_object(ordinal: int, driver: dict[str, Any]) -> dict[str, Any]:
    """A DRA GPU node as the GPU Operator's DRA mode leaves it: no GPU in its status, no GFD labels;
    labeled for the driver's kubelet plugin and tainted as the driver's tolerations expect."""
    model = dra_model_of(ordinal)
    spec = {
        "name": dra_node_name(ordinal),
        "cpu": "96",
        "memory": "1024Gi",
        "gpus": None,
        "labels": {
            "topology.kubernetes.io/zone": f"zone-{ordinal % 3}",
            "node-pool": f"pool-dra-{model.short}",
            **PCI_LABEL,
            **driver["node_selector"],
        },
        "taints": [
            {"key": t["key"], "value": t.get("value", ""), "effect": t["effect"]}
            for t in driver["tolerations"]
            if t.get("operator", "Equal") == "Equal"
        ],
    }
    return fleet.node_object(spec)


def pods_per_node(nodes: int, pods: int) -> list[int]:
    """How many pods each node gets: `pods` spread as evenly as possible."""
    base, extra = divmod(pods, nodes)
    return [base + (1 if i < extra else 0) for i in range(nodes)]


def gpu_pods_on(slot: Slot, count: int) -> int:
    return min(slot.units, MAX_GPU_PODS_PER_NODE, count)


def pod_object(slot: Slot, index: int, gpu: bool) -> dict[str, Any]:
    """Pod `index` of a node: CPU only or one GPU; bound to its node, or, for a GPU on a DRA node,
    pinned to it by nodeSelector for the scheduler to allocate its claim."""
    node_index = slot.index
    name = f"w-{node_index:05d}-{index:02d}"
    app = f"svc-{(node_index * 31 + index) % 400:03d}"
    container: dict[str, Any] = {
        "name": "main",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3" if gpu else "ghcr.io/example/api:2.3.1",
        "command": ["sleep", "infinity"],
        "env": [
            {"name": "APP", "value": app},
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
    }
    spec: dict[str, Any] = {
        "nodeName": slot.name,
        "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 5,
        "containers": [container],
    }
    if slot.dra:
        spec["tolerations"] = [{"operator": "Exists", "effect": "NoSchedule"}]
    if gpu and slot.dra:
        model = dra_model_of(slot.ordinal)
        del spec["nodeName"]
        spec["nodeSelector"] = {"kubernetes.io/hostname": slot.name}
        if model.extended_resource and index % 2:
            container["resources"]["limits"][GPU] = "1"
        else:
            container["resources"]["claims"] = [{"name": "gpu"}]
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": CLAIM_TEMPLATES[model.device_class]}]
    elif gpu:
        container["resources"]["limits"][GPU] = "1"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACES[node_index % len(NAMESPACES)],
            "labels": {
                "app.kubernetes.io/name": app,
                "app.kubernetes.io/part-of": "bench",
                "workload": "gpu" if gpu else "cpu",
            },
        },
        "spec": spec,
    }


def wanted_pods(nodes: int, pods: int, dra_percent: int = 0) -> Iterable[dict[str, Any]]:
    for slot, count in zip(fleet_layout(nodes, dra_percent), pods_per_node(nodes, pods), strict=True):
        gpus = gpu_pods_on(slot, count)
        for index in range(count):
            yield pod_object(slot, index, index < gpus)


def fleet_summary(nodes: int, pods: int, dra_percent: int = 0) -> dict[str, Any]:
    layout = fleet_layout(nodes, dra_percent)
    counts = pods_per_node(nodes, pods)
    gpu_pods = [gpu_pods_on(slot, c) for slot, c in zip(layout, counts, strict=True)]
    mix: dict[str, int] = {}
    for slot in layout:
        short = f"dra-{dra_model_of(slot.ordinal).short}" if slot.dra else model_of(slot.ordinal).short
        mix[short] = mix.get(short, 0) + 1
    return {
        "nodes": nodes,
        "pods": pods,
        "dra_percent": dra_percent,
        "dra_nodes": sum(1 for slot in layout if slot.dra),
        "gpu_pods": sum(gpu_pods),
        "dra_gpu_pods": sum(g for slot, g in zip(layout, gpu_pods, strict=True) if slot.dra),
        "gpu_units": sum(slot.units for slot in layout if not slot.dra),
        "dra_devices": sum(slot.units for slot in layout if slot.dra),
        "models": mix,
    }


# --- talking to the cluster ---------------------------------------------------------------


def make_client(kubeconfig: str, pool: int = 64) -> KubeClient:
    cfg = build_configuration(resolve_auth_params({"kubeconfig": kubeconfig}))
    cfg.connection_pool_maxsize = pool
    return KubeClient(transport(cfg), retries=8, backoff=0.5, timeout=60)


def run_bounded(work: Iterable[Any], action: Callable[[Any], None], workers: int) -> None:
    """Call action on each item, `workers` at a time, with at most 4 * workers queued."""
    gate = threading.BoundedSemaphore(workers * 4)
    errors: list[BaseException] = []

    def one(item: Any) -> None:
        try:
            action(item)
        except BaseException as exc:  # noqa: BLE001 - reported after the pool drains
            errors.append(exc)
        finally:
            gate.release()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for item in work:
            if errors:
                break
            gate.acquire()
            pool.submit(one, item)
    if errors:
        raise errors[0]


def ensure(client: KubeClient, path: str, body: dict[str, Any]) -> bool:
    """Create; False when it exists already."""
    try:
        client.create(path, body)
    except ClusterError as exc:
        if exc.status == 409:
            return False
        raise
    return True


def existing_names(client: KubeClient, path: str) -> set[str]:
    return {(item.get("metadata") or {}).get("name", "") for item in client.list_items(path, page_size=2000)}


def existing_pod_keys(client: KubeClient) -> set[tuple[str, str]]:
    keys = set()
    for item in client.list_items("/api/v1/pods", label_selector="app.kubernetes.io/part-of=bench", page_size=2000):
        metadata = item.get("metadata") or {}
        keys.add((metadata.get("namespace", ""), metadata.get("name", "")))
    return keys


def wait_namespaces(client: KubeClient, timeout: float) -> None:
    for namespace in NAMESPACES:
        ensure(client, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    deadline = time.monotonic() + timeout
    for namespace in NAMESPACES:
        while True:
            try:
                client.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
                break
            except ClusterError as exc:
                if exc.status != 404 or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


def count_not_settled(client: KubeClient) -> tuple[int, int, int, int]:
    """(nodes, nodes not Ready, pods, pods not Running)."""
    nodes = not_ready = 0
    for item in client.list_items("/api/v1/nodes", page_size=2000):
        nodes += 1
        conditions = (item.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            not_ready += 1
    pods = sum(1 for _pod in client.list_items("/api/v1/pods", page_size=5000))
    pending = sum(
        1 for _pod in client.list_items("/api/v1/pods", field_selector="status.phase!=Running", page_size=5000)
    )
    return nodes, not_ready, pods, pending


def wait_settled(client: KubeClient, nodes: int, pods: int, timeout: float, quiet: bool = False) -> float:
    started = time.monotonic()
    while True:
        total_nodes, not_ready, total_pods, pending = count_not_settled(client)
        # Every wanted pod plus one device-plugin pod per node (the DaemonSet's), all Running.
        if total_nodes >= nodes and not not_ready and total_pods >= pods + nodes and not pending:
            return time.monotonic() - started
        if not quiet:
            print(
                f"  waiting: {total_nodes - not_ready}/{total_nodes} nodes Ready, "
                f"{total_pods - pending}/{total_pods} pods Running",
                file=sys.stderr,
            )
        if time.monotonic() - started > timeout:
            raise TimeoutError(
                f"fleet not settled after {timeout:.0f}s: {not_ready} nodes not Ready, "
                f"{pending} pods not Running, {total_pods} pods"
            )
        time.sleep(5)


RESOURCE_API = f"/apis/{dra.RESOURCE_API}"


def ensure_dra_driver(client: KubeClient, driver: dict[str, Any]) -> None:
    """The driver's DeviceClasses, its kubelet-plugin DaemonSet, and one claim template per class and namespace."""
    ensure(
        client,
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": driver["namespace"]}},
    )
    for chart_class in dra.device_classes():
        ensure(client, f"{RESOURCE_API}/deviceclasses", chart_class)
    ensure(client, f"/apis/apps/v1/namespaces/{driver['namespace']}/daemonsets", dra.kubelet_plugin_daemonset(driver))
    for namespace in NAMESPACES:
        for class_name, name in CLAIM_TEMPLATES.items():
            template = dra.claim_template(name, namespace, {"device_class": class_name, "count": 1})
            ensure(client, f"{RESOURCE_API}/namespaces/{namespace}/resourceclaimtemplates", template)


def ensure_dra_node(client: KubeClient, ordinal: int, driver: dict[str, Any]) -> None:
    """The node, then its ResourceSlice, owned by the node as the kubelet plugin's slices are."""
    name = dra_node_name(ordinal)
    try:
        node = client.create("/api/v1/nodes", dra_node_object(ordinal, driver))
    except ClusterError as exc:
        if exc.status != 409:
            raise
        node = client.get(f"/api/v1/nodes/{name}")
    uid = (node.get("metadata") or {}).get("uid")
    ensure(client, f"{RESOURCE_API}/resourceslices", dra.resource_slice(name, dra_model_of(ordinal).dra, uid))


def scale(
    kubeconfig: str,
    nodes: int,
    pods: int,
    workers: int = 24,
    timeout: float = 1800,
    quiet: bool = False,
    dra_percent: int = 0,
) -> dict[str, Any]:
    """Create what is missing for `nodes` nodes (`dra_percent` of them DRA nodes) and `pods` pods,
    then wait until all are Ready/Running."""
    client = make_client(kubeconfig, pool=workers * 2)
    started = time.monotonic()
    wait_namespaces(client, 120)
    layout = fleet_layout(nodes, dra_percent)
    driver = dra_driver() if any(slot.dra for slot in layout) else None
    if driver:
        ensure_dra_driver(client, driver)
    have_nodes = existing_names(client, "/api/v1/nodes")
    new_nodes = [slot for slot in layout if slot.name not in have_nodes]

    def create_node(slot: Slot) -> None:
        if slot.dra:
            assert driver is not None
            ensure_dra_node(client, slot.ordinal, driver)
        else:
            ensure(client, "/api/v1/nodes", node_object(slot.ordinal))

    run_bounded(new_nodes, create_node, workers)
    nodes_done = time.monotonic()
    have_pods = existing_pod_keys(client)
    missing = (
        p
        for p in wanted_pods(nodes, pods, dra_percent)
        if (p["metadata"]["namespace"], p["metadata"]["name"]) not in have_pods
    )
    created = [0]

    def create_pod(pod: dict[str, Any]) -> None:
        if ensure(client, f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod):
            created[0] += 1

    run_bounded(missing, create_pod, workers)
    pods_done = time.monotonic()
    settle = wait_settled(client, nodes, pods, timeout, quiet)
    report = {
        **fleet_summary(nodes, pods, dra_percent),
        "created_nodes": len(new_nodes),
        "created_pods": created[0],
        "node_create_s": round(nodes_done - started, 1),
        "pod_create_s": round(pods_done - nodes_done, 1),
        "settle_s": round(settle, 1),
    }
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--dra-percent", type=int, default=0, help="DRA GPU nodes out of every 100 (0 to 100)")
    parser.add_argument("--workers", type=int, default=24)
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    if not 0 <= args.dra_percent <= 100:
        parser.error("--dra-percent: expected 0 to 100")
    report = scale(args.kubeconfig, args.nodes, args.pods, args.workers, args.timeout, dra_percent=args.dra_percent)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
