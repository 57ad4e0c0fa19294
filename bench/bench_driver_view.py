# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The driver view and the upgrade pre-flight against their baseline, the fleet facts, from the same lists.

A stand-in API server (a child process on 127.0.0.1, plain HTTP, bench_placement's handler) serves the
nodes and pods of `fleet_scale.py`'s fleet page by page, with one GPU Operator driver pod per node among
the pods (a tenth of them on an older pod template, a few nodes in upgrade states), the driver
DaemonSet, NVIDIADrivers and PodDisruptionBudgets; empty DRA lists. What is timed, each in a fresh
process, alternating, the median of --repeat runs:

- facts: `read_fleet` + `summarise` + JSON, what gpu_node_facts does (as `facts_direct.py`);
- facts+drivers: the same with the driver view (`driver_upgrade.read_objects: true`: one list more each of
  NVIDIADrivers and DaemonSets) and its problems;
- preflight: what gpu_driver_info does with a target version: nodes, pods, budgets, DaemonSets,
  NVIDIADrivers and ResourceClaims, one list each, the view and the blockers of every GPU node, + JSON.

    python -m bench.bench_driver_view --nodes 1000 --pods 21000 --repeat 5

It exits 1 when either costs more than 1.2x the facts' time.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.bench_placement import ROOT, handler_for

TARGET = 1.2  # at most this times the facts' time
STATE = "nvidia.com/gpu-driver-upgrade-state"
DRIVER_LABELS = {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"}
STATES = ("upgrade-done", "validation-required", "upgrade-failed", "wait-for-jobs-required")


def driver_pod(node: str, index: int) -> dict[str, Any]:
    generation = "1" if index % 10 == 0 else "2"
    return {
        "metadata": {
            "name": f"nvidia-driver-daemonset-{index:05d}",
            "namespace": "gpu-operator",
            "labels": {**DRIVER_LABELS, "pod-template-generation": generation},
            "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-driver-daemonset", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:550.90.07-ubuntu22.04"}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def fleet_items(nodes: int, pods: int) -> dict[str, list[bytes]]:
    from bench import fleet_scale

    running = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    node_items, driver_pods = [], []
    for index in range(nodes):
        node = fleet_scale.node_object(index)
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        if index % 50 == 0:
            node["metadata"]["labels"][STATE] = STATES[(index // 50) % len(STATES)]
            started = str(int(time.time()) - 7200)
            node["metadata"].setdefault("annotations", {})["nvidia.com/gpu-driver-upgrade-validation-start-time"] = (
                started
            )
        node_items.append(json.dumps(node).encode())
        driver_pods.append(json.dumps(driver_pod(node["metadata"]["name"], index)).encode())
    workloads = [json.dumps({**p, "status": running}).encode() for p in fleet_scale.wanted_pods(nodes, pods - nodes)]
    daemonset = {
        "metadata": {
            "name": "nvidia-driver-daemonset",
            "namespace": "gpu-operator",
            "labels": DRIVER_LABELS,
            "annotations": {"deprecated.daemonset.template.generation": "2"},
            "ownerReferences": [{"kind": "ClusterPolicy", "name": "cluster-policy", "controller": True}],
        },
        "spec": {"template": {"metadata": {"labels": DRIVER_LABELS}, "spec": {"containers": []}}},
    }
    # A budget per service in every namespace; one service in ten allows no disruption now.
    budgets = [
        {
            "metadata": {"name": f"svc-{app:03d}", "namespace": namespace},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": f"svc-{app:03d}"}}},
            "status": {"disruptionsAllowed": 0 if app % 10 == 0 else 1, "observedGeneration": 1},
        }
        for namespace in fleet_scale.NAMESPACES
        for app in range(0, 400, 4)
    ]
    return {
        "/api/v1/nodes": node_items,
        "/api/v1/pods": driver_pods + workloads,
        "/apis/apps/v1/daemonsets": [json.dumps(daemonset).encode()],
        "/apis/nvidia.com/v1alpha1/nvidiadrivers": [],
        "/apis/policy/v1/poddisruptionbudgets": [json.dumps(b).encode() for b in budgets],
    }


def serve(nodes: int, pods: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(fleet_items(nodes, pods)))
    print(server.server_address[1], flush=True)
    server.serve_forever()


class FakeApi:
    def __init__(self, nodes: int, pods: int, folder: Path):
        command = [sys.executable, "-m", "bench.bench_driver_view", "serve", "--nodes", str(nodes), "--pods", str(pods)]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        port = int(self.process.stdout.readline())
        self.kubeconfig = folder / f"kubeconfig-{port}"
        self.kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                    "users": [{"name": "anonymous", "user": {}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "anonymous"}}],
                    "current-context": "fake",
                }
            )
        )

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def measure_facts(kubeconfig: str, drivers: bool) -> dict[str, Any]:
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.drivers import DriverRead, add_driver_view
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.reads import read_fleet
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import options_from_params
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params

    client = client_from_params({"kubeconfig": kubeconfig})
    options = options_from_params()
    read = DriverRead(objects=True) if drivers else None
    nodes, pods, plugins, dra = read_fleet(client, options, None, None, 500, read)
    result = summarise(nodes, pods, plugins, options, dra)
    if read is not None:
        add_driver_view(result, read, time.time(), 3600)
    problems = sum(1 for p in result["problems"] if p["id"].startswith("fleet.driver"))
    text = json.dumps({"gpu_fleet": result})
    return {"bytes": len(text), "requests": client.request_count, "nodes": len(nodes), "found": problems}


def measure_preflight(kubeconfig: str) -> dict[str, Any]:
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_info.reads import read_driver_objects
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_info.view import driver_report
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params

    client = client_from_params({"kubeconfig": kubeconfig})
    result = driver_report(read_driver_objects(client, None, None, 500), "535.183.06", time.time())
    text = json.dumps({"drivers": result})
    return {
        "bytes": len(text),
        "requests": client.request_count,
        "nodes": len(result["nodes"]),
        "found": len(result["blockers"]),
    }


def measure(which: str, kubeconfig: str) -> None:
    started, cpu = time.perf_counter(), time.process_time()
    summary = measure_preflight(kubeconfig) if which == "preflight" else measure_facts(kubeconfig, which != "facts")
    summary["seconds"] = round(time.perf_counter() - started, 3)
    summary["cpu_seconds"] = round(time.process_time() - cpu, 3)
    summary["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(summary))


def run_measure(which: str, kubeconfig: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.bench_driver_view", "measure", which, "--kubeconfig", str(kubeconfig)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(nodes: int, pods: int, repeat: int, folder: Path) -> dict[str, dict[str, Any]]:
    api = FakeApi(nodes, pods, folder)
    try:
        runs: dict[str, list[dict[str, Any]]] = {"facts": [], "facts+drivers": [], "preflight": []}
        for _round in range(repeat):
            for which in runs:  # alternating, so that a busy moment of a shared machine hits each
                runs[which].append(run_measure(which, api.kubeconfig))
    finally:
        api.stop()
    return {
        which: {
            "seconds": statistics.median(r["seconds"] for r in results),
            "cpu_seconds": statistics.median(r["cpu_seconds"] for r in results),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
            "requests": results[0]["requests"],
            "result_bytes": results[0]["bytes"],
            "found": results[0]["found"],
        }
        for which, results in runs.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    serve_parser = sub.add_parser("serve")
    serve_parser.add_argument("--nodes", type=int, required=True)
    serve_parser.add_argument("--pods", type=int, required=True)
    measure_parser = sub.add_parser("measure")
    measure_parser.add_argument("which", choices=("facts", "facts+drivers", "preflight"))
    measure_parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=21000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", dest="json_file", help="write the numbers here too")
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.nodes, args.pods)
        return 0
    if args.command == "measure":
        measure(args.which, args.kubeconfig)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        numbers = compare(args.nodes, args.pods, args.repeat, Path(scratch))
    base = numbers["facts"]
    print(f"fleet of {args.nodes} nodes, {args.pods} pods; median of {args.repeat} runs, each in a fresh process")
    heads = ("seconds", "x facts", "CPU s", "x facts", "peak RSS MB", "requests", "result KB", "found")
    print(f"{'':<15}" + "".join(f"{h:>12}" for h in heads))
    for name, row in numbers.items():
        cells = (
            f"{row['seconds']:.3f}",
            f"{row['seconds'] / base['seconds']:.2f}",
            f"{row['cpu_seconds']:.3f}",
            f"{row['cpu_seconds'] / base['cpu_seconds']:.2f}",
            f"{row['peak_rss_mb']:.1f}",
            str(row["requests"]),
            f"{row['result_bytes'] / 1024:.1f}",
            str(row["found"]),
        )
        print(f"{name:<15}" + "".join(f"{c:>12}" for c in cells))
    for name in ("facts+drivers", "preflight"):
        ratio = numbers[name]["seconds"] / base["seconds"]
        cpu = numbers[name]["cpu_seconds"] / base["cpu_seconds"]
        verdict = "met" if ratio <= TARGET else "missed"
        print(
            f"{name} / facts: {ratio:.2f}x time, {cpu:.2f}x CPU (target at most {TARGET}x time: {verdict}); "
            f"{numbers[name]['requests']} requests (paginated lists, none per node)"
        )
    if args.json_file:
        Path(args.json_file).write_text(json.dumps(numbers, indent=2) + "\n")
    missed = [n for n in ("facts+drivers", "preflight") if numbers[n]["seconds"] > TARGET * base["seconds"]]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
