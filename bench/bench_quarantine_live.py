# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_node_quarantine end to end on the local cluster, against its target: --nodes KWOK GPU nodes
quarantined with their GPU pods evicted through the Eviction API, in a fleet of --fleet-pods pods,
in under 60 seconds.

The fleet: --nodes GPU nodes of a model of their own, each with --gpu-pods pods of one GPU, and
CPU-only pods bound to --filler-nodes other nodes up to --fleet-pods pods in all (bound by
nodeName, so the scheduler is not part of the setup). What is timed is one `ansible localhost -m
kubegpu.scheduling.gpu_node_quarantine` with evict (the breaker at max_share 1, since the bench takes
its whole model out), against the API server's write counters read before and after. Everything it
made is deleted at the end.

Run it on a cluster of its own (it loads the API server with tens of thousands of pods):

    export KUBEGPU_CLUSTER_DIR=~/.cache/kubegpu/cluster-bench KUBEGPU_ETCD_PORT=47079 \\
      KUBEGPU_APISERVER_PORT=47043 KUBEGPU_KWOK_PORT=47050
    make cluster-up && .venv/bin/python -m bench.bench_quarantine_live; make cluster-down
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.cluster import cluster as local_cluster

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 60
_REQUESTS = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def writes(api: local_cluster.Api) -> Counter[str]:
    """Write requests answered so far, by verb, resource and subresource."""
    status, text = api.request("GET", "/metrics", timeout=60)
    assert status == 200 and isinstance(text, str), f"GET /metrics: {status}"
    counts: Counter[str] = Counter()
    for match in _REQUESTS.finditer(text):
        labels = dict(_LABEL.findall(match["labels"]))
        if labels.get("verb") in ("POST", "PATCH", "PUT", "DELETE") and labels.get("resource") in ("nodes", "pods"):
            name = "/".join(filter(None, (labels["verb"], labels["resource"], labels.get("subresource"))))
            counts[f"{name} {labels['code']}"] += int(float(match["value"]))
    return counts


def node(name: str, model: str) -> dict:
    capacity = {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti", "pods": "250"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok", "nvidia.com/gpu.product": model},
        },
        "spec": {"taints": [{"key": "kubegpu.test/bench", "effect": "NoSchedule"}]},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pod(name: str, node_name: str, gpus: int) -> dict:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "nodeName": node_name,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": "registry.invalid/bench", "resources": {"limits": limits}}],
        },
    }


def create_all(api: local_cluster.Api, items: list[tuple[str, dict]], workers: int = 16) -> None:
    def create(item: tuple[str, dict]) -> None:
        status, reply = api.request("POST", item[0], item[1], timeout=60)
        if status not in (201, 409):
            raise SystemExit(f"creating {item[1]['metadata']['name']}: {status} {reply}")

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, items))


def wait(what: str, predicate, timeout: float) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(2)
    return time.monotonic() - start


def running_pods(api: local_cluster.Api, namespace: str) -> int:
    status, body = api.request("GET", f"/api/v1/namespaces/{namespace}/pods?fieldSelector=status.phase%3DRunning")
    return len(body["items"]) if status == 200 and isinstance(body, dict) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--gpu-pods", type=int, default=8)
    parser.add_argument("--fleet-pods", type=int, default=20000)
    parser.add_argument("--filler-nodes", type=int, default=100)
    args = parser.parse_args()

    layout = local_cluster.Layout(local_cluster.state_dir())
    api = local_cluster.Api(layout)
    run = uuid.uuid4().hex[:6]
    namespace, model = f"bench-q-{run}", f"NVIDIA-BENCH-{run}"
    gpu_nodes = [f"bench-q-{run}-gpu-{i}" for i in range(args.nodes)]
    filler_nodes = [f"bench-q-{run}-cpu-{i}" for i in range(args.filler_nodes)]
    gpu_pods = [(f"{n}-{j}", n) for n in gpu_nodes for j in range(args.gpu_pods)]
    fillers = args.fleet_pods - len(gpu_pods)
    filler_pods = [(f"filler-{i}", filler_nodes[i % len(filler_nodes)]) for i in range(max(fillers, 0))]
    pods_path = f"/api/v1/namespaces/{namespace}/pods"

    ns_body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    api.request("POST", "/api/v1/namespaces", ns_body)
    try:
        start = time.monotonic()
        create_all(api, [("/api/v1/nodes", node(n, model)) for n in gpu_nodes + filler_nodes])
        create_all(api, [(pods_path, pod(name, n, 1)) for name, n in gpu_pods])
        create_all(api, [(pods_path, pod(name, n, 0)) for name, n in filler_pods])
        total = len(gpu_pods) + len(filler_pods)
        wait(f"{total} pods Running", lambda: running_pods(api, namespace) >= total, timeout=900)
        print(
            f"fleet: {len(gpu_nodes)} GPU nodes with {len(gpu_pods)} GPU pods, {len(filler_nodes)} other nodes, "
            f"{total} pods in the namespace (set up in {time.monotonic() - start:.0f} s)"
        )

        sys.path.insert(0, str(ROOT / "tests" / "integration"))
        from conftest import ansible_env  # the environment the integration tests run ansible in

        module_args = {"names": gpu_nodes, "reason": "bench", "evict": True, "max_share": 1.0, "eviction_timeout": 60}
        before = writes(api)
        started = time.monotonic()
        done = subprocess.run(
            [
                str(Path(sys.executable).parent / "ansible"),
                "localhost",
                "-m",
                "kubegpu.scheduling.gpu_node_quarantine",
                "-a",
                json.dumps(module_args),
            ],
            env=ansible_env(layout.kubeconfig),
            capture_output=True,
            text=True,
            check=False,
        )
        took = time.monotonic() - started
        sent = writes(api) - before
        out = done.stdout
        if " => " not in out:
            raise SystemExit(f"the module did not answer: {out[-2000:]} {done.stderr[-2000:]}")
        result = json.loads(out[out.index(" => ") + 4 :])
        print(
            f"gpu_node_quarantine: {took:.1f} s (target under {TARGET_SECONDS} s): "
            f"{len(result.get('quarantined', []))} nodes quarantined, {len(result.get('evicted', []))} pods evicted, "
            f"{len(result.get('blocked', []))} blocked, module writes {result.get('writes')}"
        )
        print("API server writes in that time: " + ", ".join(f"{k}: {v}" for k, v in sorted(sent.items())))
        return 0 if done.returncode == 0 and took < TARGET_SECONDS else 1
    finally:
        api.request("DELETE", f"/api/v1/namespaces/{namespace}")
        api.request("DELETE", pods_path + "?gracePeriodSeconds=0", timeout=300)
        wait(
            "the bench's namespace to go",
            lambda: api.request("GET", f"/api/v1/namespaces/{namespace}")[0] == 404,
            timeout=900,
        )
        for name in gpu_nodes + filler_nodes:
            api.request("DELETE", f"/api/v1/nodes/{name}")


if __name__ == "__main__":
    sys.exit(main())
