# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_node_quarantine's plan against its baseline, the fleet facts, from the same lists.

The stand-in API server of `bench_placement.py` (a child process on 127.0.0.1, pages encoded once)
serves `fleet_scale.py`'s nodes and pods, empty DRA lists, and PodDisruptionBudgets: one per app of
the fleet (400), in the app's namespace, selecting it by `app.kubernetes.io/name`. What is timed,
in a fresh process each run, is the client's side:

- facts: `read_fleet` + `summarise` + JSON, what gpu_node_facts does;
- quarantine: `read_quarantine` (nodes, pods, budgets, DRA objects) + `plan_quarantine` + the
  result made JSON, for --asked nodes (the first ones of the fleet), what gpu_node_quarantine does in
  check mode.

    python -m bench.bench_quarantine --nodes 1000 --pods 21000 --asked 100 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUDGETS = "/apis/policy/v1/poddisruptionbudgets"
APPS = 400


def budget_items() -> list[bytes]:
    from bench import fleet_scale

    items = []
    for index in range(APPS):
        app = f"svc-{index:03d}"
        namespace = fleet_scale.NAMESPACES[index % len(fleet_scale.NAMESPACES)]
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": app, "namespace": namespace, "generation": 1},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": app}}},
            "status": {"observedGeneration": 1, "disruptionsAllowed": index % 2, "currentHealthy": 3},
        }
        items.append(json.dumps(budget).encode())
    return items


def serve(nodes: int, pods: int) -> None:
    from bench.bench_placement import fleet_items, handler_for

    items = fleet_items(nodes, pods)
    items[BUDGETS] = budget_items()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(items))
    print(server.server_address[1], flush=True)
    server.serve_forever()


def start_api(nodes: int, pods: int, folder: Path) -> tuple[subprocess.Popen, Path]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.bench_quarantine", "serve", "--nodes", str(nodes), "--pods", str(pods)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    port = int(process.stdout.readline())
    kubeconfig = folder / f"kubeconfig-{port}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "anonymous", "user": {}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "anonymous"}}],
        "current-context": "fake",
    }
    kubeconfig.write_text(json.dumps(config))
    return process, kubeconfig


def measure_quarantine(kubeconfig: str, asked_count: int) -> dict[str, Any]:
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import client_from_params
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine.apply import (
        checked_results,
        summarize,
    )
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine.plan import (
        QuarantineOptions,
        plan_quarantine,
    )
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine.reads import read_quarantine
    from bench import fleet_scale

    client = client_from_params({"kubeconfig": kubeconfig})
    options = QuarantineOptions("bench", "bench", "2026-12-03T10:00:00Z", 0.5)
    asked = [fleet_scale.node_name(index) for index in range(asked_count)]
    reads = read_quarantine(client, asked, options)
    plan = plan_quarantine(asked, reads, options)
    result = summarize(plan, checked_results(plan), None, 300)
    return {
        "bytes": len(json.dumps(result)),
        "requests": client.request_count,
        "nodes": len(reads.nodes),
        "quarantined": len(result["quarantined"]),
        "held_back": len(result["held_back"]),
        "to_evict": len(result["to_evict"]),
        "budgets_in_the_way": sum(1 for n in result["nodes"] for p in n["evict"] if p["blocked_by"]),
    }


def measure(which: str, kubeconfig: str, asked: int) -> None:
    from bench.bench_placement import measure_facts

    started = time.perf_counter()
    summary = measure_facts(kubeconfig) if which == "facts" else measure_quarantine(kubeconfig, asked)
    summary["seconds"] = round(time.perf_counter() - started, 3)
    summary["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(summary))


def run_measure(which: str, kubeconfig: Path, asked: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.bench_quarantine", "measure", which, "--kubeconfig", str(kubeconfig)]
    done = subprocess.run([*command, "--asked", str(asked)], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    serve_parser = sub.add_parser("serve")
    serve_parser.add_argument("--nodes", type=int, required=True)
    serve_parser.add_argument("--pods", type=int, required=True)
    measure_parser = sub.add_parser("measure")
    measure_parser.add_argument("which", choices=("facts", "quarantine"))
    measure_parser.add_argument("--kubeconfig", required=True)
    measure_parser.add_argument("--asked", type=int, required=True)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=21000)
    parser.add_argument("--asked", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.nodes, args.pods)
        return 0
    if args.command == "measure":
        measure(args.which, args.kubeconfig, args.asked)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        process, kubeconfig = start_api(args.nodes, args.pods, Path(scratch))
        try:
            runs: dict[str, list[dict[str, Any]]] = {"facts": [], "quarantine": []}
            for _round in range(args.repeat):
                for which in runs:  # alternating, so that a busy moment of a shared machine hits both
                    runs[which].append(run_measure(which, kubeconfig, args.asked))
        finally:
            process.terminate()
            process.wait(timeout=30)
    rows = {
        which: {
            "seconds": statistics.median(r["seconds"] for r in results),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
            "requests": results[0]["requests"],
            "result_kb": results[0]["bytes"] / 1024,
        }
        for which, results in runs.items()
    }
    plan = runs["quarantine"][0]
    print(
        f"fleet of {args.nodes} nodes, {args.pods} pods, {APPS} budgets; {args.asked} nodes asked; "
        f"median of {args.repeat} runs, each in a fresh process"
    )
    print(f"{'':<12}{'seconds':>9}{'peak RSS MB':>13}{'requests':>10}{'result KB':>11}")
    for name, row in rows.items():
        print(
            f"{name:<12}{row['seconds']:>9.3f}{row['peak_rss_mb']:>13.1f}{row['requests']:>10}{row['result_kb']:>11.1f}"
        )
    print(
        f"plan: {plan['quarantined']} to quarantine, {plan['held_back']} held back, {plan['to_evict']} GPU pods to "
        f"evict, {plan['budgets_in_the_way']} with a budget in the way"
    )
    ratio = rows["quarantine"]["seconds"] / rows["facts"]["seconds"]
    print(f"quarantine plan / facts: {ratio:.2f}x time (target at most 1.2x)")
    return 0 if ratio <= 1.2 else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
