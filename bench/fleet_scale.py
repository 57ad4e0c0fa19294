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

Objects are created through the API concurrently (a bounded thread pool); existing ones are
kept (409), so scaling up from a smaller fleet adds only what is missing. Node i and its pods
are the same at every scale. The command waits until KWOK reports every node Ready and every
pod Running.

    python -m bench.fleet_scale --kubeconfig PATH --nodes 1000 --pods 20000 [--workers 24]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import ApiClient, KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import (
    build_configuration,
    resolve_auth_params,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from tests.cluster import fleet

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


def model_of(index: int) -> Model:
    # Interleaved so that every prefix of the fleet (100, 300, 1,000 nodes) has the same mix.
    return _SLOTS[(index * 7) % 20]


def node_name(index: int) -> str:
    return f"gpu-{model_of(index).short}-{index:05d}"


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


def pods_per_node(nodes: int, pods: int) -> list[int]:
    """How many pods each node gets: `pods` spread as evenly as possible."""
    base, extra = divmod(pods, nodes)
    return [base + (1 if i < extra else 0) for i in range(nodes)]


def gpu_pods_on(index: int, count: int) -> int:
    return min(model_of(index).units, MAX_GPU_PODS_PER_NODE, count)


def pod_object(node_index: int, slot: int, gpu: bool) -> dict[str, Any]:
    name = f"w-{node_index:05d}-{slot:02d}"
    app = f"svc-{(node_index * 31 + slot) % 400:03d}"
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
    if gpu:
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
        "spec": {
            "nodeName": node_name(node_index),
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 5,
            "containers": [container],
        },
    }


def wanted_pods(nodes: int, pods: int) -> Iterable[dict[str, Any]]:
    for index, count in enumerate(pods_per_node(nodes, pods)):
        gpus = gpu_pods_on(index, count)
        for slot in range(count):
            yield pod_object(index, slot, slot < gpus)


def fleet_summary(nodes: int, pods: int) -> dict[str, Any]:
    counts = pods_per_node(nodes, pods)
    gpu_pods = sum(gpu_pods_on(i, c) for i, c in enumerate(counts))
    mix: dict[str, int] = {}
    for index in range(nodes):
        mix[model_of(index).short] = mix.get(model_of(index).short, 0) + 1
    return {
        "nodes": nodes,
        "pods": pods,
        "gpu_pods": gpu_pods,
        "gpu_units": sum(model_of(i).units for i in range(nodes)),
        "models": mix,
    }


# --- talking to the cluster ---------------------------------------------------------------


def make_client(kubeconfig: str, pool: int = 64) -> KubeClient:
    cfg = build_configuration(resolve_auth_params({"kubeconfig": kubeconfig}))
    cfg.connection_pool_maxsize = pool
    return KubeClient(ApiClient(cfg), retries=8, backoff=0.5, timeout=60)


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


def scale(
    kubeconfig: str, nodes: int, pods: int, workers: int = 24, timeout: float = 1800, quiet: bool = False
) -> dict[str, Any]:
    """Create what is missing for `nodes` nodes and `pods` pods, then wait until all are Ready/Running."""
    client = make_client(kubeconfig, pool=workers * 2)
    started = time.monotonic()
    wait_namespaces(client, 120)
    have_nodes = existing_names(client, "/api/v1/nodes")
    new_nodes = [i for i in range(nodes) if node_name(i) not in have_nodes]
    run_bounded(new_nodes, lambda i: ensure(client, "/api/v1/nodes", node_object(i)), workers)
    nodes_done = time.monotonic()
    have_pods = existing_pod_keys(client)
    missing = (
        p for p in wanted_pods(nodes, pods) if (p["metadata"]["namespace"], p["metadata"]["name"]) not in have_pods
    )
    created = [0]

    def create_pod(pod: dict[str, Any]) -> None:
        if ensure(client, f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod):
            created[0] += 1

    run_bounded(missing, create_pod, workers)
    pods_done = time.monotonic()
    settle = wait_settled(client, nodes, pods, timeout, quiet)
    report = {
        **fleet_summary(nodes, pods),
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
    parser.add_argument("--workers", type=int, default=24)
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    report = scale(args.kubeconfig, args.nodes, args.pods, args.workers, args.timeout)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
